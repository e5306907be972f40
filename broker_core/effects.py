"""What a node asks its runtime to do (imperative)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping

from broker_core.segment_format import BatchBytes


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@dataclass(slots=True, init=False)
class Send:
    dst: Hashable
    message: Any

    def __init__(self, dst: Hashable, message: Any) -> None:
        self.dst = dst
        self.message = message


@dataclass(slots=True, init=False)
class WriteBytes:
    """Write ``data`` at ``position``. ``data`` is bytes, or a BatchBytes (the core's own
    batch, of known length, encoded when first read: ``segment_format.materialize``)."""
    path: str
    position: int
    data: bytes | BatchBytes
    batch: Any = field(default=None, compare=False, repr=False)  # the batch ``data`` encodes, for runtimes that keep the objects written

    def __init__(self, path: str, position: int, data: bytes | BatchBytes, batch: Any = None) -> None:
        self.path = path
        self.position = position
        self.data = data
        self.batch = batch


@dataclass(slots=True)
class TruncateFile:
    path: str
    size: int


@dataclass(slots=True)
class DeleteFile:
    path: str


@dataclass(slots=True)
class ReplaceFile:
    """Atomically replace a small file and make it durable (write temp, fsync, rename)."""
    path: str
    data: bytes


@dataclass(slots=True)
class Fsync:
    path: str
    token: int  # echoed in FsyncCompleted


@dataclass(slots=True, init=False)
class SetTimer:
    key: tuple  # (kind, ...): the node routes a fired timer by its kind
    at_ms: int

    def __init__(self, key: tuple, at_ms: int) -> None:
        self.key = key
        self.at_ms = at_ms


@dataclass(slots=True, init=False)
class CancelTimer:
    key: tuple

    def __init__(self, key: tuple) -> None:
        self.key = key


@dataclass(slots=True)
class CoordRequest:
    request_id: int
    op: Any  # broker_core.coordination op


@dataclass(slots=True, init=False)
class Trace:
    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, type: str, fields: Mapping[str, Any] | None = None) -> None:
        self.type = type
        self.fields = {} if fields is None else fields


@dataclass(slots=True)
class Halt:
    """Stop the process now (after a controlled shutdown, when the log directory failed,
    or when startup failed). ``clean``: close the coordination session instead of
    letting it expire. ``requested``: the stop someone asked for (a controlled
    shutdown), as opposed to an exit on the broker's own account, which a process
    supervisor restarts."""
    reason: str
    clean: bool = False
    requested: bool = False


@dataclass(slots=True)
class CloseConnection:
    """Close the connection to the client ``dst``: the only way to tell an acks=0
    producer that its request failed (it then refreshes its metadata)."""
    dst: Hashable
