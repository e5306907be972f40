"""AlterPartitionReassignments and ListPartitionReassignments in the controller
(broker_core/reassignment_api.py). Each test names the 2.7.0 function it follows, in
core/src/main/scala/kafka/controller/KafkaController.scala unless said otherwise."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.reassignment import REASSIGN_PARTITIONS_PATH, ReplicaAssignment, encode_reassignment
from broker_core.reassignment_api import (
    NO_REASSIGNMENT_IN_PROGRESS, AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest)
from broker_core.types import TopicPartition
from tests.harness import Cluster

TP = TopicPartition("t", 0)


def started() -> Cluster:
    """Broker 2 leads and 1 is the controller (1 is the replica the tests remove)."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 1]})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 1]))
    assert (cluster.controller(), cluster.leader()) == (1, 2)
    return cluster


def alter(cluster: Cluster, partitions, broker=None):
    broker = broker if broker is not None else cluster.controller()
    return cluster.request_and_wait(broker, lambda cid: AlterPartitionReassignmentsRequest(cid, partitions), 10000)


def listed(cluster: Cluster, partitions=None, broker=None):
    broker = broker if broker is not None else cluster.controller()
    return cluster.request_and_wait(broker, lambda cid: ListPartitionReassignmentsRequest(cid, partitions), 10000)


def topic_node(cluster: Cluster) -> dict:
    return coord.decode_data(cluster.store.get(coord.topic_path("t")))


def test_a_broker_that_is_not_the_controller_answers_not_controller():
    """processApiPartitionReassignment / processListPartitionReassignments: ``if
    (!isActive) callback(Right(new ApiError(Errors.NOT_CONTROLLER)))``."""
    cluster = started()
    other = next(b for b in (1, 2, 3, 4) if b != cluster.controller())
    answer = alter(cluster, {TP: (4, 2, 3)}, broker=other)
    assert answer.error == ErrorCode.NOT_CONTROLLER and answer.results is None
    assert listed(cluster, broker=other).error == ErrorCode.NOT_CONTROLLER
    assert not cluster.traced("reassignment_started")


def test_reassignment_through_the_api_runs_and_is_listed_until_complete():
    """processApiPartitionReassignment -> maybeTriggerPartitionReassignment ->
    onPartitionReassignment: answered NONE once phase U/A ran; processListPartitionReassignments
    shows RS, AR and RR while it runs and nothing once phase B ran. validateReplicas
    refuses a dead broker; once back, 4 is kept from the leader until the list was checked."""
    cluster = started()
    for i in range(3):
        cluster.produce_and_wait(2, [f"v{i}"])
    cluster.crash(4)
    assert cluster.wait_for(lambda: cluster.traced("brokers_changed", failed=[4]), 30000)
    assert alter(cluster, {TP: (4, 2, 3)}).results == {TP: (ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
        "Replica assignment has brokers that are not alive. Replica list: [4], live broker list: [1, 2, 3]"))}
    cluster.start(4)
    assert cluster.wait_for(lambda: 4 in cluster.nodes[cluster.controller()].controller.live, 30000)
    cluster.crash(4)  # the controller still counts it live until its session expires: the race path
    assert alter(cluster, {TP: (4, 2, 3)}).results == {TP: (0, None)}
    ongoing = listed(cluster).ongoing
    assert ongoing == {TP: ReplicaAssignment((4, 2, 3, 1), (4,), (1,))}
    assert listed(cluster, frozenset({TP, TopicPartition("t", 7)})).ongoing == ongoing  # unknown left out
    assert cluster.wait_for(lambda: len(cluster.traced("brokers_changed", failed=[4])) == 2, 30000)
    cluster.start(4)  # maybeResumeReassignments (onBrokerStartup) once it is back
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 30000)
    assert listed(cluster).ongoing == {}
    assert topic_node(cluster)["partitions"] == {"0": [4, 2, 3]}
    assert cluster.wait_for(lambda: cluster.partition(1) is None, 5000)
    assert cluster.values(4) == [f"v{i}" for i in range(3)]


def test_bad_replica_lists_get_kafkas_errors():
    """validateReplicas: empty list, duplicate ids and negative ids are
    INVALID_REPLICA_ASSIGNMENT with 2.7's messages; maybeTriggerPartitionReassignment: a
    partition with no assignment is UNKNOWN_TOPIC_OR_PARTITION; maybeBuildReassignment: a
    cancellation of a partition not being reassigned is NO_REASSIGNMENT_IN_PROGRESS.
    Each partition has its own answer; nothing starts."""
    cluster = started()
    results = alter(cluster, {TP: (), TopicPartition("t", 1): None, TopicPartition("u", 0): (1, 2),
                              TopicPartition("t", 2): (1, 1), TopicPartition("t", 3): (1, -2)}).results
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert results == {
        TP: (bad, "Empty replica list specified in partition reassignment."),
        TopicPartition("t", 1): (NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
        TopicPartition("u", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        TopicPartition("t", 2): (bad, "Duplicate replica ids in partition reassignment replica list: List(1, 1)"),
        TopicPartition("t", 3): (bad, "Invalid broker id in replica list: List(1, -2)")}
    assert not cluster.traced("reassignment_started")
    assert topic_node(cluster)["partitions"] == {"0": [2, 3, 1]}


def test_a_null_replica_list_cancels_back_to_the_original_replicas():
    """maybeBuildReassignment with no target: reassignTo(originReplicas); phase U sends
    the replica being added StopReplica (updateCurrentReassignment's
    stopRemovedReplicasOfReassignedPartition) and phase B writes ORS back. As in 2.7 the
    new replica was not in the ISR, so doRemoveReplicasFromIsr (ReplicaStateMachine.scala)
    does not bump the leader epoch and broker 4 ignores both StopReplicas
    (ReplicaManager.stopReplicas: "leader epoch ... matches the current leader epoch"):
    its copy stays on disk until it is restarted, a 2.7 quirk kept here."""
    cluster = started()
    # both queued on the controller at once: the cancel runs before 4 can catch up
    first = cluster.send(1, AlterPartitionReassignmentsRequest(cluster.next_correlation_id(), {TP: (4, 2, 3)}))
    assert alter(cluster, {TP: None}).results == {TP: (0, None)}
    assert cluster.responses[first].results == {TP: (0, None)}
    assert len(cluster.traced("reassignment_started")) == 2
    assert listed(cluster).ongoing == {}
    assert topic_node(cluster)["partitions"] == {"0": [2, 3, 1]}
    assert topic_node(cluster)["adding_replicas"] == {}
    assert cluster.wait_for(lambda: len(cluster.traced("replicas_stopped", ignored=["t-0"])) == 2, 5000)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 1]))


def test_the_api_takes_its_partitions_out_of_the_admin_node():
    """processApiPartitionReassignment: "The latest reassignment (whether by API or
    through zk) always takes precedence", maybeRemoveFromZkReassignment drops the API's
    partitions from /admin/reassign_partitions (deleted when none is left)."""
    cluster = started()
    cluster.crash(4)  # still live for the controller: the reassignment waits in phase A
    cluster.store.set_data(REASSIGN_PARTITIONS_PATH, encode_reassignment({TP: (4, 2, 3)}))
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    assert alter(cluster, {TP: (1, 2, 4)}).results == {TP: (0, None)}
    assert cluster.store.get(REASSIGN_PARTITIONS_PATH) is None
    assert listed(cluster).ongoing == {TP: ReplicaAssignment((1, 2, 4, 3), (4,), (3,))}
    assert cluster.wait_for(lambda: cluster.traced("brokers_changed", failed=[4]), 30000)
    cluster.start(4)
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 30000)
    assert topic_node(cluster)["partitions"] == {"0": [1, 2, 4]}


def test_requests_queued_when_the_controller_resigns_are_answered_not_controller():
    """ControllerEventManager ``preempt`` (2.7.0 ApiPartitionReassignment.preempt and
    ListPartitionReassignments.preempt): a queued request is answered NOT_CONTROLLER."""
    cluster = started()
    controller = cluster.nodes[cluster.controller()].controller
    controller._running = True  # holds the queue, as a long event would
    cluster.send(cluster.controller(), AlterPartitionReassignmentsRequest(cid := cluster.next_correlation_id(),
                                                                           {TP: (4, 2, 3)}))
    assert cluster.wait_for(lambda: len(controller._events) == 1, 1000, step_ms=1)
    controller.resign()
    assert cluster.wait_for(lambda: cid in cluster.responses, 1000, step_ms=1)
    assert cluster.responses[cid].error == ErrorCode.NOT_CONTROLLER
