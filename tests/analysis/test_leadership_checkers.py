"""unavailable_ms from leadership intervals, and the facts a scenario can expect
(issue 8, items 18 and 19), on hand-built traces."""
import pytest

from analysis.verdict import Expectation, MappingExpectation, check_history, evaluate, format_table, \
    parse_expectation, Verdict

from tests.analysis.builders import HistoryBuilder


def cluster(brokers=(1, 2, 3), leader: int = 1, at: int = 100) -> HistoryBuilder:
    """Brokers started at 0; ``leader`` leads t-0 from ``at``; a producer exists."""
    h = HistoryBuilder()
    h.add(0, "world", "run_started", brokers=list(brokers))
    for b in brokers:
        h.broker(0, b, "broker_started", recovered_partitions=[])
    h.broker(at - 2, sorted(brokers)[0], "leader_elected", partition="t-0", leader=leader, leader_epoch=0,
             isr=list(brokers), election="initial", unclean=False, controller_epoch=1)
    h.broker(at, leader, "became_leader", partition="t-0", leader_epoch=0, isr=list(brokers))
    h.send(at, ["v"], 0)
    return h


def samples(h: HistoryBuilder, start: int, end: int, roles: dict[int, str]) -> None:
    for t in range(start, end, 100):
        for broker, role in roles.items():
            h.state(t, broker, {"t-0": role})


def unavailable(h: HistoryBuilder, stop: int):
    h.add(stop, "world", "workload_stopped")
    return h.check()["unavailable_ms"]


def test_every_broker_down_is_unavailable_although_no_broker_samples():
    """The old sample-based measure saw nothing: no broker writes a sample while all are
    down, and after the restart the first sample already has a leader. (Kafka's
    OfflinePartitionsCount, KafkaController.scala 2.7.0, has no controller to count
    then either; the intervals do.)"""
    h = cluster()
    samples(h, 200, 1000, {1: "leader", 2: "follower", 3: "follower"})
    h.fault(1000, 1, "crash", brokers=[1, 2, 3], targets=[1, 2, 3])
    for b in (1, 2, 3):
        h.broker(11000, b, "broker_started", recovered_partitions=["t-0"])
    h.broker(11400, 1, "leader_elected", partition="t-0", leader=2, leader_epoch=1, isr=[2],
             election="offline", unclean=False, controller_epoch=2)
    h.broker(11500, 2, "became_leader", partition="t-0", leader_epoch=1, isr=[2])
    samples(h, 11600, 20000, {1: "follower", 2: "leader", 3: "follower"})
    result = unavailable(h, 20000)
    assert result.value == 10500
    assert result.examples == ({"t_ms": 1000, "partition": "t-0", "from_ms": 1000, "to_ms": 11500,
                                "duration_ms": 10500},)
    assert result.details["sources"] == ["leadership"]


def test_a_single_broker_down_for_ten_seconds_is_ten_seconds_unavailable():
    h = cluster(brokers=(1,))
    samples(h, 200, 5000, {1: "leader"})
    h.fault(5000, 1, "crash", brokers=[1], targets=[1])
    h.broker(15000, 1, "broker_started", recovered_partitions=["t-0"])
    h.broker(15200, 1, "became_leader", partition="t-0", leader_epoch=1, isr=[1])
    samples(h, 15300, 20000, {1: "leader"})
    assert unavailable(h, 20000).value == 10200


def test_a_halted_broker_loses_its_leadership_until_a_new_leader_takes_over():
    h = cluster()
    h.broker(3000, 1, "broker_halted", reason="log directory failed: EIO", clean=False)
    h.broker(9000, 2, "became_leader", partition="t-0", leader_epoch=1, isr=[2, 3])
    assert unavailable(h, 20000).value == 6000


def test_a_paused_leader_serves_nothing_until_it_resumes():
    h = cluster()
    h.fault(2000, 1, "pause", brokers=[1], targets=[1])
    h.add(5000, "nemesis", "fault_ended", fault_id=1, fault="pause")
    h.fault(7000, 2, "pause", brokers=[1], targets=[1])
    h.fault(7500, 3, "resume", brokers=[1], targets=[1])
    assert unavailable(h, 20000).value == 3500


def test_a_leader_no_client_can_reach_is_unavailable():
    """isolate cuts broker-1 from every client; a split that leaves the clients
    unlisted keeps them connected to both sides, so the leader still serves."""
    h = cluster()
    h.fault(2000, 1, "isolate", nodes=["broker-1"], targets=["broker-1"])
    h.add(4000, "nemesis", "fault_ended", fault_id=1, fault="isolate")
    h.fault(6000, 2, "partition", groups=[["broker-1"], ["broker-2", "broker-3", "zk"]],
            targets=[["broker-1"], ["broker-2", "broker-3", "zk"]])
    h.add(8000, "nemesis", "fault_ended", fault_id=2, fault="partition")
    h.fault(9000, 3, "isolate", nodes=["broker-1", "producer-0"], targets=["broker-1", "producer-0"])
    assert unavailable(h, 20000).value == 2000


def test_a_network_fault_that_changed_nothing_cuts_no_client_off():
    """Issue 10: a role that resolved into two partition groups cuts nothing (the
    executor adds no cut and says ``no_effect``): the leader still serves."""
    h = cluster()
    h.fault(2000, 1, "partition", groups=[["leader: t-0"], ["broker-1", "producer-0"]],
            targets=[["broker-1"], ["broker-1", "producer-0"]], roles={"leader: t-0": 1},
            no_effect="broker-1 resolved into two groups")
    h.fault(3000, 2, "isolate", nodes=["leader: t-0", "producer-0"], targets=[], roles={"leader: t-0": None},
            no_effect="leader: t-0 resolved to no broker: t-0 has no leader")
    assert unavailable(h, 20000).value == 0


def test_time_before_a_partitions_first_leader_is_not_counted():
    h = cluster(at=700)
    assert unavailable(h, 20000).value == 0


def test_a_leaderless_election_counts_even_while_an_old_leader_still_claims():
    """The controller's -1 and the brokers' claims are united, as before."""
    h = cluster()
    h.broker(1000, 2, "leader_elected", partition="t-0", leader=-1, leader_epoch=1, isr=[1],
             election="offline", unclean=False, controller_epoch=2)
    h.broker(3000, 2, "leader_elected", partition="t-0", leader=1, leader_epoch=2, isr=[1],
             election="offline", unclean=False, controller_epoch=2)
    assert unavailable(h, 20000).value == 2000


def test_a_second_claimant_keeps_the_partition_served():
    h = cluster()
    h.broker(2000, 2, "became_leader", partition="t-0", leader_epoch=1, isr=[2, 3])
    h.fault(2500, 1, "crash", brokers=[1], targets=[1])
    h.broker(4000, 1, "broker_started", recovered_partitions=["t-0"])
    h.broker(4100, 1, "became_follower", partition="t-0", leader=2, leader_epoch=1)
    assert unavailable(h, 20000).value == 0


def test_a_step_down_without_successor_is_unavailable_until_one_leads():
    h = cluster()
    h.broker(2000, 1, "became_follower", partition="t-0", leader=2, leader_epoch=1)
    h.broker(2300, 2, "became_leader", partition="t-0", leader_epoch=1, isr=[2, 3])
    assert unavailable(h, 20000).value == 300


# -- facts ---------------------------------------------------------------------------

def eventful() -> HistoryBuilder:
    h = cluster()
    h.broker(1000, 1, "isr_shrunk", partition="t-0", isr=[1, 2], old_isr=[1, 2, 3], reason="lagging",
             leader_epoch=0, zk_version=1)
    h.broker(1500, 1, "isr_expanded", partition="t-0", isr=[1, 2, 3], old_isr=[1, 2], reason="caught_up",
             leader_epoch=0, zk_version=2)
    h.broker(1800, 1, "isr_update_conflict", partition="t-0", cached_zk_version=2, zk_version=3, leader=1,
             leader_epoch=0)
    h.fault(2000, 1, "crash", brokers=[1], targets=[1])
    h.broker(2100, 2, "isr_shrunk", partition="t-1", isr=[2], reason="broker_failed", leader_epoch=1,
             zk_version=4, by="controller")
    h.broker(2200, 2, "leader_elected", partition="t-0", leader=-1, leader_epoch=1, isr=[1],
             election="offline", unclean=False, controller_epoch=1)
    h.broker(2300, 2, "leader_elected", partition="t-0", leader=3, leader_epoch=2, isr=[3],
             election="offline", unclean=True, controller_epoch=1)
    h.broker(2310, 3, "became_leader", partition="t-0", leader_epoch=2, isr=[3])
    h.broker(2400, 3, "request_fenced", request="leader_and_isr", controller_epoch=1, known_controller_epoch=2)
    h.broker(2401, 2, "controller_fenced", controller_epoch=1, by_broker=3)
    h.broker(2402, 2, "controller_fenced", controller_epoch=1)
    h.broker(3000, 1, "broker_started", recovered_partitions=["t-0"])
    h.broker(3100, 1, "became_follower", partition="t-0", leader=3, leader_epoch=2)
    h.add(5000, "world", "workload_stopped")
    return h


def test_the_facts_count_what_the_trace_says_happened():
    """The counts Kafka's own meters keep (2.7.0): UncleanLeaderElectionsPerSec, marked
    in PartitionStateMachine.scala offlinePartitionLeaderElection when the leader comes
    from outside the ISR; IsrShrinksPerSec / IsrExpandsPerSec, marked by Partition.scala
    markShrink / markExpand (the leader's ISR writes; isrlab also counts the
    controller's, split in the details); FailedIsrUpdatesPerSec (markFailed), which is
    the stale ISR write isrlab counts as fenced."""
    results = eventful().check()
    assert results["unclean_elections"].value == 1
    assert results["unclean_elections"].examples[0]["leader"] == 3
    assert results["leader_elections"].value == 2
    assert results["leader_elections"].details == {"by_election": {"initial": 1, "offline": 1}, "leaderless": 1}
    fenced = results["fenced_requests"]
    assert fenced.value == 3  # the by_broker echo of request_fenced is not counted twice
    assert fenced.details["by_event"] == {"controller_fenced": 1, "controller_fenced_by_broker": 1,
                                          "isr_update_conflict": 1, "request_fenced": 1}
    assert results["isr_shrinks"].value == 2 and results["isr_shrinks"].details == {"by": {"controller": 1,
                                                                                           "leader": 1}}
    assert results["isr_expansions"].value == 1
    assert results["final_leader"].value == {"t-0": 3}
    assert all(results[n].valid for n in ("unclean_elections", "fenced_requests", "final_leader"))


def test_the_final_leader_is_minus_one_when_no_running_broker_leads():
    h = cluster()
    h.fault(2000, 1, "crash", brokers=[1], targets=[1])
    assert h.check()["final_leader"].value == {"t-0": -1}


def test_without_leadership_facts_the_final_leader_is_the_controllers_last_election():
    h = HistoryBuilder()
    h.add(10, "broker-1", "leader_elected", partition="t-0", leader=2, leader_epoch=3, isr=[2],
          election="offline", unclean=False, controller_epoch=1)
    result = h.check()["final_leader"]
    assert result.value == {"t-0": 2} and result.details == {"source": "leader_elected"}


def test_expectations_on_facts_use_the_same_comparisons():
    verdict = check_history(eventful().history())
    rows = evaluate(verdict, {"unclean_elections": ">0", "fenced_requests": 3, "isr_expansions": "<1",
                              "final_leader": {"t-0": 3}})
    assert [(r.name, r.passed) for r in rows] == [("unclean_elections", True), ("fenced_requests", True),
                                                  ("isr_expansions", False), ("final_leader", True)]
    assert not evaluate(verdict, {"final_leader": {"t-0": "!=3"}})[0].passed
    assert not evaluate(verdict, {"final_leader": {"t-1": 3}})[0].passed  # a partition it does not know


def test_a_mapping_is_required_for_final_leader_and_refused_elsewhere():
    assert parse_expectation({"t-0": "<=2"}, "final_leader") == \
        MappingExpectation((("t-0", Expectation("<=", 2)),))
    with pytest.raises(ValueError, match="final_leader takes a mapping"):
        parse_expectation(1, "final_leader")
    with pytest.raises(ValueError, match="only final_leader take"):
        parse_expectation({"t-0": 1}, "lost_writes")
    with pytest.raises(ValueError, match="not a number"):
        parse_expectation({"t-0": "leader"}, "final_leader")


def test_the_verdict_file_and_table_show_the_final_leader():
    verdict = check_history(eventful().history())
    assert Verdict.from_json(verdict.to_json()) == verdict
    line = next(l for l in format_table(verdict).splitlines() if "final_leader" in l)
    assert "{t-0: 3}" in line
