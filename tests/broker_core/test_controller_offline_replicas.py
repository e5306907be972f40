"""The controller takes a dead broker's replicas out of every ISR (Kafka's OfflineReplica
transition), deciding from the partition state it reads fresh from the store, and a new
controller does so for brokers that were already dead when it started (2.7, not 0.8.2)."""
import pytest

from broker_core import coordination as coord
from broker_core.messages import LeaderAndIsr
from broker_core.types import NO_LEADER
from tests.harness import Cluster

NO_LAG_SHRINK = {"replica.lag.time.max.ms": 3_600_000}  # keep the leader's own ISR shrink out of the way
STATE = coord.partition_state_path("t", 0)


def controller_of(cluster: Cluster):
    active = [(cluster.nodes[b].controller.epoch, b) for b in cluster.nodes if cluster.nodes[b].controller.active]
    return max(active)[1] if active else None


def stored(cluster: Cluster) -> LeaderAndIsr:
    return LeaderAndIsr.from_data(coord.decode_data(cluster.store.get(STATE)), cluster.store.znodes[STATE].version)


def controller_shrinks(cluster: Cluster, **match):
    return cluster.traced("isr_shrunk", by="controller", **match)


def follower_joined_behind_the_controllers_back(profile: str) -> Cluster:
    """Brokers 1 and 2 start: the controller (1) creates t-0 with ISR [1, 2]. Broker 3
    starts, catches up, and the leader (1) writes ISR [1, 2, 3] itself (the zookeeper ISR
    protocol: 0.8.2, and 2.7 with an inter-broker protocol before AlterIsr): the
    controller's cached ISR still says [1, 2]."""
    cluster = Cluster(assignment={0: [1, 2, 3]}, config={**NO_LAG_SHRINK, "isr_change_protocol": "zookeeper"},
                      profile=profile)
    cluster.start(1)
    cluster.start(2)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[1, 2]), 5000)
    assert controller_of(cluster) == 1
    cluster.start(3)
    assert cluster.wait_for(cluster.settled, 10000)
    assert stored(cluster).isr == (1, 2, 3)
    tp = cluster.partition(1).tp
    assert cluster.nodes[1].controller.states[tp].isr == (1, 2), "the leader's ISR write bypasses the controller"
    return cluster


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_a_dead_follower_leaves_the_isr_although_the_controllers_cached_isr_lacks_it(profile):
    """2.7.0 KafkaController.onBrokerFailure -> onReplicasBecomeOffline ->
    ReplicaStateMachine OfflineReplica -> doRemoveReplicasFromIsr, which reads the states
    from ZooKeeper (getTopicPartitionStatesFromZk); 0.8.2.2 KafkaController.removeReplicaFromIsr
    likewise re-reads the leader and ISR path. Deciding on the cache, the controller
    would think 3 was never in the ISR and leave it there."""
    cluster = follower_joined_behind_the_controllers_back(profile)
    cluster.crash(3)
    timeout = cluster.config.zookeeper_session_timeout_ms + 3000
    assert cluster.wait_for(lambda: bool(controller_shrinks(cluster, isr=[1, 2], reason="broker_failed")), timeout)
    assert stored(cluster).isr == (1, 2) and stored(cluster).leader == 1


def test_a_leader_write_between_the_controllers_read_and_write_is_not_overwritten():
    """2.7.0 ReplicaStateMachine.removeReplicasFromIsr retries the partitions whose update
    met a BADVERSION (the leader updated the state meanwhile), reading them fresh again.
    Here the leader's write (dropping 2 as lagging) lands just before the controller's
    write removing the dead 3: the controller must end with [1], not put 2 back."""
    cluster = follower_joined_behind_the_controllers_back("kafka-2.7")
    original = cluster.store.request
    raced = []

    def request(session_id, op, now):
        if isinstance(op, coord.SetData) and op.path == STATE and op.check_path and not raced:
            current = stored(cluster)
            leader_write = LeaderAndIsr(current.leader, current.leader_epoch, (1, 3), current.controller_epoch)
            raced.append(original(cluster.sessions[1], coord.SetData(
                STATE, coord.encode_data(leader_write.to_data()), current.zk_version), now))
        return original(session_id, op, now)

    cluster.store.request = request
    cluster.crash(3)
    assert cluster.wait_for(lambda: bool(controller_shrinks(cluster)), 25000)
    assert raced and raced[0].ok, "the leader's write went in between"
    assert controller_shrinks(cluster)[0][2]["isr"] == [1]


def test_a_controller_elected_while_a_broker_is_dead_removes_it_from_the_isr():
    """2.7.0 KafkaController.onControllerFailover -> ReplicaStateMachine.startup moves the
    replicas on dead brokers to OfflineReplica (out of every ISR) before the partition
    state machine starts. Brokers 1 (controller) and 3 die together: broker 2, the
    leader, becomes controller with 1 and 3 already gone."""
    cluster = Cluster(assignment={0: [2, 3, 1]}, config=NO_LAG_SHRINK)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert controller_of(cluster) == 1 and cluster.leader() == 2
    cluster.crash(1)
    cluster.crash(3)
    assert cluster.wait_for(lambda: controller_of(cluster) == 2, 25000)
    assert cluster.wait_for(lambda: stored(cluster).isr == (2,), 2000), stored(cluster)
    assert stored(cluster).leader == 2
    assert cluster.partition(2).isr == (2,), "the leader is told through LeaderAndIsr"


def test_a_08_controller_elected_while_a_broker_is_dead_leaves_the_isr_alone():
    """0.8.2.2 ReplicaStateMachine.startup moves only the live replicas to OnlineReplica
    (initializeReplicaState marks the dead ones ReplicaDeletionIneligible): nothing
    removes brokers that died before the controller started."""
    cluster = Cluster(assignment={0: [2, 3, 1]}, config=NO_LAG_SHRINK, profile="kafka-0.8")
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert controller_of(cluster) == 1 and cluster.leader() == 2
    cluster.crash(1)
    cluster.crash(3)
    assert cluster.wait_for(lambda: controller_of(cluster) == 2, 25000)
    cluster.run_for(3000)
    assert sorted(stored(cluster).isr) == [1, 2, 3] and stored(cluster).leader == 2
    assert not controller_shrinks(cluster)


def sole_isr_member_dies(profile: str, config=None, members=(1,)) -> Cluster:
    """Broker 4 controls; of t-0's replicas [1, 2, 3] only ``members`` ever start, so
    the ISR is just them. Then they all die."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [1, 2, 3]}, profile=profile,
                      config={**NO_LAG_SHRINK, **(config or {})})
    cluster.start(4)
    assert cluster.wait_for(lambda: controller_of(cluster) == 4, 2000)
    for broker in members:
        cluster.start(broker)
    assert cluster.wait_for(lambda: cluster.settled(replicas=list(members)), 5000)
    for broker in members:
        cluster.crash(broker)
    cluster.run_for(cluster.config.zookeeper_session_timeout_ms + 3000)
    return cluster


def test_the_last_isr_member_stays_in_the_isr_when_it_dies():
    """2.7.0 ReplicaStateMachine.doRemoveReplicasFromIsr: an ISR of one keeps its member
    (adjustedIsr = isr when isr.size == 1), so that it alone may lead again cleanly.
    (A guard: the controller before this change never shrank a leaderless partition.)"""
    cluster = sole_isr_member_dies("kafka-2.7")
    assert stored(cluster).leader == NO_LEADER and stored(cluster).isr == (1,)


def test_two_isr_members_dying_together_leave_only_the_last_removed():
    """2.7.0 doRemoveReplicasFromIsr, one dead replica after the other: removing 1 leaves
    [2], and 2, the last member, stays. So 1 alone cannot come back as a clean leader:
    only 2 may (unclean election is off). Kafka's order over the dead replicas follows
    a hash set; isrlab removes them in broker id order."""
    cluster = sole_isr_member_dies("kafka-2.7", members=(1, 2))
    assert stored(cluster).leader == NO_LEADER and stored(cluster).isr == (2,)
    cluster.start(1)
    cluster.run_for(3000)
    assert stored(cluster).leader == NO_LEADER, "1 is no longer in the ISR"
    cluster.start(2)
    assert cluster.wait_for(lambda: bool(cluster.traced("leader_elected", leader=2, unclean=False)), 5000)


def test_08_with_unclean_election_empties_the_isr_when_its_last_member_dies():
    """0.8.2.2 KafkaController.removeReplicaFromIsr keeps the last member only "if unclean
    leader election is disallowed for the corresponding topic"; the 0.8 profile enables
    it, so the ISR becomes empty and the next leader, whoever it is, is unclean."""
    cluster = sole_isr_member_dies("kafka-0.8")
    assert stored(cluster).leader == NO_LEADER and stored(cluster).isr == ()
    cluster.start(1)
    assert cluster.wait_for(lambda: bool(cluster.traced("leader_elected", leader=1, unclean=True)), 5000)
    assert stored(cluster).leader == 1 and stored(cluster).isr == (1,)


def test_08_without_unclean_election_keeps_the_last_isr_member():
    """0.8.2.2 KafkaController.removeReplicaFromIsr: with unclean election disallowed the
    last ISR member is retained."""
    cluster = sole_isr_member_dies("kafka-0.8", config={"unclean.leader.election.enable": False})
    assert stored(cluster).leader == NO_LEADER and stored(cluster).isr == (1,)
