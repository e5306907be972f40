"""Conformance: library scenarios give the same verdicts in the simulation and on a real
cluster (``isrlab run --binding real``: ZooKeeper, a fault proxy on every link, real
``isrlab serve`` brokers replicating over the wire, librdkafka clients). Each scenario's
expectations are the verdict that matters: every one must hold in both bindings, and
the run must have tested something (its faults took effect, its triggers fired, its
producers had records acknowledged)."""
from __future__ import annotations

from pathlib import Path

import pytest

from real_io.zk_server import server_available
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
CASES = [("jepsen-2013.yaml", "unclean"), ("jepsen-2013.yaml", "safe"), ("kip-101-scenario-1.yaml", "hw"),
         ("kip-101-scenario-1.yaml", "epoch"), ("controller-and-leader-failover.yaml", None)]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(server_available() is not None, reason=f"no ZooKeeper: {server_available()}")]


def _scenario(filename: str, variant: str | None):
    scenario = load_scenario(LIBRARY / filename)
    return scenario if variant is None else {v.variant: v for v in scenario.variants}[variant]


def _outcomes(result) -> dict[str, bool]:
    return {e.name: e.passed for e in result.evaluations}


IDS = ["jepsen-2013-unclean", "jepsen-2013-safe", "kip-101-scenario-1-hw", "kip-101-scenario-1-epoch",
       "controller-and-leader-failover"]


@pytest.mark.parametrize("filename, variant", CASES, ids=IDS)
def test_the_same_verdict_in_the_simulation_and_on_a_real_cluster(tmp_path, filename, variant):
    scenario = _scenario(filename, variant)
    simulated = run_scenario(scenario, 1, tmp_path / "sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real")
    assert all(_outcomes(simulated).values()), f"the simulation no longer meets {filename}'s expectations"
    assert _outcomes(real) == _outcomes(simulated), [
        (e.name, str(e.expectation), e.actual) for e in real.evaluations if not e.passed]
    verdict = real.verdict
    assert verdict is not None
    assert verdict.number("faults_applied") > 0 and verdict.number("faults_without_effect") == 0
    assert verdict.number("triggers_never_fired") == 0
    assert verdict.number("acknowledged") > 0
