"""What a node asks its runtime to do (imperative).

``Effect`` is the union of them all: ``BrokerNode.handle`` returns a list of it. Every
runtime (sim/broker_host.py, real_io/runtime.py, tests/harness.py) carries them out
through the one loop in broker_core/effect_loop.py, which dispatches on the exact class
and ends its dispatch with :func:`unhandled_effect`, so mypy rejects a loop that forgets
a member (and a runtime whose port lacks its method), and an unknown effect is a loud
error at run time (tests/test_effect_dispatch.py tries every member on every runtime). The classes are ``@final``: that lets mypy narrow ``type(e) is Send`` in both
directions, which the exhaustiveness check needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, NoReturn, final

from broker_core.segment_format import BatchBytes


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@final
@dataclass(slots=True, init=False)
class Send:
    dst: Hashable
    message: Any

    def __init__(self, dst: Hashable, message: Any) -> None:
        self.dst = dst
        self.message = message


@final
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


@final
@dataclass(slots=True)
class TruncateFile:
    path: str
    size: int


@final
@dataclass(slots=True)
class DeleteFile:
    path: str


@final
@dataclass(slots=True)
class ReplaceFile:
    """Atomically replace a small file and make it durable (write temp, fsync, rename)."""
    path: str
    data: bytes


@final
@dataclass(slots=True)
class RenameFile:
    """Rename ``path`` to ``new_path`` atomically (replacing any file there) and make the
    rename durable: the log cleaner's swap of cleaned segments (Kafka's ``.cleaned``,
    ``.swap`` and ``.deleted`` suffixes, Log.replaceSegments) is a sequence of these, so
    that a crash between two leaves a state recovery can finish or undo."""
    path: str
    new_path: str


@final
@dataclass(slots=True)
class Fsync:
    path: str
    token: int  # echoed in FsyncCompleted


@final
@dataclass(slots=True, init=False)
class SetTimer:
    key: tuple  # (kind, ...): the node routes a fired timer by its kind
    at_ms: int

    def __init__(self, key: tuple, at_ms: int) -> None:
        self.key = key
        self.at_ms = at_ms


@final
@dataclass(slots=True, init=False)
class CancelTimer:
    key: tuple

    def __init__(self, key: tuple) -> None:
        self.key = key


@final
@dataclass(slots=True)
class CoordRequest:
    request_id: int
    op: Any  # broker_core.coordination op


@final
@dataclass(slots=True, init=False)
class Trace:
    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, type: str, fields: Mapping[str, Any] | None = None) -> None:
        self.type = type
        self.fields = {} if fields is None else fields


@final
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


@final
@dataclass(slots=True)
class CloseConnection:
    """Close the connection to the client ``dst``: the only way to tell an acks=0
    producer that its request failed (it then refreshes its metadata)."""
    dst: Hashable


@final
@dataclass(slots=True)
class MuteConnection:
    """Read nothing more from the client ``dst`` until ``until_ms`` (the node's clock):
    its response was throttled by a client quota and sent at once, and the channel stays
    muted for the throttle time (KIP-219; 2.7.0 ClientQuotaManager.throttle adds a
    ThrottledChannel, SocketServer mutes it with CHANNEL_MUTED_AND_THROTTLED). Requests
    the client sends meanwhile wait, unread, and reach the node after ``until_ms``."""
    dst: Hashable
    until_ms: int


# Every effect; a new one goes here, and mypy then points at every runtime to extend.
Effect = (Send | WriteBytes | TruncateFile | DeleteFile | ReplaceFile | RenameFile | Fsync | SetTimer | CancelTimer
          | CoordRequest | Trace | Halt | CloseConnection | MuteConnection)

# The effects on the data directory, which the bindings' file layers carry out.
FileEffect = WriteBytes | TruncateFile | DeleteFile | ReplaceFile | RenameFile


def unhandled_effect(effect: NoReturn) -> NoReturn:
    """The last branch of an exhaustive dispatch on an effect's class. mypy accepts the
    call only where every member of the union was handled before it (what
    ``typing.assert_never`` does); at run time it is a loud error naming the class."""
    raise TypeError(f"unhandled effect {type(effect).__name__}")
