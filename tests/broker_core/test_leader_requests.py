"""Client requests at a leader, and at a broker that no longer leads: ListOffsets while a
new leader's high watermark catches up, the order of the epoch and leadership checks,
parked acks=all produces at a demoted leader, and acks=0 produces that fail
(broker_core/replica_manager.py, broker_core/offset_requests.py)."""
import pytest

from broker_core.errors import ErrorCode
from broker_core.messages import (
    CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchPartition, FetchRequest, LeaderAndIsr,
    LeaderAndIsrRequest, ListOffsetsRequest, OffsetsForLeaderEpochRequest, PartitionState)
from broker_core.types import TopicPartition
from tests.harness import CLIENT, Cluster

TP = TopicPartition("t", 0)


def list_offsets(cluster: Cluster, broker: int, timestamp: int):
    response = cluster.request_and_wait(broker, lambda cid: ListOffsetsRequest(cid, {TP: timestamp}), 1000)
    result = response.partitions[TP]
    return result.error, result.offset, result.leader_epoch


def new_leader_behind_its_epoch_start(profile: str) -> Cluster:
    """Broker 2 holds "a" and "b" but its high watermark is 0 (broker 3 fetched nothing,
    so leader 1's high watermark never moved); broker 1 dies and broker 2 leads from
    offset 2 while broker 3 still cannot fetch from it."""
    cluster = Cluster(brokers=(1, 2, 3), profile=profile)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    assert cluster.leader() == 1
    cluster.block(3, 1)
    cluster.block(3, 2)
    assert cluster.produce_and_wait(1, ["a", "b"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: cluster.partition(2).log.log_end_offset == 2, 5000, step_ms=1)
    assert cluster.partition(2).log.high_watermark == 0
    cluster.crash(1)
    assert cluster.wait_for(lambda: cluster.leader() == 2, 60000)
    return cluster


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_list_offsets_latest_waits_for_a_new_leaders_high_watermark_to_reach_its_epoch_start(profile: str):
    """2.7.0 core/src/main/scala/kafka/cluster/Partition.scala fetchOffsetForTimestamp: for
    a client's request, LATEST throws OFFSET_NOT_AVAILABLE while leaderEpochStartOffsetOpt
    (the log end offset at makeLeader) is above the high watermark, and otherwise answers
    the high watermark with the leader epoch; EARLIEST answers the log start offset with
    the earliest cached epoch (Log.fetchOffsetByTimestamp) and is not checked. 0.8.2.2
    (KafkaApis.handleOffsetRequest) answers the high watermark at once."""
    cluster = new_leader_behind_its_epoch_start(profile)
    leader = cluster.partition(2)
    assert (leader.leader_epoch_start_offset, leader.log.high_watermark) == (2, 0)
    epoch = leader.leader_epoch
    assert list_offsets(cluster, 2, EARLIEST_TIMESTAMP) == (ErrorCode.NONE, 0, 0)
    if profile == "kafka-0.8":
        assert list_offsets(cluster, 2, LATEST_TIMESTAMP) == (ErrorCode.NONE, 0, epoch)
        return
    assert list_offsets(cluster, 2, LATEST_TIMESTAMP) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1)
    cluster.heal()  # broker 3 fetches from broker 2 (once its lost request timed out): the high watermark reaches 2
    assert cluster.wait_for(lambda: leader.log.high_watermark == 2, 60000, step_ms=1)
    assert list_offsets(cluster, 2, LATEST_TIMESTAMP) == (ErrorCode.NONE, 2, epoch)


def fetch_error(cluster: Cluster, broker: int, epoch: int, replica_id: int = CONSUMER_REPLICA_ID) -> ErrorCode:
    request = lambda cid: FetchRequest(cid, replica_id, 0, 1, {TP: FetchPartition(0, epoch)})  # noqa: E731
    return cluster.request_and_wait(broker, request, 1000).partitions[TP].error


def epoch_error(cluster: Cluster, broker: int, epoch: int) -> ErrorCode:
    request = lambda cid: OffsetsForLeaderEpochRequest(cid, CONSUMER_REPLICA_ID, {TP: (epoch, 0)})  # noqa: E731
    return cluster.request_and_wait(broker, request, 1000).partitions[TP].error


@pytest.mark.parametrize("ask", [fetch_error, epoch_error], ids=["fetch", "offsets_for_leader_epoch"])
def test_the_leader_epoch_is_checked_before_leadership(ask):
    """2.7.0 core/src/main/scala/kafka/cluster/Partition.scala getLocalLog: checkCurrentLeaderEpoch
    first (FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer one),
    then requireLeader (NOT_LEADER_OR_FOLLOWER); readRecords and lastOffsetForLeaderEpoch
    both go through it. A broker that does not host the partition has no epoch to compare
    (ReplicaManager.getPartitionOrError): NOT_LEADER_OR_FOLLOWER whatever the epoch."""
    cluster = Cluster(brokers=(1, 2, 3), replication_factor=2)  # t-0 on brokers 1 and 2
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=(1, 2)))
    assert cluster.leader() == 1
    # a new epoch (the same leader), so that an older epoch is one a request can carry
    old = cluster.partition(1)
    state = LeaderAndIsr(1, old.leader_epoch + 1, (1, 2), old.controller_epoch, old.zk_version + 1)
    for broker in (1, 2):
        cluster.send(broker, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, old.controller_epoch,
                                                 {TP: PartitionState(state, (1, 2))}, (1,)))
    assert cluster.wait_for(lambda: cluster.partition(2).leader_epoch == state.leader_epoch, 1000, step_ms=1)
    epoch = state.leader_epoch
    assert ask(cluster, 2, epoch - 1) is ErrorCode.FENCED_LEADER_EPOCH
    assert ask(cluster, 2, epoch + 1) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(cluster, 2, epoch) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ask(cluster, 2, -1) is ErrorCode.NOT_LEADER_OR_FOLLOWER  # no epoch: not checked
    assert ask(cluster, 3, epoch - 1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ask(cluster, 1, epoch) is ErrorCode.NONE


def demote_with_a_produce_parked(profile: str) -> tuple[Cluster, int]:
    """Leader 1 parks an acks=all produce (broker 3 cannot fetch, so the high watermark
    stays below it), then a LeaderAndIsr makes broker 2 leader. Broker 2 cannot reach
    broker 1, so no follower fetch reaches broker 1 afterwards."""
    cluster = Cluster(brokers=(1, 2, 3), profile=profile)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    old = cluster.partition(1)
    cluster.block(1, 3)
    cid = cluster.produce(1, ["x"], acks=-1, timeout_ms=5000)
    assert cluster.wait_for(lambda: cluster.partition(2).log.log_end_offset == 1, 1000, step_ms=1)
    cluster.block(1, 2)
    state = LeaderAndIsr(2, old.leader_epoch + 1, (1, 2), old.controller_epoch, old.zk_version + 1)
    cluster.send(1, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, old.controller_epoch,
                                        {TP: PartitionState(state, (1, 2, 3))}, (2,)))
    assert cluster.wait_for(lambda: not cluster.partition(1).is_leader, 1000, step_ms=1)
    return cluster, cid


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_a_demoted_leader_answers_its_parked_produces_at_once_from_kafka_2_7(profile: str):
    """2.7.0 core/src/main/scala/kafka/server/ReplicaManager.scala makeFollowers calls
    completeDelayedFetchOrProduceRequests for each partition made follower, so a parked
    acks=all produce answers NOT_LEADER_OR_FOLLOWER at once (Partition
    checkEnoughReplicasReachOffset). 0.8.2.2 server/ReplicaManager.scala makeFollowers
    leaves the purgatory alone: without a follower fetch the produce waits for its
    timeout and answers REQUEST_TIMED_OUT (DelayedProduce: the status set at creation)."""
    cluster, cid = demote_with_a_produce_parked(profile)
    demoted_at = cluster.now
    if profile == "kafka-2.7":
        assert cluster.wait_for(lambda: cid in cluster.responses, 10, step_ms=1)
        assert cluster.responses[cid].partitions[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        return
    assert not cluster.wait_for(lambda: cid in cluster.responses, 3000, step_ms=1)
    assert cluster.wait_for(lambda: cid in cluster.responses, 3000, step_ms=1)
    assert cluster.now - demoted_at > 3000
    assert cluster.responses[cid].partitions[TP].error is ErrorCode.REQUEST_TIMED_OUT


def test_kafka_0_8_a_follower_fetch_at_the_demoted_leader_answers_its_parked_produces():
    """0.8.2.2 core/src/main/scala/kafka/server/KafkaApis.scala handleFetchRequest ->
    recordFollowerLogEndOffsets -> ReplicaManager.unblockDelayedProduceRequests for every
    partition of a follower's fetch, even one whose read failed (NotLeaderForPartition):
    the parked produce is checked again and, as this broker no longer leads,
    Partition.checkEnoughReplicasReachOffset answers NotLeaderForPartition. A consumer's
    fetch does not check it."""
    cluster, cid = demote_with_a_produce_parked("kafka-0.8")
    assert fetch_error(cluster, 1, -1) is ErrorCode.NOT_LEADER_OR_FOLLOWER  # a consumer's
    assert cid not in cluster.responses
    assert fetch_error(cluster, 1, -1, replica_id=3) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.wait_for(lambda: cid in cluster.responses, 10, step_ms=1)
    assert cluster.responses[cid].partitions[TP].error is ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_an_acks_0_produce_that_fails_closes_the_connection(profile: str):
    """2.7.0 core/src/main/scala/kafka/server/KafkaApis.scala handleProduceRequest
    (sendResponseCallback: acks=0 with an error in any partition -> closeConnection;
    0.8.2.2 KafkaApis.handleProducerOrOffsetCommitRequest alike): the only way an acks=0
    producer hears of NOT_LEADER_OR_FOLLOWER, so that it refreshes its metadata. An
    acks=0 produce that succeeds, and an acks=1 one that fails, leave it open."""
    cluster = Cluster(brokers=(1, 2, 3), profile=profile)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    assert cluster.leader() == 1
    cluster.produce_and_wait(1, ["fine"], acks=0)
    assert cluster.produce_and_wait(2, ["refused"], acks=1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.closed_connections == []
    cluster.produce_and_wait(2, ["lost"], acks=0)
    assert [(broker, client) for _, broker, client in cluster.closed_connections] == [(2, CLIENT)]
    assert "lost" not in cluster.values(1) and "fine" in cluster.values(1)
