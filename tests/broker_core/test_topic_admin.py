"""Topic creation: top-level paths, replica assignment, CreateTopics and auto-creation."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.config_describe import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG, describe_topic
from broker_core.errors import ErrorCode
from broker_core.messages import CreateTopicsRequest, MetadataRequest, ProduceRequest
from broker_core.records import Record
from broker_core.topic_admin import (
    TOP_LEVEL_PATHS, TopicCreationError, assign_replicas_to_brokers, validate_topic_name)
from broker_core.types import TopicPartition
from tests.harness import ZK, Cluster


def started(brokers=(1, 2, 3), config=None) -> Cluster:
    cluster = Cluster(brokers=brokers, replication_factor=len(brokers), config=config)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.leader() is not None)
    return cluster


def test_every_broker_creates_kafkas_top_level_paths_at_startup():
    """2.7.0 core/src/main/scala/kafka/zk/KafkaZkClient.scala createTopLevelPaths with
    ZkData.scala PersistentZkPaths: created before the broker registers."""
    cluster = started(brokers=(1,))
    for path in TOP_LEVEL_PATHS:
        assert path in cluster.store.znodes, path
        assert cluster.store.znodes[path].ephemeral_owner is None


def test_assignment_spreads_first_replicas_and_shifts_the_followers():
    """2.7.0 core/src/main/scala/kafka/admin/AdminUtils.scala
    assignReplicasToBrokersRackUnaware (the example in its scaladoc: 5 brokers, 10
    partitions, 3 replicas, start index 0)."""
    assignment = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert assignment == {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                          5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}


@pytest.mark.parametrize("partitions, replication, error", [
    (0, 1, ErrorCode.INVALID_PARTITIONS), (2**31 - 1, 1, ErrorCode.INVALID_PARTITIONS),
    (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
    (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR)])
def test_assignment_refuses_impossible_counts(partitions, replication, error):
    """2.7.0 AdminUtils.scala assignReplicasToBrokers: partitions and replication factor
    must be positive, and no more replicas than brokers (and, isrlab's own bound, at most
    1000 partitions: a huge count is refused at once rather than assigned)."""
    with pytest.raises(TopicCreationError) as failure:
        assign_replicas_to_brokers([1, 2, 3], partitions, replication)
    assert failure.value.error is error


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "t/1", "ü"])
def test_illegal_topic_names_are_refused(name):
    """2.7.0 clients/src/main/java/org/apache/kafka/common/internals/Topic.java validate."""
    with pytest.raises(TopicCreationError) as failure:
        validate_topic_name(name)
    assert failure.value.error is ErrorCode.INVALID_TOPIC_EXCEPTION


def test_create_topics_writes_the_assignment_and_answers_once_leaders_exist():
    """2.7.0 KafkaApis.handleCreateTopicsRequest -> AdminZkClient.createTopic (config node,
    then /brokers/topics/<t>), answered by DelayedCreatePartitions when the metadata has
    a leader for every partition."""
    cluster = started()
    controller = cluster.controller()
    response = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(cid, (("new", (4, 2)),), 10000))
    assert response.topics["new"].error is ErrorCode.NONE
    data = coord.decode_data(cluster.store.get(coord.topic_path("new")))
    assert sorted(data["partitions"]) == ["0", "1", "2", "3"]
    assert all(len(replicas) == 2 for replicas in data["partitions"].values())
    assert "/config/topics/new" in cluster.store.znodes
    node = cluster.nodes[controller]
    assert all(node.metadata[TopicPartition("new", p)].leader_and_isr.leader in (1, 2, 3) for p in range(4))
    again = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(cid, (("new", (1, 1)),), 10000))
    assert again.topics["new"].error is ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_answers_each_created_topics_counts_and_configs_as_describe_configs_shows_them():
    """CreateTopics v5+ (KIP-525): 2.7.0 core/src/main/scala/kafka/server/AdminManager.scala
    createTopics -> maybePopulateMetadataAndConfigs fills, for a topic that passed its
    checks (validate_only too), every LogConfig key through createTopicConfigEntry
    (the request's configs as TOPIC_CONFIG, the rest from the broker, no synonyms) and
    the assignment's counts; KafkaApis.scala handleCreateTopicsRequest resets them to
    none and -1 for a topic whose creation failed."""
    cluster = started(config={"min.insync.replicas": 2})
    controller = cluster.controller()
    asked = {"shown": {"retention.ms": "3600000"}, "checked": {"cleanup.policy": "compact"}}
    response = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(
        cid, (("shown", (2, 3)), ("too-wide", (1, 9))), 10000, False, asked))
    shown = response.topics["shown"]
    assert (shown.error, shown.num_partitions, shown.replication_factor) == (ErrorCode.NONE, 2, 3)
    layers = cluster.nodes[controller].config_layers_now()
    assert shown.configs == tuple(describe_topic(layers, asked["shown"], False, None))  # DescribeConfigs' code
    entries = {e.name: e for e in shown.configs}
    assert len(entries) == 26  # LogConfig.configDef's keys at 2.7.0
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("3600000", TOPIC_CONFIG)
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].source) == ("2", STATIC_BROKER_CONFIG)
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == ("1073741824", DEFAULT_CONFIG)
    assert not any(e.read_only or e.sensitive or e.synonyms for e in shown.configs)
    failed = response.topics["too-wide"]
    assert failed.error is ErrorCode.INVALID_REPLICATION_FACTOR
    assert (failed.configs, failed.num_partitions, failed.replication_factor) == ((), -1, -1)
    checked = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(
        cid, (("checked", (1, 1)), ("shown", (1, 1))), 10000, True, asked)).topics
    assert {e.name: e.value for e in checked["checked"].configs}["cleanup.policy"] == "compact"
    assert (checked["checked"].num_partitions, checked["checked"].replication_factor) == (1, 1)
    assert checked["shown"].error is ErrorCode.TOPIC_ALREADY_EXISTS and checked["shown"].configs == ()
    assert coord.topic_path("checked") not in cluster.store.znodes


def test_create_topics_on_a_broker_that_is_not_the_controller_answers_not_controller():
    """2.7.0 KafkaApis.handleCreateTopicsRequest: if (!controller.isActive) NOT_CONTROLLER."""
    cluster = started()
    other = next(b for b in (1, 2, 3) if b != cluster.controller())
    response = cluster.request_and_wait(other, lambda cid: CreateTopicsRequest(cid, (("x", (1, 1)),)))
    assert response.topics["x"].error is ErrorCode.NOT_CONTROLLER
    assert cluster.store.get(coord.topic_path("x")) is None


def test_create_topics_defaults_duplicates_and_bad_replication():
    """2.7.0 KafkaApis.handleCreateTopicsRequest: a name given twice is INVALID_REQUEST;
    -1 takes num.partitions / default.replication.factor (KIP-464); too many replicas is
    INVALID_REPLICATION_FACTOR."""
    cluster = started(config={"num.partitions": 3})
    controller = cluster.controller()
    response = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(
        cid, (("dup", (1, 1)), ("dup", (1, 1)), ("dflt", (-1, -1)), ("wide", (1, 5))), 10000))
    assert response.topics["dup"].error is ErrorCode.INVALID_REQUEST
    assert response.topics["dflt"].error is ErrorCode.NONE
    assert response.topics["dflt"].num_partitions == 3
    assert response.topics["wide"].error is ErrorCode.INVALID_REPLICATION_FACTOR


def test_create_topics_times_out_when_the_store_does_not_answer():
    """2.7.0 DelayedCreatePartitions.onComplete: a topic not created (with leaders) by
    the request's timeout answers REQUEST_TIMED_OUT; here the controller's link to the
    coordination store is cut, so its writes hang."""
    cluster = started(brokers=(1, 2))
    controller = cluster.controller()
    cluster.block(controller, ZK)
    response = cluster.request_and_wait(controller, lambda cid: CreateTopicsRequest(cid, (("slow", (2, 1)),), 300))
    assert response.topics["slow"].error is ErrorCode.REQUEST_TIMED_OUT


def test_metadata_for_an_unknown_topic_auto_creates_it():
    """2.7.0 KafkaApis.getTopicMetadata -> createTopic: with auto.create.topics.enable and
    allow_auto_topic_creation the topic is created with num.partitions and
    default.replication.factor and answered LEADER_NOT_AVAILABLE meanwhile; then a
    produce to it succeeds."""
    cluster = started(brokers=(1,), config={"num.partitions": 2})
    first = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, ("auto",), allow_auto_topic_creation=True))
    assert first.topic_errors == {"auto": ErrorCode.LEADER_NOT_AVAILABLE}
    assert cluster.wait_for(lambda: TopicPartition("auto", 1) in cluster.nodes[1].metadata)
    second = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, ("auto",), allow_auto_topic_creation=True))
    assert second.topic_errors == {}
    assert sorted(second.partitions) == [TopicPartition("auto", 0), TopicPartition("auto", 1)]
    produced = cluster.request_and_wait(1, lambda cid: ProduceRequest(
        cid, -1, 1000, {TopicPartition("auto", 1): [Record(None, "v")]}))
    assert produced.partitions[TopicPartition("auto", 1)].error is ErrorCode.NONE
    assert cluster.traced("topic_created", topic="auto", by="auto_create")


@pytest.mark.parametrize("config, allow", [({"auto.create.topics.enable": False}, True), ({}, False)])
def test_metadata_without_auto_creation_answers_unknown_topic(config, allow):
    """2.7.0 KafkaApis.getTopicMetadata: without auto.create.topics.enable, or when the
    request disallows it, an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and nothing is
    written."""
    cluster = started(brokers=(1,), config=config)
    response = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, ("nope",), allow_auto_topic_creation=allow))
    assert response.topic_errors == {"nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    cluster.run_for(1000)
    assert cluster.store.get(coord.topic_path("nope")) is None


def test_controlled_shutdown_of_a_sole_replica_completes_at_once_and_checkpoints():
    """2.7.0 KafkaController.doControlledShutdown (partitionsToActOn and
    ControllerContext.partitionLeadersOnBroker count only partitions with more than one
    replica; 0.8.2.2 KafkaController.shutdownBroker replicatedPartitionsBrokerLeads): a
    single broker's controlled shutdown succeeds on the first attempt; then
    ReplicaManager.shutdown(checkpointHW = true) writes the high watermarks."""
    from broker_core.inputs import ShutdownRequested
    from broker_core.log_manager import HW_CHECKPOINT, decode_offset_checkpoint
    cluster = Cluster(brokers=(1,), replication_factor=1)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.leader() == 1)
    cluster.produce_and_wait(1, ["a", "b", "c"])
    cluster._push(cluster.now, 1, ShutdownRequested())
    assert cluster.wait_for(lambda: 1 not in cluster.nodes or cluster.nodes.get(1) is None, 2000)
    assert cluster.traced("controlled_shutdown_completed", attempts=1)
    marks = decode_offset_checkpoint(bytes(cluster.disks[1].files[HW_CHECKPOINT]))
    assert marks[TopicPartition("t", 0)] == 3
