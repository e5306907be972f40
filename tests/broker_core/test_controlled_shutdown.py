"""Controlled shutdown as Kafka's controller does it: who gets which request, and which
brokers leave the ISRs."""
import pytest

from broker_core.errors import ErrorCode
from broker_core.inputs import MessageReceived, ShutdownRequested
from broker_core.messages import LeaderAndIsrRequest, StopReplicaRequest, StopReplicaResponse
from broker_core.types import TopicPartition
from tests.harness import Cluster

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


class RecordingCluster(Cluster):
    """Keeps every message a broker was handed, and which partitions its fetchers
    served right after it handled a StopReplica."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received: list[tuple[int, int, object]] = []
        self.fetching_after_stop: list[set] = []

    def _deliver(self, broker: int, event) -> None:
        super()._deliver(broker, event)
        if isinstance(event, MessageReceived):
            self.received.append((self.now, broker, event.message))
            node = self.nodes.get(broker)
            if isinstance(event.message, StopReplicaRequest) and node is not None:
                self.fetching_after_stop.append(
                    {tp for f in node.fetchers.fetchers.values() for tp in f.states})

    def messages(self, broker: int, kind: type, since: int) -> list:
        return [m for t, b, m in self.received if b == broker and type(m) is kind and t >= since]


def _shut_down(cluster: Cluster, broker: int) -> int:
    cluster.run_for(100)  # the broker knows the controller from UpdateMetadata
    start = cluster.now
    cluster._push(cluster.now, broker, ShutdownRequested())
    return start


def _store_state(cluster: Cluster, tp: TopicPartition):
    controller = cluster.nodes[cluster.controller()].controller
    return controller.states[tp]


@pytest.mark.parametrize("profile", ["kafka-0.8", "kafka-2.7"])
def test_a_shutting_down_broker_gets_stop_replica_for_what_it_follows_and_is_told_only_what_it_led(profile):
    """2.7.0 core/src/main/scala/kafka/controller/KafkaController.scala doControlledShutdown
    (with ReplicaStateMachine.scala OfflineReplica, PartitionStateMachine.scala
    doElectLeaderForPartitions, Election.scala leaderForControlledShutdown); 0.8.2.2
    controller/KafkaController.scala shutdownBroker (with ReplicaStateMachine OfflineReplica,
    ControlledShutdownLeaderSelector). Broker 2 follows A and leads B. A's new state (2 out
    of the ISR) goes to the other replicas only, and 2 gets StopReplica(delete=false) for A;
    B's new leader goes to B's live-or-shutting-down replicas, 2 among them, in both versions."""
    cluster = RecordingCluster(partitions=2, assignment={0: [1, 2, 3], 1: [2, 3, 1]}, profile=profile)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(0) and cluster.settled(1), 10000)
    assert cluster.controller() == 1 and cluster.leader(0) == 1 and cluster.leader(1) == 2
    epoch_a = cluster.partition(2, 0).leader_epoch
    since = _shut_down(cluster, 2)
    assert cluster.wait_for(lambda: 2 not in cluster.nodes, 10000)

    stops = cluster.messages(2, StopReplicaRequest, since)
    assert len(stops) == 1 and not stops[0].delete_partitions
    expected_epoch = -1 if profile == "kafka-0.8" else epoch_a  # KIP-570 (2.6+): the epoch before the ISR change
    assert dict(stops[0].partitions) == {A: expected_epoch}
    told = [tp for m in cluster.messages(2, LeaderAndIsrRequest, since) for tp in m.partitions]
    assert A not in told and B in told
    for other in (1, 3):
        assert A in [tp for m in cluster.messages(other, LeaderAndIsrRequest, since) for tp in m.partitions]
    assert 2 not in _store_state(cluster, A).isr
    assert _store_state(cluster, B).leader == 3 and 2 not in _store_state(cluster, B).isr
    assert cluster.traced("controlled_shutdown_completed")


def test_08_stop_replica_stops_the_followers_fetcher():
    """0.8.2.2 core/src/main/scala/kafka/server/ReplicaManager.scala stopReplicas: no epoch
    to check; the fetchers of the partitions stop and the partition stays (delete=false)."""
    cluster = RecordingCluster(partitions=2, assignment={0: [1, 2, 3], 1: [2, 3, 1]}, profile="kafka-0.8")
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(0) and cluster.settled(1), 10000)
    _shut_down(cluster, 2)
    assert cluster.wait_for(lambda: cluster.traced("replicas_stopped"), 10000)
    assert A not in cluster.fetching_after_stop[0]
    _, broker, fields = cluster.traced("replicas_stopped")[0]
    assert broker == 2 and fields["partitions"] == [str(A)] and fields["ignored"] == []
    answers = [m for t, b, m in cluster.received if b == 1 and type(m) is StopReplicaResponse]
    assert answers and answers[0].partitions == {A: ErrorCode.NONE}


def test_27_stop_replica_with_the_followers_own_epoch_is_ignored():
    """2.7.0 core/src/main/scala/kafka/server/ReplicaManager.scala stopReplicas (KIP-570):
    a request epoch equal to the partition's is FENCED_LEADER_EPOCH and the fetcher keeps
    running. doControlledShutdown takes the epoch before OfflineReplica bumps it, so an
    up-to-date follower ignores it (Kafka until KAFKA-13972 accepted an equal epoch)."""
    cluster = RecordingCluster(partitions=2, assignment={0: [1, 2, 3], 1: [2, 3, 1]}, profile="kafka-2.7")
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(0) and cluster.settled(1), 10000)
    _shut_down(cluster, 2)
    assert cluster.wait_for(lambda: cluster.traced("replicas_stopped"), 10000)
    assert A in cluster.fetching_after_stop[0]
    _, broker, fields = cluster.traced("replicas_stopped")[0]
    assert broker == 2 and fields["partitions"] == [] and fields["ignored"] == [str(A)]
    answers = [m for t, b, m in cluster.received if b == 1 and type(m) is StopReplicaResponse]
    assert answers and answers[0].partitions == {A: ErrorCode.FENCED_LEADER_EPOCH}


def test_stop_replica_with_a_newer_epoch_stops_the_fetcher_and_an_old_controller_is_refused():
    """2.7.0 ReplicaManager.stopReplicas: a newer request epoch stops the partition's
    fetcher and keeps the partition; an older controller epoch is STALE_CONTROLLER_EPOCH."""
    cluster = RecordingCluster(partitions=1, assignment={0: [1, 2, 3]})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 10000)
    epoch = cluster.partition(2).leader_epoch
    controller_epoch = cluster.nodes[1].controller.epoch
    cid = cluster.next_correlation_id()
    cluster.send(2, StopReplicaRequest(cid, 1, controller_epoch - 1, False, {A: epoch + 1}))
    assert cluster.wait_for(lambda: cid in cluster.responses, 1000)
    assert cluster.responses[cid].error is ErrorCode.STALE_CONTROLLER_EPOCH
    assert A in cluster.fetching_after_stop[-1]
    cid = cluster.next_correlation_id()
    cluster.send(2, StopReplicaRequest(cid, 1, controller_epoch, False, {A: epoch + 1}))
    assert cluster.wait_for(lambda: cid in cluster.responses, 1000)
    assert cluster.responses[cid].partitions == {A: ErrorCode.NONE}
    assert A not in cluster.fetching_after_stop[-1] and cluster.partition(2) is not None


@pytest.mark.parametrize("profile", ["kafka-0.8", "kafka-2.7"])
def test_a_controlled_shutdown_election_drops_every_shutting_down_broker_from_the_isr(profile):
    """2.7.0 core/src/main/scala/kafka/controller/Election.scala leaderForControlledShutdown
    (newIsr: the ISR without every shutting-down broker); 0.8.2.2 controller/
    PartitionLeaderSelector.scala ControlledShutdownLeaderSelector, likewise. Broker 3 asks
    first and stays up (it still leads B, whose other replica 4 is dead); it follows A
    again, and A's leader 2 takes it back into the ISR. Then 2 shuts down too: A's new
    ISR must lack 3 as well as 2."""
    cluster = RecordingCluster(brokers=(1, 2, 3, 4), partitions=2, assignment={0: [3, 2, 1], 1: [3, 4]},
                               profile=profile)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(0, [1, 2, 3]) and cluster.settled(1, [3, 4]), 10000)
    assert cluster.controller() == 1
    controller = cluster.nodes[1].controller
    cluster.crash(4)
    assert cluster.wait_for(lambda: 4 not in controller.live and controller.states[B].isr == (3,), 30000)
    _shut_down(cluster, 3)
    assert cluster.wait_for(lambda: cluster.leader(0) == 2 and 3 in cluster.partition(2).isr, 4000)
    assert 3 in controller.shutting_down and 3 in cluster.nodes
    _shut_down(cluster, 2)
    assert cluster.wait_for(lambda: controller.states[A].leader == 1, 4000)
    assert controller.states[A].isr == (1,)
