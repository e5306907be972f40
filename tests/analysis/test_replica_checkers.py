"""Divergence (replica_log digests) and unavailability (replica_state samples and
leader_elected events) on hand-written traces."""
from analysis.checkers import run_checkers

from tests.analysis.builders import HistoryBuilder

SAME = [[0, "aaaa"], [100, "bbbb"], [200, "cccc"]]


def replica_log(h: HistoryBuilder, broker: int, chunks, partition="t-0", upto=300, start=0):
    h.add(5000, f"broker-{broker}", "replica_log", partition=partition, upto_offset=upto, log_start_offset=start,
          log_end_offset=upto, high_watermark=upto, chunk_size=100, chunks=chunks)


# -- divergence --------------------------------------------------------------------

def test_replicas_with_equal_chunks_do_not_diverge():
    h = HistoryBuilder()
    for broker in (1, 2, 3):
        replica_log(h, broker, SAME)
    result = h.check()["divergence"]
    assert result.value == 0 and result.valid
    assert result.details == {"partitions_compared": 1}


def test_a_replica_with_a_different_chunk_diverges_from_that_chunk_on():
    h = HistoryBuilder()
    replica_log(h, 1, SAME)
    replica_log(h, 2, [[0, "aaaa"], [100, "XXXX"], [200, "YYYY"]])
    replica_log(h, 3, SAME)
    replica_log(h, 1, SAME, partition="t-1")
    replica_log(h, 2, SAME, partition="t-1")
    result = h.check()["divergence"]
    assert result.value == 1 and not result.valid
    example = result.examples[0]
    assert example["partition"] == "t-0"
    assert example["replicas"] == [["broker-1", "broker-3"], ["broker-2"]]
    assert example["first_differing_offsets"] == [100, 200]
    assert example["differing_chunks"] == 2


def test_a_single_replica_cannot_diverge():
    h = HistoryBuilder()
    replica_log(h, 1, SAME)
    assert h.check()["divergence"].value == 0


def test_replicas_covering_different_ranges_compare_only_what_both_cover_whole():
    h = HistoryBuilder()
    replica_log(h, 1, SAME, upto=300)
    replica_log(h, 2, [[0, "aaaa"], [100, "bbbb"], [200, "partial"]], upto=250)
    replica_log(h, 3, [[100, "bbbb"], [200, "cccc"]], start=100)
    assert h.check()["divergence"].value == 0
    h2 = HistoryBuilder()
    replica_log(h2, 1, SAME, upto=300)
    replica_log(h2, 2, [[0, "aaaa"], [100, "other"], [200, "partial"]], upto=250)
    example = h2.check()["divergence"].examples[0]
    assert example["first_differing_offsets"] == [100, 200]


# -- unavailability ------------------------------------------------------------------

def sample_rounds(h: HistoryBuilder, start: int, stop: int, roles: dict[int, str], partition="t-0"):
    for t in range(start, stop, 100):
        for broker, role in roles.items():
            h.state(t, broker, {partition: role})


def test_a_partition_always_led_was_never_unavailable():
    h = HistoryBuilder()
    sample_rounds(h, 100, 3000, {1: "leader", 2: "follower"})
    h.add(3000, "world", "workload_stopped")
    result = h.check()["unavailable_ms"]
    assert result.value == 0 and result.valid
    assert result.details["per_partition_ms"] == {"t-0": 0}
    assert result.details["sample_interval_ms"] == 100


def test_time_with_no_broker_reporting_leader_is_unavailable():
    h = HistoryBuilder()
    sample_rounds(h, 100, 1100, {1: "leader", 2: "follower"})
    sample_rounds(h, 1100, 2100, {1: "follower", 2: "follower"})
    sample_rounds(h, 2100, 3000, {1: "follower", 2: "leader"})
    h.add(3000, "world", "workload_stopped")
    result = h.check()["unavailable_ms"]
    assert result.value == 1000
    assert result.examples == ({"t_ms": 1100, "partition": "t-0", "from_ms": 1100, "to_ms": 2100,
                                "duration_ms": 1000},)


def test_a_leader_that_stops_reporting_counts_for_one_and_a_half_intervals():
    h = HistoryBuilder()
    sample_rounds(h, 100, 1100, {1: "leader", 2: "follower"})
    sample_rounds(h, 1100, 2100, {2: "follower"})  # broker 1 crashed after its sample at 1000
    sample_rounds(h, 2100, 3000, {2: "leader"})
    h.add(3000, "world", "workload_stopped")
    assert h.check()["unavailable_ms"].value == 900  # from the round at 1200 to the one at 2100


def test_two_brokers_claiming_leadership_is_not_unavailable():
    h = HistoryBuilder()
    sample_rounds(h, 100, 1000, {1: "leader", 2: "follower"})
    sample_rounds(h, 1000, 2000, {1: "leader", 2: "leader"})
    h.add(2000, "world", "workload_stopped")
    assert h.check()["unavailable_ms"].value == 0


def test_brokers_sampling_at_different_phases_do_not_read_as_gaps():
    h = HistoryBuilder()
    sample_rounds(h, 100, 2000, {1: "follower"})
    sample_rounds(h, 150, 2000, {2: "leader"})
    h.add(2000, "world", "workload_stopped")
    result = h.check()["unavailable_ms"]
    assert result.value == 50  # before broker 2's first sample only


def test_time_after_the_workload_stopped_is_not_counted():
    h = HistoryBuilder()
    sample_rounds(h, 100, 1000, {1: "leader"})
    h.add(1000, "world", "workload_stopped")
    sample_rounds(h, 1000, 5000, {1: "follower"})
    assert h.check()["unavailable_ms"].value == 0


def test_leader_elected_minus_one_until_the_next_leader_without_samples():
    h = HistoryBuilder()
    h.add(0, "world", "run_started", scenario="s", topics=[{"name": "t", "partitions": 2}])
    h.add(10, "broker-1", "leader_elected", partition="t-0", leader=1, leader_epoch=0, unclean=False)
    h.add(10, "broker-1", "leader_elected", partition="t-1", leader=1, leader_epoch=0, unclean=False)
    h.add(500, "broker-1", "leader_elected", partition="t-0", leader=-1, leader_epoch=1, unclean=False)
    h.add(1500, "broker-1", "leader_elected", partition="t-0", leader=2, leader_epoch=2, unclean=True)
    h.add(2500, "broker-1", "leader_elected", partition="t-1", leader=-1, leader_epoch=1, unclean=False)
    h.add(3000, "world", "workload_stopped")
    h.add(4000, "broker-1", "leader_elected", partition="t-1", leader=2, leader_epoch=2, unclean=False)
    result = run_checkers(h.history())  # no replica_state samples at all
    assert result["unavailable_ms"].value == 1000
    assert result["unavailable_ms"].details["per_partition_ms"] == {"t-0": 1000, "t-1": 500}
    assert result["unavailable_ms"].details["sources"] == ["leader_elected"]


def test_samples_and_elections_are_united_not_added():
    h = HistoryBuilder()
    sample_rounds(h, 100, 1000, {1: "leader"})
    sample_rounds(h, 1000, 2000, {1: "follower"})
    sample_rounds(h, 2000, 3000, {1: "leader"})
    h.add(1500, "broker-1", "leader_elected", partition="t-0", leader=-1, leader_epoch=1)
    h.add(2500, "broker-1", "leader_elected", partition="t-0", leader=1, leader_epoch=2)
    h.add(3000, "world", "workload_stopped")
    h.events.sort(key=lambda e: e.t_ms)
    assert h.check()["unavailable_ms"].value == 1500  # [1000, 2000) with [1500, 2500)


def test_no_leadership_facts_gives_zero_with_a_note():
    result = HistoryBuilder().check()["unavailable_ms"]
    assert (result.value, result.explanation) == (0, "no leadership facts in the trace")
