"""BrokerNode.snapshot_json, which the simulation's sampler writes as replica_state lines:
written by one %-format per replica from its fields, the very bytes the trace's encoder
writes for the broker's snapshot (BrokerNode.snapshot, which fault triggers and the
settle check read)."""
import io

from analysis.trace import TraceWriter
from broker_core.partition import Partition, Role
from broker_core.types import TopicPartition
from tests.harness import Cluster


def assert_written_as_the_snapshot(node) -> None:
    fast, encoded = io.StringIO(), io.StringIO()
    TraceWriter(fast, "run", 3, "sim").write_json(
        100, "broker-1", "replica_state", '{"partitions":%s}' % node.snapshot_json())
    TraceWriter(encoded, "run", 3, "sim").write(100, "broker-1", "replica_state", {"partitions": node.snapshot()})
    assert fast.getvalue() == encoded.getvalue()


def test_every_replica_state_of_a_cluster_under_faults_is_written_as_its_snapshot():
    # twelve partitions: the encoder orders "t-10" before "t-2", TopicPartition does not
    cluster = Cluster(partitions=12)
    cluster.start_all()
    seen_roles = set()

    def check_all():
        for node in cluster.nodes.values():
            if node is not None:
                seen_roles.update(p.role for p in node.replicas.partitions.values())
                assert_written_as_the_snapshot(node)
    for _ in range(30):  # from the start, while the controller hands out leadership
        cluster.run_for(20)
        check_all()
    assert cluster.wait_for(lambda: all(cluster.leader(p) is not None for p in range(12)))
    cluster.produce_and_wait(cluster.leader(0), ["a", "b", "c"])
    check_all()
    cluster.isolate(1)
    cluster.run_for(20000)  # the ISR shrinks, leaders move
    check_all()
    cluster.crash(2)
    cluster.run_for(20000)
    check_all()
    assert seen_roles == {Role.LEADER, Role.FOLLOWER}, seen_roles


def test_offline_replicas_and_names_the_encoder_escapes_or_orders_apart():
    cluster = Cluster(partitions=1)
    cluster.start_all()
    assert cluster.wait_for(lambda: bool(cluster.nodes[1].replicas.partitions))
    node = cluster.nodes[1]
    hosted = next(iter(node.replicas.partitions.values()))
    # escaped names, and a name whose JSON string sorts apart from it: the encoder orders
    # by the name itself, where "x-1" comes before "x-1 -2" (and '"x-1"' after '"x-1 -2"')
    for odd in (TopicPartition('q"\u00e9', 3), TopicPartition("x", 1), TopicPartition("x-1 ", 2)):
        offline = Partition(1, odd, hosted.log, hosted.config)  # hosted, no leader known yet
        assert offline.role is Role.OFFLINE
        node.replicas.partitions[odd] = offline
    assert_written_as_the_snapshot(node)
