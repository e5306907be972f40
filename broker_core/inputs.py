"""What a runtime hands to a node (past tense: things that happened)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable


@dataclass(slots=True)
class Started:
    """The process started. ``storage`` is the read side of its data directory (the
    durable or page-cache bytes that survived), a broker_core.storage.LogStorage; the
    node keeps it to read stored batches it does not hold."""
    storage: Any


@dataclass(slots=True)
class MessageReceived:
    src: Hashable  # a broker id for brokers, an opaque address for clients
    message: Any


@dataclass(slots=True)
class TimerFired:
    key: tuple  # (kind, ...) as given to SetTimer


@dataclass(slots=True)
class FsyncCompleted:
    path: str
    token: int


@dataclass(slots=True)
class DiskWriteFailed:
    path: str
    reason: str


@dataclass(slots=True)
class CoordSessionStarted:
    session_id: int


@dataclass(slots=True)
class CoordSessionExpired:
    session_id: int


@dataclass(slots=True)
class CoordReplied:
    request_id: int
    reply: Any  # broker_core.coordination.Reply


@dataclass(slots=True)
class CoordWatchFired:
    path: str
    kind: str  # "created" | "deleted" | "changed" | "children"


@dataclass(slots=True)
class ShutdownRequested:
    """An operator asked the broker to stop cleanly (controlled shutdown)."""
