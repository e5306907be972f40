"""Timelines: the data they draw (exact, on hand-made events) and the PNGs of a real run."""
import struct
import textwrap

import pytest

from analysis import timeline_data as data
from analysis.history import build_history
from analysis.summary import acknowledged_values
from analysis.timeline import (events_by_partition, figure_name, partition_timeline, plot_history, plot_trace,
                               read_drawn_events)
from analysis.timeline_data import FaultInterval, LeaderClaim
from analysis.trace import Event, read_events
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCENARIO = textwrap.dedent("""\
    name: timeline-test
    cluster:
      brokers: 3
      profile: kafka-0.8
      topics:
        - {name: t, partitions: 2, replication_factor: 3}
    workload:
      producers: [{topic: t, acks: 1, rate: 100}]
      consumers: [{topic: t}]
    faults:
      - {at: 1s, crash: 1}
      - {at: 3s, restart: 1}
    duration: 4s
    """)


def ev(t_ms, node, type_, **fields):
    return Event(t_ms, node, type_, fields)


def sample(t_ms, broker, partition="t-0", **state):
    return ev(t_ms, f"broker-{broker}", "replica_state", partitions={partition: state})


# ---- leaders -------------------------------------------------------------------------------

def crash_and_reelection():
    return [
        ev(10, "broker-1", "leader_elected", partition="t-0", leader=1, leader_epoch=0, isr=[1, 2, 3],
           election="initial", unclean=False),
        ev(11, "broker-1", "became_leader", partition="t-0", leader_epoch=0, isr=[1, 2, 3]),
        ev(11, "broker-2", "became_follower", partition="t-0", leader=1, leader_epoch=0),
        sample(100, 1, role="leader", leader=1, leader_epoch=0, isr=[1, 2, 3]),
        sample(100, 2, role="follower", leader=1, leader_epoch=0, isr=[1, 2, 3]),
        ev(500, "nemesis", "fault_started", fault="crash", brokers=[1]),
        ev(900, "broker-2", "leader_elected", partition="t-0", leader=2, leader_epoch=1, isr=[2, 3],
           election="offline", unclean=False),
        ev(901, "broker-2", "became_leader", partition="t-0", leader_epoch=1, isr=[2, 3]),
        ev(950, "broker-2", "leader_elected", partition="t-9", leader=3, leader_epoch=7, isr=[3],
           election="offline", unclean=True),
    ]


def test_a_crashed_leader_stops_leading_and_leaves_a_gap_with_no_leader():
    events = crash_and_reelection()
    claims = data.leader_claims(events, "t-0", 2000)
    assert claims == [LeaderClaim(1, 0, 11, 500), LeaderClaim(2, 1, 901, 2000)]
    assert data.no_leader_intervals(claims, 0, 2000) == [(0, 11), (500, 901)]
    assert data.zombie_intervals(claims) == []
    assert [(e.t_ms, e.leader, e.leader_epoch, e.unclean) for e in data.elections(events, "t-0")] == [
        (10, 1, 0, False), (900, 2, 1, False)]


def test_an_election_of_no_leader_leaves_the_partition_without_one():
    events = [
        ev(0, "broker-1", "became_leader", partition="t-0", leader_epoch=0, isr=[1]),
        ev(300, "broker-2", "leader_elected", partition="t-0", leader=-1, leader_epoch=1, isr=[1],
           election="offline", unclean=False),
        ev(302, "broker-1", "became_follower", partition="t-0", leader=-1, leader_epoch=1),
    ]
    claims = data.leader_claims(events, "t-0", 1000)
    assert claims == [LeaderClaim(1, 0, 0, 300), LeaderClaim(1, 0, 300, 302, stale=True)]
    assert data.no_leader_intervals([c for c in claims if not c.stale], 0, 1000) == [(300, 1000)]
    assert data.elections(events, "t-0")[0].leader == -1


def test_a_zombie_leader_is_stale_from_the_newer_election_until_it_steps_down():
    events = [
        ev(10, "broker-1", "became_leader", partition="t-0", leader_epoch=0, isr=[1, 2, 3]),
        ev(200, "nemesis", "fault_started", fault="isolate", nodes=["broker-1"]),
        ev(300, "broker-3", "leader_elected", partition="t-0", leader=2, leader_epoch=1, isr=[2, 3],
           election="offline", unclean=False),
        ev(301, "broker-2", "became_leader", partition="t-0", leader_epoch=1, isr=[2, 3]),
        sample(400, 1, role="leader", leader=1, leader_epoch=0, isr=[1, 2, 3]),
        sample(400, 2, role="leader", leader=2, leader_epoch=1, isr=[2, 3]),
        ev(600, "broker-1", "became_follower", partition="t-0", leader=2, leader_epoch=1),
    ]
    claims = data.leader_claims(events, "t-0", 1000)
    assert claims == [LeaderClaim(1, 0, 10, 300), LeaderClaim(1, 0, 300, 600, stale=True),
                      LeaderClaim(2, 1, 301, 1000)]
    assert data.zombie_intervals(claims) == [(301, 600, 1)]
    assert data.no_leader_intervals([c for c in claims if not c.stale], 10, 1000) == [(300, 301)]
    # the zombie's cached ISR (an older epoch) does not count
    changes = data.isr_changes(events, "t-0")
    assert changes == [(10, (1, 2, 3)), (300, (2, 3))]


def test_samples_alone_are_enough_to_see_who_leads():
    events = [sample(100, 3, role="leader", leader=3, leader_epoch=4, isr=[3]),
              sample(200, 3, role="leader", leader=3, leader_epoch=4, isr=[3]),
              sample(300, 3, role="follower", leader=1, leader_epoch=5, isr=[1, 3])]
    assert data.raw_leader_claims(events, "t-0", 1000) == [LeaderClaim(3, 4, 100, 300)]


# ---- ISR -----------------------------------------------------------------------------------

def test_isr_intervals_follow_shrinks_and_expansions():
    events = [
        ev(10, "broker-1", "leader_elected", partition="t-0", leader=1, leader_epoch=0, isr=[1, 2, 3],
           election="initial", unclean=False),
        sample(100, 1, role="leader", leader=1, leader_epoch=0, isr=[1, 2, 3]),
        ev(200, "broker-1", "isr_shrunk", partition="t-0", isr=[1, 2], leader_epoch=0, reason="lagging"),
        sample(300, 1, role="leader", leader=1, leader_epoch=0, isr=[1, 2]),
        ev(400, "broker-1", "isr_shrunk", partition="t-1", isr=[1], leader_epoch=0, reason="lagging"),
        ev(500, "broker-1", "isr_expanded", partition="t-0", isr=[3, 1, 2], leader_epoch=0, reason="caught_up"),
    ]
    changes = data.isr_changes(events, "t-0")
    assert changes == [(10, (1, 2, 3)), (200, (1, 2)), (500, (1, 2, 3))]
    assert data.isr_intervals(changes, (1, 2, 3), 1000) == {
        1: [(10, 1000)], 2: [(10, 1000)], 3: [(10, 200), (500, 1000)]}


def test_a_replica_never_in_the_isr_has_no_interval():
    assert data.isr_intervals([(0, (1,)), (50, (1, 2))], (1, 2, 3), 100) == {
        1: [(0, 100)], 2: [(50, 100)], 3: []}


# ---- faults --------------------------------------------------------------------------------

def test_faults_without_ids_end_at_restart_heal_or_the_final_phase():
    events = [
        ev(0, "broker-1", "broker_started"),
        ev(100, "nemesis", "fault_started", fault="crash", brokers=[1]),
        ev(200, "nemesis", "fault_started", fault="isolate", nodes=["broker-2", "zk"]),
        ev(300, "nemesis", "fault_started", fault="heal"),
        ev(400, "nemesis", "fault_started", fault="restart", brokers=[1]),
        ev(400, "broker-1", "broker_started"),
        ev(500, "nemesis", "fault_started", fault="power_loss", brokers=[3]),
        ev(600, "nemesis", "fault_started", fault="partition", groups=[["broker-1"], ["broker-2", "zk"]]),
        ev(800, "world", "final_phase_started"),
    ]
    assert data.fault_intervals(events, 1000) == [
        FaultInterval(100, 400, "crash", "crash b1", (1,)),
        FaultInterval(200, 300, "isolate", "isolate b2,zk"),
        FaultInterval(500, 800, "power_loss", "power loss b3", (3,)),
        FaultInterval(600, 800, "partition", "partition b1 | b2,zk"),
    ]


def test_faults_with_ids_end_at_their_fault_ended_or_at_the_end():
    events = [
        ev(100, "nemesis", "fault_started", fault_id=1, fault="crash", brokers=[1]),
        ev(150, "nemesis", "fault_started", fault_id=2, fault="partition", groups=[["broker-1"], ["broker-2", "zk"]]),
        ev(400, "nemesis", "fault_started", fault_id=3, fault="restart", brokers=[1]),
        ev(400, "nemesis", "fault_ended", fault_id=3, fault="restart"),
        ev(400, "nemesis", "fault_ended", fault_id=1, fault="crash"),
        ev(400, "broker-1", "broker_started"),
        ev(800, "world", "final_phase_started"),
    ]
    assert data.fault_intervals(events, 1000) == [
        FaultInterval(100, 400, "crash", "crash b1", (1,)),
        FaultInterval(150, 1000, "partition", "partition b1 | b2,zk"),
    ]


def test_a_fault_on_a_role_is_drawn_on_the_broker_it_resolved_to():
    """Issue 10: ``brokers`` holds the role as written; the timeline uses ``targets``."""
    events = [ev(0, "broker-2", "became_leader", partition="t-0", leader_epoch=1, isr=[2]),
              ev(100, "nemesis", "fault_started", fault_id=1, fault="crash", brokers=["leader: t-0"], targets=[2],
                 roles={"leader: t-0": 2}),
              ev(200, "nemesis", "fault_started", fault_id=2, fault="isolate", nodes=["follower: t-0, isr: false"],
                 targets=[], roles={"follower: t-0, isr: false": None}, no_effect="..."),
              ev(200, "nemesis", "fault_ended", fault_id=2, fault="isolate"),
              ev(300, "nemesis", "fault_ended", fault_id=1, fault="crash")]
    assert data.fault_intervals(events, 1000) == [
        FaultInterval(100, 300, "crash", "crash b2 (leader: t-0)", (2,)),
        FaultInterval(200, 200, "isolate", "isolate nothing (follower: t-0, isr: false)")]
    assert data.leader_claims(events, "t-0", 1000) == [LeaderClaim(2, 1, 0, 100)]


def test_a_crash_ends_a_claim_to_lead_even_without_a_fault_id_match():
    events = [ev(0, "broker-1", "became_leader", partition="t-0", leader_epoch=0, isr=[1]),
              ev(50, "nemesis", "fault_started", fault_id=9, fault="power_loss", brokers=[1])]
    assert data.leader_claims(events, "t-0", 100) == [LeaderClaim(1, 0, 0, 50)]


# ---- logs and produce outcomes -------------------------------------------------------------

def test_replica_series_and_truncations_of_one_partition():
    events = [
        sample(100, 2, log_end_offset=5, high_watermark=3, role="follower"),
        sample(100, 1, log_end_offset=6, high_watermark=3, role="leader"),
        sample(200, 2, partition="t-1", log_end_offset=9, high_watermark=9, role="leader"),
        ev(250, "broker-2", "log_truncated", partition="t-0", rule="high_watermark", from_offset=5,
           to_offset=3, removed_count=2),
        sample(300, 2, log_end_offset=3, high_watermark=3, role="follower"),
    ]
    series = data.replica_series(events, "t-0")
    assert list(series) == [1, 2]
    assert (series[2].t_ms, series[2].log_end_offset, series[2].high_watermark) == ([100, 300], [5, 3], [3, 3])
    assert data.truncations(events, "t-0") == [data.Truncation(250, 2, 5, 3, 2, "high_watermark")]


def test_cleaning_passes_and_log_start_offsets_of_one_partition():
    """segments_cleaned gives a pass (its range and the records it removed) on its
    broker; the log start comes from segments_deleted and segments_cleaned, changes only."""
    events = [
        ev(100, "broker-1", "cleaning_started", partition="t-0", first_dirty_offset=0, first_uncleanable_offset=40,
           cleanable_ratio=1.0),
        ev(150, "broker-1", "segments_cleaned", partition="t-0", base_offsets=[[0, 20]], start_offset=0,
           end_offset=40, records_before=40, records_after=12, tombstones_removed=0, bytes_before=4000,
           bytes_after=1200, log_start_offset=0),
        ev(160, "broker-2", "segments_cleaned", partition="t-1", base_offsets=[[0]], start_offset=0,
           end_offset=9, records_before=9, records_after=9, tombstones_removed=0, bytes_before=900,
           bytes_after=900, log_start_offset=0),
        ev(200, "broker-2", "segments_deleted", partition="t-0", reason="retention_ms", base_offsets=[0],
           deleted_bytes=3000, log_start_offset=30),
        ev(300, "broker-1", "segments_cleaned", partition="t-0", base_offsets=[[0, 40]], start_offset=40,
           end_offset=70, records_before=42, records_after=20, tombstones_removed=3, bytes_before=4200,
           bytes_after=2000, log_start_offset=0),
        ev(400, "broker-2", "segments_deleted", partition="t-0", reason="retention_bytes", base_offsets=[30],
           deleted_bytes=3000, log_start_offset=55),
    ]
    assert data.cleanings(events, "t-0") == [data.Cleaned(150, 1, 0, 40, 28), data.Cleaned(300, 1, 40, 70, 22)]
    assert data.cleanings(events, "t-1") == [data.Cleaned(160, 2, 0, 9, 0)]
    assert data.log_starts(events, "t-0") == {1: [(150, 0)], 2: [(200, 30), (400, 55)]}
    assert data.log_starts(events, "t-2") == {}


def test_produce_outcomes_place_acknowledged_values_at_their_offsets():
    events = [
        ev(10, "producer-0", "invoke", f="send", op=1, partition="t-0", values=["a", "b"], acks=1),
        ev(12, "producer-0", "ok", f="send", op=1, partition="t-0", offset=5),
        ev(20, "producer-0", "invoke", f="send", op=2, partition="t-0", values=["c"], acks=1),
        ev(25, "producer-0", "fail", f="send", op=2, partition="t-0", error="NOT_LEADER_OR_FOLLOWER", error_code=6),
        ev(30, "producer-0", "invoke", f="send", op=3, partition="t-0", values=["d"], acks=1),
        ev(40, "producer-0", "info", f="send", op=3, partition="t-0", reason="timeout"),
        ev(50, "producer-0", "invoke", f="send", op=4, partition="t-0", values=["e"], acks=1),
        ev(60, "producer-0", "invoke", f="send", op=5, partition="t-1", values=["f"], acks=1),
        ev(61, "producer-0", "ok", f="send", op=5, partition="t-1", offset=0),
        ev(70, "consumer-0", "invoke", f="poll", op=1, positions={"t-0": 0}),
    ]
    outcomes = data.produce_outcomes(build_history(events).operations, "t-0", {"b", "f"})
    assert (outcomes.acked_t_ms, outcomes.acked_offset) == ([12, 12], [5, 6])
    assert outcomes.failed == [(25, "NOT_LEADER_OR_FOLLOWER")]
    assert outcomes.unknown == [(40, "timeout"), (50, "no reply")]
    assert outcomes.lost == [(12, 6, "b")]


def test_run_info_reads_partitions_and_phases_from_the_trace():
    events = [
        ev(0, "world", "run_started", scenario="s", brokers=[1, 2, 3], topics=[
            {"name": "t", "partitions": 2, "replication_factor": 2, "assignment": {"0": [1, 2], "1": [2, 3]}}]),
        ev(40, "world", "workload_stopped"),
        ev(70, "world", "final_phase_started"),
        ev(90, "world", "run_finished"),
    ]
    run = data.run_info(events)
    assert (run.scenario, run.partitions, run.end_ms) == ("s", {"t-0": (1, 2), "t-1": (2, 3)}, 90)
    assert run.markers == [(40, "workload stopped"), (70, "final phase")]
    assert figure_name("t-1") == "timeline-t-1.png"


# ---- real runs -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return run_scenario(parse_scenario(SCENARIO, "x.yaml"), 2, out).trace_path


def png_size(path):
    raw = path.read_bytes()
    assert raw[:8] == PNG_SIGNATURE and raw[12:16] == b"IHDR"
    return struct.unpack(">II", raw[16:24])


def test_one_deterministic_png_per_partition(trace, tmp_path):
    history = build_history(read_events(trace))
    acked = sorted(acknowledged_values(history))
    lost = set(acked[:3])  # pretend the checkers lost a few
    first = plot_trace(trace, tmp_path / "a", lost_values=lost)
    second = plot_trace(trace, tmp_path / "b", lost_values=lost)
    assert [p.name for p in first] == ["timeline-t-0.png", "timeline-t-1.png"]
    for a, b in zip(first, second):
        assert png_size(a) == (1200, 1000)
        assert 30_000 < a.stat().st_size < 2_000_000
        assert a.read_bytes() == b.read_bytes()
    assert b"Software" not in first[0].read_bytes()


def test_plot_history_draws_without_samples(trace, tmp_path):
    paths = plot_history(build_history(read_events(trace)), tmp_path, seed=2)
    assert [png_size(p) for p in paths] == [(1200, 1000)] * 2


def test_the_fast_reader_keeps_every_event_a_timeline_draws(trace):
    everything = [e for e in read_events(trace) if e.get("f") not in ("poll", "read") and e.type != "replica_log"]
    assert list(read_drawn_events(trace)) == everything
    by_partition = events_by_partition([e for e in everything if e.type == "became_leader"], ["t-0", "t-1"])
    assert {e.get("partition") for e in by_partition["t-1"]} == {"t-1"}


def test_without_run_started_partitions_come_from_the_events():
    events = [sample(100, 2, partition="t-1", role="leader"), sample(100, 3, partition="t-1", role="follower"),
              ev(150, "producer-0", "invoke", f="send", op=1, partition="t-0", values=["a"], acks=1)]
    assert data.run_info(events).partitions == {"t-0": (), "t-1": (2, 3)}


COMPACTED_SCENARIO = textwrap.dedent("""\
    name: timeline-compaction
    cluster:
      brokers: 3
      config: {log.cleaner.backoff.ms: 200}
      topics:
        - name: t
          partitions: 1
          replication_factor: 3
          config: {cleanup.policy: compact, segment.bytes: 2000, min.cleanable.dirty.ratio: 0.01,
                   delete.retention.ms: 500}
    workload:
      producers: [{topic: t, acks: all, rate: 200, keys: 10, tombstone_rate: 0.1}]
    duration: 4s
    """)


@pytest.mark.slow
def test_a_compacted_run_draws_its_cleaning_passes_and_log_starts(tmp_path):
    """A simulated run whose replicas clean: the figure's data holds every replica's
    passes, and the drawing shows them (the PNG differs from one drawn without them)."""
    trace_path = run_scenario(parse_scenario(COMPACTED_SCENARIO, "x.yaml"), 1, tmp_path / "run").trace_path
    events = list(read_events(trace_path))
    internal = [e for e in events if e.type == "segments_cleaned"]
    assert {e.node for e in internal} == {"broker-1", "broker-2", "broker-3"}
    tl = partition_timeline(events, [], "t-0", (1, 2, 3), 4000)
    assert len(tl.cleanings) == len(internal) and sum(c.records_removed for c in tl.cleanings) > 0
    assert set(tl.log_starts) == {1, 2, 3}  # a compact-only log's start stays 0: one point each
    assert all(points == [(points[0][0], 0)] for points in tl.log_starts.values())
    bare = [e for e in events if e.type not in ("segments_cleaned", "segments_deleted")]
    without = plot_history(build_history(bare), tmp_path / "c")[0]
    drawn = plot_history(build_history(events), tmp_path / "d")[0]
    assert png_size(drawn) == (1200, 1000) and drawn.read_bytes() != without.read_bytes()
