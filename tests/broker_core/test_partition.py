"""The ISR and high-watermark rules of one partition, without a cluster."""
import pytest

from broker_core.config import broker_config
from broker_core.errors import ErrorCode, InvariantViolation
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.partition import FollowerProgress, Partition, Role
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog

TP = TopicPartition("t", 0)


def leader(isr=(1, 2, 3), **config) -> Partition:
    partition = Partition(1, TP, AppliedLog(TP, 1 << 30), broker_config("kafka-2.7", config))
    partition.make_leader(PartitionState(LeaderAndIsr(1, 0, tuple(isr), 1), (1, 2, 3)), now_ms=0)
    return partition


def append(partition, n=1, acks=-1):
    return partition.append_as_leader(tuple(Record(None, f"v{i}") for i in range(n)), acks)


def test_caught_up_time_follows_kafkas_rule():
    progress = FollowerProgress()
    progress.record_fetch(fetch_offset=10, leader_log_end_offset=10, now_ms=100)
    assert progress.last_caught_up_ms == 100
    progress.record_fetch(fetch_offset=10, leader_log_end_offset=15, now_ms=200)
    assert progress.last_caught_up_ms == 100  # behind the current end...
    progress.record_fetch(fetch_offset=15, leader_log_end_offset=20, now_ms=300)
    assert progress.last_caught_up_ms == 200  # ...but it reached the end as of the previous fetch


def test_high_watermark_is_the_smallest_log_end_over_the_isr():
    p = leader()
    append(p, 5)
    assert not p.maybe_advance_high_watermark(), "followers whose log end is unknown hold it"
    p.record_follower_fetch(2, 5, now_ms=10)
    p.record_follower_fetch(3, 3, now_ms=10)
    assert p.maybe_advance_high_watermark() and p.log.high_watermark == 3
    p.record_follower_fetch(3, 5, now_ms=20)
    assert p.maybe_advance_high_watermark() and p.log.high_watermark == 5


def test_a_follower_outside_the_isr_does_not_hold_the_high_watermark():
    p = leader(isr=(1, 2))
    append(p, 4)
    p.record_follower_fetch(2, 4, now_ms=5)
    assert p.maybe_advance_high_watermark() and p.log.high_watermark == 4


def test_followers_lagging_longer_than_the_lag_time_are_out_of_sync():
    p = leader(**{"replica.lag.time.max.ms": 1000})
    append(p, 3)
    p.record_follower_fetch(2, 3, now_ms=500)
    p.record_follower_fetch(3, 0, now_ms=500)
    assert p.out_of_sync_replicas(now_ms=900) == ()
    assert p.out_of_sync_replicas(now_ms=1001) == (3,)


def test_the_08_profile_also_evicts_by_message_lag():
    p = Partition(1, TP, AppliedLog(TP, 1 << 30), broker_config("kafka-0.8", {"replica.lag.max.messages": 2}))
    p.make_leader(PartitionState(LeaderAndIsr(1, 0, (1, 2), 1), (1, 2)), now_ms=0)
    append(p, 5)
    p.record_follower_fetch(2, 2, now_ms=1)
    assert p.out_of_sync_replicas(now_ms=2) == (2,)


def test_a_follower_rejoins_once_it_reaches_the_high_watermark_and_the_epoch_start():
    p = leader(isr=(1, 2))
    append(p, 4)
    p.record_follower_fetch(2, 4, now_ms=1)
    p.maybe_advance_high_watermark()
    p.record_follower_fetch(3, 3, now_ms=2)
    assert p.caught_up_replicas() == ()
    p.record_follower_fetch(3, 4, now_ms=3)
    assert p.caught_up_replicas() == (3,)


def test_min_isr_and_roles_decide_what_an_append_may_do():
    p = leader(isr=(1,), **{"min.insync.replicas": 2})
    assert append(p, acks=-1)[0] is ErrorCode.NOT_ENOUGH_REPLICAS
    assert append(p, acks=1)[0] is ErrorCode.NONE
    p.make_follower(PartitionState(LeaderAndIsr(2, 1, (2,), 1), (1, 2, 3)))
    assert p.role is Role.FOLLOWER and append(p)[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(InvariantViolation):  # no live leader: the replica manager skips it instead
        p.make_follower(PartitionState(LeaderAndIsr(-1, 2, (2,), 1), (1, 2, 3)))
    assert p.role is Role.FOLLOWER and p.leader == 2


def test_becoming_leader_starts_a_new_epoch_at_the_log_end():
    p = leader()
    append(p, 3)
    p.make_leader(PartitionState(LeaderAndIsr(1, 4, (1, 2, 3), 2), (1, 2, 3)), now_ms=50)
    assert p.log.epochs.entries[-1] == (4, 3)
