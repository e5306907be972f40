"""What a node asks its runtime to do (imperative)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping


@dataclass(frozen=True, slots=True)
class Send:
    dst: Hashable
    message: Any


@dataclass(frozen=True, slots=True)
class WriteBytes:
    path: str
    position: int
    data: bytes
    batch: Any = field(default=None, compare=False, repr=False)  # the batch ``data`` encodes, for runtimes that keep the objects written


@dataclass(frozen=True, slots=True)
class TruncateFile:
    path: str
    size: int


@dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str


@dataclass(frozen=True, slots=True)
class ReplaceFile:
    """Atomically replace a small file and make it durable (write temp, fsync, rename)."""
    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Fsync:
    path: str
    token: int  # echoed in FsyncCompleted


@dataclass(frozen=True, slots=True)
class SetTimer:
    key: tuple  # (kind, ...): the node routes a fired timer by its kind
    at_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: tuple


@dataclass(frozen=True, slots=True)
class CoordRequest:
    request_id: int
    op: Any  # broker_core.coordination op


@dataclass(frozen=True, slots=True)
class Trace:
    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Halt:
    """Stop the process now (after a controlled shutdown, when the log directory failed,
    or when startup failed). ``clean``: close the coordination session instead of
    letting it expire. ``requested``: the stop someone asked for (a controlled
    shutdown), as opposed to an exit on the broker's own account, which a process
    supervisor restarts."""
    reason: str
    clean: bool = False
    requested: bool = False
