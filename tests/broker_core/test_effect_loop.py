"""The one effect loop (broker_core/effect_loop.py): every effect reaches its port
method in order, and its stop rule, which all three runtimes share: nothing after a
``Halt``, and nothing once the process stopped part-way (an effect handed the node an
input whose answer halted it). Driven by a port written here that records the calls."""
from __future__ import annotations

import typing
from typing import Any, Hashable, Mapping

import pytest

from broker_core import coordination as coord
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import (
    CancelTimer, CloseConnection, CoordRequest, DeleteFile, Effect, Fsync, Halt, MuteConnection, RenameFile, ReplaceFile,
    Send, SetTimer, Trace, TruncateFile, WriteBytes)


class RecordingPort:
    """Records each call; after ``stop_after`` calls the process is no longer running
    (as a runtime's is after a failed write that the node answered with a halt);
    ``halt_stops``: whether ``halt`` itself stops it."""

    def __init__(self, stop_after: int | None = None, halt_stops: bool = True) -> None:
        self.calls: list[tuple] = []
        self.running = True
        self.stop_after = stop_after
        self.halt_stops = halt_stops

    @property
    def is_running(self) -> bool:
        return self.running

    def _record(self, name: str, *args: Any) -> None:
        self.calls.append((name, *args))
        if len(self.calls) == self.stop_after:
            self.running = False

    def send(self, dst: Hashable, message: Any) -> None:
        self._record("send", dst, message)

    def set_timer(self, key: tuple, at_ms: int) -> None:
        self._record("set_timer", key, at_ms)

    def cancel_timer(self, key: tuple) -> None:
        self._record("cancel_timer", key)

    def write_bytes(self, effect: WriteBytes) -> None:
        self._record("write_bytes", effect.path)

    def trace(self, type_: str, fields: Mapping[str, Any]) -> None:
        self._record("trace", type_, dict(fields))

    def coord_request(self, request_id: int, op: Any) -> None:
        self._record("coord_request", request_id)

    def fsync(self, path: str, token: int) -> None:
        self._record("fsync", path, token)

    def file_effect(self, effect: TruncateFile | DeleteFile | ReplaceFile | RenameFile) -> None:
        self._record("file_effect", type(effect).__name__, effect.path)

    def close_connection(self, dst: Hashable) -> None:
        self._record("close_connection", dst)

    def mute_connection(self, dst: Hashable, until_ms: int) -> None:
        self._record("mute_connection", dst, until_ms)

    def halt(self, effect: Halt) -> None:
        self._record("halt", effect.reason)
        if self.halt_stops:
            self.running = False


EVERY_EFFECT: list[tuple[Effect, tuple]] = [
    (Send(2, "m"), ("send", 2, "m")),
    (SetTimer(("isr-check",), 100), ("set_timer", ("isr-check",), 100)),
    (CancelTimer(("isr-check",)), ("cancel_timer", ("isr-check",))),
    (WriteBytes("a.log", 0, b"x"), ("write_bytes", "a.log")),
    (Trace("t", {"k": 1}), ("trace", "t", {"k": 1})),
    (CoordRequest(7, coord.GetData("/controller")), ("coord_request", 7)),
    (Fsync("a.log", 3), ("fsync", "a.log", 3)),
    (TruncateFile("a.log", 0), ("file_effect", "TruncateFile", "a.log")),
    (DeleteFile("a.log"), ("file_effect", "DeleteFile", "a.log")),
    (ReplaceFile("cp", b"0\n"), ("file_effect", "ReplaceFile", "cp")),
    (RenameFile("a.log.cleaned", "a.log.swap"), ("file_effect", "RenameFile", "a.log.cleaned")),
    (CloseConnection("client-1"), ("close_connection", "client-1")),
    (MuteConnection("client-1", 250), ("mute_connection", "client-1", 250)),
]


def test_the_checks_cover_every_effect():
    """A new member of ``Effect`` fails here until it has a row above (Halt has its own
    tests: it ends the list)."""
    assert {type(effect) for effect, _ in EVERY_EFFECT} | {Halt} == set(typing.get_args(Effect))


def test_every_effect_reaches_its_port_method_in_order():
    port = RecordingPort()
    carry_out_effects([effect for effect, _ in EVERY_EFFECT], port)
    assert port.calls == [call for _, call in EVERY_EFFECT]


@pytest.mark.parametrize("halt_stops", [True, False], ids=["port-stops", "port-keeps-running"])
def test_nothing_after_a_halt_is_carried_out(halt_stops):
    """Even a port that still says it runs after ``halt`` gets nothing more: the Halt
    itself ends the list."""
    port = RecordingPort(halt_stops=halt_stops)
    carry_out_effects([Send(2, "before"), Halt("shutdown"), Send(2, "after"), Trace("t", {}),
                       WriteBytes("a.log", 0, b"x")], port)
    assert port.calls == [("send", 2, "before"), ("halt", "shutdown")]


@pytest.mark.parametrize("effect,call", EVERY_EFFECT, ids=[type(e).__name__ for e, _ in EVERY_EFFECT])
def test_a_process_that_stopped_part_way_gets_none_of_the_rest(effect, call):
    """Whichever effect the process stopped in, the loop carries out nothing after it."""
    port = RecordingPort(stop_after=2)
    carry_out_effects([Send(2, "before"), effect, Send(2, "after"), SetTimer(("k",), 5), Halt("late")], port)
    assert port.calls == [("send", 2, "before"), call]


def test_a_failed_write_that_halted_the_node_ends_the_list_the_write_was_in():
    """What the runtimes do on a failed write: the port hands the node DiskWriteFailed
    at once, and the node's answer (here, as a log-directory failure does: a Halt) is
    carried out by a nested call of the same loop; the outer list then stops."""
    class FailingWrites(RecordingPort):
        def write_bytes(self, effect: WriteBytes) -> None:
            super().write_bytes(effect)
            carry_out_effects([Trace("log_dir_failed", {"path": effect.path}), Halt("log directory failed")], self)

    port = FailingWrites()
    carry_out_effects([WriteBytes("a.log", 0, b"x"), Send(2, "produce answer"), Fsync("a.log", 1)], port)
    assert port.calls == [("write_bytes", "a.log"), ("trace", "log_dir_failed", {"path": "a.log"}),
                          ("halt", "log directory failed")]


def test_an_effect_of_no_known_class_is_a_loud_error():
    with pytest.raises(TypeError, match="unhandled effect object"):
        carry_out_effects([object()], RecordingPort())  # type: ignore[list-item]
