"""What a runtime hands to a node (past tense: things that happened)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping


@dataclass(slots=True)
class Started:
    """The process started; ``files`` holds every file's durable (or page-cache) bytes."""
    files: Mapping[str, bytes] = field(default_factory=dict)


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
