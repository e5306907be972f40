"""Replication rules, driving several core nodes directly (no simpy)."""
from __future__ import annotations

import pytest

from broker_core.errors import ErrorCode
from tests.harness import CLIENT, Cluster, started_cluster


def produce_batches(cluster: Cluster, prefix: str, count: int, acks: int = -1) -> list[str]:
    """Produce ``count`` one-record batches to the current leader; return the acknowledged values."""
    acked = []
    for i in range(count):
        leader = cluster.leader()
        if leader is None:
            cluster.run_for(100)
            continue
        value = f"{prefix}-{i}"
        if cluster.produce_and_wait(leader, [value], acks, wait_ms=5000) is ErrorCode.NONE:
            acked.append(value)
    return acked


@pytest.mark.parametrize("victim_role", ["leader", "follower-a", "follower-b"])
def test_acks_all_with_min_isr_2_survives_the_loss_of_any_one_broker(victim_role):
    cluster = started_cluster(config={"min.insync.replicas": 2})
    acked = produce_batches(cluster, "before", 20)
    assert len(acked) == 20
    leader = cluster.leader()
    followers = [b for b in cluster.brokers if b != leader]
    victim = {"leader": leader, "follower-a": followers[0], "follower-b": followers[1]}[victim_role]
    cluster.crash(victim)
    # While the victim's session is alive the controller has not reacted; acks=all
    # writes wait for it or fail, and none may be acknowledged and then lost.
    assert cluster.wait_for(lambda: cluster.leader() not in (None, victim)
                            and victim not in cluster.partition(cluster.leader()).isr, 40000)
    acked += produce_batches(cluster, "during", 20)
    cluster.start(victim)
    assert cluster.wait_for(cluster.settled, 60000)
    acked += produce_batches(cluster, "after", 5)
    assert cluster.wait_for(cluster.settled, 10000)
    assert len(acked) >= 40
    for broker in cluster.brokers:
        stored = set(cluster.values(broker))
        assert [v for v in acked if v not in stored] == [], f"broker {broker} lacks acknowledged records"


def test_min_isr_rejects_acks_all_before_the_append_when_the_isr_is_too_small():
    cluster = started_cluster(config={"min.insync.replicas": 2, "replica.lag.time.max.ms": 1000})
    leader = cluster.leader()
    for follower in [b for b in cluster.brokers if b != leader]:
        cluster.block(follower, leader)
    # Followers at the leader's log end never fall out of sync (KAFKA-7152): make them lag.
    assert cluster.produce_and_wait(leader, ["behind"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: cluster.partition(leader).isr == (leader,), 5000)
    before = cluster.partition(leader).log.log_end_offset
    assert cluster.produce_and_wait(leader, ["x"], acks=-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.partition(leader).log.log_end_offset == before  # nothing appended
    assert cluster.produce_and_wait(leader, ["y"], acks=1) is ErrorCode.NONE


@pytest.mark.parametrize("profile,config,expected", [
    ("kafka-0.8", {}, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    ("kafka-2.7", {"isr_change_protocol": "zookeeper"}, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    ("kafka-2.7", {"alter_isr_commit_advances_high_watermark": True}, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
    ("kafka-2.7", {}, ErrorCode.REQUEST_TIMED_OUT),
    ("kafka-3.0", {}, ErrorCode.REQUEST_TIMED_OUT),
])
def test_acks_all_fails_after_append_when_the_isr_shrinks_below_min_isr_while_waiting(profile, config, expected):
    """The append succeeds (the ISR is still full) but can only complete once the ISR has
    shrunk to the leader, which is below min.insync.replicas. Under the zookeeper
    protocol the shrink advances the high watermark at once and the produce fails
    (0.8.2.2 Partition.maybeShrinkIsr; 2.7.0 maybeShrinkIsr after shrinkIsrWithZk), as
    it does with 3.1.0's AlterIsr callback. 2.7.0 and 3.0.0 handleAlterIsrResponse only
    record the new ISR (KAFKA-13091): with nothing appended after it the produce times out."""
    cluster = started_cluster(profile=profile, config={"min.insync.replicas": 2, "replica.lag.time.max.ms": 1000,
                                                       **config})
    leader = cluster.leader()
    for follower in [b for b in cluster.brokers if b != leader]:
        cluster.block(follower, leader)
    assert cluster.produce_and_wait(leader, ["late"], acks=-1) is expected


def test_acks_all_times_out_when_no_follower_fetches_and_the_isr_does_not_shrink():
    cluster = started_cluster()
    leader = cluster.leader()
    for follower in [b for b in cluster.brokers if b != leader]:
        cluster.block(follower, leader)
    cid = cluster.produce(leader, ["slow"], acks=-1)
    cluster.run_for(1000)
    assert cid not in cluster.responses
    assert cluster.wait_for(lambda: cid in cluster.responses, 40000)
    from broker_core.types import TopicPartition
    assert cluster.responses[cid].partitions[TopicPartition("t", 0)].error is ErrorCode.REQUEST_TIMED_OUT


def test_acks_1_loses_the_unreplicated_tail_when_the_leader_dies():
    cluster = started_cluster()
    acked_replicated = produce_batches(cluster, "replicated", 5, acks=1)
    assert cluster.wait_for(cluster.settled, 2000)
    leader = cluster.leader()
    for follower in [b for b in cluster.brokers if b != leader]:
        cluster.block(follower, leader)
    tail = []
    for i in range(5):
        if cluster.produce_and_wait(leader, [f"tail-{i}"], acks=1) is ErrorCode.NONE:
            tail.append(f"tail-{i}")
    assert len(tail) == 5, "acks=1 acknowledges as soon as the leader wrote it"
    cluster.crash(leader)
    cluster.heal()
    assert cluster.wait_for(lambda: cluster.leader() not in (None, leader), 40000)
    cluster.start(leader)
    assert cluster.wait_for(lambda: cluster.settled(), 60000)
    for broker in cluster.brokers:
        stored = cluster.values(broker)
        assert all(v in stored for v in acked_replicated)
        assert not any(v in stored for v in tail), "the old leader's unreplicated tail must be gone"
    assert cluster.traced("log_truncated"), "the old leader truncated its divergent tail"


def test_a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time_and_returns_after_catching_up():
    lag_ms = 2000
    cluster = started_cluster(config={"replica.lag.time.max.ms": lag_ms})
    leader = cluster.leader()
    follower = [b for b in cluster.brokers if b != leader][0]
    cluster.block(follower, leader, both=False)  # its fetches never arrive
    cut_at = cluster.now
    produce_batches(cluster, "x", 3, acks=1)
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 3 * lag_ms)
    shrunk = cluster.traced("isr_shrunk")
    assert shrunk and follower not in shrunk[0][2]["isr"]
    assert shrunk[0][0] - cut_at >= lag_ms, "evicted before replica.lag.time.max.ms had passed"
    cluster.heal()
    assert cluster.wait_for(lambda: follower in cluster.partition(leader).isr, 40000)
    assert cluster.traced("isr_expanded")
    assert cluster.values(follower) == cluster.values(leader)


def test_a_caught_up_follower_stays_in_the_isr():
    cluster = started_cluster(config={"replica.lag.time.max.ms": 1000})
    produce_batches(cluster, "steady", 30, acks=-1)
    cluster.run_for(5000)
    assert cluster.settled()
    assert not cluster.traced("isr_shrunk")


def test_stale_leader_epoch_fetch_is_fenced():
    from broker_core.inputs import MessageReceived
    from broker_core.messages import FetchPartition, FetchRequest
    from broker_core.types import TopicPartition
    cluster = started_cluster()
    first = cluster.leader()
    cluster.crash(first)  # move leadership so that the epoch is above 0
    assert cluster.wait_for(lambda: cluster.leader() not in (None, first), 40000)
    leader = cluster.leader()
    epoch = cluster.partition(leader).leader_epoch
    assert epoch >= 1
    tp = TopicPartition("t", 0)
    for current, expected in ((epoch - 1, ErrorCode.FENCED_LEADER_EPOCH), (epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
                              (epoch, ErrorCode.NONE)):
        cluster._correlation += 1
        cid = cluster._correlation
        request = FetchRequest(cid, -1, 0, 1, {tp: FetchPartition(0, current)})
        cluster._push(cluster.now + 1, leader, MessageReceived(CLIENT, request))
        assert cluster.wait_for(lambda: cid in cluster.responses, 1000)
        assert cluster.responses[cid].partitions[tp].error is expected
