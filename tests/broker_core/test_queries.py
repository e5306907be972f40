"""BrokerNode's read-only queries, which the bindings read instead of the node's
internals: each answers what those internals hold, as plain values or frozen records,
and none of them changes the node or emits an effect."""
import dataclasses

import pytest

from broker_core.types import TopicPartition
from tests.harness import Cluster, started_cluster


def test_the_queries_answer_what_the_internals_hold():
    cluster = started_cluster(brokers=(1, 2, 3), partitions=2)
    cluster.produce_and_wait(cluster.leader(0), ["a", "b", "c"])
    cluster.run_for(1000)
    tp = TopicPartition("t", 0)
    for broker, node in cluster.nodes.items():
        assert node.has_partitions()
        assert node.live_brokers() == (1, 2, 3)
        assert node.has_topic("t") and not node.has_topic("other")
        assert node.config_for_topic("t") == node.replicas.config_for("t")
        log = node.replicas.partitions[tp].log
        replica = node.replica_log(tp)
        assert (replica.log_start_offset, replica.log_end_offset, replica.high_watermark) == (
            log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 3, 3)
        assert [r.value for b in replica.batches for r in b.records] == ["a", "b", "c"]
        assert node.replica_log(TopicPartition("t", 9)) is None
        with pytest.raises(dataclasses.FrozenInstanceError):
            replica.high_watermark = 0
    controller = cluster.controller()
    epochs = {b: n.active_controller_epoch() for b, n in cluster.nodes.items()}
    assert epochs == {b: cluster.nodes[b].controller.epoch if b == controller else None for b in cluster.nodes}
    assert epochs[controller] >= 1


def test_the_queries_change_nothing():
    cluster = started_cluster()
    node = cluster.nodes[1]
    before = (node.snapshot(), node.ctx.out, dict(node.metadata))
    node.has_partitions(), node.snapshot_json(), node.replica_log(TopicPartition("t", 0))
    node.active_controller_epoch(), node.live_brokers(), node.has_topic("t"), node.config_for_topic("t")
    assert (node.snapshot(), node.ctx.out, dict(node.metadata)) == before
    assert before[1] == []


def test_a_broker_that_hosts_nothing_yet_answers_empty():
    cluster = Cluster()
    cluster.start(1)
    node = cluster.nodes[1]
    assert not node.has_partitions() and node.snapshot_json() == "{}" and node.snapshot() == {}
    assert node.live_brokers() == () and not node.has_topic("t") and node.active_controller_epoch() is None
