"""Topic deletion and new partitions in a cluster (issue 22): three `isrlab serve`
processes on ZooKeeper (real_io/cluster.py). Kafka 2.7.0: DeleteTopics marks
/admin/delete_topics/<t>; the controller's TopicDeletionManager sends
StopReplica(delete=true) to every replica, each broker deletes the log's directory,
the controller removes the topic's nodes. CreatePartitions rewrites the topic's
assignment; the controller's partition-modification watch brings the new partitions
online (LeaderAndIsr) and every broker's metadata lists them."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

from real_io.cluster import CHROOT, LocalCluster
from tests.real_io.reading import read_assigned
from tests.real_io.test_cluster_clients import leaders_in_metadata
from tests.real_io.waiting import wait_until

pytestmark = pytest.mark.slow
BROKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=len(BROKERS), stop_timeout_s=10) as running:
        yield running



def dirs(cluster: LocalCluster, broker: int, topic: str) -> list[str]:
    return sorted(p.name for p in cluster.broker_dir(broker).rglob(f"{topic}-*") if p.is_dir())


def produce(bootstrap: str, topic: str, partition: int, values: list[str]) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000,
                         "topic.metadata.refresh.interval.ms": 500, "log_level": 0})
    errors: list = []
    for value in values:
        producer.produce(topic, value.encode(), partition=partition, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(30)
    return errors


def zk_nodes(cluster: LocalCluster, *paths: str) -> dict[str, bool]:
    client = KazooClient(hosts=cluster.zk_hosts + CHROOT)
    client.start(timeout=10)
    try:
        return {path: client.exists(path) is not None for path in paths}
    finally:
        client.stop()
        client.close()


def test_deleting_a_replicated_topic_removes_it_from_every_broker(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("rf3", 2, 3)], request_timeout=20)["rf3"].result(timeout=30)
    assert produce(cluster.bootstrap, "rf3", 0, ["a", "b"]) == [None, None]
    assert produce(cluster.bootstrap, "rf3", 1, ["c"]) == [None]
    assert wait_until(lambda: all(dirs(cluster, b, "rf3") == ["rf3-0", "rf3-1"] for b in BROKERS))
    admin.delete_topics(["rf3"], request_timeout=20)["rf3"].result(timeout=30)
    assert wait_until(lambda: all(dirs(cluster, b, "rf3") == [] for b in BROKERS)), {
        b: dirs(cluster, b, "rf3") for b in BROKERS}
    assert wait_until(lambda: "rf3" not in admin.list_topics(timeout=10).topics)
    nodes = ("/brokers/topics/rf3", "/config/topics/rf3", "/admin/delete_topics/rf3")
    assert wait_until(lambda: not any(zk_nodes(cluster, *nodes).values())), zk_nodes(cluster, *nodes)


def test_new_partitions_get_leaders_and_take_records(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("wider", 1, 3)], request_timeout=20)["wider"].result(timeout=30)
    admin.create_partitions([NewPartitions("wider", 3)], request_timeout=20)["wider"].result(timeout=30)
    assert wait_until(lambda: len(admin.list_topics("wider", timeout=10).topics["wider"].partitions) == 3)
    partitions = admin.list_topics("wider", timeout=10).topics["wider"].partitions
    assert all(p.leader in BROKERS and sorted(p.replicas) == list(BROKERS) for p in partitions.values())
    # Each broker's metadata cache learns of the new partitions from its own UpdateMetadata,
    # as in Kafka: a producer that asks a broker not yet told would see one partition and
    # fail partition 2 locally ("Unknown partition"). Wait until every broker knows.
    def every_broker_knows() -> bool:
        known = [leaders_in_metadata(cluster, b, "wider") for b in BROKERS]
        return all(sorted(k) == [0, 1, 2] and set(k.values()) <= set(BROKERS) for k in known)
    assert wait_until(every_broker_knows)
    assert produce(cluster.bootstrap, "wider", 2, ["new"]) == [None]
    records = read_assigned(cluster.bootstrap, [("wider", 2)], 1, 20)
    assert [r.value() for r in records] == [b"new"]
    # acks=all: every replica of the new partition holds the record in its own directory
    assert wait_until(lambda: all("wider-2" in dirs(cluster, b, "wider") for b in BROKERS))


def test_deletion_waits_for_a_killed_replica_and_completes_when_it_is_back(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("waits", 1, 3)], request_timeout=20)["waits"].result(timeout=30)
    assert produce(cluster.bootstrap, "waits", 0, ["x"]) == [None]
    assert wait_until(lambda: all(dirs(cluster, b, "waits") == ["waits-0"] for b in BROKERS))
    controller = admin.list_topics(timeout=10).controller_id
    victim = max(b for b in BROKERS if b != controller)  # a replica's broker, not the controller
    cluster.kill(victim)
    assert wait_until(lambda: victim not in cluster.registered_brokers(), 60)
    admin.delete_topics(["waits"], request_timeout=20)["waits"].result(timeout=30)
    live = [b for b in BROKERS if b != victim]
    assert wait_until(lambda: all(dirs(cluster, b, "waits") == [] for b in live))
    time.sleep(1)
    assert dirs(cluster, victim, "waits") == ["waits-0"]
    assert zk_nodes(cluster, "/brokers/topics/waits")["/brokers/topics/waits"], "deletion must wait for the victim"
    assert cluster.restart(victim)
    assert wait_until(lambda: dirs(cluster, victim, "waits") == [], 60)
    assert wait_until(lambda: not zk_nodes(cluster, "/brokers/topics/waits")["/brokers/topics/waits"])
