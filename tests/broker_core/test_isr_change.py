"""The leader's view of its followers and how its ISR changes, per profile, driving real
core nodes (tests/harness.py). Each test names the Kafka code it follows."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.inputs import ShutdownRequested
from broker_core.isr_change import ALTER_ISR_INTERVAL_MS
from broker_core.messages import AlterIsrRequest, FetchPartition, FetchRequest, LeaderAndIsr, UpdateMetadataRequest
from broker_core.types import TopicPartition
from tests.harness import Cluster, ZK, started_cluster

TP = TopicPartition("t", 0)


def append_behind_blocked_followers(cluster: Cluster, leader: int) -> None:
    """An acks=1 record that blocked followers lack: since KAFKA-7152 (2.1+) a follower at
    the leader's log end is never out of sync, so an idle partition would keep them."""
    assert cluster.produce_and_wait(leader, ["behind"], acks=1) is ErrorCode.NONE


def fetch_as_follower(cluster: Cluster, leader: int, replica: int, fetch_offset: int, current_epoch: int):
    cid = cluster.next_correlation_id()
    cluster.send(leader, FetchRequest(cid, replica, 0, 1, {TP: FetchPartition(fetch_offset, current_epoch)}))
    assert cluster.wait_for(lambda: cid in cluster.responses, 1000)
    return cluster.responses[cid].partitions[TP]


# -- item 1: a failed follower fetch ----------------------------------------------------

@pytest.mark.parametrize("error", ["FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_OUT_OF_RANGE"])
def test_a_failed_follower_fetch_does_not_update_the_leaders_view_of_that_follower(error):
    """ReplicaManager.fetchMessages / updateFollowerFetchState (2.7.0,
    core/src/main/scala/kafka/server/ReplicaManager.scala): a partition whose read failed
    is skipped, so the follower's log end offset and last caught-up time stay as they
    were, it cannot re-enter the ISR and it cannot move the high watermark."""
    cluster = started_cluster()
    first = cluster.leader()
    cluster.crash(first)  # a new leader in epoch >= 1; the dead broker leaves the ISR
    assert cluster.wait_for(lambda: cluster.leader() not in (None, first)
                            and first not in cluster.partition(cluster.leader()).isr, 40000)
    leader = cluster.leader()
    partition = cluster.partition(leader)
    epoch, log_end = partition.leader_epoch, partition.log.log_end_offset
    before = vars(partition.followers[first]).copy()
    offset, current = {"FENCED_LEADER_EPOCH": (log_end, epoch - 1), "UNKNOWN_LEADER_EPOCH": (log_end, epoch + 1),
                       "OFFSET_OUT_OF_RANGE": (log_end + 10, epoch)}[error]
    result = fetch_as_follower(cluster, leader, first, offset, current)
    assert result.error is ErrorCode[error]
    cluster.run_for(500)
    assert vars(partition.followers[first]) == before
    assert first not in partition.isr and partition.pending_isr is None
    assert not cluster.traced("isr_expanded")
    # The same fetch without an error is what counts: it brings the replica back.
    assert fetch_as_follower(cluster, leader, first, log_end, epoch).error is ErrorCode.NONE
    assert cluster.wait_for(lambda: first in partition.isr, 2000)


# -- item 5: a delayed produce and an epoch bump ----------------------------------------

@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_a_delayed_acks_all_produce_keeps_waiting_through_an_epoch_bump_with_the_same_leader(profile):
    """DelayedProduce.tryComplete -> Partition.checkEnoughReplicasReachOffset (2.7.0,
    core/src/main/scala/kafka/server/DelayedProduce.scala; 0.8.2.2 DelayedProduce.isSatisfied):
    the only leadership check is whether this broker still leads. The controller drops a
    dead follower from the ISR with a new epoch and the same leader; the produce then
    completes, it does not fail with NOT_LEADER_OR_FOLLOWER."""
    cluster = started_cluster(profile=profile, config={"replica.lag.time.max.ms": 120000})
    leader = cluster.leader()
    follower = [b for b in cluster.brokers if b not in (leader, cluster.controller())][0]
    epoch = cluster.partition(leader).leader_epoch
    cluster.crash(follower)
    cid = cluster.produce(leader, ["waits"], acks=-1, timeout_ms=60000)
    assert cluster.wait_for(lambda: cid in cluster.responses, 60000)
    assert cluster.responses[cid].partitions[TP].error is ErrorCode.NONE
    partition = cluster.partition(leader)
    assert partition.is_leader and partition.leader_epoch > epoch and follower not in partition.isr


# -- item 6: the two ISR change protocols -----------------------------------------------

def _cluster_with_a_remote_controller(protocol: str, **config) -> tuple[Cluster, int, int]:
    """Replicas 2, 3, 4 with leader 2; broker 1 hosts nothing and controls, so cutting the
    leader off from the controller leaves replication alone. Lost fetches and AlterIsr
    requests are sent again within a second."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]},
                      config={"replica.lag.time.max.ms": 1000, "replica.socket.timeout.ms": 500, "controller.socket.timeout.ms": 1000,
                              "isr_change_protocol": protocol, **config})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    leader, controller = cluster.leader(), cluster.controller()
    assert leader == 2 and controller == 1
    return cluster, leader, controller


@pytest.mark.parametrize("protocol", ["zookeeper", "alter_isr"])
def test_a_replica_being_added_to_the_isr_is_waited_for_before_anything_is_acknowledged(protocol):
    """2.7.0 Partition.scala: with AlterIsr, expandIsrWithAlterIsr puts the partition in
    PendingExpandIsr and maybeIncrementLeaderHW counts the maximal ISR (KIP-497); with
    ZooKeeper, expandIsrWithZk writes under the leaderIsrUpdateLock write lock, which
    appendRecordsToLeader needs too (0.8.2.2 Partition.updateIsr likewise). Either way a
    record the joining replica lacks is not acknowledged while the change is in flight
    (before, the leader wrote asynchronously and acknowledged over the old ISR)."""
    cluster, leader, controller = _cluster_with_a_remote_controller(protocol)
    joining = 3
    cluster.block(joining, leader)
    append_behind_blocked_followers(cluster, leader)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).isr) == [2, 4], 5000)
    cluster.heal()
    cluster.block(leader, ZK)  # the write (zookeeper) or the request (alter_isr) hangs
    cluster.block(leader, controller)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).pending_isr or ()) == [2, 3, 4], 5000)
    cluster.block(joining, leader)  # the joining replica stops fetching
    before = cluster.partition(leader).log.log_end_offset
    cid = cluster.produce(leader, ["unreplicated"], acks=-1, timeout_ms=3000)
    cluster.run_for(5000)
    partition = cluster.partition(leader)
    if protocol == "zookeeper":  # locked: not even appended, no answer yet
        assert cid not in cluster.responses and partition.log.log_end_offset == before
    else:  # appended, then held back by the maximal ISR until the timeout
        assert cluster.responses[cid].partitions[TP].error is ErrorCode.REQUEST_TIMED_OUT
        assert partition.log.log_end_offset == before + 1 and partition.log.high_watermark == before
    assert sorted(partition.isr) == [2, 4]


@pytest.mark.parametrize("commit_advances", [False, True])
def test_alter_isr_a_pending_shrink_keeps_counting_the_replica_until_the_controller_commits_it(commit_advances):
    """2.7.0 Partition.shrinkIsrWithAlterIsr: PendingShrinkIsr's maximal ISR is the old ISR,
    so the high watermark waits for the replica being removed until the controller
    answers. The commit itself (2.7.0 handleAlterIsrResponse) moves nothing: the other
    follower already holds the record and its fetches no longer move its log end
    (updateFollowerFetchState), so with no new append the produce times out (KAFKA-13091).
    3.1.0's handleAlterIsrResponse tries the high watermark and the produce completes."""
    cluster, leader, controller = _cluster_with_a_remote_controller(
        "alter_isr", alter_isr_commit_advances_high_watermark=commit_advances)
    cluster.block(leader, controller)
    cluster.block(3, leader)
    append_behind_blocked_followers(cluster, leader)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).pending_isr or ()) == [2, 4], 5000)
    cid = cluster.produce(leader, ["waits-for-the-shrink"], acks=-1, timeout_ms=20000)
    cluster.run_for(3000)
    assert cid not in cluster.responses and sorted(cluster.partition(leader).isr) == [2, 3, 4]
    partition = cluster.partition(leader)
    assert partition.followers[4].log_end_offset == partition.log.log_end_offset
    high_watermark = partition.log.high_watermark
    assert high_watermark < partition.log.log_end_offset
    cluster.heal()
    cluster.block(3, leader)
    assert cluster.wait_for(lambda: cid in cluster.responses, 20000)
    error = cluster.responses[cid].partitions[TP].error
    assert sorted(partition.isr) == [2, 4]
    shrunk = cluster.traced("isr_shrunk", protocol="alter_isr")
    assert shrunk and shrunk[0][1] == leader
    if commit_advances:
        assert error is ErrorCode.NONE and partition.log.high_watermark == partition.log.log_end_offset
    else:
        assert error is ErrorCode.REQUEST_TIMED_OUT and partition.log.high_watermark == high_watermark


def test_zookeeper_a_session_expiry_ends_the_isr_write_and_releases_the_held_requests():
    """0.8.2.2 Partition.updateIsr / 2.7.0 shrinkIsrWithZk: the write fails when the session
    expires (ZooKeeperClient gives up on SESSION_EXPIRED), the ISR stays as it was and
    the requests that waited for the lock run."""
    cluster = started_cluster(profile="kafka-0.8", config={"replica.lag.time.max.ms": 1000})
    leader = cluster.leader()
    cluster.block(leader, ZK)
    cluster.block(3 if leader != 3 else 2, leader)
    assert cluster.wait_for(lambda: cluster.partition(leader).isr_locked, 5000)
    cid = cluster.produce(leader, ["held"], acks=1)
    cluster.run_for(2000)
    assert cid not in cluster.responses
    cluster.run_for(8000)  # past zookeeper.session.timeout.ms (6 s in 0.8.2)
    cluster.heal()
    assert cluster.wait_for(lambda: cid in cluster.responses, 5000)
    assert cluster.traced("session_expired") and not cluster.partition(leader).isr_locked


@pytest.mark.parametrize("protocol", ["zookeeper", "alter_isr"])
def test_a_stale_zk_version_is_not_retried_by_the_leader(protocol):
    """Partition.maybeUpdateIsrAndVersionWithZk (2.7.0; 0.8.2.2 updateIsr): "Cached zkVersion
    not equal to that in zookeeper, skip updating ISR"; with AlterIsr the controller
    answers INVALID_UPDATE_VERSION (KafkaController.processAlterIsr) and the leader gives
    up, pending until the next LeaderAndIsr (Partition.handleAlterIsrResponse)."""
    cluster, leader, controller = _cluster_with_a_remote_controller(protocol)
    path = coord.partition_state_path("t", 0)
    cluster.store.put(path, cluster.store.get(path))  # another writer moved the version on
    cluster.block(3, leader)
    append_behind_blocked_followers(cluster, leader)
    assert cluster.wait_for(lambda: cluster.traced("isr_update_conflict", protocol=protocol), 5000)
    cluster.run_for(3000)
    partition = cluster.partition(leader)
    assert sorted(partition.isr) == [2, 3, 4], "the conflict must not be resolved by the leader re-reading"
    conflicts = cluster.traced("isr_update_conflict")
    if protocol == "alter_isr":
        assert sorted(partition.pending_isr) == [2, 4] and len(conflicts) == 1
        assert conflicts[0][2]["error"] == "INVALID_UPDATE_VERSION"
    else:
        assert partition.pending_isr is None and len(conflicts) > 1  # tried again, same stale version


# -- an AlterIsr whose controller stops ------------------------------------------------------

@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-3.0"])
@pytest.mark.parametrize("stop", ["controlled_shutdown", "crash"])
def test_an_alter_isr_lost_with_its_controller_goes_to_the_new_controller_without_waiting_for_the_timeout(
        stop, profile):
    """2.7.0 core/src/main/scala/kafka/server/BrokerToControllerChannelManagerImpl.scala
    BrokerToControllerRequestThread.handleResponse and doWork (3.0.0
    BrokerToControllerChannelManager.scala, the same two): when the controller's process
    stops, the leader's connection to it closes; the request in flight comes back
    disconnected, is put back at the head of the queue, and is sent to the controller the
    metadata cache names as soon as UpdateMetadata names the new one, not after
    controller.socket.timeout.ms (30 s). The expansion then commits."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]}, profile=profile,
                      config={"replica.lag.time.max.ms": 1000, "replica.socket.timeout.ms": 500,
                              "zookeeper.session.timeout.ms": 6000, "isr_change_protocol": "alter_isr"})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    leader, controller, joining = cluster.leader(), cluster.controller(), 3
    assert (leader, controller) == (2, 1) and cluster.config.controller_socket_timeout_ms == 30000
    cluster.block(joining, leader)
    append_behind_blocked_followers(cluster, leader)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).isr) == [2, 4], 5000)
    cluster.heal()
    cluster.block(leader, controller, both=False)  # the expansion's AlterIsr is lost
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).pending_isr or ()) == [2, 3, 4], 5000)
    sent_at = cluster.now
    if stop == "crash":
        cluster.crash(controller)  # its session expires 6 s later, and another broker controls
    else:
        cluster._deliver(controller, ShutdownRequested())  # it hosts nothing: it stops at once
    cluster.heal()
    assert cluster.wait_for(lambda: cluster.controller() not in (None, controller), 10000)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).isr) == [2, 3, 4], 40000)
    committed_at = cluster.traced("isr_expanded", isr=[2, 3, 4])[-1][0]
    assert committed_at - sent_at < (7000 if stop == "crash" else 1000) < cluster.config.controller_socket_timeout_ms
    resent = cluster.traced("alter_isr_resent", reason="controller_moved")
    assert resent and resent[0][2]["previous_controller"] == controller
    assert resent[0][2]["controller"] == cluster.controller() and resent[0][2]["partitions"] == ["t-0"]


def test_an_alter_isr_answered_not_controller_goes_at_once_to_the_controller_the_metadata_names():
    """2.7.0 core/src/main/scala/kafka/server/BrokerToControllerChannelManagerImpl.scala
    BrokerToControllerRequestThread.handleResponse (3.0.0 BrokerToControllerChannelManager.scala
    likewise): NOT_CONTROLLER never reaches AlterIsrManager; the channel drops the
    controller and sends the same request to the one its metadata cache names, at once
    when that is another broker (not at AlterIsrManager's next 50 ms schedule)."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]},
                      config={"replica.lag.time.max.ms": 1000, "replica.socket.timeout.ms": 500,
                              "isr_change_protocol": "alter_isr"})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    leader, controller, joining = 2, 1, 4
    assert (cluster.leader(), cluster.controller()) == (leader, controller)
    cluster.block(joining, leader)
    append_behind_blocked_followers(cluster, leader)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).isr) == [2, 3], 5000)
    node = cluster.nodes[leader]

    def metadata_naming(broker: int) -> UpdateMetadataRequest:
        return UpdateMetadataRequest(cluster.next_correlation_id(), broker, node.replicas.controller_epoch,
                                     (1, 2, 3, 4), dict(node.metadata))

    cluster.send(leader, metadata_naming(3), src=controller)  # stale metadata: 3 does not control
    cluster.run_for(10)
    cluster.heal()
    assert cluster.wait_for(lambda: cluster.traced("alter_isr_failed", error="NOT_CONTROLLER")
                            and node.replicas.isr.in_flight is not None, 2000, step_ms=1)
    # In flight to 3 again; the true controller is named before 3 answers NOT_CONTROLLER.
    cluster.send(leader, metadata_naming(controller), src=controller)
    assert cluster.wait_for(lambda: sorted(cluster.partition(leader).isr) == [2, 3, 4], 2000)
    answered_at = cluster.traced("alter_isr_failed", error="NOT_CONTROLLER")[-1][0]
    assert cluster.traced("isr_expanded", isr=[2, 3, 4])[-1][0] - answered_at < ALTER_ISR_INTERVAL_MS
    assert cluster.traced("alter_isr_resent", reason="retry", controller=3)  # the same request, to 3 again
    resent = cluster.traced("alter_isr_resent", reason="not_controller")
    assert resent and resent[-1][0] == answered_at and resent[-1][2]["controller"] == controller


# -- the controller's side of AlterIsr ------------------------------------------------------

def test_the_controller_fences_stale_alter_isr_requests():
    """KafkaController.processAlterIsr (2.7.0): NOT_CONTROLLER from a broker that does not
    control, STALE_BROKER_EPOCH for an unknown incarnation, FENCED_LEADER_EPOCH for an
    older leader epoch, INVALID_UPDATE_VERSION for a stale version, and the current
    state for an ISR already in place."""
    cluster, leader, controller = _cluster_with_a_remote_controller("alter_isr")
    partition = cluster.partition(leader)
    state = LeaderAndIsr(leader, partition.leader_epoch, partition.isr, partition.controller_epoch,
                         partition.zk_version)
    epoch = cluster.nodes[leader].session_id

    def ask(broker, request_state, broker_epoch=epoch):
        cid = cluster.next_correlation_id()
        cluster.send(broker, AlterIsrRequest(cid, leader, broker_epoch, {TP: request_state}))
        assert cluster.wait_for(lambda: cid in cluster.responses, 2000)
        return cluster.responses[cid]

    assert ask(leader, state).error is ErrorCode.NOT_CONTROLLER
    assert ask(controller, state, broker_epoch=epoch + 1000).error is ErrorCode.STALE_BROKER_EPOCH
    same = ask(controller, state)
    assert same.error is ErrorCode.NONE and same.partitions[TP].leader_and_isr.isr == state.isr
    shrink = LeaderAndIsr(leader, state.leader_epoch, (2, 4), state.controller_epoch, state.zk_version)
    assert ask(controller, LeaderAndIsr(leader, state.leader_epoch - 1, (2, 4), 0, state.zk_version)
               ).partitions[TP].error is ErrorCode.FENCED_LEADER_EPOCH
    assert ask(controller, LeaderAndIsr(leader, state.leader_epoch, (2, 4), 0, state.zk_version + 7)
               ).partitions[TP].error is ErrorCode.INVALID_UPDATE_VERSION
    done = ask(controller, shrink).partitions[TP]
    assert done.error is ErrorCode.NONE and done.leader_and_isr.isr == (2, 4)
    assert done.leader_and_isr.zk_version > state.zk_version
    stored = LeaderAndIsr.from_data(coord.decode_data(cluster.store.get(coord.partition_state_path("t", 0))), 0)
    assert stored.isr == (2, 4) and stored.leader_epoch == state.leader_epoch
