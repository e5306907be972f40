"""What a runtime hands to a node (past tense: things that happened).

``Input`` is the union of them all: the type of ``BrokerNode.handle``'s event. The
classes are ``@final`` so that mypy narrows ``type(event) is X`` both ways.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, final

from broker_core.coordination import Reply
from broker_core.storage import LogStorage


@final
@dataclass(slots=True)
class Started:
    """The process started. ``storage`` is the read side of its data directory (the
    durable or page-cache bytes that survived), a broker_core.storage.LogStorage; the
    node keeps it to read stored batches it does not hold."""
    storage: LogStorage


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@final
@dataclass(slots=True, init=False)
class MessageReceived:
    src: Hashable  # a broker id for brokers, an opaque address for clients
    message: Any

    def __init__(self, src: Hashable, message: Any) -> None:
        self.src = src
        self.message = message


@final
@dataclass(slots=True, init=False)
class TimerFired:
    key: tuple  # (kind, ...) as given to SetTimer

    def __init__(self, key: tuple) -> None:
        self.key = key


@final
@dataclass(slots=True)
class FsyncCompleted:
    path: str
    token: int


@final
@dataclass(slots=True)
class DiskWriteFailed:
    path: str
    reason: str


@final
@dataclass(slots=True)
class CoordSessionStarted:
    session_id: int


@final
@dataclass(slots=True)
class CoordSessionExpired:
    session_id: int


@final
@dataclass(slots=True)
class CoordReplied:
    request_id: int
    reply: Reply


@final
@dataclass(slots=True)
class CoordWatchFired:
    path: str
    kind: str  # "created" | "deleted" | "changed" | "children"


@final
@dataclass(slots=True)
class ShutdownRequested:
    """An operator asked the broker to stop cleanly (controlled shutdown)."""


@final
@dataclass(slots=True)
class RequestHandled:
    """The real binding timed a client's request (``request_time_source`` "measured"):
    ``handler_nanos`` is 2.7.0 RequestChannel's ``requestThreadTimeNanos`` as the binding
    measures it, ``network_nanos`` the time it spent encoding and writing this
    connection's previous response (``recordNetworkThreadTimeCallback``). ``api_key`` and
    ``replica_id`` (a fetch's; -1 otherwise) say whether 2.7.0 exempts the request
    (quota_enforcement.request_quota_exempt). The node answers ``RequestThrottle`` to
    ``src``."""
    src: Hashable
    correlation_id: int
    client_id: str
    user: str
    handler_nanos: int
    network_nanos: int = 0
    api_key: int = -1
    replica_id: int = -1


# Every input; a new one goes here and in BrokerNode's table of handlers (a test compares them).
Input = (Started | MessageReceived | TimerFired | FsyncCompleted | DiskWriteFailed | CoordSessionStarted
         | CoordSessionExpired | CoordReplied | CoordWatchFired | ShutdownRequested | RequestHandled)
