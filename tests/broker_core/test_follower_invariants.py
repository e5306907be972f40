"""The invariants of broker_core/follower_invariants.py, each through the observed
harness (tests/invariant_harness.py, which wires them as `isrlab run --check-invariants`
does): the real core passes each situation, and the same situation fails when the core
breaks the rule (the mutant of broker_core/mutants.py that breaks it, or the core's own
ISR proposal made where its lag rule would not make it)."""
from __future__ import annotations

import pytest

from broker_core import mutants
from broker_core.config import LOG_FLUSHER_INITIAL_DELAY_MS, broker_config
from broker_core.errors import ErrorCode
from broker_core.follower_invariants import (
    CAUGHT_UP_FOLLOWER_STAYS_IN_ISR, LOG_START_FOLLOWS_LEADER, MIN_ISR_ON_ACKNOWLEDGE, log_start_followed)
from broker_core.invariants import INVARIANTS
from broker_core.types import TopicPartition
from tests.invariant_harness import ObservedCluster, observed_cluster

TP = TopicPartition("t", 0)
BATCH_BYTES = 78  # one record of the harness's in a v2 batch (tests/broker_core/test_retention.py)


def test_the_new_invariants_are_properties_the_explorer_and_expect_know():
    assert {MIN_ISR_ON_ACKNOWLEDGE, CAUGHT_UP_FOLLOWER_STAYS_IN_ISR, LOG_START_FOLLOWS_LEADER} <= set(INVARIANTS)


# -- MinIsrOnAcknowledge --------------------------------------------------------------
def _isr_down_to_the_leader() -> tuple[ObservedCluster, int]:
    """Both followers cut off from the leader and made to lag, so that the leader drops
    them and is alone in its ISR, below min.insync.replicas 2."""
    cluster = observed_cluster(config={"min.insync.replicas": 2, "replica.lag.time.max.ms": 1000})
    leader = cluster.leader()
    for follower in [b for b in cluster.brokers if b != leader]:
        cluster.block(follower, leader)
    assert cluster.produce_and_wait(leader, ["behind"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: cluster.partition(leader).isr == (leader,), 5000)
    return cluster, leader


def test_an_acks_all_produce_below_min_isr_is_refused_and_breaks_nothing():
    cluster, leader = _isr_down_to_the_leader()
    assert cluster.produce_and_wait(leader, ["x"], acks=-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.violations == []


def test_min_isr_on_acknowledge_fails_when_acks_all_is_acknowledged_below_min_isr():
    cluster, leader = _isr_down_to_the_leader()
    with mutants.active("acks-all-below-min-isr"):
        assert cluster.produce_and_wait(leader, ["x"], acks=-1) is ErrorCode.NONE
    [found] = cluster.named(MIN_ISR_ON_ACKNOWLEDGE)
    assert found.brokers == (leader,) and found.seen["maximal_isr"] == [leader]
    assert found.seen["min_insync_replicas"] == 2 and found.allowed_by == ()


# -- CaughtUpFollowerStaysInIsr -------------------------------------------------------
def _a_follower_stops_fetching(profile: str = "kafka-2.7", **config) -> tuple[ObservedCluster, int, int]:
    """As test_isr_lag_and_high_watermark's: leader 2, controller 1, follower 3 cut off
    from the leader (not from the store), the partition idle."""
    cluster = ObservedCluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]}, profile=profile,
                              config={"replica.lag.time.max.ms": 1000, **config})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    assert cluster.leader() == 2 and cluster.controller() == 1
    cluster.block(3, 2)
    return cluster, 2, 3


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-3.0"])
def test_an_idle_follower_that_stopped_fetching_breaks_nothing_and_a_lagging_one_may_go(profile):
    cluster, leader, follower = _a_follower_stops_fetching(profile)
    cluster.run_for(10000)  # ten lag times without a fetch, nothing produced
    assert follower in cluster.partition(leader).isr
    assert cluster.produce_and_wait(leader, ["lacked"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 3000)
    assert cluster.violations == []


def test_caught_up_follower_stays_in_isr_fails_when_an_idle_follower_is_dropped():
    cluster, leader, follower = _a_follower_stops_fetching()
    with mutants.active("idle-follower-dropped"):  # 0.8.2.2's "stuck" rule on kafka-2.7
        assert cluster.wait_for(lambda: cluster.named(CAUGHT_UP_FOLLOWER_STAYS_IN_ISR), 5000)
    found = cluster.named(CAUGHT_UP_FOLLOWER_STAYS_IN_ISR)[0]
    assert found.brokers == (leader, follower) and follower not in found.seen["proposed_isr"]
    assert found.seen["follower_log_end_offset"] == found.seen["leader_log_end_offset"]


def test_caught_up_follower_stays_in_isr_fails_on_the_leaders_own_proposal_without_the_mutant():
    """The leader's own ISR change path (IsrChanger.propose), asked to drop a follower at
    its log end as a wrong lag rule would: the invariant judges the proposal itself."""
    cluster, leader, follower = _a_follower_stops_fetching()
    node = cluster.nodes[leader]
    partition = cluster.partition(leader)
    node.replicas.isr.propose(partition, tuple(r for r in partition.isr if r != follower), "lagging")
    found = cluster.observer.observe(cluster.view, (leader,))  # as after the input that proposed it
    assert [v.brokers for v in found if v.invariant == CAUGHT_UP_FOLLOWER_STAYS_IN_ISR] == [(leader, follower)]
    assert cluster.observer.observe(cluster.view, (leader,)) == []  # a proposal is judged once


@pytest.mark.parametrize("profile,rule", [("kafka-0.8", None), ("kafka-2.7", "last_caught_up")])
def test_the_older_lag_rules_drop_an_idle_follower_unjudged(profile, rule):
    """0.8.2.2's "stuck" rule and 0.9 to 2.0's (KIP-16) drop the idle follower: Kafka's own
    behaviour under those rules, which the invariant does not judge."""
    cluster, leader, follower = _a_follower_stops_fetching(profile, **({"isr_lag_rule": rule} if rule else {}))
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 5000)
    assert cluster.named(CAUGHT_UP_FOLLOWER_STAYS_IN_ISR) == []


# -- LogStartFollowsLeader ------------------------------------------------------------
def _leader_alone_has_retention() -> ObservedCluster:
    """As test_retention's: ten one-record batches, two a segment, and a retention limit
    the leader alone has (a topic override the followers have not read yet): its check
    moves its log start to 6; the followers learn it only from fetch answers."""
    cluster = ObservedCluster(config={"log.segment.bytes": 2 * BATCH_BYTES, "log.retention.check.interval.ms": 1000})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    for i in range(10):
        assert cluster.produce_and_wait(1, [f"r{i}"]) is ErrorCode.NONE
    assert cluster.wait_for(cluster.settled, 5000)
    leader_config = broker_config("kafka-2.7", {"log.segment.bytes": 2 * BATCH_BYTES,
                                                "log.retention.check.interval.ms": 1000,
                                                "log.retention.bytes": 3 * BATCH_BYTES})
    cluster.nodes[1].replicas.partitions[TP].config = leader_config
    cluster.nodes[1].replicas.topic_configs["t"] = leader_config
    cluster.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert cluster.partition(1).log.log_start_offset == 6
    return cluster


def test_followers_take_the_leaders_log_start_and_break_nothing():
    cluster = _leader_alone_has_retention()
    assert cluster.produce_and_wait(1, ["after"]) is ErrorCode.NONE
    cluster.run_for(1000)
    assert [cluster.partition(b).log.log_start_offset for b in (2, 3)] == [6, 6]
    assert cluster.violations == []


def test_log_start_follows_leader_fails_when_a_follower_ignores_the_leaders_log_start():
    with mutants.active("log-start-not-applied"):
        cluster = _leader_alone_has_retention()
        cluster.run_for(1000)
    found = cluster.named(LOG_START_FOLLOWS_LEADER)
    assert found and found[0].seen["leader_log_start_offset"] == 6 and found[0].seen["log_start_offset"] == 0
    assert found[0].brokers[0] in (2, 3)


def test_log_start_follows_leader_allows_a_log_start_held_back_by_the_high_watermark():
    """maybeIncrementLogStartOffset never passes the high watermark (2.7.0 Log): a leader's
    log start above the follower's high watermark asks only for the high watermark."""
    cluster = observed_cluster()
    cluster.produce_and_wait(cluster.leader(), ["a", "b"])
    cluster.run_for(1000)  # the followers learn the high watermark
    follower = next(b for b in cluster.brokers if b != cluster.leader())
    node, log = cluster.nodes[follower], cluster.partition(follower).log
    assert (log.log_start_offset, log.high_watermark) == (0, 2)
    [found] = log_start_followed(follower, node, {TP: 7})
    assert found.invariant == LOG_START_FOLLOWS_LEADER and found.seen["high_watermark"] == 2
    log.log_start_offset = 2  # as far as maybeIncrementLogStartOffset would go
    assert log_start_followed(follower, node, {TP: 7}) == []
