"""The request-time quota's clock in the real broker (``request_percentage``, docs/quotas.md).

Kafka 2.7.0 charges a request the time a request handler thread spent on it
(RequestChannel ``requestThreadTimeNanos``: from dequeue to the API's local completion,
so a DelayedProduce's or DelayedFetch's wait is not counted) and, unchecked, the time
the network thread spent on its response (``recordNetworkThreadTimeCallback``). isrlab's
broker has no separate threads: one event loop decodes, hands the request to the core,
maps the answer and encodes it. So, with ``time.perf_counter_ns``, a request is charged:
- as its handler time: from just after its frame was read to just before its response
  is encoded (decoding, the core's synchronous handling, mapping the answer), less the
  time spent awaiting the core's answer (a delayed answer's wait, and whatever other
  connections ran meanwhile, which the wait lets run);
- as network time: encoding its response, recorded with the connection's next request
  (it counts for the next check, as in 2.7, where it is recorded after the send).
Writing to the socket is not counted (it is the kernel's, and waits on the client).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator


# the nanoseconds the current request (one per connection task) spent awaiting the core
_awaited: ContextVar[list[int] | None] = ContextVar("isrlab_request_awaited", default=None)


class RequestTimer:
    """One connection's clock: the handler time of the request under way, and the
    network time of its previous response, still to be recorded."""

    def __init__(self) -> None:
        self.started = 0
        self.network_nanos = 0
        self._awaited = [0]

    def start(self) -> None:
        self.started = time.perf_counter_ns()
        self._awaited[0] = 0
        _awaited.set(self._awaited)

    def handler_nanos(self) -> int:
        return max(time.perf_counter_ns() - self.started - self._awaited[0], 0)

    @contextmanager
    def encoding(self) -> Iterator[None]:
        """Time the response's encoding: network time for the next request."""
        started = time.perf_counter_ns()
        try:
            yield
        finally:
            self.network_nanos = time.perf_counter_ns() - started


@contextmanager
def awaiting_core() -> Iterator[None]:
    """Around an await of the core's answer: that time is not the request's."""
    awaited = _awaited.get()
    started = time.perf_counter_ns()
    try:
        yield
    finally:
        if awaited is not None:
            awaited[0] += time.perf_counter_ns() - started
