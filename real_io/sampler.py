"""The real broker's ``replica_state`` samples: every ``interval_ms`` on the broker's
clock, the state of every replica it hosts, written to its trace as the simulation's
sampler writes it (sim/world.py ``_sampler``: the same event, the same fields, from the
same ``BrokerNode.snapshot_json``). The checkers that read samples (the leadership
checker) then judge a real run as they judge a simulated one, and the scenario runner
reads the cluster's state from the samples (real_io/trace_view.py), as the simulation
reads it from its brokers.

A sample is written only while the node runs and hosts partitions (the simulation's
rule), and never after the broker halted.
"""
from __future__ import annotations

import asyncio

from real_io.runtime import BrokerRuntime

REPLICA_STATE = "replica_state"


def start_sampler(runtime: BrokerRuntime, interval_ms: int) -> asyncio.TimerHandle | None:
    """Sample now and every ``interval_ms`` after, on the runtime's loop; None when the
    broker writes no trace. The first sample comes at once so that a restarted broker's
    state is known before its first interval ends."""
    writer = runtime.writer
    if writer is None or interval_ms <= 0:
        return None
    loop = runtime.loop
    assert loop is not None, "start the runtime first"
    handle: list[asyncio.TimerHandle] = []

    def sample() -> None:
        if not runtime.is_running:
            return
        node = runtime.node
        if node.has_partitions():
            writer.write_json(runtime.now_ms(), runtime.name, REPLICA_STATE,
                                      '{"partitions":%s}' % node.snapshot_json())
        handle[:] = [loop.call_later(interval_ms / 1000.0, sample)]

    sample()
    return handle[0] if handle else None
