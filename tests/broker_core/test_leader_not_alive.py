"""A LeaderAndIsr request naming a leader that is not alive (or none): followers ignore
it (0.8.2.2 and 2.7.0 ReplicaManager.makeFollowers), and the controller says which
leaders are alive (2.7.0 ControllerChannelManager.sendLeaderAndIsrRequest)."""
from __future__ import annotations

from broker_core.errors import ErrorCode
from broker_core.messages import LeaderAndIsr, LeaderAndIsrRequest, PartitionState
from broker_core.partition import Role
from broker_core.types import NO_LEADER, TopicPartition
from tests.harness import Cluster

TP = TopicPartition("t", 0)


def _leader_and_isr(c: Cluster, broker: int, tp: TopicPartition, leader: int, epoch: int,
                    live_leaders: tuple[int, ...]) -> None:
    """Deliver a LeaderAndIsr for ``tp`` to ``broker`` as the current controller would."""
    controller = c.controller()
    state = PartitionState(LeaderAndIsr(leader, epoch, (1, 2, 3), c.nodes[controller].controller.epoch), (1, 2, 3))
    response = c.request_and_wait(broker, lambda cid: LeaderAndIsrRequest(
        cid, controller, c.nodes[controller].controller.epoch, {tp: state}, live_leaders), wait_ms=1000)
    assert response is not None and response.error is ErrorCode.NONE


def test_kafka_08_a_dead_leader_then_the_same_leader_again_does_not_truncate_the_follower():
    """0.8.2.2 server/ReplicaManager.scala makeFollowers: a partition whose new leader is
    not among the request's live leaders is skipped (its leader, epoch and fetcher stay),
    so when the same leader is elected again Partition.makeFollower sees no leader change
    and the follower does not truncate to its high watermark. Before, the follower took
    leader -1 and then saw 'a new leader' and lost what lay above its high watermark."""
    c = Cluster(profile="kafka-0.8")
    c.start_all()
    assert c.wait_for(c.settled)
    assert c.leader() == 1
    assert c.produce_and_wait(1, ["a", "b"]) is ErrorCode.NONE
    c.block(1, 3)  # broker 3 stops fetching: the leader's high watermark stays at 2
    assert c.produce_and_wait(1, ["c", "d"], acks=1) is ErrorCode.NONE
    assert c.wait_for(lambda: c.partition(2).log.log_end_offset == 4)
    follower = c.partition(2)
    assert follower.log.high_watermark == 2
    epoch = follower.leader_epoch

    _leader_and_isr(c, 2, TP, NO_LEADER, epoch + 1, ())
    assert (follower.role, follower.leader, follower.leader_epoch) == (Role.FOLLOWER, 1, epoch)
    [(_, _, skipped)] = c.traced("become_follower_skipped")
    assert (skipped["leader"], skipped["leader_epoch"], skipped["reason"]) == (NO_LEADER, epoch + 1, "leader_not_alive")

    _leader_and_isr(c, 2, TP, 1, epoch + 2, (1,))
    assert follower.leader_epoch == epoch + 2
    assert not [f for _, b, f in c.traced("log_truncated") if b == 2]
    assert c.values(2) == ["a", "b", "c", "d"]


def test_a_leader_not_in_the_live_leaders_is_ignored_and_its_epoch_applied_later():
    """2.7.0 server/ReplicaManager.scala makeFollowers (metadata cache's hasAliveBroker;
    isrlab uses the request's live leaders): a partition this broker never had, named
    with a leader that is not alive, only gets its log (createLogIfNotExists, KAFKA-1647):
    it has no leader, no epoch and no fetcher. The same epoch, sent again once the leader
    is alive, is applied."""
    c = Cluster(profile="kafka-2.7")
    c.start_all()
    assert c.wait_for(c.settled)
    fresh = TopicPartition("t", 7)
    _leader_and_isr(c, 2, fresh, 3, 4, ())
    partition = c.nodes[2].replicas.partitions[fresh]
    assert (partition.role, partition.leader, partition.leader_epoch) == (Role.OFFLINE, NO_LEADER, -1)
    assert all(fresh not in fetcher.states for fetcher in c.nodes[2].fetchers.fetchers.values())
    _leader_and_isr(c, 2, fresh, 3, 4, (3,))
    assert (partition.role, partition.leader, partition.leader_epoch) == (Role.FOLLOWER, 3, 4)


def test_the_controller_sends_the_live_leaders_and_followers_keep_a_leader_that_died():
    """2.7.0 controller/ControllerChannelManager.scala sendLeaderAndIsrRequest: the live
    (or shutting-down) brokers among the partitions' leaders. The only ISR member dies
    with unclean election off: the controller sends leader -1 with no live leader, and
    the followers keep following broker 1 (2.7.0 ReplicaManager.makeFollowers) until it
    is back and elected again."""
    c = Cluster(profile="kafka-2.7", config={"replica.lag.time.max.ms": 1000})
    c.start_all()
    assert c.wait_for(c.settled)
    assert c.leader() == 1
    c.block(1, 2)
    c.block(1, 3)
    # A record the followers lack: an idle follower is never out of sync (2.7.0
    # Partition.isFollowerOutOfSync), so without it the ISR would not shrink.
    c.produce(1, ["unreplicated"], acks=1)
    assert c.wait_for(lambda: c.partition(1).isr == (1,), 10000)
    epoch = c.partition(2).leader_epoch
    c.crash(1)
    assert c.wait_for(lambda: c.traced("become_follower_skipped"), 30000)
    skipped = {b: f for _, b, f in c.traced("become_follower_skipped")}
    assert sorted(skipped) == [2, 3] and all(f["leader"] == NO_LEADER for f in skipped.values())
    assert all(c.partition(b).leader == 1 and c.partition(b).role is Role.FOLLOWER for b in (2, 3))
    c.heal()
    c.start(1)
    assert c.wait_for(lambda: c.leader() == 1 and c.partition(2).leader_epoch > epoch + 1, 30000)
