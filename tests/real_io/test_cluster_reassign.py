"""Partition reassignment through the admin API on a real cluster (issue 22): four
`isrlab serve` processes on ZooKeeper (real_io/cluster.py), the request sent at the wire
with the project's codec (confluent-kafka's AdminClient has no
alter_partition_reassignments), while a confluent-kafka producer writes with acks=all.

Kafka 2.7.0: KafkaApis handleAlterPartitionReassignmentsRequest hands the request to the
controller (KafkaController.processApiPartitionReassignment; any other broker answers
NOT_CONTROLLER), which runs onPartitionReassignment: the new replica joins (phase A),
and once it is in the ISR the old one is stopped and its log deleted (phase B,
stopRemovedReplicasOfReassignedPartition); processListPartitionReassignments lists the
partition until then."""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from real_io.cluster import CLIENT_NODE, LocalCluster
from real_io.real_clients import final_read
from real_io.protocol.apis import ApiKey
from tests.real_io.test_cluster_clients import WireClient
from tests.real_io.waiting import wait_until

pytestmark = pytest.mark.slow
BROKERS = (1, 2, 3, 4)
TOPIC = "moved"
NOT_CONTROLLER = 41



def ask(cluster: LocalCluster, broker: int, key: int, body: dict) -> dict | None:
    client = WireClient(cluster.link_address(CLIENT_NODE, f"broker-{broker}"), 15)
    try:
        return client.ask(key, 0, body)
    finally:
        client.close()


def to_controller(cluster: LocalCluster, key: int, body: dict, brokers=BROKERS) -> tuple[int, dict]:
    """What an admin client does: ask; NOT_CONTROLLER sends it to the next broker. Exactly
    one broker answers otherwise."""
    answers = {b: ask(cluster, b, key, body) for b in brokers}
    assert all(a is not None for a in answers.values())
    others = {b: a for b, a in answers.items() if a["error_code"] != NOT_CONTROLLER}
    assert len(others) == 1, answers
    return next(iter(others.items()))


def listed(cluster: LocalCluster, brokers=BROKERS) -> list:
    return to_controller(cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 10000, "topics": None},
                         brokers)[1]["topics"]


def dirs(cluster: LocalCluster, broker: int) -> list[str]:
    return sorted(p.name for p in cluster.broker_dir(broker).rglob(f"{TOPIC}-*") if p.is_dir())


class Writer(threading.Thread):
    """A confluent-kafka producer writing acks=all until stopped; ``acked`` holds what
    the cluster acknowledged. Idempotent: the leader moves during the run, and a request
    the old leader appended but could not answer is retried; without idempotence Kafka
    may then hold the record twice (at least once), with it the new leader answers the
    retry from its producer state (ProducerStateManager), so a duplicate is a bug."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": 30000,
                                  "topic.metadata.refresh.interval.ms": 500, "linger.ms": 5, "log_level": 0})
        self.acked: list[str] = []
        self.failed: list = []
        self.stopping = threading.Event()

    def _delivered(self, error, message) -> None:
        (self.failed if error else self.acked).append(error or message.value().decode())

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            self.producer.produce(TOPIC, f"v{i}".encode(), partition=0, on_delivery=self._delivered)
            self.producer.poll(0.01)
            i += 1
        self.producer.flush(40)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=len(BROKERS), stop_timeout_s=10) as running:
        yield running


def test_reassign_through_the_api_while_producing(cluster):
    """The new replica is on a broker that is not the controller (it is paused a moment);
    the replica removed is the first, the partition's leader."""
    controller = to_controller(cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 10000, "topics": None})[0]
    new = max(b for b in BROKERS if b != controller)
    origin = [b for b in BROKERS if b != new]
    removed, target = origin[0], [new, *origin[1:]]
    others = [b for b in BROKERS if b != new]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[origin])])[TOPIC].result(30)
    writer = Writer(cluster.bootstrap)
    writer.start()
    try:
        assert wait_until(lambda: len(writer.acked) > 200)
        assert wait_until(lambda: all(dirs(cluster, b) == [f"{TOPIC}-0"] for b in origin))
        # The new broker paused: the controller still counts it live (its ZooKeeper session
        # holds), so the request is taken, but it cannot catch up: in progress for sure.
        cluster.pause(new)
        try:
            _, answer = to_controller(cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
                "timeout_ms": 10000, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "replicas": target}]}]}, others)
            assert answer["error_code"] == 0
            assert answer["responses"] == [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 0, "error_message": None}]}]
            assert listed(cluster, others) == [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "replicas": [*target, removed], "adding_replicas": [new],
                 "removing_replicas": [removed]}]}]
        finally:
            cluster.resume(new)
        assert wait_until(lambda: listed(cluster) == [], 60)
        assert wait_until(lambda: dirs(cluster, removed) == [], 30)  # the old replica's log is deleted
        assert dirs(cluster, new) == [f"{TOPIC}-0"]
        before = len(writer.acked)
        assert wait_until(lambda: len(writer.acked) > before + 100)  # still writing after the move
    finally:
        writer.stopping.set()
        writer.join(60)
    assert not writer.is_alive()
    metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    assert sorted(metadata.replicas) == sorted(target) and metadata.leader in target
    # Up to the high watermark, not a count: a record the log holds that was not
    # acknowledged (or held twice) must not hide the end of the log.
    done = final_read(cluster.bootstrap, [f"{TOPIC}-0"], lambda *event: None, time.monotonic() + 60)
    assert f"{TOPIC}-0" in done, "the partition could not be read to its high watermark"
    read = [value for _offset, value in done[f"{TOPIC}-0"][2]]
    lost = sorted(set(writer.acked) - set(read), key=lambda v: int(v[1:]))
    assert not lost, f"acknowledged records lost: {lost} of {len(writer.acked)}; failed: {writer.failed[:5]}"
    doubled = sorted({v for v in read if read.count(v) > 1}, key=lambda v: int(v[1:]))
    assert not doubled, f"records written twice by an idempotent producer: {doubled}"


def test_bad_input_at_the_wire_gets_kafkas_errors_and_the_broker_goes_on(cluster):
    """KafkaController.validateReplicas / maybeBuildReassignment /
    maybeTriggerPartitionReassignment (2.7.0) through the wire: one answer per partition."""
    _, answer = to_controller(cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 10000, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": []},
                                       {"partition_index": 5, "replicas": None},
                                       {"partition_index": 6, "replicas": [1, 1]}]},
        {"name": "nope", "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in answer["responses"] for p in t["partitions"]}
    assert codes == {(TOPIC, 0): 39, (TOPIC, 5): 85, (TOPIC, 6): 39, ("nope", 0): 3}
    assert listed(cluster) == []
