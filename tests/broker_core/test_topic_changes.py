"""CreateTopics with explicit assignments and CreatePartitions: the core's rules, each
with the 2.7.0 file and function it follows."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.messages import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, ProduceRequest)
from broker_core.partition_admin import new_partitions_assignment
from broker_core.records import Record
from broker_core.topic_admin import TopicCreationError, explicit_assignment
from broker_core.types import TopicPartition
from tests.harness import Cluster


def started(brokers=(1, 2, 3), config=None) -> Cluster:
    cluster = Cluster(brokers=brokers, replication_factor=len(brokers), config=config)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.leader() is not None)
    return cluster


def create(cluster: Cluster, topics, assignments, validate_only=False, timeout_ms=5000):
    return cluster.request_and_wait(cluster.controller(), lambda cid: CreateTopicsRequest(
        cid, topics, timeout_ms, validate_only, {}, assignments))


def add(cluster: Cluster, topics, broker=None, validate_only=False, timeout_ms=5000):
    return cluster.request_and_wait(broker or cluster.controller(), lambda cid: CreatePartitionsRequest(
        cid, topics, timeout_ms, validate_only))


def assignment_of(cluster: Cluster, topic: str) -> dict[str, list[int]]:
    return coord.decode_data(cluster.store.get(coord.topic_path(topic)))["partitions"]


# -- CreateTopics with assignments -------------------------------------------------------------
def test_create_topics_writes_the_assignment_asked_for():
    """2.7.0 core/src/main/scala/kafka/server/AdminManager.scala createTopics: with
    assignments the request's own is written (AdminZkClient.createTopicWithAssignment);
    each partition's first replica leads; the answer counts partitions and replicas."""
    cluster = started()
    response = create(cluster, (("own", (-1, -1)),), {"own": ((0, (3, 1)), (1, (2, 3)))})
    assert response.topics["own"].error is ErrorCode.NONE
    assert (response.topics["own"].num_partitions, response.topics["own"].replication_factor) == (2, 2)
    assert assignment_of(cluster, "own") == {"0": [3, 1], "1": [2, 3]}
    metadata = cluster.nodes[cluster.controller()].metadata
    assert metadata[TopicPartition("own", 0)].leader_and_isr.leader == 3
    assert metadata[TopicPartition("own", 1)].leader_and_isr.leader == 2


@pytest.mark.parametrize("pairs, counts, error, message", [
    (((0, (1, 2)),), (2, -1), ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor"),
    (((0, (1, 2)),), (-1, 2), ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor"),
    (((0, (1, 2)), (1, (3,))), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "All partitions should have the same number of replicas"),
    (((0, (1, 1)),), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment found"),
    (((0, (1,)), (2, (2,))), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (((1, (1,)),), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (((-1, (1,)), (1, (2,))), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (((0, ()),), (-1, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0"),
])
def test_create_topics_refuses_a_bad_assignment_with_kafkas_code_and_message(pairs, counts, error, message):
    """2.7.0 AdminManager.createTopics (counts with assignments) and
    core/src/main/scala/kafka/zk/AdminZkClient.scala validateTopicCreate (same replica
    count, no duplicate broker, partitions 0..n-1); a partition without replicas is
    refused as AdminZkClient.validateReplicaAssignment does for CreatePartitions, and a
    negative id too (2.7 sums only ids >= 0). Nothing is written."""
    cluster = started()
    response = create(cluster, (("bad", counts),), {"bad": pairs})
    assert response.topics["bad"].error is error
    assert message in response.topics["bad"].message
    assert cluster.store.get(coord.topic_path("bad")) is None


def test_explicit_assignment_keeps_the_last_entry_for_a_partition_named_twice():
    """2.7.0 AdminManager.createTopics fills a mutable.HashMap: a later entry wins."""
    assert explicit_assignment(((0, (1,)), (0, (2,))), -1, -1) == {0: (2,)}


def test_create_topics_validate_only_checks_the_assignment_and_writes_nothing():
    """2.7.0 AdminManager.createTopics with validateOnly: the same checks, no write."""
    cluster = started()
    ok = create(cluster, (("v", (-1, -1)),), {"v": ((0, (1, 2)),)}, validate_only=True)
    bad = create(cluster, (("w", (-1, -1)),), {"w": ((0, (1, 1)),)}, validate_only=True)
    assert ok.topics["v"].error is ErrorCode.NONE and ok.topics["v"].num_partitions == 1
    assert bad.topics["w"].error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert cluster.store.get(coord.topic_path("v")) is None


def test_create_topics_on_an_unknown_broker_is_written_and_times_out_without_a_leader():
    """2.7.0 AdminManager.createTopics does not check the brokers ("this follows the
    existing logic in TopicCommand"): the topic is created, its partition has no live
    replica and so no leader, and DelayedCreatePartitions times out."""
    cluster = started()
    response = create(cluster, (("far", (-1, -1)),), {"far": ((0, (9,)),)}, timeout_ms=500)
    assert response.topics["far"].error is ErrorCode.REQUEST_TIMED_OUT
    assert assignment_of(cluster, "far") == {"0": [9]}
    assert all(node.started for node in cluster.nodes.values())


# -- CreatePartitions --------------------------------------------------------------------------
def test_create_partitions_adds_partitions_that_get_leaders_and_take_produces():
    """2.7.0 AdminManager.createPartitions -> AdminZkClient.createPartitionsWithAssignment;
    KafkaController.processPartitionModifications -> onNewPartitionCreation: the new
    partitions get a leader (LeaderAndIsr) and every broker's metadata lists them."""
    cluster = started()
    response = add(cluster, (("t", 3, None),))
    assert response.topics["t"].error is ErrorCode.NONE
    assert sorted(assignment_of(cluster, "t")) == ["0", "1", "2"]
    assert cluster.traced("partitions_added", topic="t")
    assert cluster.wait_for(lambda: all(TopicPartition("t", 2) in n.metadata for n in cluster.nodes.values()))
    leader = cluster.nodes[1].metadata[TopicPartition("t", 2)].leader_and_isr.leader
    produced = cluster.request_and_wait(leader, lambda cid: ProduceRequest(
        cid, -1, 5000, {TopicPartition("t", 2): (Record(None, "new", 10),)}))
    assert produced.partitions[TopicPartition("t", 2)].error is ErrorCode.NONE
    meta = cluster.request_and_wait(2, lambda cid: MetadataRequest(cid, ("t",)))
    assert sorted(tp.partition for tp in meta.partitions) == [0, 1, 2]


def test_create_partitions_assigns_new_partitions_as_kafka_does():
    """2.7.0 AdminZkClient.createNewPartitionsAssignment: start at the first broker whose
    id is at least partition 0's first replica, continue the partition ids, keep the
    replication factor (AdminUtils.assignReplicasToBrokers with startPartitionId)."""
    new = new_partitions_assignment("t", {0: (2, 3), 1: (3, 1)}, [1, 2, 3], 4, None)
    assert sorted(new) == [2, 3]
    assert new[2][0] == 1 and new[3][0] == 2  # (2 + start index 1) mod 3 -> broker 1, then broker 2
    assert all(len(replicas) == 2 and len(set(replicas)) == 2 for replicas in new.values())


def test_create_partitions_with_an_assignment_writes_it():
    """2.7.0 AdminManager.createPartitions: the request's assignment for the new
    partitions, numbered after the existing ones."""
    cluster = started()
    response = add(cluster, (("t", 3, ((2, 1, 3), (3, 2, 1))),))
    assert response.topics["t"].error is ErrorCode.NONE
    assert assignment_of(cluster, "t")["1"] == [2, 1, 3] and assignment_of(cluster, "t")["2"] == [3, 2, 1]


@pytest.mark.parametrize("topics, error, message", [
    ((("t", 0, None),), ErrorCode.INVALID_PARTITIONS, "Topic currently has 1 partitions, which is higher than the requested 0."),
    ((("t", -5, None),), ErrorCode.INVALID_PARTITIONS, "which is higher than the requested -5."),
    ((("t", 1, None),), ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partitions."),
    ((("nope", 2, None),), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
    ((("", 2, None),), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
    ((("../t", 2, None),), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
    ((("t", 2, ((1, 9, 3),)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9."),
    ((("t", 3, ((1, 2, 3),)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Increasing the number of partitions by 2 but 1 assignments provided."),
    ((("t", 2, ((1, 1, 3),)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Duplicate brokers not allowed in replica assignment: 1, 1, 3 for partition id 1."),
    ((("t", 2, ((1, 2),)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Inconsistent replication factor between partitions, partition 0 has 3 while partitions [1] have "
     "replication factors [2], respectively."),
    ((("t", 2, ((),)),), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0 for partition id 1."),
    ((("t", 2000, None),), ErrorCode.INVALID_PARTITIONS, "isrlab's limit"),
    ((("t", 2, None), ("t", 3, None)), ErrorCode.INVALID_REQUEST, "Duplicate topic in request."),
])
def test_create_partitions_refuses_bad_input_with_kafkas_code_and_message(topics, error, message):
    """2.7.0 AdminManager.createPartitions and AdminZkClient.validateReplicaAssignment
    (and KafkaApis.handleCreatePartitionsRequest for a duplicate topic); the topic's
    node stays as it was and the broker goes on serving."""
    cluster = started()
    response = add(cluster, topics)
    assert response.topics[topics[0][0]].error is error
    assert message in response.topics[topics[0][0]].message
    assert assignment_of(cluster, "t") == {"0": [1, 2, 3]}
    assert cluster.produce_and_wait(cluster.leader(), ["still"]) is ErrorCode.NONE


def test_create_partitions_validate_only_and_not_controller():
    """2.7.0 KafkaApis.handleCreatePartitionsRequest: NOT_CONTROLLER off the controller;
    validateOnly checks and writes nothing."""
    cluster = started()
    other = next(b for b in (1, 2, 3) if b != cluster.controller())
    assert add(cluster, (("t", 2, None),), broker=other).topics["t"].error is ErrorCode.NOT_CONTROLLER
    checked = add(cluster, (("t", 2, None),), validate_only=True)
    assert checked.topics["t"].error is ErrorCode.NONE
    assert assignment_of(cluster, "t") == {"0": [1, 2, 3]}


def test_two_create_partitions_that_cross_cannot_both_extend_the_same_count():
    """isrlab's own: the topic's node is rewritten against the version read, so when a
    second writer changed it in between (here the admin tool) the request fails rather
    than overwrite it (2.7 writes over any version and loses one of them)."""
    cluster = started()
    controller = cluster.controller()

    def admin_writes_first():
        data = coord.decode_data(cluster.store.get(coord.topic_path("t")))
        data["partitions"]["1"] = [2, 3, 1]
        cluster.store.set_data(coord.topic_path("t"), coord.encode_data(data))
    # the admin's write lands between the request's read of the topic and its write
    cluster.lose_answers(controller, coord.GetChildren, coord.BROKER_IDS_PATH, then=admin_writes_first)
    response = add(cluster, (("t", 3, None),))
    assert response.topics["t"].error is ErrorCode.INVALID_PARTITIONS
    assert "changed while partitions were added" in response.topics["t"].message
    assert assignment_of(cluster, "t") == {"0": [1, 2, 3], "1": [2, 3, 1]}
    assert cluster.wait_for(lambda: TopicPartition("t", 1) in cluster.nodes[controller].metadata)


def test_create_partitions_of_a_topic_queued_for_deletion_is_refused():
    """2.7.0 KafkaApis.handleCreatePartitionsRequest: a topic queued for deletion
    answers INVALID_TOPIC_EXCEPTION "The topic is queued for deletion."."""
    cluster = started()
    cluster.crash(3)  # the deletion waits for broker 3, so the topic stays queued
    assert cluster.wait_for(lambda: 3 not in cluster.nodes[cluster.controller()].controller.live)
    cluster.request_and_wait(cluster.controller(), lambda cid: DeleteTopicsRequest(cid, ("t",), 300))
    response = add(cluster, (("t", 2, None),))
    assert response.topics["t"].error is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert response.topics["t"].message == "The topic is queued for deletion."


def test_new_partitions_written_while_the_topic_is_deleted_are_skipped():
    """2.7.0 KafkaController.processPartitionModifications: new partitions of a topic
    queued for deletion are not added (isrlab leaves the node to the deletion)."""
    cluster = started()
    cluster.crash(3)
    assert cluster.wait_for(lambda: 3 not in cluster.nodes[cluster.controller()].controller.live)
    from broker_core.admin_nodes import mark_topic_deleted
    assert mark_topic_deleted(cluster.store, "t") is None
    assert cluster.wait_for(lambda: cluster.nodes[cluster.controller()].controller.deletion.is_queued("t"))
    cluster.store.set_data(coord.topic_path("t"), coord.encode_data({"partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}}))
    assert cluster.wait_for(lambda: cluster.traced("partitions_add_skipped", topic="t"))
    assert TopicPartition("t", 1) not in cluster.nodes[cluster.controller()].controller.assignments


def test_explicit_assignment_errors_are_topic_creation_errors():
    with pytest.raises(TopicCreationError):
        explicit_assignment(((0, (1, 1)),), -1, -1)
