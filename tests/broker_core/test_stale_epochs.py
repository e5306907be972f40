"""StaleEpochChangesNothing (broker_core/stale_epochs.py): every request type that carries
a controller, leader or producer epoch, sent stale to a real core, is recognised as
stale and changes nothing; and the check reports a change when there is one."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.effects import CoordRequest
from broker_core.errors import ErrorCode
from broker_core.invariants import STALE_EPOCH_CHANGES_NOTHING
from broker_core.messages import (
    AlterIsrRequest, FetchPartition, FetchRequest, LeaderAndIsr, LeaderAndIsrRequest, OffsetsForLeaderEpochRequest,
    PartitionState, ProduceRequest, StopReplicaRequest, UpdateMetadataRequest)
from broker_core.records import Record, RecordBatch
from broker_core.stale_epochs import stale_request_changed, stale_request_state
from broker_core.types import TopicPartition
from tests.invariant_harness import ObservedCluster, observed_cluster

TP = TopicPartition("t", 0)


def bumped(cluster: ObservedCluster) -> ObservedCluster:
    """The cluster after one more leader epoch (same leader, a newer controller epoch), so
    that an older controller epoch and leader epoch exist to be stale."""
    leader = cluster.leader()
    p = cluster.partition(leader)
    state = LeaderAndIsr(leader, p.leader_epoch + 1, p.isr, p.controller_epoch + 1, p.zk_version)
    for broker in cluster.brokers:
        cluster.send(broker, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, p.controller_epoch + 1,
                                                 {TP: PartitionState(state, (1, 2, 3))}, (leader,)))
    assert cluster.wait_for(lambda: all(cluster.partition(b).leader_epoch == state.leader_epoch
                                        for b in cluster.brokers), 1000, step_ms=1)
    return cluster


_NAMES = {LeaderAndIsrRequest: "leader_and_isr", UpdateMetadataRequest: "update_metadata",
          StopReplicaRequest: "stop_replica", FetchRequest: "fetch", OffsetsForLeaderEpochRequest: "offsets_for_leader_epoch",
          ProduceRequest: "produce", AlterIsrRequest: "alter_isr"}


def sent_stale(cluster: ObservedCluster, broker: int, request, src="client") -> None:
    name = _NAMES[type(request)]
    checked = cluster.stale_checked.count(name)
    cluster.send(broker, request, src=src)
    cluster.run_for(50)
    assert cluster.stale_checked.count(name) > checked, "the probe did not see the request as stale"
    assert cluster.named(STALE_EPOCH_CHANGES_NOTHING) == []


def failed_over(cluster: ObservedCluster) -> ObservedCluster:
    """The cluster after the controller elected a new leader (a newer leader epoch in
    the store and the controller's state): the old epoch is stale at the controller."""
    old = cluster.leader()
    cluster.crash(old)
    assert cluster.wait_for(lambda: cluster.leader() not in (None, old), 40000)
    cluster.start(old)
    assert cluster.wait_for(cluster.settled, 60000)
    return cluster


def test_controller_requests_with_a_stale_controller_epoch_change_nothing():
    cluster = bumped(observed_cluster())
    leader = cluster.leader()
    p = cluster.partition(leader)
    old = p.controller_epoch - 1
    other = next(b for b in cluster.brokers if b != leader)
    takeover = LeaderAndIsr(other, p.leader_epoch + 5, (other,), old, p.zk_version)
    sent_stale(cluster, leader, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, old,
                                                    {TP: PartitionState(takeover, (1, 2, 3))}, (other,)))
    sent_stale(cluster, leader, UpdateMetadataRequest(cluster.next_correlation_id(), 0, old, (other,),
                                                      {TP: PartitionState(takeover, (1, 2, 3))}))
    sent_stale(cluster, leader, StopReplicaRequest(cluster.next_correlation_id(), 0, old, True,
                                                   {TP: p.leader_epoch + 5}))
    assert cluster.partition(leader).is_leader


def test_controller_requests_with_a_stale_leader_epoch_change_nothing():
    cluster = bumped(observed_cluster())
    leader = cluster.leader()
    p = cluster.partition(leader)
    other = next(b for b in cluster.brokers if b != leader)
    for epoch in (p.leader_epoch - 1, p.leader_epoch):  # older, and the same (2.7.0: "matches")
        state = LeaderAndIsr(other, epoch, (other,), p.controller_epoch, p.zk_version)
        sent_stale(cluster, leader, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, p.controller_epoch,
                                                        {TP: PartitionState(state, (1, 2, 3))}, (other,)))
        sent_stale(cluster, other, StopReplicaRequest(cluster.next_correlation_id(), 0, p.controller_epoch, True,
                                                      {TP: epoch}))
    assert cluster.partition(leader).is_leader and cluster.partition(other) is not None


def test_fetches_with_a_stale_current_leader_epoch_change_nothing():
    cluster = bumped(observed_cluster())
    leader = cluster.leader()
    epoch = cluster.partition(leader).leader_epoch
    follower = next(b for b in cluster.brokers if b != leader)
    # A record the follower has, so that a stale fetch from offset 0, if it were served,
    # would move the leader's view of the follower back (not only its fetch time, which
    # may not change within one millisecond): the mutant stale-leader-epoch-accepted.
    response = cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, -1, 30000, {TP: [Record(None, "v", 10)]}))
    assert response.partitions[TP].error is ErrorCode.NONE
    assert cluster.partition(leader).followers[follower].log_end_offset == 1
    fetch = FetchRequest(cluster.next_correlation_id(), follower, 0, 1, {TP: FetchPartition(0, epoch - 1)})
    sent_stale(cluster, leader, fetch, src=follower)
    sent_stale(cluster, leader, OffsetsForLeaderEpochRequest(cluster.next_correlation_id(), follower,
                                                             {TP: (epoch - 1, epoch - 1)}), src=follower)


def test_a_produce_with_a_stale_producer_epoch_changes_nothing():
    cluster = observed_cluster()
    leader = cluster.leader()

    def batch(epoch: int, sequence: int) -> RecordBatch:
        return RecordBatch(0, -1, [Record(None, f"e{epoch}-{sequence}", 10)], producer_id=7, producer_epoch=epoch,
                           base_sequence=sequence)
    response = cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, -1, 30000, {TP: batch(1, 0)}))
    assert response.partitions[TP].error is ErrorCode.NONE
    sent_stale(cluster, leader, ProduceRequest(cluster.next_correlation_id(), -1, 30000, {TP: batch(0, 1)}))
    assert cluster.responses[cluster._correlation].partitions[TP].error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_alter_isr_with_a_stale_leader_epoch_writes_nothing():
    cluster = failed_over(observed_cluster())
    leader = cluster.leader()
    controller = cluster.controller()
    p = cluster.partition(leader)
    broker_epoch = cluster.nodes[controller].controller.registrations[leader]
    proposal = LeaderAndIsr(leader, p.leader_epoch - 1, (leader,), p.controller_epoch, p.zk_version)
    sent_stale(cluster, controller, AlterIsrRequest(cluster.next_correlation_id(), leader, broker_epoch,
                                                    {TP: proposal}), src=leader)
    assert len(cluster.nodes[controller].controller.states[TP].isr) == 3


def test_the_check_reports_a_change_to_what_a_stale_request_named():
    """A core that let a stale request through would change what the snapshot holds:
    here a fresh request changes it between the snapshot and the comparison."""
    cluster = bumped(observed_cluster())
    leader = cluster.leader()
    p = cluster.partition(leader)
    other = next(b for b in cluster.brokers if b != leader)
    takeover = LeaderAndIsr(other, p.leader_epoch + 1, (other,), p.controller_epoch - 1, p.zk_version)
    stale = LeaderAndIsrRequest(1, 0, p.controller_epoch - 1, {TP: PartitionState(takeover, (1, 2, 3))}, (other,))
    before = stale_request_state(cluster.nodes[leader], stale)
    assert before is not None
    fresh = LeaderAndIsr(other, p.leader_epoch + 1, (other,), p.controller_epoch, p.zk_version)
    cluster.send(leader, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, p.controller_epoch,
                                             {TP: PartitionState(fresh, (1, 2, 3))}, (other,)))
    cluster.run_for(5)
    found = stale_request_changed(cluster.nodes[leader], before, [])
    assert [v.invariant for v in found] == [STALE_EPOCH_CHANGES_NOTHING]
    assert found[0].seen["before"][0] == "leader" and found[0].seen["after"][0] == "follower"


def test_the_check_reports_a_stale_alter_isr_written_to_the_store():
    cluster = failed_over(observed_cluster())
    leader, controller = cluster.leader(), cluster.controller()
    p = cluster.partition(leader)
    proposal = LeaderAndIsr(leader, p.leader_epoch - 1, (leader,), p.controller_epoch, p.zk_version)
    request = AlterIsrRequest(1, leader, 0, {TP: proposal})
    before = stale_request_state(cluster.nodes[controller], request)
    assert before is not None
    written = CoordRequest(1, coord.SetData(coord.partition_state_path("t", 0), coord.encode_data(proposal.to_data())))
    found = stale_request_changed(cluster.nodes[controller], before, [written])
    assert found and found[0].seen["written"]["isr"] == [leader]
