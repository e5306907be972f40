"""Partition reassignment in the controller (broker_core/reassignment.py), phase by
phase, each test naming the 2.7.0 file and function it follows
(core/src/main/scala/kafka/controller/KafkaController.scala unless said otherwise)."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.reassignment import REASSIGN_PARTITIONS_PATH, ReplicaAssignment, encode_reassignment
from broker_core.types import TopicPartition
from tests.harness import Cluster

TP = TopicPartition("t", 0)


def started(brokers=(1, 2, 3, 4), assignment=None, config=None) -> Cluster:
    cluster = Cluster(brokers=brokers, assignment=assignment or {0: [1, 2, 3]}, config=config)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[1, 2, 3]))
    return cluster


def reassign(cluster: Cluster, replicas, tp: TopicPartition = TP) -> None:
    """What kafka-reassign-partitions.sh --zookeeper --execute writes (2.7.0
    ReassignPartitionsCommand.executeAssignment: KafkaZkClient.createPartitionReassignment).
    The tool refuses while the node exists; writing over it is what the controller's
    handler (PartitionReassignmentHandler.handleDataChange) still takes."""
    cluster.store.set_data(REASSIGN_PARTITIONS_PATH, encode_reassignment({tp: tuple(replicas)}))


def topic_node(cluster: Cluster) -> dict:
    return coord.decode_data(cluster.store.get(coord.topic_path("t")))


def state(cluster: Cluster) -> dict:
    return coord.decode_data(cluster.store.get(coord.partition_state_path("t", 0)))


def test_reassign_to_assignment_orders_target_then_origin():
    """2.7.0 controller/ControllerContext.scala ReplicaAssignment.reassignTo: RS is TRS
    then ORS without repeats, AR = TRS - ORS, RR = ORS - TRS; a second reassignment is
    computed from ORS (RS - AR), not from RS."""
    first = ReplicaAssignment((1, 2, 3)).reassign_to([4, 2, 3])
    assert first == ReplicaAssignment((4, 2, 3, 1), (4,), (1,))
    assert (first.origin, first.target) == ((2, 3, 1), (4, 2, 3))
    changed = first.reassign_to([5, 2, 3])
    assert changed == ReplicaAssignment((5, 2, 3, 1), (5,), (1,))
    assert not first.reassign_to([1, 2, 3]).is_being_reassigned


def test_new_replica_joins_catches_up_and_enters_the_isr_before_the_old_one_is_removed():
    """onPartitionReassignment: phase U writes RS = [4, 2, 3, 1] with adding [4] and
    removing [1] to the topic node (updateCurrentReassignment), phase A bumps the leader
    epoch and sends LeaderAndIsr to RS (updateLeaderEpochAndSendRequest), broker 4 catches
    up and the leader's AlterIsr expansion completes it (processAlterIsr ->
    maybeCompleteReassignment): the leader moves off 1 (moveReassignedPartitionLeaderIfRequired,
    reassignPartitionLeaderElection: the first live TRS replica in the ISR), 1 leaves the
    ISR and is deleted (stopRemovedReplicasOfReassignedPartition), the node holds TRS and
    /admin/reassign_partitions is gone (removePartitionFromReassigningPartitions)."""
    cluster = started()
    for i in range(5):
        cluster.produce_and_wait(1, [f"v{i}"])
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    _, _, started_fields = cluster.traced("reassignment_started")[0]
    assert started_fields["replicas"] == [4, 2, 3, 1]
    assert (started_fields["adding"], started_fields["removing"]) == ([4], [1])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 20000)
    # 4 was in the ISR before 1 left it: the expansion precedes the completion
    expanded = [t for t, _, f in cluster.traced("isr_expanded") if 4 in f.get("isr", [])]
    completed_at = cluster.traced("reassignment_completed")[0][0]
    assert expanded and min(expanded) <= completed_at
    assert topic_node(cluster)["partitions"] == {"0": [4, 2, 3]}
    assert topic_node(cluster)["adding_replicas"] == {} and topic_node(cluster)["removing_replicas"] == {}
    assert state(cluster)["leader"] == 4 and sorted(state(cluster)["isr"]) == [2, 3, 4]
    assert cluster.store.get(REASSIGN_PARTITIONS_PATH) is None
    assert cluster.wait_for(lambda: cluster.partition(1) is None, 5000)  # deleted on broker 1
    assert cluster.values(4) == [f"v{i}" for i in range(5)]
    assert cluster.produce_and_wait(4, ["after"]) is not None
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]))


def test_leader_in_the_target_keeps_leading_at_a_new_epoch():
    """moveReassignedPartitionLeaderIfRequired: a live leader already in TRS keeps
    leading; updateLeaderEpochAndSendRequest bumps its epoch for the shrunk RS."""
    cluster = started()
    cluster.produce_and_wait(1, ["a"])
    epoch = state(cluster)["leader_epoch"]
    reassign(cluster, [1, 2, 4])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 20000)
    assert state(cluster)["leader"] == 1 and state(cluster)["leader_epoch"] > epoch
    assert not cluster.traced("leader_elected", election="reassignment")
    assert cluster.wait_for(lambda: cluster.partition(3) is None, 5000)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[1, 2, 4]))


def test_a_partition_the_controller_does_not_know_is_dropped_from_the_node():
    """processZkPartitionReassignment: a partition without an assignment fails
    (maybeTriggerPartitionReassignment: UNKNOWN_TOPIC_OR_PARTITION) and
    maybeRemoveFromZkReassignment takes it out of the node (deleted when empty)."""
    cluster = started()
    reassign(cluster, [4, 2, 3], TopicPartition("nope", 0))
    assert cluster.wait_for(lambda: cluster.traced("reassignment_refused"), 5000)
    assert cluster.wait_for(lambda: cluster.store.get(REASSIGN_PARTITIONS_PATH) is None, 5000)
    assert topic_node(cluster)["partitions"] == {"0": [1, 2, 3]}


def test_new_replica_down_mid_reassignment_waits_then_completes_when_it_returns():
    """The race path: the adding replica's broker dies before it is in sync.
    onReplicasBecomeOffline leaves the reassignment pending (TRS is not in the ISR:
    isReassignmentComplete), old replicas keep serving; onBrokerStartup's
    maybeResumeReassignments (its TRS includes the new broker) runs phase A again, and the
    reassignment completes once it has caught up."""
    cluster = started()
    cluster.crash(4)
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    for i in range(3):
        assert cluster.produce_and_wait(1, [f"w{i}"]) is not None
    assert cluster.wait_for(lambda: cluster.traced("brokers_changed", failed=[4]), 30000)  # its session expired
    assert not cluster.traced("reassignment_completed")
    assert topic_node(cluster)["adding_replicas"] == {"0": [4]}
    cluster.start(4)
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 30000)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]))
    assert cluster.values(4) == [f"w{i}" for i in range(3)]


def test_leader_fails_mid_reassignment_and_the_new_leader_completes_it():
    """The race path on the leader: broker 1 (leader, being removed) dies during phase A.
    onBrokerFailure elects from RS in the ISR (2, OfflinePartitionLeaderElectionStrategy),
    which tells 4 its leader; 2's expansion completes the reassignment, and B4's
    StopReplica is not sent to the dead broker. Nothing acknowledged is lost."""
    cluster = started()
    acked = []
    for i in range(5):
        if cluster.produce_and_wait(1, [f"x{i}"]) is not None:
            acked.append(f"x{i}")
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    cluster.crash(1)
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 30000)
    assert state(cluster)["leader"] in (2, 4)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]))
    assert cluster.values(4) == acked


def test_rewriting_the_node_with_the_original_replicas_cancels_the_reassignment():
    """updateCurrentReassignment U3 via the node: a running reassignment replaced by one
    whose target is ORS (maybeBuildReassignment over the full assignment) ends with RS =
    ORS, and the replica that was being added is stopped and deleted
    (stopRemovedReplicasOfReassignedPartition for currentAssignment.replicas -- new RS)."""
    cluster = started()
    cluster.crash(4)  # keep 4 out of the ISR so that the first reassignment cannot complete
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    cluster.run_for(500)
    reassign(cluster, [1, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 10000)
    assert topic_node(cluster)["partitions"] == {"0": [1, 2, 3]}
    assert topic_node(cluster)["adding_replicas"] == {}
    assert state(cluster)["leader"] == 1


def test_a_new_controller_resumes_a_reassignment_from_the_topic_node():
    """initializeControllerContext reads adding/removing from the topic node (TopicZNode
    .decode) into partitionsBeingReassigned; initializePartitionReassignments resumes it."""
    cluster = started()
    cluster.crash(4)
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_started"), 5000)
    old = cluster.controller()
    cluster.crash(old)
    assert cluster.wait_for(lambda: cluster.controller() not in (None, old), 30000)
    for broker in sorted({4, old}):
        assert cluster.wait_for(lambda: cluster.store.get(coord.broker_path(broker)) is None, 30000)  # expired
        cluster.start(broker)
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 40000)
    assert topic_node(cluster)["partitions"] == {"0": [4, 2, 3]}


def test_with_zookeeper_isr_changes_the_state_node_watch_completes_it():
    """With the leader writing the ISR itself (isAlterIsrEnabled false),
    updateCurrentReassignment registers PartitionReassignmentIsrChangeHandler on the
    partition's state node; its data change runs processPartitionReassignmentIsrChange."""
    cluster = started(config={"isr_change_protocol": "zookeeper"})
    cluster.produce_and_wait(1, ["z"])
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 20000)
    assert cluster.traced("isr_expanded", protocol="zookeeper")
    assert state(cluster)["leader"] == 4 and sorted(state(cluster)["isr"]) == [2, 3, 4]
