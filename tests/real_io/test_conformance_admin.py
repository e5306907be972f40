"""Conformance of the admin steps: library scenarios whose faults are admin tools'
writes (``reassign``, ``client_quota``) give the same verdicts in the simulation and on
a real cluster (``isrlab run --binding real``), where the steps write the same ZooKeeper
nodes with the same functions (real_io/zk_admin_store.py). Each run is shortened (the
same shorter scenario in both bindings) to keep the test bounded; what the scenario is
about still happens in it, and the test checks that it did, in the real trace."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from analysis.trace import read_events
from real_io.protocol import record_batch
from real_io.replica_files import segment_files
from real_io.zk_server import server_available
from broker_core.types import TopicPartition
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(server_available() is not None, reason=f"no ZooKeeper: {server_available()}")]


def _both(filename: str, duration_ms: int, tmp_path: Path):
    scenario = dataclasses.replace(load_scenario(LIBRARY / filename), duration_ms=duration_ms)
    simulated = run_scenario(scenario, 1, tmp_path / "sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    outcomes = {e.name: e.passed for e in simulated.evaluations}
    assert all(outcomes.values()), f"the simulation no longer meets {filename}'s expectations"
    assert {e.name: e.passed for e in real.evaluations} == outcomes, [
        (e.name, str(e.expectation), e.actual) for e in real.evaluations if not e.passed]
    verdict = real.verdict
    assert verdict is not None and verdict.number("acknowledged") > 0
    assert verdict.number("faults_applied") > 0 and verdict.number("faults_without_effect") == 0
    return real, list(read_events(real.trace_path))


def test_reassign_throttled_gives_the_simulations_verdicts(tmp_path):
    """The reassignment at 10 s moves t-0 to [4, 2, 3] under the follower throttle: the
    real controller completes it (broker 4 leads, broker 1's replica deleted), the run
    settles on the new replicas, and each record on disk holds the scenario's 200 value
    bytes (the padding that makes the throttle see the simulated bytes)."""
    real, events = _both("reassign-throttled.yaml", 25000, tmp_path)
    assert next(e for e in events if e.type == "run_finished")["settled"]  # on the replicas ZooKeeper holds now
    started = next(e for e in events if e.type == "reassignment_started")
    completed = next(e for e in events if e.type == "reassignment_completed")
    assert completed["new_replicas"] == [4, 2, 3] and completed["leader"] == 4
    assert completed.t_ms - started.t_ms > 5000  # throttled: broker 4 fetched ~20 KB/s, not at once
    assert any(e.type == "replica_deleted" and e.node == "broker-1" for e in events)
    data_dir = tmp_path / "real" / "real" / "cluster" / "broker-4" / "data"
    segment = segment_files(data_dir, TopicPartition("t", 0))[0].read_bytes()
    batch, _ = record_batch.decode_batch(segment, 0)
    assert {len(value) for value in batch.records.values} == {200}


def test_quota_lowered_mid_run_gives_the_simulations_verdicts(tmp_path):
    """The producer's quota is lowered at 10 s; the brokers read the change from its
    notification and throttle the producer (client.id app) and not beyond its quota; the
    consumer (client.id reader) is under the default client quota."""
    real, events = _both("quota-lowered-mid-run.yaml", 20000, tmp_path)
    recorded = {(e["client"], e["quota_type"]) for e in events if e.type == "quota_recorded"}
    assert ("app", "produce") in recorded and ("reader", "fetch") in recorded
    throttled = [e for e in events if e.type == "throttled" and e["client"] == "app"]
    assert throttled and min(e.t_ms for e in throttled) > 10000  # under the lowered quota only
