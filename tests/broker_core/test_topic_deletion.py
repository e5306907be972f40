"""DeleteTopics and the controller's topic deletion: the core's rules, each with the
2.7.0 file and function it follows (core/src/main/scala/kafka/controller/
TopicDeletionManager.scala unless named otherwise)."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.messages import (
    CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, ProduceRequest, StopReplicaRequest)
from broker_core.records import Record
from broker_core.topic_deletion import DELETE_TOPICS_PATH, delete_topic_path
from broker_core.types import TopicPartition
from tests.harness import Cluster

T0 = TopicPartition("t", 0)


def started(config=None, partitions=1) -> Cluster:
    cluster = Cluster(brokers=(1, 2, 3), partitions=partitions, replication_factor=3, config=config)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    return cluster


def delete(cluster: Cluster, topics=("t",), broker=None, timeout_ms=5000):
    return cluster.request_and_wait(broker or cluster.controller(),
                                    lambda cid: DeleteTopicsRequest(cid, tuple(topics), timeout_ms))


def files_of(cluster: Cluster, broker: int, topic: str = "t") -> list[str]:
    return sorted(p for p in cluster.disks[broker].files if p.startswith(f"{topic}-"))


def gone_everywhere(cluster: Cluster, topic: str = "t") -> bool:
    return (cluster.store.get(coord.topic_path(topic)) is None and bool(cluster.traced("topic_deleted", topic=topic))
            and all(not files_of(cluster, b, topic) for b in cluster.brokers)
            and all(TopicPartition(topic, 0) not in node.replicas.partitions for node in cluster.nodes.values()))


def test_delete_topics_removes_replicas_files_nodes_and_metadata():
    """KafkaApis.handleDeleteTopicsRequest -> AdminZkClient.deleteTopic marks
    /admin/delete_topics/t; onTopicDeletion sends UpdateMetadata without it and
    StopReplica(delete=true) to every replica (ReplicaManager.stopReplicas deletes the
    log: LogManager.asyncDelete); completeDeleteTopic removes /brokers/topics/t,
    /config/topics/t and the mark. The answer comes once the metadata has dropped it
    (DelayedDeleteTopics)."""
    cluster = started()
    assert cluster.produce_and_wait(cluster.leader(), ["a", "b"]) is ErrorCode.NONE
    assert all(files_of(cluster, b) for b in (1, 2, 3))
    cluster.store.put("/config/topics/t", b'{"version":1,"config":{}}')
    response = delete(cluster)
    assert response.topics["t"].error is ErrorCode.NONE
    assert all(T0 not in node.metadata for node in cluster.nodes.values() if node.controller.active)
    assert cluster.wait_for(lambda: gone_everywhere(cluster))
    assert cluster.store.get("/config/topics/t") is None
    assert cluster.store.get(delete_topic_path("t")) is None
    assert [f["topic"] for _, _, f in cluster.traced("topic_deleted")] == ["t"]
    assert sorted(b for _, b, f in cluster.traced("replica_deleted", partition="t-0")) == [1, 2, 3]
    meta = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, ("t",)))
    assert meta.topic_errors == {"t": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_deleted_topic_can_be_created_again_empty():
    """completeDeleteTopic forgets the topic (controllerContext.removeTopic): a new
    topic of the same name is a new topic, with empty logs."""
    cluster = started()
    assert cluster.produce_and_wait(cluster.leader(), ["old"]) is ErrorCode.NONE
    delete(cluster)
    assert cluster.wait_for(lambda: gone_everywhere(cluster))
    created = cluster.request_and_wait(cluster.controller(), lambda cid: CreateTopicsRequest(cid, (("t", (1, 3)),)))
    assert created.topics["t"].error is ErrorCode.NONE
    assert cluster.wait_for(lambda: cluster.settled())
    assert cluster.values(cluster.leader()) == []


def test_delete_topics_errors_as_kafka_answers_them():
    """KafkaApis.handleDeleteTopicsRequest (2.7.0): NOT_CONTROLLER off the controller;
    UNKNOWN_TOPIC_OR_PARTITION for a topic the metadata cache does not list."""
    cluster = started()
    other = next(b for b in (1, 2, 3) if b != cluster.controller())
    assert delete(cluster, broker=other).topics["t"].error is ErrorCode.NOT_CONTROLLER
    assert delete(cluster, ("nope",)).topics["nope"].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.store.get(delete_topic_path("t")) is None
    assert cluster.produce_and_wait(cluster.leader(), ["still"]) is ErrorCode.NONE


def test_delete_topic_enable_false_answers_topic_deletion_disabled_and_drops_marks():
    """KafkaApis.handleDeleteTopicsRequest: !config.deleteTopicEnable ->
    TOPIC_DELETION_DISABLED; KafkaController.processTopicDeletion removes the marks an
    admin tool wrote ("since delete topic is disabled")."""
    cluster = started(config={"delete.topic.enable": False})
    assert delete(cluster).topics["t"].error is ErrorCode.TOPIC_DELETION_DISABLED
    cluster.store.put(delete_topic_path("t"), b"")
    cluster.nodes[cluster.controller()].controller.enqueue("topic_deletion")
    assert cluster.wait_for(lambda: cluster.store.get(delete_topic_path("t")) is None)
    assert cluster.store.get(coord.topic_path("t")) is not None
    assert cluster.produce_and_wait(cluster.leader(), ["kept"]) is ErrorCode.NONE


def test_deletion_waits_for_an_offline_replica_and_completes_when_it_returns():
    """onPartitionDeletion: a replica on a dead broker is ReplicaDeletionIneligible and
    the topic ineligible; the live replicas are deleted meanwhile, the nodes stay.
    KafkaController.onBrokerStartup -> resumeDeletionForTopics: when the broker is back
    its replica (recovered from its files) gets StopReplica(delete) and the deletion
    completes."""
    cluster = started()
    assert cluster.produce_and_wait(cluster.leader(), ["a"]) is ErrorCode.NONE
    cluster.crash(3)
    assert cluster.wait_for(lambda: 3 not in cluster.nodes[cluster.controller()].controller.live)
    assert delete(cluster, timeout_ms=2000).topics["t"].error is ErrorCode.NONE
    cluster.run_for(3000)
    assert cluster.traced("topic_deletion_ineligible", topic="t")
    assert not files_of(cluster, 1) and not files_of(cluster, 2)
    assert files_of(cluster, 3), "the offline broker's files wait for it"
    assert cluster.store.get(coord.topic_path("t")) is not None
    assert cluster.store.get(delete_topic_path("t")) is not None
    cluster.start(3)
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 10000)
    assert cluster.traced("topic_deleted", topic="t")


def test_a_broker_that_dies_with_its_stop_replica_in_flight_is_waited_for():
    """TopicDeletionManager.failReplicaDeletion (from KafkaController.onBrokerFailure for
    replicas in ReplicaDeletionStarted): the deletion waits for the broker, and resumes
    when it starts again."""
    cluster = started()
    controller = cluster.controller()
    victim = max(b for b in (1, 2, 3) if b != controller)
    cluster.block(controller, victim)  # the StopReplica to the victim never arrives
    delete(cluster, timeout_ms=500)
    others = [b for b in (1, 2, 3) if b != victim]
    assert cluster.wait_for(lambda: all(T0 not in cluster.nodes[b].replicas.partitions for b in others), 3000)
    assert (T0, victim) in cluster.nodes[controller].controller.deletion.deleting["t"]
    cluster.crash(victim)
    assert cluster.wait_for(lambda: cluster.traced("topic_deletion_ineligible", topic="t", reason="broker failed"),
                            30000)
    assert cluster.store.get(coord.topic_path("t")) is not None
    cluster.heal()
    cluster.start(victim)
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 20000)


def test_a_produce_that_crosses_the_deletion_fails_and_nothing_reappears():
    """A produce sent while the deletion runs: the leader has either still got the
    partition (the append is acknowledged, then deleted with the log) or not
    (NOT_LEADER_OR_FOLLOWER, as 2.7's ReplicaManager answers for a partition it does not
    host); it never crashes the broker and never brings the partition back."""
    cluster = started()
    leader = cluster.leader()
    controller = cluster.controller()
    cid = cluster.next_correlation_id()
    cluster.send(controller, DeleteTopicsRequest(cid, ("t",), 5000))
    outcomes = []
    for _ in range(30):
        pid = cluster.next_correlation_id()
        cluster.send(leader, ProduceRequest(pid, 1, 1000, {T0: (Record(None, "x", 10),)}))
        cluster.run_for(1)
        outcomes.append(pid)
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 10000)
    errors = {cluster.responses[p].partitions[T0].error for p in outcomes if p in cluster.responses}
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in errors
    assert errors <= {ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER}
    cluster.run_for(2000)
    assert gone_everywhere(cluster)
    assert all(node.started for node in cluster.nodes.values())


def test_a_topic_being_deleted_answers_as_2_7_does():
    """Meanwhile (a replica offline): Metadata does not list it (the brokers' metadata
    cache dropped its LeaderDuringDelete partitions); DeleteTopics again is
    UNKNOWN_TOPIC_OR_PARTITION (not in the metadata cache); CreateTopics of the name is
    TOPIC_ALREADY_EXISTS (AdminZkClient.validateTopicCreate: the node still exists)."""
    cluster = started()
    cluster.crash(3)
    assert cluster.wait_for(lambda: 3 not in cluster.nodes[cluster.controller()].controller.live)
    assert delete(cluster, timeout_ms=2000).topics["t"].error is ErrorCode.NONE
    meta = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, ("t",)))
    assert not meta.partitions and meta.topic_errors["t"] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert delete(cluster).topics["t"].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    created = cluster.request_and_wait(cluster.controller(), lambda cid: CreateTopicsRequest(cid, (("t", (1, 2)),)))
    assert created.topics["t"].error is ErrorCode.TOPIC_ALREADY_EXISTS


def test_a_new_controller_resumes_a_deletion_it_finds_marked():
    """KafkaController.onControllerFailover reads /admin/delete_topics
    (fetchTopicDeletionsInProgress) and resumes the deletion (tryTopicDeletion): here
    the mark is written while no controller runs."""
    cluster = started()
    first = cluster.controller()
    cluster.crash(first)
    cluster.store.put(delete_topic_path("t"), b"")
    assert cluster.wait_for(lambda: cluster.controller() not in (None, first), 30000)
    cluster.start(first)
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 20000)


def test_an_admin_mark_is_read_through_the_controllers_watch():
    """KafkaController's TopicDeletionHandler: a mark written by kafka-topics.sh
    --delete --zookeeper fires the controller's watch on /admin/delete_topics."""
    from broker_core.admin_nodes import mark_topic_deleted
    cluster = started()
    assert mark_topic_deleted(cluster.store, "t") is None
    assert mark_topic_deleted(cluster.store, "t") == "topic t is already marked for deletion"
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 10000)
    assert cluster.store.znodes[DELETE_TOPICS_PATH].children == set() or not cluster.store.znodes[
        DELETE_TOPICS_PATH].children
    assert mark_topic_deleted(cluster.store, "t") == "Topic `t` to delete does not exist"


def test_stop_replica_with_delete_from_an_old_controller_is_fenced():
    """ReplicaManager.stopReplicas: a request of an older controller epoch is refused
    (STALE_CONTROLLER_EPOCH) and deletes nothing."""
    cluster = started()
    assert cluster.produce_and_wait(cluster.leader(), ["a"]) is ErrorCode.NONE
    broker = next(b for b in (1, 2, 3) if b != cluster.controller())
    epoch = cluster.nodes[broker].replicas.controller_epoch
    response = cluster.request_and_wait(broker, lambda cid: StopReplicaRequest(cid, 99, epoch - 1, True, {T0: -2}))
    assert response.error is ErrorCode.STALE_CONTROLLER_EPOCH
    assert files_of(cluster, broker)
    assert T0 in cluster.nodes[broker].replicas.partitions


def test_delete_topics_is_carried_out_by_a_controller_that_does_not_watch_the_marks():
    """isrlab's controller_watches_deletions=false (the simulation's setting for scenarios
    without a delete_topic step): the controller that marks the topic reads the marks
    itself, so DeleteTopics still deletes."""
    cluster = started(config={"controller_watches_deletions": False})
    assert delete(cluster).topics["t"].error is ErrorCode.NONE
    assert cluster.wait_for(lambda: gone_everywhere(cluster), 10000)
