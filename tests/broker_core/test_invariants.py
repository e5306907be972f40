"""The replication invariants (broker_core/invariants.py): each holds through ordinary
replication and fails on a state that breaks it, built through the cores' own requests
where a request can build it (a rogue controller's LeaderAndIsr, a store write)."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.invariants import (
    ACKNOWLEDGED_NEVER_TRUNCATED, HIGH_WATERMARK_BELOW_LOG_END, LEADER_EPOCHS_GROW, LEADER_IN_ISR,
    NO_TWO_LEADERS_IN_ONE_EPOCH, REPLICAS_AGREE_BELOW_HIGH_WATERMARK, STRONG_ISR, ClusterView, check_all)
from broker_core.messages import LeaderAndIsr, LeaderAndIsrRequest, PartitionState
from broker_core.types import TopicPartition
from tests.invariant_harness import ObservedCluster, observed_cluster

TP = TopicPartition("t", 0)


def rogue_leader_and_isr(cluster: ObservedCluster, broker: int, leader: int, isr: tuple[int, ...],
                         epoch_step: int = 1) -> int:
    """A LeaderAndIsr from a controller with a newer controller epoch than any broker
    has seen, naming ``leader`` at the next leader epoch: the store is not written, as a
    controller whose write was lost would leave it. Returns the epoch it named."""
    p = cluster.partition(broker)
    epoch = max(cluster.partition(b).leader_epoch for b in cluster.nodes if cluster.partition(b)) + epoch_step
    state = LeaderAndIsr(leader, epoch, isr, p.controller_epoch + 5, p.zk_version + 1)
    cluster.send(broker, LeaderAndIsrRequest(cluster.next_correlation_id(), 0, p.controller_epoch + 5,
                                             {TP: PartitionState(state, (1, 2, 3))}, (leader,)))
    cluster.run_for(5)
    return epoch


def test_nothing_is_violated_through_produce_failover_and_restart_on_the_safe_profile():
    cluster = observed_cluster(config={"min.insync.replicas": 2})
    for i in range(20):
        assert cluster.produce_and_wait(cluster.leader(), [f"v{i}"]) is ErrorCode.NONE
    leader = cluster.leader()
    cluster.crash(leader)
    assert cluster.wait_for(lambda: cluster.leader() not in (None, leader), 40000)
    for i in range(10):
        cluster.produce_and_wait(cluster.leader(), [f"w{i}"], wait_ms=5000)
    cluster.start(leader)
    assert cluster.wait_for(cluster.settled, 60000)
    assert cluster.observer.acknowledged(TP), "acknowledged records were fed to the observer"
    assert cluster.violations == []
    assert cluster.healed() == []
    assert check_all(cluster.view) == []


def test_leader_in_isr_fails_when_a_leader_is_told_an_isr_without_itself():
    cluster = observed_cluster()
    rogue_leader_and_isr(cluster, 1, leader=1, isr=(2, 3))
    found = cluster.named(LEADER_IN_ISR)
    assert found and found[0].brokers == (1,) and found[0].seen["where"] == "replica"


def test_leader_in_isr_fails_when_the_store_names_a_leader_outside_its_isr():
    cluster = observed_cluster()
    state = LeaderAndIsr(1, 7, (2, 3), 1)
    cluster.store.set_data(coord.partition_state_path("t", 0), coord.encode_data(state.to_data()))
    cluster.run_for(1000)  # the next input any broker handles (a fetch: at most 500 ms) looks at the store
    found = cluster.named(LEADER_IN_ISR)
    assert found and found[0].seen["where"] == "quorum" and found[0].seen["isr"] == [2, 3]


def test_high_watermark_below_log_end_fails_on_a_high_watermark_past_the_log_end():
    # No request makes a core do this (its logs clamp the high watermark): set on the real log.
    cluster = observed_cluster()
    cluster.produce_and_wait(cluster.leader(), ["a", "b"])
    follower = next(b for b in cluster.brokers if b != cluster.leader())
    log = cluster.partition(follower).log
    log.high_watermark = log.log_end_offset + 3
    assert [v.invariant for v in check_all(ClusterView(cluster.nodes, cluster.store))] == [HIGH_WATERMARK_BELOW_LOG_END]
    found = cluster.observer.observe(cluster.view, (follower,))  # as after an input that did this
    assert found and found[0].brokers == (follower,) and found[0].seen["high_watermark"] == log.log_end_offset + 3


def test_a_follower_catching_up_in_small_fetches_keeps_its_high_watermark_below_its_log_end():
    """A restarted follower far behind fetches a few batches at a time while the leader's
    high watermark is past them all: it takes the high watermark only up to its own log
    end (2.7.0 ReplicaFetcherThread.processPartitionData). The mutant
    follower-hw-uncapped survived every other test: none had a follower behind the
    high watermark it was told."""
    cluster = observed_cluster(config={"replica.fetch.max.bytes": 200})
    leader = cluster.leader()
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.crash(follower)
    for i in range(30):
        assert cluster.produce_and_wait(leader, [f"v{i}"], wait_ms=40000) is ErrorCode.NONE
    cluster.start(follower)
    assert cluster.wait_for(cluster.settled, 60000)
    assert cluster.partition(follower).log.log_end_offset == 30
    assert cluster.named(HIGH_WATERMARK_BELOW_LOG_END) == []
    assert cluster.violations == []


def test_an_election_by_a_controller_that_survives_the_leader_starts_a_new_epoch():
    """The controller elects from the leader's own state (no ISR removal in between, as
    when the dead leader was also the controller), and the new leader's epoch is the next
    one: brokers apply only a newer epoch (2.7.0 PartitionStateMachine
    electLeaderForPartitions, leaderEpoch + 1). The mutant epoch-not-bumped survived every
    other test: their crashed leader was the controller too."""
    cluster = observed_cluster(assignment={0: [2, 3, 1]})
    leader, controller = cluster.leader(), cluster.controller()
    assert leader == 2 and controller != leader
    epoch = cluster.partition(leader).leader_epoch
    assert cluster.produce_and_wait(leader, ["a"]) is ErrorCode.NONE
    cluster.crash(leader)
    assert cluster.wait_for(lambda: cluster.leader() not in (None, leader), 40000)
    assert cluster.partition(cluster.leader()).leader_epoch > epoch
    assert cluster.produce_and_wait(cluster.leader(), ["b"]) is ErrorCode.NONE
    assert cluster.violations == []


def test_leader_epochs_grow_fails_when_the_store_s_epoch_goes_back():
    cluster = observed_cluster()
    current = LeaderAndIsr.from_data(coord.decode_data(cluster.store.get(coord.partition_state_path("t", 0))), 0)
    older = LeaderAndIsr(current.leader, current.leader_epoch - 1, current.isr, current.controller_epoch)
    cluster.store.set_data(coord.partition_state_path("t", 0), coord.encode_data(
        LeaderAndIsr(current.leader, current.leader_epoch + 3, current.isr, current.controller_epoch).to_data()))
    cluster.run_for(1000)
    cluster.store.set_data(coord.partition_state_path("t", 0), coord.encode_data(older.to_data()))
    cluster.run_for(1000)
    found = cluster.named(LEADER_EPOCHS_GROW)
    assert found and found[0].seen["where"] == "quorum" and found[0].seen["leader_epoch"] == older.leader_epoch


def test_leader_epochs_grow_fails_when_a_replica_s_epoch_goes_back():
    # The core refuses an older epoch in every request: set on the real partition.
    cluster = observed_cluster()
    follower = next(b for b in cluster.brokers if b != cluster.leader())
    cluster.partition(follower).leader_epoch -= 1
    cluster.run_for(500)
    found = cluster.named(LEADER_EPOCHS_GROW)
    assert found and found[0].brokers == (follower,) and found[0].seen["where"] == "replica"


def test_no_two_leaders_in_one_epoch_fails_when_two_controllers_name_two_leaders_for_one_epoch():
    cluster = observed_cluster()
    epoch = rogue_leader_and_isr(cluster, 2, leader=2, isr=(2,))
    assert cluster.partition(2).is_leader and cluster.partition(2).leader_epoch == epoch
    rogue_leader_and_isr(cluster, 3, leader=3, isr=(3,), epoch_step=0)
    found = cluster.named(NO_TWO_LEADERS_IN_ONE_EPOCH)
    assert found and set(found[0].brokers) == {2, 3} and found[0].seen["leader_epoch"] == epoch


def test_strong_isr_fails_when_a_leader_advances_its_high_watermark_past_the_true_isr():
    cluster = observed_cluster()
    leader = cluster.leader()
    for follower in cluster.brokers:
        if follower != leader:
            cluster.block(follower, leader)
    rogue_leader_and_isr(cluster, leader, leader=leader, isr=(leader,))  # the store still says the full ISR
    cluster.produce_and_wait(leader, ["x"], acks=1)
    found = cluster.named(STRONG_ISR)
    assert found and found[0].seen["high_watermark"] == 1 and found[0].seen["member_log_end_offset"] == 0
    assert found[0].allowed_by == ()  # no unsafe setting in force: a bug, not Kafka's behaviour


def test_strong_isr_names_the_unsafe_setting_that_allows_it():
    cluster = observed_cluster(config={"unclean.leader.election.enable": True})
    leader = cluster.leader()
    for follower in cluster.brokers:
        if follower != leader:
            cluster.block(follower, leader)
    rogue_leader_and_isr(cluster, leader, leader=leader, isr=(leader,))
    cluster.produce_and_wait(leader, ["x"], acks=1)
    assert cluster.named(STRONG_ISR)[0].allowed_by == ("unclean.leader.election.enable",)


def test_acknowledged_never_truncated_fails_when_a_later_leader_lacks_an_acknowledged_record():
    cluster = observed_cluster()
    leader = cluster.leader()
    assert cluster.produce_and_wait(leader, ["first"]) is ErrorCode.NONE
    others = [b for b in cluster.brokers if b != leader]
    for follower in others:
        cluster.block(follower, leader)
    rogue_leader_and_isr(cluster, leader, leader=leader, isr=(leader,))
    assert cluster.produce_and_wait(leader, ["acked-alone"]) is ErrorCode.NONE  # acks=all, ISR {leader}, min ISR 1
    assert cluster.named(ACKNOWLEDGED_NEVER_TRUNCATED) == []
    rogue_leader_and_isr(cluster, others[0], leader=others[0], isr=(others[0],))
    found = cluster.named(ACKNOWLEDGED_NEVER_TRUNCATED)
    assert found and found[0].brokers == (others[0],) and found[0].seen["acknowledged"] == [1, 1]
    assert found[0].seen["when"] == "leading"


def test_acks_1_records_are_not_held_to_acknowledged_never_truncated():
    cluster = observed_cluster()
    leader = cluster.leader()
    others = [b for b in cluster.brokers if b != leader]
    for follower in others:
        cluster.block(follower, leader)
    rogue_leader_and_isr(cluster, leader, leader=leader, isr=(leader,))
    assert cluster.produce_and_wait(leader, ["acks-1"], acks=1) is ErrorCode.NONE
    rogue_leader_and_isr(cluster, others[0], leader=others[0], isr=(others[0],))
    assert cluster.named(ACKNOWLEDGED_NEVER_TRUNCATED) == []


def test_replicas_agree_below_high_watermark_fails_on_a_replica_missing_committed_records():
    cluster = observed_cluster()
    leader = cluster.leader()
    lagging = next(b for b in cluster.brokers if b != leader)
    cluster.block(lagging, leader)
    rogue_leader_and_isr(cluster, leader, leader=leader, isr=(leader,))
    cluster.produce_and_wait(leader, ["x", "y"], acks=1)
    found = cluster.healed()
    assert [v.invariant for v in found] == [REPLICAS_AGREE_BELOW_HIGH_WATERMARK, REPLICAS_AGREE_BELOW_HIGH_WATERMARK]
    assert {v.brokers[1] for v in found} == set(cluster.brokers) - {leader}
