"""Preferred leader election: automatic (auto.leader.rebalance.enable and the imbalance
check) and on request (/admin/preferred_replica_election, written by the admin tool)."""
import pytest

from broker_core import coordination as coord
from broker_core.preferred_election import requested_partitions
from broker_core.election import imbalanced_partitions
from broker_core.types import TopicPartition
from tests.harness import Cluster

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
REQUEST = coord.PREFERRED_REPLICA_ELECTION_PATH


def controller_of(cluster: Cluster):
    active = [(cluster.nodes[b].controller.epoch, b) for b in cluster.nodes if cluster.nodes[b].controller.active]
    return max(active)[1] if active else None


def leadership_moved_off_the_preferred_replica(config: dict) -> Cluster:
    """t-0 prefers broker 2 (AR [2, 1, 3]); broker 1 controls. Broker 2 dies, 1 leads;
    broker 2 restarts and catches up (back in the ISR): now 1 leads, 2 is preferred."""
    cluster = Cluster(assignment={0: [2, 1, 3]}, config={"leader.imbalance.check.interval.seconds": 10, **config})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert controller_of(cluster) == 1 and cluster.leader() == 2
    cluster.crash(2)
    assert cluster.wait_for(lambda: cluster.leader() == 1, 25000)
    cluster.start(2)
    assert cluster.wait_for(cluster.settled, 10000)
    assert cluster.leader() == 1
    return cluster


def preferred_elections(cluster: Cluster):
    return cluster.traced("leader_elected", election="preferred")


def test_leadership_returns_to_the_preferred_replica_after_the_imbalance_check():
    """2.7.0 KafkaController.checkAndTriggerAutoLeaderRebalance (0.8.2.2
    checkAndTriggerPartitionRebalance): broker 2 prefers 1 partition and leads none, an
    imbalance of 100 % > leader.imbalance.per.broker.percentage (10): the controller
    elects the preferred replica (PreferredReplicaPartitionLeaderElectionStrategy),
    judging "in the ISR" on the state it reads from the store (the leader added 2
    without telling the controller)."""
    cluster = leadership_moved_off_the_preferred_replica({})
    assert cluster.wait_for(lambda: cluster.leader() == 2, 12000)
    elections = preferred_elections(cluster)
    assert len(elections) == 1 and elections[0][1] == 1 and elections[0][2]["leader"] == 2
    assert sorted(elections[0][2]["isr"]) == [1, 2, 3], "the ISR stays as it is"
    assert cluster.partition(1).leader == 2, "the old leader follows"


def test_no_automatic_preferred_election_when_auto_leader_rebalance_is_off():
    """2.7.0 KafkaController.onControllerFailover schedules the imbalance check only
    if auto.leader.rebalance.enable."""
    cluster = leadership_moved_off_the_preferred_replica({"auto.leader.rebalance.enable": False})
    cluster.run_for(30000)
    assert cluster.leader() == 1 and not preferred_elections(cluster)


def test_no_automatic_preferred_election_while_the_imbalance_is_within_the_percentage():
    """2.7.0 checkAndTriggerAutoLeaderRebalance triggers only when the ratio *exceeds*
    leader.imbalance.per.broker.percentage / 100: 1 of 1 partitions is not above 100 %."""
    cluster = leadership_moved_off_the_preferred_replica({"leader.imbalance.per.broker.percentage": 100})
    cluster.run_for(30000)
    assert cluster.leader() == 1 and not preferred_elections(cluster)


def test_imbalance_ratio_is_per_preferred_broker_and_strictly_above_the_percentage():
    """2.7.0 checkAndTriggerAutoLeaderRebalance: partitions grouped by AR[0]; a group's
    ratio counts the partitions led elsewhere (or leaderless) over all of the group."""
    assignments = {T0: (1, 2), T1: (1, 3), T2: (2, 1)}
    leaders = {T0: 2, T1: 1, T2: 2}
    assert imbalanced_partitions(assignments, leaders, 49) == [T0]      # 1 of 2 > 49 %
    assert imbalanced_partitions(assignments, leaders, 50) == []        # 1 of 2 is not > 50 %
    assert imbalanced_partitions(assignments, {T0: -1, T1: 3, T2: 2}, 10) == [T0, T1]
    assert imbalanced_partitions(assignments, {T1: 3}, 49) == [T1]      # T0 unknown: denominator only


def test_an_admin_request_node_elects_the_preferred_replica_and_is_deleted():
    """2.7.0 KafkaController: the PreferredReplicaElection handler on
    /admin/preferred_replica_election (written by kafka-preferred-replica-election.sh)
    runs onReplicaElection(PREFERRED, ZkTriggered), then removePartitionsFromPreferredReplicaElection
    deletes the node; the controller keeps watching for the next request."""
    cluster = leadership_moved_off_the_preferred_replica({"auto.leader.rebalance.enable": False})
    request = {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    cluster.store.put(REQUEST, coord.encode_data(request))
    assert cluster.wait_for(lambda: cluster.leader() == 2, 2000)
    assert cluster.wait_for(lambda: cluster.store.get(REQUEST) is None, 1000)
    assert len(preferred_elections(cluster)) == 1
    # a second request later is seen too (the watch was set again); nothing to do now
    cluster.store.put(REQUEST, coord.encode_data(request))
    assert cluster.wait_for(lambda: cluster.store.get(REQUEST) is None, 1000)
    assert len(preferred_elections(cluster)) == 1


def test_an_unreadable_request_node_is_deleted_without_an_election():
    """A malformed request must not stop the controller: it is dropped like a handled one."""
    cluster = leadership_moved_off_the_preferred_replica({"auto.leader.rebalance.enable": False})
    cluster.store.put(REQUEST, b"{not json")
    assert cluster.wait_for(lambda: cluster.store.get(REQUEST) is None, 1000)
    assert cluster.leader() == 1 and not preferred_elections(cluster)


@pytest.mark.parametrize("raw,expected", [
    (b'{"version":1,"partitions":[{"topic":"t","partition":1},{"topic":"t","partition":0}]}', [T0, T1]),
    (b'{"partitions":[{"topic":"t","partition":"0"},{"topic":7,"partition":1},3,{"topic":"t","partition":true}]}', []),
    (b'[1, 2]', []),
    (b'\xff', []),
])
def test_request_parsing_skips_what_it_cannot_read(raw, expected):
    assert requested_partitions(raw) == expected


def test_a_request_written_while_no_controller_runs_is_handled_by_the_next_one():
    """2.7.0 KafkaController.onControllerFailover: fetchPendingPreferredReplicaElections
    (0.8.2.2 maybeTriggerPreferredReplicaElection) handles a request already there.
    Broker 1 controls and hosts no replica of t-0 (AR [2, 3, 4]); leadership moved to 3
    while 2 was down. The controller crashes, the request is written, and the next
    controller finds it when it starts."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]},
                      config={"auto.leader.rebalance.enable": False})
    cluster.start(1)
    assert cluster.wait_for(lambda: controller_of(cluster) == 1, 1000)
    for broker in (2, 3, 4):
        cluster.start(broker)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    cluster.crash(2)
    assert cluster.wait_for(lambda: cluster.leader() == 3, 25000)
    cluster.start(2)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 10000)
    cluster.crash(1)
    cluster.store.put(REQUEST, coord.encode_data({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}))
    cluster.run_for(5000)
    assert cluster.store.get(REQUEST) is not None and cluster.leader() == 3, "no controller yet"
    assert cluster.wait_for(lambda: controller_of(cluster) in (2, 3, 4), 20000)
    assert cluster.wait_for(lambda: cluster.leader() == 2 and cluster.store.get(REQUEST) is None, 2000)
    assert preferred_elections(cluster)[0][2]["leader"] == 2
