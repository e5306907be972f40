"""Every runtime carries out every member of the core's ``Effect`` union, and the core
handles every member of ``Input`` (issue 21, "type the seam").

mypy already rejects a runtime that lacks a method of the effect port (every runtime
carries effects out through broker_core/effect_loop.py, whose dispatch ends with
``unhandled_effect``), but only over the modules it is run on; this test tries one
instance of every member on each runtime's port: the simulation's broker host, the real
binding's runtime and the in-test router. A new effect fails
here until it has a sample below, and then until every runtime handles it."""
from __future__ import annotations

import asyncio
import random
import typing

import pytest
import simpy

from broker_core import coordination as coord
from broker_core.broker import BrokerNode
from broker_core.config import broker_config
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import (
    CancelTimer, CloseConnection, CoordRequest, DeleteFile, Effect, Fsync, Halt, MuteConnection, RenameFile, ReplaceFile,
    Send, SetTimer, Trace, TruncateFile, WriteBytes)
from broker_core.inputs import Input
from real_io.embedded_coordination import EmbeddedCoordination
from real_io.files import DataDir
from real_io.runtime import BrokerRuntime
from sim.broker_host import BrokerHost
from sim.disk import SimDisk
from sim.network import LinkSpec, Network
from tests.harness import CLIENT, Cluster

SEGMENT = "t-0/00000000000000000000.log"


def samples() -> dict[type, Effect]:
    """One instance of each effect (fresh each time: a runtime may change what it is handed)."""
    return {
        Send: Send(CLIENT, object()),
        WriteBytes: WriteBytes(SEGMENT, 0, b"abc"),
        TruncateFile: TruncateFile(SEGMENT, 1),
        DeleteFile: DeleteFile(SEGMENT),
        ReplaceFile: ReplaceFile("recovery-point-offset-checkpoint", b"0\n0\n"),
        RenameFile: RenameFile(SEGMENT, SEGMENT + ".swap"),
        Fsync: Fsync(SEGMENT, 1),
        SetTimer: SetTimer(("isr-check",), 100),
        CancelTimer: CancelTimer(("isr-check",)),
        CoordRequest: CoordRequest(10_000, coord.GetData("/controller")),
        Trace: Trace("dispatch_test", {"a": 1}),
        Halt: Halt("dispatch test", clean=True),
        CloseConnection: CloseConnection(CLIENT),
        MuteConnection: MuteConnection(CLIENT, 100),
    }


def test_every_effect_has_a_sample():
    assert set(samples()) == set(typing.get_args(Effect))


def _sim_host() -> BrokerHost:
    env = simpy.Environment()
    network = Network(env, random.Random(0), LinkSpec(1, 0, 0))
    host = BrokerHost(env, network, 1, broker_config("kafka-2.7", {}), {}, SimDisk(env), lambda *fields: None)
    host.start()
    return host


def _apply_sim(effect) -> None:
    carry_out_effects([effect], _sim_host())


def _apply_harness(effect) -> None:
    cluster = Cluster()
    cluster.start(1)
    cluster._apply(1, [effect])


def _apply_real(effect, tmp_path) -> None:
    async def run() -> None:
        data_dir = DataDir(tmp_path)
        runtime = BrokerRuntime(1, broker_config("kafka-2.7", {}), data_dir, EmbeddedCoordination(None))
        runtime.start()
        try:
            carry_out_effects([WriteBytes(SEGMENT, 0, b"xyz"), effect], runtime)
            await asyncio.sleep(0)
        finally:
            runtime.close()
    asyncio.run(run())


RUNTIMES = {"sim": lambda effect, tmp_path: _apply_sim(effect),
            "harness": lambda effect, tmp_path: _apply_harness(effect),
            "real": _apply_real}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("kind", sorted(typing.get_args(Effect), key=lambda k: k.__name__),
                         ids=lambda k: k.__name__)
def test_every_runtime_carries_out_every_effect(runtime, kind, tmp_path):
    RUNTIMES[runtime](samples()[kind], tmp_path)


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_an_unknown_effect_is_a_loud_error(runtime, tmp_path):
    with pytest.raises(TypeError, match="unhandled effect object"):
        RUNTIMES[runtime](object(), tmp_path)


def test_the_core_handles_every_input():
    node = BrokerNode(1, broker_config("kafka-2.7", {}))
    assert set(node._handlers) == set(typing.get_args(Input))
