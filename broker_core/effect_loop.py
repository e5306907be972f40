"""The one loop that carries out a node's effects, for every runtime.

``BrokerNode.handle`` answers a list of effects (broker_core/effects.py). The simulation
(sim/broker_host.py), the real binding (real_io/runtime.py) and the in-test router
(tests/harness.py) each carry them out with their own primitives, but in the same way:
in order, by exact class, and not one more once the process has stopped. That part is
written here once; a runtime implements :class:`EffectPort` and calls
:func:`carry_out_effects`.

Only dispatch lives here (no I/O): the port's methods are the runtime's primitives.
"""
from __future__ import annotations

from typing import Any, Hashable, Mapping, Protocol

from broker_core.effects import (
    CancelTimer, CloseConnection, CoordRequest, DeleteFile, Effect, Fsync, Halt, MuteConnection, RenameFile, ReplaceFile,
    Send, SetTimer, Trace, TruncateFile, WriteBytes, unhandled_effect)


class EffectPort(Protocol):
    """What a runtime offers the loop: one method per kind of effect, and whether the
    process that issued the effects still runs. mypy holds each runtime to it where the
    runtime hands itself (or its port) to :func:`carry_out_effects`. The parameters are
    positional-only, so that a runtime names its own."""

    @property
    def is_running(self) -> bool:
        """False once the process stopped: by a ``Halt`` carried out, perhaps by a
        nested call of the loop (an effect handed the node an input at once, a failed
        write, and the node's answer halted it). A process never starts again while a
        list of its effects is carried out (a restart is always a later event), so
        "not running" tells the loop that the rest of the list belongs to a process
        that is gone."""
        ...

    def send(self, dst: Hashable, message: Any, /) -> None: ...

    def set_timer(self, key: tuple, at_ms: int, /) -> None:
        """Set, or set again, the timer ``key`` to fire at ``at_ms`` on the node's clock."""

    def cancel_timer(self, key: tuple, /) -> None: ...

    def write_bytes(self, effect: WriteBytes, /) -> None:
        """Write to the data directory; a failure is handed to the node at once (as
        ``DiskWriteFailed``), before any later effect is carried out."""

    def trace(self, type_: str, fields: Mapping[str, Any], /) -> None: ...

    def coord_request(self, request_id: int, op: Any, /) -> None: ...

    def fsync(self, path: str, token: int, /) -> None:
        """Make ``path`` durable; the node hears ``FsyncCompleted(path, token)`` later."""

    def file_effect(self, effect: TruncateFile | DeleteFile | ReplaceFile | RenameFile, /) -> None:
        """The rarer effects on the data directory; a failure as for ``write_bytes``."""

    def close_connection(self, dst: Hashable, /) -> None: ...

    def mute_connection(self, dst: Hashable, until_ms: int, /) -> None:
        """Read nothing more from the client ``dst`` until ``until_ms`` on the node's
        clock (a client quota's throttle); what it sends meanwhile waits, in order."""

    def halt(self, effect: Halt, /) -> None:
        """Stop the process (the loop carries out nothing after it)."""


def carry_out_effects(effects: list[Effect], port: EffectPort) -> None:
    """Carry out ``effects``, which a running process's node just answered, in order
    through ``port``.

    The stop rule, the same in every runtime: nothing after a ``Halt``, and nothing
    once ``port`` says the process no longer runs. The loop asks before each effect:
    an effect may hand the node an input at once (a failed write: the core hears of it
    before anything after the write happens), whose answer may halt it, and the rest
    of the list then never happened. (Asking only after the effects that can do so
    today saved 0.2% of the compiled simulation's instructions: not worth a rule that
    each runtime would have to keep.)

    By exact class, the most frequent first (the simulation's hot path): the classes
    are final, so mypy narrows ``effect`` in each branch (mypyc then reads its fields
    directly), and :func:`unhandled_effect` makes a member of ``Effect`` without a
    branch a mypy error and, at run time, a loud one."""
    for effect in effects:
        if not port.is_running:
            return  # the process halted part-way: the rest never happened
        if type(effect) is Send:
            port.send(effect.dst, effect.message)
        elif type(effect) is SetTimer:
            port.set_timer(effect.key, effect.at_ms)
        elif type(effect) is CancelTimer:
            port.cancel_timer(effect.key)
        elif type(effect) is WriteBytes:
            port.write_bytes(effect)
        elif type(effect) is Trace:
            port.trace(effect.type, effect.fields)
        elif type(effect) is CoordRequest:
            port.coord_request(effect.request_id, effect.op)
        elif type(effect) is Fsync:
            port.fsync(effect.path, effect.token)
        elif (type(effect) is TruncateFile or type(effect) is DeleteFile or type(effect) is ReplaceFile
              or type(effect) is RenameFile):
            port.file_effect(effect)
        elif type(effect) is CloseConnection:
            port.close_connection(effect.dst)
        elif type(effect) is MuteConnection:
            port.mute_connection(effect.dst, effect.until_ms)
        elif type(effect) is Halt:
            port.halt(effect)
            return  # the process is gone: its remaining effects never happen
        else:
            unhandled_effect(effect)
