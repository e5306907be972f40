"""Consumer groups on the cluster of issue 21 (three ``isrlab serve`` brokers on a real
ZooKeeper): a group's coordinator is the leader of its ``__consumer_offsets``
partition; kill -9 that broker and the partition's new leader loads the group's
commits, so a new consumer of the group resumes from them (issue 24: "a coordinator
restart")."""
from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from faults.nodes import broker_node
from real_io.cluster import LocalCluster
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from tests.real_io.test_serve_groups import KP, kafka_python_poll
from tests.real_io.waiting import wait_for

pytestmark = pytest.mark.slow

BROKERS = (1, 2, 3)
SESSION_MS = 6000
CONFIG = {"zookeeper.session.timeout.ms": SESSION_MS, "min.insync.replicas": 2, "replica.fetch.wait.max.ms": 200,
          "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 3,
          "group.initial.rebalance.delay.ms": 0}
FAILOVER_S = SESSION_MS / 1000 + 40  # the dead broker's session expires, the controller elects, the group loads


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("groups"), brokers=len(BROKERS), config=CONFIG, zk_tick_ms=500,
                      stop_timeout_s=10) as running:
        yield running


async def _coordinator(address: str, group: str) -> tuple[int, int]:
    """FindCoordinator at one broker: (error code, node id)."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(apis.encode_request(RequestHeader(ApiKey.FIND_COORDINATOR, 3, 1, "t"),
                                         {"key": group, "key_type": 0}))
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
        _, body = apis.decode_response(ApiKey.FIND_COORDINATOR, 3, await reader.readexactly(size))
        return body["error_code"], body["node_id"]
    finally:
        writer.close()


def coordinator(cluster: LocalCluster, group: str, alive: tuple[int, ...]) -> int | None:
    error, node = asyncio.run(_coordinator(cluster.direct_address(broker_node(alive[0])), group))
    return node if error == 0 and node in alive else None


def test_a_new_coordinator_loads_the_commits_and_a_consumer_resumes_from_them(cluster):
    topic, group = "failover", "failover-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=3)], operation_timeout=30)[topic].result(60)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", request_timeout_ms=10000)
    for i in range(20):
        producer.send(topic, value=f"a{i}".encode(), partition=i % 4)
    producer.flush(30)

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, **KP)
    consumer.subscribe([topic])
    assert len(kafka_python_poll(consumer, 20, 60)) == 20
    consumer.commit()
    consumer.close()
    old = wait_for(lambda: coordinator(cluster, group, BROKERS), 30, "the group's coordinator")

    cluster.kill(old)
    alive = tuple(b for b in BROKERS if b != old)
    new = wait_for(lambda: coordinator(cluster, group, alive), FAILOVER_S, "a new coordinator")
    assert new != old
    for i in range(8):
        producer.send(topic, value=f"b{i}".encode(), partition=i % 4)
    producer.flush(30)
    producer.close(5)

    resumed = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, **KP)
    resumed.subscribe([topic])
    got = kafka_python_poll(resumed, 8, FAILOVER_S)
    got += kafka_python_poll(resumed, 9, 1)
    committed = {p: resumed.committed(TopicPartition(topic, p)) for p in range(4)}
    resumed.close()
    assert sorted(got) == sorted(f"b{i}".encode() for i in range(8))
    assert all(offset is not None and offset >= 5 for offset in committed.values()), committed
