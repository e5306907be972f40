"""The controller, driven through the harness: failover, fencing, and a controller that
is elected again after others changed the partition state in between."""
from broker_core.types import TopicPartition
from tests.harness import Cluster


def controller_of(cluster: Cluster):
    active = [(cluster.nodes[b].controller.epoch, b) for b in cluster.nodes if cluster.nodes[b].controller.active]
    return max(active)[1] if active else None


def test_a_controller_elected_again_reads_the_current_state_not_its_old_cache():
    """Broker 1 controls and leads t-0 (AR [1, 3, 2]). Its session expires: broker 2
    takes over and moves t-0 to broker 3. Broker 2 dies and broker 1 is controller again.
    Its cache from the first term says "1 leads t-0 in epoch 0", and 1 is alive, so
    nothing would correct it: a restarted broker 2 must still be told the truth."""
    cluster = Cluster(assignment={0: [1, 3, 2]})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert controller_of(cluster) == 1 and cluster.leader() == 1
    cluster.store.expire(cluster.sessions[1], reason="test")
    assert cluster.wait_for(lambda: controller_of(cluster) == 2 and cluster.leader() == 3, 5000)
    assert cluster.wait_for(cluster.settled, 10000)
    epoch = cluster.partition(3).leader_epoch
    cluster.crash(2)
    cluster.run_for(17500)            # just before broker 2's session expires
    cluster.block(3, "zk")            # keep broker 3 out of the controller election
    assert cluster.wait_for(lambda: controller_of(cluster) == 1, 5000)
    cluster.run_for(200)
    cluster.heal()
    cluster.start(2)
    assert cluster.wait_for(cluster.settled, 60000), "broker 2 must follow the real leader of t-0"
    assert cluster.partition(2).leader == 3 and cluster.partition(2).leader_epoch >= epoch


def test_a_stale_controller_epoch_is_fenced_by_brokers():
    from broker_core.errors import ErrorCode
    from broker_core.inputs import MessageReceived
    from broker_core.messages import LeaderAndIsr, LeaderAndIsrRequest, PartitionState
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    first = controller_of(cluster)
    cluster.store.expire(cluster.sessions[first], reason="test")
    assert cluster.wait_for(lambda: controller_of(cluster) not in (None, first), 5000)
    cluster.run_for(500)
    broker = next(b for b in cluster.brokers if b != first)
    stale = LeaderAndIsrRequest(999, first, 1, {TopicPartition("t", 0): PartitionState(
        LeaderAndIsr(first, 99, (first,), 1), (1, 2, 3))}, (first,))
    cluster._push(cluster.now + 1, broker, MessageReceived("client", stale))
    assert cluster.wait_for(lambda: 999 in cluster.responses, 1000)
    assert cluster.responses[999].error is ErrorCode.STALE_CONTROLLER_EPOCH
    assert cluster.partition(broker).leader_epoch < 99
