"""Which produce errors a history may record as ``fail`` (nothing appended) and which
only as ``info`` (outcome unknown): broker_core.errors.is_definite_produce_failure."""
import pytest

from broker_core.errors import ErrorCode, is_definite_produce_failure
from broker_core.types import TopicPartition
from tests.harness import ZK, Cluster


def test_acks_all_not_leader_comes_after_an_append_that_survives():
    """Kafka 2.7.0 kafka.cluster.Partition.checkEnoughReplicasReachOffset (through
    DelayedProduce.tryComplete): a leader that loses leadership while an acks=all produce
    waits in purgatory answers NOT_LEADER_OR_FOLLOWER, although it appended the records
    and a follower that has them may become the next leader. So with acks=all that error
    is not a definite failure."""
    cluster = Cluster(brokers=(1, 2, 3))
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    assert cluster.leader() == 1  # AR [1, 2, 3]
    cluster.block(1, 3)  # broker 3 stops fetching: the high watermark cannot pass "x"
    cid = cluster.produce(1, ["x"], acks=-1, timeout_ms=120000)
    assert cluster.wait_for(lambda: "x" in cluster.values(2), 5000, step_ms=1)
    cluster.block(1, ZK)  # broker 1's session expires; broker 2 (in the ISR, has "x") takes over
    assert cluster.wait_for(lambda: cluster.leader() == 2, 60000)
    assert cid not in cluster.responses
    cluster.heal()  # broker 1 hears it is a follower now and answers the waiting produce
    assert cluster.wait_for(lambda: cid in cluster.responses, 60000, step_ms=1)
    error = cluster.responses[cid].partitions[TopicPartition("t", 0)].error
    assert error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.wait_for(lambda: cluster.settled(), 60000)
    assert all("x" in cluster.values(b) for b in (1, 2, 3)), "the 'failed' record is committed"
    assert not is_definite_produce_failure(error, acks=-1)


def test_acks_1_not_leader_is_answered_before_any_append():
    """Kafka 2.7.0 kafka.cluster.Partition.appendRecordsToLeader: with acks 0 or 1 the
    only NOT_LEADER_OR_FOLLOWER a produce gets is the check before appending (no delayed
    produce exists), so it is a definite failure."""
    cluster = Cluster(brokers=(1, 2, 3))
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    error = cluster.produce_and_wait(2, ["y"], acks=1)  # 2 is a follower
    assert error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert all("y" not in cluster.values(b) for b in (1, 2, 3))
    assert is_definite_produce_failure(error, acks=1)


@pytest.mark.parametrize("error", [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                   ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION])
@pytest.mark.parametrize("acks", [1, -1])
def test_errors_that_can_follow_an_append_are_never_definite(error, acks):
    """Kafka 2.7.0 DelayedProduce.onExpiration (REQUEST_TIMED_OUT) and
    Partition.checkEnoughReplicasReachOffset (NOT_ENOUGH_REPLICAS_AFTER_APPEND) answer
    after the append; a storage error can strike half way through a write."""
    assert not is_definite_produce_failure(error, acks)


@pytest.mark.parametrize("error", [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.INVALID_REQUIRED_ACKS,
                                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
                                   ErrorCode.CORRUPT_MESSAGE])
def test_errors_before_the_append_are_definite(error):
    """Kafka 2.7.0 Partition.appendRecordsToLeader: NOT_ENOUGH_REPLICAS is checked before
    the append; the others reject the request before it reaches a log."""
    assert is_definite_produce_failure(error, -1) and is_definite_produce_failure(error, 1)
