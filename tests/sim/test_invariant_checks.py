"""``isrlab run --check-invariants``: the replication invariants after every input a
simulated core handles. Library scenarios that expect no loss pass; an unsafe profile
stops the run with the invariant Kafka's own loss breaks, and the printed replay
command stops at the same place."""
from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.trace import TraceWriter
from broker_core.invariants import ACKNOWLEDGED_NEVER_TRUNCATED
from isrlab.cli import _chosen_variants
from scenarios.parse import load_scenario
from sim.broker_host import BrokerHost
from sim.world import World

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"


def checked_run(name: str, variant: str | None, seed: int = 1) -> World:
    scenario = load_scenario(str(LIBRARY / name), ())
    (chosen,) = _chosen_variants(scenario, variant) if variant else [scenario]
    world = World(chosen, seed, TraceWriter(io.StringIO(), "test", seed, "sim"), check_invariants=True)
    world.run()
    return world


@pytest.mark.parametrize("name,variant", [
    ("jepsen-2013.yaml", "safe"),
    ("kip-101-scenario-1.yaml", "epoch"),
    ("ack-after-truncation.yaml", "kafka-2.7"),
    ("single-broker-crash.yaml", "acks-all"),
])
def test_library_scenarios_that_expect_no_loss_break_no_invariant(name, variant):
    world = checked_run(name, variant)
    assert world.violation is None, world.violation.describe()
    assert world.checks.checked > 500  # the invariants ran after every input
    assert world.settled


@pytest.mark.slow
@pytest.mark.parametrize("name,variant", [
    ("leader-crash.yaml", None),
    ("controller-and-leader-failover.yaml", None),
    ("compaction-failover.yaml", None),
    ("kip-279.yaml", "epoch"),
    ("rolling-restart.yaml", None),
])
def test_more_library_scenarios_that_expect_no_loss_break_no_invariant(name, variant):
    world = checked_run(name, variant)
    assert world.violation is None, world.violation.describe()


@pytest.mark.parametrize("name,variant,broken_by", [
    ("kip-101-scenario-1.yaml", "hw", "truncation: high_watermark"),
    ("ack-after-truncation.yaml", "kafka-0.8", "demotion_completes_produces: false"),
])
def test_an_unsafe_profile_stops_the_run_at_acknowledged_never_truncated(name, variant, broken_by):
    world = checked_run(name, variant)
    assert world.violation is not None and world.violation.invariant == ACKNOWLEDGED_NEVER_TRUNCATED
    assert broken_by in world.violation.allowed_by
    assert not world.settled  # stopped before the final phase


def test_without_the_flag_the_world_runs_the_plain_hosts():
    scenario = load_scenario(str(LIBRARY / "leader-crash.yaml"), ())
    world = World(scenario, 1, TraceWriter(io.StringIO(), "test", 1, "sim"))
    assert world.checks is None and all(type(h) is BrokerHost for h in world.hosts.values())


def isrlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def last_event(trace: Path) -> dict:
    return json.loads(trace.read_text().splitlines()[-1])


@pytest.mark.slow  # two runs in fresh processes: about 5 s
def test_the_cli_prints_the_violation_and_its_replay_command_which_reproduces_it(tmp_path):
    first = isrlab("run", "scenarios/library/kip-101-scenario-1.yaml", "--variant", "hw", "--check-invariants",
                   "--no-plot", "--out", str(tmp_path / "first"))
    assert first.returncode == 1, first.stderr
    assert "INVARIANT VIOLATED: AcknowledgedNeverTruncated t-0" in first.stdout
    assert "seed 1, simulated time 22127 ms" in first.stdout
    replay = next(line.split("replay:", 1)[1].strip() for line in first.stdout.splitlines() if "replay:" in line)
    assert "--check-invariants" in replay and "--variant hw" in replay
    violated = last_event(tmp_path / "first" / "trace.jsonl")
    assert violated["type"] == "invariant_violated" and violated["invariant"] == ACKNOWLEDGED_NEVER_TRUNCATED
    (tmp_path / "first" / "trace.jsonl").rename(tmp_path / "trace-1.jsonl")
    # The printed program is the one beside this Python; its arguments are what is replayed.
    args = shlex.split(replay)
    again = isrlab(*args[args.index("run"):])
    assert again.returncode == 1
    assert (tmp_path / "first" / "trace.jsonl").read_bytes() == (tmp_path / "trace-1.jsonl").read_bytes()


def test_check_invariants_is_refused_on_the_real_binding():
    result = isrlab("run", "scenarios/library/single-broker-crash.yaml", "--binding", "real", "--check-invariants")
    assert result.returncode == 2
    assert "--check-invariants runs in the simulation only" in result.stderr and "Traceback" not in result.stderr
