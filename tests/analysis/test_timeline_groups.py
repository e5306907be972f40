"""A consumer group's timeline (analysis/timeline_groups.py): its lanes exactly on
hand-made events, what they hold for the library's zombie and coordinator-failover runs,
and the figure plot_trace writes for a group run and never for a run without groups."""
from pathlib import Path

import pytest

from analysis.history import HISTORY_TYPES, build_history
from analysis.timeline import group_figure_name, plot_trace, read_drawn_events
from analysis.timeline_data import LeaderClaim, run_info
from analysis.timeline_groups import (GenerationSpan, GroupMark, group_names, group_timeline, loading_spans,
                                      offsets_partitions)
from analysis.trace import Event
from broker_core.group_records import partition_for
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def ev(t_ms, node, type_, **fields):
    return Event(t_ms, node, type_, fields)


def member(t_ms, node, type_, generation=1, **fields):
    return ev(t_ms, node, type_, group="g", member_id=f"{node}-id", generation=generation, **fields)


def commit(t_ms, done_ms, node, op, outcome, **fields):
    return [ev(t_ms, node, "invoke", f="commit", op=op, group="g", member_id=f"{node}-id", generation=1,
               mode="sync", offsets={"t-0": 5}),
            ev(done_ms, node, outcome, f="commit", op=op, group="g", committed={}, **fields)]


def hand_made() -> list[Event]:
    """Broker 1 leads __consumer_offsets-3 and loads it; member a leads generation 1, b is
    in it too; a commit of a is refused as a stale generation's, then a learns it is out;
    b's process is killed at 900 ms; broker 1 crashes at 1000 and broker 2 takes over."""
    return [
        ev(0, "world", "run_started", scenario="s", profile="kafka-2.7", config={"offsets.topic.num.partitions": 4},
           topics=[]),
        ev(10, "broker-1", "became_leader", partition="__consumer_offsets-3", leader_epoch=0, isr=[1, 2]),
        ev(10, "broker-1", "group_partition_loading", partition=3, leader_epoch=0),
        ev(30, "broker-1", "group_partition_loaded", partition=3, leader_epoch=0),
        ev(40, "broker-1", "group_partition_loading", partition=2, leader_epoch=0),  # another partition's
        member(100, "group-0-0", "group_coordinator_found", coordinator=1),
        member(200, "group-0-0", "group_joined", leader="group-0-0-id", protocol="range"),
        member(200, "group-0-1", "group_joined", leader="group-0-0-id", protocol="range"),
        member(210, "group-0-0", "group_assigned", partitions=["t-0"]),
        member(210, "group-0-1", "group_assigned", partitions=["t-1"]),
        *commit(300, 320, "group-0-0", 1, "ok"),
        *commit(500, 520, "group-0-0", 2, "fail", errors={"t-0": "ILLEGAL_GENERATION"}),
        member(530, "group-0-0", "group_revoked", partitions=["t-0"], reason="lost"),
        *commit(600, 650, "group-0-0", 3, "info", reason="client_timeout"),
        ev(900, "nemesis", "fault_started", fault="crash", fault_id=1, brokers=["group-0-1"], targets=["group-0-1"]),
        ev(1000, "nemesis", "fault_started", fault="crash", fault_id=2, brokers=[1], targets=[1]),
        ev(1200, "broker-2", "became_leader", partition="__consumer_offsets-3", leader_epoch=1, isr=[2]),
        ev(1200, "broker-2", "group_partition_loading", partition=3, leader_epoch=1),
        member(1300, "group-0-0", "group_joined", generation=2, leader="group-0-0-id", protocol="range"),
        member(1310, "group-0-0", "group_assigned", generation=2, partitions=["t-0", "t-1"]),
        ev(1500, "world", "workload_stopped"),
    ]


def timeline_of(events: list[Event], group: str = "g"):
    history = build_history(events, keep_internal=False)
    internal = [e for e in events if e.type not in HISTORY_TYPES]
    return group_timeline(internal, history.operations, group, run_info(events).end_ms, offsets_partitions(events))


def test_the_lanes_of_a_hand_made_group_hold_every_fact_at_its_time():
    assert partition_for("g", 4) == 3  # the group's partition of __consumer_offsets with 4 of them
    tl = timeline_of(hand_made())
    assert (tl.group, tl.partition, tl.end_ms) == ("g", "__consumer_offsets-3", 1500)
    assert tl.coordinator == [LeaderClaim(1, 0, 10, 1000), LeaderClaim(2, 1, 1200, 1500)]
    assert tl.no_coordinator == [(1000, 1200)]
    assert tl.loading == [(10, 30, 1), (1200, 1500, 2)]  # the loading of partition 2 is another group's
    assert tl.generations == [(200, 1), (1300, 2)]
    a, b = tl.members
    assert (a.node, b.node) == ("group-0-0", "group-0-1")
    assert a.spans == [GenerationSpan(210, 530, 1, ("t-0",), leader=True),
                       GenerationSpan(1310, 1500, 2, ("t-0", "t-1"), leader=True)]
    assert b.spans == [GenerationSpan(210, 900, 1, ("t-1",))]  # killed with its process
    assert a.marks == [GroupMark(100, "coordinator_found", "b1"), GroupMark(200, "joined", "g1"),
                       GroupMark(320, "commit_ok", ""), GroupMark(520, "fenced", "ILLEGAL_GENERATION"),
                       GroupMark(530, "fenced", "lost"), GroupMark(650, "commit_info", "client_timeout"),
                       GroupMark(1300, "joined", "g2")]
    assert b.marks == [GroupMark(200, "joined", "g1"), GroupMark(900, "killed", "crash")]


def test_loading_ends_with_the_broker_and_the_group_names_come_from_member_events():
    events = [ev(10, "broker-1", "group_partition_loading", partition=3, leader_epoch=0),
              ev(50, "nemesis", "fault_started", fault="crash", fault_id=1, brokers=[1], targets=[1]),
              ev(60, "broker-3", "group_partition_loading", partition=3, leader_epoch=1),
              ev(70, "broker-3", "broker_started")]
    assert loading_spans(events, "__consumer_offsets-3", 100) == [(10, 50, 1), (60, 70, 3)]
    assert group_names(hand_made()) == ["g"]
    assert group_names([ev(1, "broker-1", "became_leader", partition="t-0", leader_epoch=0)]) == []
    # without run_started the partition count is unknown: members still get their lanes
    tl = timeline_of(hand_made()[1:])
    assert tl.partition is None and tl.coordinator == [] and len(tl.members) == 2


@pytest.fixture(scope="module")
def group_runs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name in ("group-zombie-fenced", "group-coordinator-failover"):
        result = run_scenario(load_scenario(LIBRARY / f"{name}.yaml"), 1, tmp_path_factory.mktemp(name), plot=False)
        out[name] = Path(result.trace_path)
    return out


def lanes(trace: Path):
    events = list(read_drawn_events(trace))
    return timeline_of(events), events


@pytest.mark.slow  # two library runs, shared: about 6 s
def test_the_zombie_keeps_its_generation_through_the_pause_and_is_fenced_after(group_runs):
    tl, events = lanes(group_runs["group-zombie-fenced"])
    zombie = {lane.node: lane for lane in tl.members}["group-0-0"]
    # paused from 2 s to 7 s: it still believes it owns its partitions until it is fenced
    believed = [s for s in zombie.spans if s.start_ms < 2000 < 7000 < s.end_ms]
    assert len(believed) == 1
    fenced = zombie.marks_of("fenced")
    refused = [e for e in events if e.node == "group-0-0" and e.type == "fail" and e.get("f") == "commit"
               and set((e.get("errors") or {}).values()) & {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}]
    assert refused and refused[0].t_ms in [m.t_ms for m in fenced]
    assert believed[0].end_ms == min(m.t_ms for m in fenced if m.label == "lost")
    others = {lane.node: lane for lane in tl.members}["group-0-1"]
    newer = [s.generation for s in others.spans if 2000 < s.start_ms < 7000]
    assert newer and min(newer) > believed[0].generation  # the group moved on meanwhile


@pytest.mark.slow  # two library runs, shared: about 6 s
def test_the_failover_moves_the_coordinator_lane_at_the_crash(group_runs):
    tl, events = lanes(group_runs["group-coordinator-failover"])
    [crash] = [e for e in events if e.type == "fault_started"]
    first, *later = [c for c in tl.coordinator if not c.stale]
    assert first.broker == crash["targets"][0] and first.end_ms == crash.t_ms
    assert later and later[0].broker != first.broker
    assert tl.no_coordinator[0][0] == crash.t_ms and tl.no_coordinator[0][1] == later[0].start_ms
    final = {lane.node: lane.spans[-1] for lane in tl.members}
    assert len({s.generation for s in final.values()}) == 1 and all(s.start_ms > crash.t_ms for s in final.values())
    assert sorted(p for s in final.values() for p in s.partitions) == ["t-0", "t-1", "t-2"]
    assert tl.generations[-1][1] == next(iter(final.values())).generation


@pytest.mark.slow  # two library runs, shared: about 6 s
def test_a_group_run_gets_a_deterministic_group_figure(group_runs, tmp_path):
    trace = group_runs["group-zombie-fenced"]
    first = plot_trace(trace, tmp_path / "a")
    again = plot_trace(trace, tmp_path / "b")
    assert [p.name for p in first] == ["timeline-t-0.png", "timeline-t-1.png", group_figure_name("g")]
    assert first[-1].read_bytes().startswith(PNG_SIGNATURE)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]


def test_a_run_without_groups_draws_no_group_figure(tmp_path):
    result = run_scenario(load_scenario(LIBRARY / "leader-crash.yaml"), 1, tmp_path / "run", plot=False)
    paths = plot_trace(result.trace_path, tmp_path / "plots")
    assert [p.name for p in paths] == ["timeline-t-0.png"]
