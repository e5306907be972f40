"""The four consumer-group library scenarios run through ``isrlab run`` in the
simulation (sim/group_consumer.py): their verdicts, the group checkers' counts, and what
the traces show of a member's process under a crash and a pause."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"
SCENARIOS = ("group-crash-before-commit", "group-commit-before-processing", "group-coordinator-failover",
             "group-zombie-fenced")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[dict, list[dict]]]:
    """Each scenario once, seed 1, by the command line: (verdict, trace events)."""
    out: dict[str, tuple[dict, list[dict]]] = {}
    base = tmp_path_factory.mktemp("group-runs")
    for name in SCENARIOS:
        result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(LIBRARY / f"{name}.yaml"), "--seed", "1",
                                 "--out", str(base / name), "--no-plot"],
                                cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        verdict = json.loads((base / name / "verdict.json").read_text())
        events = [json.loads(line) for line in (base / name / "trace.jsonl").read_text().splitlines()]
        out[name] = (verdict, events)
    return out


def value(verdict: dict, name: str):
    return verdict["results"][name]["value"]


def of(events: list[dict], node: str, *types: str) -> list[dict]:
    return [e for e in events if e["node"] == node and (not types or e["type"] in types)]


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
def test_a_crash_between_processing_and_commit_duplicates_and_loses_nothing(runs):
    verdict, events = runs["group-crash-before-commit"]
    assert value(verdict, "group_duplicates") > 0
    assert (value(verdict, "group_unconsumed"), value(verdict, "group_commits_backwards")) == (0, 0)
    assert value(verdict, "lost_writes") == 0
    example = verdict["results"]["group_duplicates"]["examples"][0]
    first, second = example["consumed_by"][:2]
    # consumed by the crashed process before the crash, again after its restart (or by the other member)
    assert first["t_ms"] < 3000 < second["t_ms"] and first["member_id"] != second["member_id"]


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
@pytest.mark.parametrize("name, fault, first, then", [
    ("group-crash-before-commit", "crash", "group_consumed", "invoke"),      # consumed, not committed
    ("group-commit-before-processing", "crash", "invoke", "group_consumed"),  # committed, not consumed
    ("group-zombie-fenced", "pause", "group_consumed", "invoke"),
])
def test_the_member_trigger_fires_within_a_batch(runs, name, fault, first, then):
    """``when: {member: group-0-0, processing: true}``: the fault falls after the batch's
    first step and before its last (by the commit policy), not at a fixed time."""
    _, events = runs[name]
    [fired] = [e for e in events if e["type"] == "trigger_fired"]
    assert fired["when"] == {"member": "group-0-0", "processing": True}
    [started] = [e for e in events if e["type"] == "fault_started"]
    assert started["fault"] == fault and started["targets"] == ["group-0-0"] and started["t_ms"] == fired["t_ms"]
    at = started["t_ms"]
    steps = [e for e in of(events, "group-0-0", "group_consumed", "invoke") if e["t_ms"] <= at]
    assert steps[-1]["type"] == first, steps[-1]
    last_then = [e for e in steps if e["type"] == then]
    assert last_then and last_then[-1]["t_ms"] < steps[-1]["t_ms"]  # the batch's first step came after the last one's
    if fault == "crash":  # the batch's last step never came from that process
        assert not [e for e in of(events, "group-0-0") if at < e["t_ms"] < at + 2000]


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
def test_the_crashed_member_is_silent_then_joins_anew_from_the_commit(runs):
    _, events = runs["group-crash-before-commit"]
    member = of(events, "group-0-0")
    assert not [e for e in member if 3000 < e["t_ms"] < 5000]  # no process, no event
    before = {e["member_id"] for e in member if e["t_ms"] < 3000 and "member_id" in e}
    after = [e for e in member if e["t_ms"] >= 5000]
    assert after[0]["type"] == "group_coordinator_found"
    assert {e["member_id"] for e in after if e.get("member_id")} .isdisjoint(before)  # a new member
    positions = [e for e in after if e["type"] == "group_position"]
    assert positions and all(p["reason"] == "committed" for p in positions)


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
def test_a_commit_before_processing_then_a_crash_loses_the_batch_for_the_group(runs):
    verdict, _ = runs["group-commit-before-processing"]
    assert value(verdict, "group_unconsumed") > 0
    assert (value(verdict, "group_duplicates"), value(verdict, "group_commits_backwards")) == (0, 0)
    assert value(verdict, "lost_writes") == 0  # lost for the group only: the log has every record
    example = verdict["results"]["group_unconsumed"]["examples"][0]
    assert example["process"] == "group-0-0" and example["offset"] < example["committed"]


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
def test_a_coordinator_failover_during_a_rebalance_loses_nothing_and_the_group_is_stable_again(runs):
    verdict, events = runs["group-coordinator-failover"]
    assert (value(verdict, "group_unconsumed"), value(verdict, "group_commits_backwards")) == (0, 0)
    assert value(verdict, "group_duplicates") <= 3 * 20  # the in-flight batches at most
    assert verdict["valid"]
    members = ("group-0-0", "group-0-1", "group-1-0")
    # {coordinator: g} resolved at 3020 ms to the leader of g's partition, the broker the
    # members had found as coordinator: the crash is the coordinator's
    [crash] = [e for e in events if e["type"] == "fault_started"]
    became = [e for e in events if e["type"] == "became_leader" and e["partition"] == "__consumer_offsets-1"
              and e["t_ms"] <= 3020]
    coordinator = int(became[-1]["node"].removeprefix("broker-"))
    assert crash["roles"] == {"coordinator: g": coordinator} and crash["targets"] == [coordinator]
    before = {e["coordinator"] for m in members for e in of(events, m, "group_coordinator_found") if e["t_ms"] <= 3020}
    assert before == {coordinator}
    found = [e for m in members for e in of(events, m, "group_coordinator_found") if e["t_ms"] > 3020]
    assert {e["coordinator"] for e in found} - {coordinator}  # the new coordinator: another broker
    last = {m: of(events, m, "group_assigned")[-1] for m in members}
    generations = {e["generation"] for e in last.values()}
    assert len(generations) == 1 and all(e["t_ms"] > 3020 for e in last.values())
    owned = sorted(p for e in last.values() for p in e["partitions"])
    assert owned == ["t-0", "t-1", "t-2"]  # every partition owned once in that generation
    assert not [e for m in members for e in of(events, m, "group_member_failed")]


@pytest.mark.slow  # the four runs by the command line: about 7 s, shared
def test_a_zombie_after_a_long_pause_is_fenced_by_its_generation(runs):
    verdict, events = runs["group-zombie-fenced"]
    assert value(verdict, "group_commits_backwards") == 0 and value(verdict, "group_unconsumed") == 0
    assert value(verdict, "group_duplicates") > 0
    zombie = of(events, "group-0-0")
    assert not [e for e in zombie if 2000 < e["t_ms"] < 7000]  # paused: not a single call
    generation_before = [e for e in zombie if e["type"] == "group_assigned" and e["t_ms"] < 2000][-1]["generation"]
    newer = [e for e in of(events, "group-0-1", "group_assigned") if 2000 < e["t_ms"] < 7000]
    assert newer and newer[0]["generation"] > generation_before  # the others moved on meanwhile
    # it woke believing it still owned its partitions, and consumed in its old generation
    assert [e for e in zombie if e["type"] == "group_consumed" and e["t_ms"] >= 7000
            and e["generation"] == generation_before]
    refused = [e for e in zombie if e["type"] == "fail" and e.get("f") == "commit" and e["t_ms"] >= 7000
               and set((e.get("errors") or {}).values()) & {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}]
    assert refused
    rejoined = [e for e in zombie if e["type"] == "group_assigned" and e["t_ms"] > refused[0]["t_ms"]]
    assert rejoined and rejoined[0]["generation"] > newer[0]["generation"]


def test_a_group_run_is_deterministic(tmp_path: Path):
    scenario = load_scenario(LIBRARY / "group-zombie-fenced.yaml")
    run_scenario(scenario, 3, tmp_path / "a", plot=False)
    run_scenario(scenario, 3, tmp_path / "b", plot=False)
    assert (tmp_path / "a" / "trace.jsonl").read_bytes() == (tmp_path / "b" / "trace.jsonl").read_bytes()
    assert (tmp_path / "a" / "verdict.json").read_bytes() == (tmp_path / "b" / "verdict.json").read_bytes()


def test_runs_without_groups_have_no_group_results(tmp_path: Path):
    verdict = run_scenario(load_scenario(LIBRARY / "single-broker-crash.yaml").variants[0], 1, tmp_path, plot=False)
    assert not {"group_duplicates", "group_unconsumed", "group_commits_backwards"} & set(verdict.verdict.results)


QUIET_GROUP = """\
name: quiet-group
cluster:
  brokers: {brokers}
  config: {{group.initial.rebalance.delay.ms: 0, group.min.session.timeout.ms: 1000,
           offsets.topic.num.partitions: 3}}
  topics:
    - {{name: t, partitions: 2, replication_factor: {brokers}}}
workload:
  consumers:
    - {{group: g, topic: t, members: 2, auto.offset.reset: earliest, session.timeout.ms: 2s,
       heartbeat.interval.ms: 500ms}}
duration: 3s
expect:
  group_duplicates: 0
"""


def test_a_group_that_consumed_nothing_tested_nothing(tmp_path: Path):
    """No producer: the members join, find positions and poll, but have nothing to
    consume. ``group_duplicates: 0`` would hold vacuously; the run is NOT TESTED."""
    from scenarios.parse import parse_scenario
    result = run_scenario(parse_scenario(QUIET_GROUP.format(brokers=3), "quiet.yaml"), 1, tmp_path, plot=False)
    assert not result.passed
    assert any(r.startswith("tested nothing: the group members consumed no record") for r in result.untested)
    assert result.verdict["group_duplicates"].details["tested"] is False


def test_a_group_whose_members_never_joined_tested_nothing(tmp_path: Path):
    """One broker with offsets.topic.replication.factor 3 (the default): no
    __consumer_offsets, no coordinator, no group event at all."""
    from scenarios.parse import parse_scenario
    result = run_scenario(parse_scenario(QUIET_GROUP.format(brokers=1), "quiet.yaml"), 1, tmp_path, plot=False)
    assert not result.passed
    assert result.untested == ["tested nothing: the scenario's group consumers wrote no group event (no member "
                               "joined its group)"]
