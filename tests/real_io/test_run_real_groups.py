"""The consumer-group library scenarios on a real cluster (``isrlab run --binding real``):
each member is a confluent-kafka consumer with ``group.id`` in a process of its own
(real_io/group_member_process.py), crashed with SIGKILL and paused with SIGSTOP, against
real ``isrlab serve`` brokers whose group coordinator is broker_core's. The verdicts are
the group checkers' (analysis/checkers/groups.py), read from the history the real
members wrote, and must be the simulation's: duplicates after a crash between
processing and commit, a zombie fenced by its generation."""
from __future__ import annotations

from pathlib import Path

import pytest

from analysis.trace import read_events
from real_io.zk_server import server_available
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
FENCED = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION")

NEEDS_ZOOKEEPER = pytest.mark.skipif(server_available() is not None, reason=f"no ZooKeeper: {server_available()}")


def _both(name: str, tmp_path: Path):
    """The scenario simulated and on a real cluster, seed 1: (simulated, real, the real trace's events)."""
    scenario = load_scenario(LIBRARY / f"{name}.yaml")
    simulated = run_scenario(scenario, 1, tmp_path / "sim", plot=False)
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real", plot=False)
    return simulated, real, list(read_events(real.trace_path))


def _outcomes(result) -> dict[str, bool]:
    return {e.name: e.passed for e in result.evaluations}


def _same_verdict(simulated, real) -> None:
    assert all(_outcomes(simulated).values()), "the simulation no longer meets the scenario's expectations"
    assert _outcomes(real) == _outcomes(simulated), [
        (e.name, str(e.expectation), e.actual) for e in real.evaluations if not e.passed]
    assert real.passed and not real.untested, real.untested
    assert real.verdict.number("faults_without_effect") == 0


def _fault_ms(events, kind: str) -> int:
    return next(e.t_ms for e in events if e.type == "fault_started" and e["fault"] == kind)


def _ended_ms(events, kind: str) -> int:
    return next(e.t_ms for e in events if e.type == "fault_ended" and e["fault"] == kind)


def _within_a_batch(events, kind: str, first: str) -> None:
    """The member trigger (``when: {member: group-0-0, processing: true}``) put the
    fault after the batch's first step (``first``: its last step before the fault) and
    before its last, as in the simulation, whenever the real group formed. (It may be
    the member's first batch.)"""
    fired = next(e for e in events if e.type == "trigger_fired")
    assert fired["when"] == {"member": "group-0-0", "processing": True}
    at = _fault_ms(events, kind)
    steps = [e for e in events if e.node == "group-0-0" and e.type in ("group_consumed", "invoke") and e.t_ms <= at]
    assert steps and steps[-1].type == first, steps[-3:]


# How far a member's lines may fall inside a pause's traced span (see the zombie test).
SIGNAL_SLACK_MS = 1000

@pytest.mark.slow
@NEEDS_ZOOKEEPER
def test_a_member_killed_between_processing_and_commit_makes_the_group_consume_twice(tmp_path):
    simulated, real, events = _both("group-crash-before-commit", tmp_path)
    _same_verdict(simulated, real)
    verdict = real.verdict
    duplicates = verdict["group_duplicates"]
    assert duplicates.value > 0 and verdict["group_unconsumed"].value == 0
    assert verdict["group_commits_backwards"].value == 0
    # the records consumed twice were first consumed by the member that was killed
    assert all(example["consumed_by"][0]["process"] == "group-0-0" for example in duplicates.examples)
    _within_a_batch(events, "crash", "group_consumed")
    crashed, restarted = _fault_ms(events, "crash"), _ended_ms(events, "crash")
    mine = [e for e in events if e.node == "group-0-0"]
    assert not [e for e in mine if crashed < e.t_ms < restarted], "a killed member wrote nothing until its restart"
    before = {e["member_id"] for e in mine if e.t_ms < crashed and "member_id" in e.fields}
    after = [e for e in mine if e.t_ms > restarted]
    assert before and after, "the member had joined before its crash and joined again after its restart"
    assert {e["member_id"] for e in after if "member_id" in e.fields}.isdisjoint(before)  # a new member
    # its positions come from the group's commits: the last one of the partition, or
    # earliest where none was made yet (under load the trigger may find the member in its
    # first batch: the group formed late, and nothing was committed for it before)
    positions = [e for e in after if e.type == "group_position"]
    assert positions
    for position in positions:
        commits = [e["committed"][position["partition"]] for e in events if e.type == "ok" and e.get("f") == "commit"
                   and e.t_ms <= position.t_ms and position["partition"] in (e.get("committed") or {})]
        assert (position["reason"], position["offset"]) == (("committed", max(commits)) if commits else ("earliest", 0))


@pytest.mark.slow
@NEEDS_ZOOKEEPER
def test_a_paused_member_wakes_as_a_zombie_and_is_fenced_by_its_generation(tmp_path):
    simulated, real, events = _both("group-zombie-fenced", tmp_path)
    _same_verdict(simulated, real)
    _within_a_batch(events, "pause", "group_consumed")
    verdict = real.verdict
    assert verdict["group_duplicates"].value > 0 and verdict["group_commits_backwards"].value == 0
    # The executor traces a pause's start before its SIGSTOP and its end after its
    # SIGCONT (faults/executor.py: the record, the effect; the effect, the record), so the
    # member may write a line just after the traced start or just before the traced end:
    # as long as the runner's thread took between the two, which load stretches.
    started = _fault_ms(events, "pause")
    ended = _ended_ms(events, "pause")
    paused, resumed = started + SIGNAL_SLACK_MS, ended - SIGNAL_SLACK_MS
    zombie = [e for e in events if e.node == "group-0-0"]
    generation = max(e["generation"] for e in zombie if e.type == "group_joined" and e.t_ms < started)
    assert not [e for e in zombie if paused < e.t_ms < resumed], "a stopped process writes nothing"
    # meanwhile the other member took the partitions over in a later generation
    assert any(e.type == "group_joined" and e["generation"] > generation for e in events
               if e.node == "group-0-1" and started < e.t_ms < ended)
    # awake, the zombie commits in its old generation and the coordinator refuses it
    invokes = {e["op"]: e for e in zombie if e.type == "invoke" and e.t_ms >= resumed}
    refused = [e for e in zombie if e.type == "fail" and e["op"] in invokes and e.t_ms >= resumed]
    assert refused, "the zombie's commit was not refused"
    assert invokes[refused[0]["op"]]["generation"] == generation
    assert set(refused[0]["errors"].values()) <= set(FENCED)
    # then it learns it is out of the group and joins again, in a newer generation (the
    # way librdkafka learns it varies with timing: its partitions lost, or revoked)
    assert any(e.type == "group_joined" and e["generation"] > generation and e.t_ms >= refused[0].t_ms
               for e in zombie)
    assert any(e.type == "group_revoked" and e["reason"] in ("lost", "rebalance") for e in zombie if e.t_ms >= resumed)


@pytest.mark.slow
@NEEDS_ZOOKEEPER
def test_a_commit_before_processing_then_a_kill_loses_the_batch_for_the_group(tmp_path):
    simulated, real, events = _both("group-commit-before-processing", tmp_path)
    _same_verdict(simulated, real)
    _within_a_batch(events, "crash", "invoke")
    assert real.verdict["group_unconsumed"].value > 0 and real.verdict["group_duplicates"].value == 0


@pytest.mark.slow
@NEEDS_ZOOKEEPER
def test_the_group_moves_to_a_new_coordinator_and_is_stable_again(tmp_path):
    """The coordinator's broker (the role {coordinator: g}) is killed as a third member joins; the group's
    partition of __consumer_offsets is loaded by another broker and the three members
    end in one generation."""
    simulated, real, events = _both("group-coordinator-failover", tmp_path)
    _same_verdict(simulated, real)
    crash = next(e for e in events if e.type == "fault_started" and e["fault"] == "crash")
    coordinator = f"broker-{crash['roles']['coordinator: g']}"  # the role resolved when the crash started
    loaded = [e for e in events if e.type == "group_partition_loaded" and e["partition"] == 1]
    before = [e.node for e in loaded if e.t_ms < crash.t_ms]
    assert before and before[-1] == coordinator
    assert any(e.node != coordinator and e.t_ms > crash.t_ms for e in loaded)
    last = {}
    for e in events:
        if e.type == "group_joined":
            last[e.node] = e["generation"]
    assert sorted(last) == ["group-0-0", "group-0-1", "group-1-0"] and len(set(last.values())) == 1


ONE_BROKER = """\
name: {name}
cluster:
  brokers: 1
  config: {{offsets.topic.replication.factor: 1, offsets.topic.num.partitions: 3,
           group.initial.rebalance.delay.ms: 0, group.min.session.timeout.ms: 1000}}
  topics: [{{name: t, partitions: 2, replication_factor: 1}}]
workload:
  producers: [{producers}]
  consumers:
{consumers}
duration: 4s
"""
MEMBER = "auto.offset.reset: earliest, session.timeout.ms: 2s, heartbeat.interval.ms: 500ms"


def _one_broker(tmp_path: Path, name: str, producers: str, consumers: list[str]):
    path = tmp_path / f"{name}.yaml"
    path.write_text(ONE_BROKER.format(name=name, producers=producers,
                                      consumers="".join(f"    - {{{c}, {MEMBER}}}\n" for c in consumers)))
    result = run_scenario(load_scenario(path), 1, tmp_path / "out", binding="real", plot=False)
    return result, list(read_events(result.trace_path))


@pytest.mark.slow
def test_each_commit_policy_commits_as_the_simulated_member_does(tmp_path):
    """auto (librdkafka's auto-commit of what was processed), async (answered through
    the commit callback) and before_processing (a sync commit before the batch is
    handed over), one group each, on one broker."""
    result, events = _one_broker(tmp_path, "policies", "{topic: t, acks: all, rate: 50}", [
        "group: auto, topic: t, commit: auto, auto.commit.interval.ms: 500ms",
        "group: async, topic: t, commit: async, processing: 100ms",
        "group: before, topic: t, commit: before_processing, processing: 100ms"])
    assert result.passed and not result.untested, (result.untested, result.verdict.results)
    commits = {e["op"]: e for e in events if e.type == "invoke" and e.get("f") == "commit"}
    by_group: dict[str, list] = {}
    for event in events:
        if event.type in ("ok", "fail", "info") and event.get("f") == "commit":
            invoke = [e for e in events if e.type == "invoke" and e.node == event.node and e.get("op") == event["op"]
                      and e.t_ms <= event.t_ms][-1]
            by_group.setdefault(invoke["group"], []).append((invoke["mode"], event.type, event["committed"]))
    assert commits and set(by_group) == {"auto", "async", "before"}
    assert {mode for mode, _, _ in by_group["auto"]} == {"auto"}
    assert {mode for mode, _, _ in by_group["async"]} == {"async"}
    assert {mode for mode, _, _ in by_group["before"]} == {"sync"}
    assert all(outcome == "ok" and committed for g in by_group.values() for _, outcome, committed in g)
    # before_processing: each batch is committed before it is handed over, as simulated
    before = [e for e in events if e.node == "group-2-0" and e.type in ("invoke", "group_consumed")]
    for i, event in enumerate(before):
        if event.type == "group_consumed":
            end = {event["partition"]: event["offsets"][-1] + 1}
            assert any(e.type == "invoke" and end.items() <= e["offsets"].items() for e in before[:i])
    # auto: only what was processed is committed (offsets stored after the batch)
    consumed_ends = {}
    for e in events:
        if e.node == "group-0-0" and e.type == "group_consumed":
            consumed_ends.setdefault(e["partition"], set()).add(e["offsets"][-1] + 1)
    for _, _, committed in by_group["auto"]:
        assert all(offset in consumed_ends[p] for p, offset in committed.items())


@pytest.mark.slow
def test_a_group_that_consumed_nothing_is_not_tested(tmp_path):
    """No producer: the member joins and polls, consumes nothing, and the run says so."""
    result, events = _one_broker(tmp_path, "quiet", "", ["group: g, topic: t"])
    assert any(e.type == "group_joined" for e in events)
    assert not result.passed
    assert any(reason.startswith("tested nothing: the group members consumed no record") for reason in result.untested)


def test_the_generation_is_read_from_librdkafkas_group_metadata():
    import sys

    from confluent_kafka import Consumer

    from real_io.group_member_process import parse_group_metadata
    generation = (7).to_bytes(4, sys.byteorder, signed=True)  # librdkafka writes it in the machine's order
    assert parse_group_metadata(b"CGMDv2:" + generation + b"g\0member-1\0\1") == (7, "member-1")
    consumer = Consumer({"group.id": "g", "bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    try:  # a consumer that never joined: no generation, no member id yet
        assert parse_group_metadata(bytes(consumer.consumer_group_metadata())) == (-1, "")
    finally:
        consumer.close()
    assert parse_group_metadata(b"CGMDv2:\xff\xff\xff\xffg\0\0\1") == (-1, "")
    assert parse_group_metadata(b"nonsense") is None and parse_group_metadata(b"CGMDv2:\0") is None


def test_a_member_process_that_dies_by_itself_fails_the_run_and_a_killed_one_does_not(tmp_path):
    """A member whose process ends on its own (here librdkafka refuses its settings)
    is a failure of the run, named with its last words; a SIGKILL (a crash fault) is not."""
    from real_io.real_groups import GroupMemberFailed, RealGroupMember, stop_members
    recorded: list = []
    spec = {"name": "group-0-0", "bootstrap": "127.0.0.1:1", "group": "g", "topics": ["t"], "client_id": "c",
            "commit": "auto", "processing_ms": 0, "poll_interval_ms": 100, "max_poll_records": 10,
            "session_timeout_ms": 2000, "heartbeat_interval_ms": 500, "max_poll_interval_ms": 300000,
            "assignors": ["range"], "auto_commit_interval_ms": 1000, "auto_offset_reset": "earliest",
            "static": False, "retry_failed_commits": False, "retry_backoff_ms": 100}
    killed = RealGroupMember("group-0-0", spec, lambda *event: recorded.append(event), tmp_path / "killed.stderr")
    killed.launch()
    killed.begin(0.0)
    killed.kill()
    stop_members([killed])  # nothing raised: the run killed it
    broken = RealGroupMember("group-0-1", {**spec, "assignors": ["no-such-assignor"]},
                             lambda *event: recorded.append(event), tmp_path / "broken.stderr")
    broken.launch()
    broken.begin(0.0)
    with pytest.raises(GroupMemberFailed) as failed:
        stop_members([broken])
    assert "group-0-1" in str(failed.value) and "exited with 1" in str(failed.value)
    assert not broken.alive and not killed.alive and recorded == []
