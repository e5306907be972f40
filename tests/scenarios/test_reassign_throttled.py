"""scenarios/library/reassign-throttled.yaml: the new replica catches up at the
follower throttle's rate (the time from the reassignment's start to broker 4 in the ISR
is the bytes it fetched over follower.replication.throttled.rate, within 15 %), joins the
ISR before broker 1 leaves it, the leader moves off 1, and lost_writes (the existing
checker) finds nothing acknowledged lost across the move."""
from __future__ import annotations

import io
import json
from pathlib import Path

from analysis.trace import TraceWriter
from broker_core.types import TopicPartition
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario
from sim.world import World

PATH = Path(__file__).resolve().parents[2] / "scenarios" / "library" / "reassign-throttled.yaml"
RATE = 20000  # the scenario's follower.replication.throttled.rate


def test_new_replica_catches_up_at_the_throttled_rate_then_replaces_broker_1():
    scenario = load_scenario(PATH)
    stream = io.StringIO()
    world = World(scenario, 1, TraceWriter(stream, "reassign-throttled", 1, "sim"))
    world.run()
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    started = next(e["t_ms"] for e in events if e["type"] == "reassignment_started")
    joined = next(e for e in events if e["type"] == "isr_expanded" and 4 in e["isr"])
    completed = next(e for e in events if e["type"] == "reassignment_completed")
    shrunk = next(e for e in events if e["type"] == "isr_shrunk" and e.get("reason") == "reassignment")
    assert joined["t_ms"] < shrunk["t_ms"] <= completed["t_ms"]  # 4 in the ISR before 1 leaves it
    assert completed["new_replicas"] == [4, 2, 3] and completed["leader"] == 4
    # the bytes broker 4 fetched before it joined: its log up to the leader's end then
    log = world.hosts[4].node.replica_log(TopicPartition("t", 0))
    samples = [e["partitions"]["t-0"]["log_end_offset"] for e in events
               if e["type"] == "replica_state" and e["node"] == "broker-4" and e["t_ms"] <= joined["t_ms"]
               and "t-0" in e["partitions"]]
    fetched = sum(b.size_bytes for b in log.batches if b.next_offset <= samples[-1])
    took_ms = joined["t_ms"] - started
    expected_ms = fetched / RATE * 1000
    assert abs(took_ms - expected_ms) <= 0.15 * expected_ms, (took_ms, expected_ms, fetched)


def test_the_scenario_loses_nothing_acknowledged(tmp_path):
    """The existing lost_writes checkers judge the move: the scenario's expect says 0."""
    result = run_scenario(load_scenario(PATH), 1, tmp_path)
    assert result.passed
    assert {e.name: e.actual for e in result.evaluations}["lost_writes_acks_all"] == 0
