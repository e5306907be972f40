"""Request deadlines that share one simpy wake-up, in the order simpy would fire them.

A client gives every request the same timeout, and almost every request is answered
long before it. One simpy ``Timeout`` per request would leave thousands of dead
timeouts in simpy's queue (each costs an event, a heap push and pop, and a callback).
Here the deadlines wait in a FIFO and only the earliest live one sits in simpy's queue.

Each deadline still takes the place a ``Timeout`` created at that moment would take in
simpy's order: simpy orders events by (time, priority, event id), and ``add`` draws the
event id then, exactly as ``env.timeout`` would. So a deadline fires before or after
another event of the same millisecond just as it did with one timeout per request, and
the trace stays byte-identical; nothing else's event id moves either. This reads two of
simpy's attributes (``_eid`` and ``_queue``, simpy 4.1); without them it falls back to
one ``Timeout`` per deadline, which fires in the same order.
"""
from __future__ import annotations

from collections import deque
from heapq import heappush
from typing import Any, Callable, Final

import simpy
from simpy.events import NORMAL


def has_simpy_internals(env: simpy.Environment) -> bool:
    """Whether ``env`` has the attributes the exact shortcuts read (simpy 4.1's ``_eid``,
    ``_queue`` and ``_now``, which its ``now`` property returns)."""
    return hasattr(env, "_eid") and hasattr(env, "_now") and isinstance(getattr(env, "_queue", None), list)


class DeadlineQueue:
    """Deadlines of one constant ``delay_ms``; ``fire(key)`` runs at a deadline whose
    ``live(key)`` still holds (a request still unanswered), in the order they were added."""

    def __init__(self, env: simpy.Environment, delay_ms: float, live: Callable[[Any], bool],
                 fire: Callable[[Any], None]):
        if delay_ms < 0:
            raise ValueError(f"negative deadline delay {delay_ms}")
        self.env = env
        self.delay_ms = delay_ms
        self._live = live
        self._fire = fire
        self._fifo: deque[tuple[float, int, Any]] = deque()  # (time, simpy event id, key)
        self._armed = False
        self._exact = has_simpy_internals(env)

    def add(self, key: Any) -> None:
        env = self.env
        if not self._exact:
            env.timeout(self.delay_ms).callbacks.append(lambda _event: self._fire_if_live(key))
            return
        # the event id env.timeout would take now: the deadline's place among same-time events
        self._fifo.append((env._now + self.delay_ms, next(env._eid), key))
        if not self._armed:
            self._arm()

    def __len__(self) -> int:
        """Deadlines waiting (answered ones included until they reach the front)."""
        return len(self._fifo)

    def _fire_if_live(self, key: Any) -> None:
        if self._live(key):
            self._fire(key)

    def _arm(self) -> None:
        """Put the earliest live deadline into simpy's queue under its own place."""
        fifo = self._fifo
        live = self._live
        while fifo and not live(fifo[0][2]):
            fifo.popleft()  # answered: its timeout would have done nothing
        if not fifo:
            return
        at, eid, _key = fifo[0]
        heappush(self.env._queue, (at, NORMAL, eid, _Deadline(self)))  # type: ignore[misc]
        self._armed = True

    def _wake(self) -> None:
        self._armed = False
        _at, _eid, key = self._fifo.popleft()
        if self._live(key):
            self._fire(key)  # may add deadlines (a retry), which may arm the next one
        if not self._armed:
            self._arm()


class _Deadline:
    """The simpy event of the earliest live deadline: simpy's step reads ``callbacks``
    (then clears it) and ``_ok``, as of a triggered event with no value (a Timeout's)."""

    def __init__(self, queue: DeadlineQueue) -> None:
        self.callbacks: Any = _DEADLINE
        self._ok = True
        self._value: Any = None
        self.queue = queue


def _deadline_event(event: _Deadline) -> None:
    event.queue._wake()


_DEADLINE: Final = (_deadline_event,)
