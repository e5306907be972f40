"""Three ``isrlab serve`` processes on one real ZooKeeper replicate over the Kafka wire
protocol (real_io/peer_channels.py, real_io/inter_broker_api.py): a topic with
replication factor 3 created with confluent-kafka's AdminClient, acks=all produces,
every replica's segment files holding the same batches, the ISR of all three, a
consumer reading every record; then kill -9 of the leader, a new leader, a producer
that goes on, nothing acknowledged lost, and the restarted broker back in the ISR.
Also: garbage from a peer, as a request or as a response, never stops a broker."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker_core.errors import ErrorCode
from broker_core.messages import LeaderAndIsr, LeaderAndIsrRequest, PartitionState
from broker_core.types import TopicPartition
from real_io import inter_broker_api
from real_io.broker_process import BrokerProcess
from real_io.ports import free_port
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey
from real_io.protocol.primitives import Writer
from real_io.protocol.record_batch import decode_batches
from tests.real_io.reading import read_assigned
from tests.real_io.waiting import wait_for

BROKERS = (1, 2, 3)
TOPIC = "replicated"
# Short sessions so that a killed broker is noticed in seconds (the session fixture's
# ZooKeeper has a 250 ms tick: 500-5000 ms sessions).
CONFIG = {"zookeeper.session.timeout.ms": 3000, "min.insync.replicas": 2, "replica.fetch.wait.max.ms": 200}


class Cluster:
    def __init__(self, root: Path, zk_hosts: str, profile: str | None = None):
        self.root = root
        self.zk_hosts = zk_hosts
        self.profile = profile
        self.ports = {b: free_port() for b in BROKERS}
        origin = time.monotonic()
        self.brokers = {b: BrokerProcess(
            b, root / f"broker-{b}", self.ports[b], root / f"broker-{b}-trace.jsonl", CONFIG, origin,
            root / f"broker-{b}.stderr", zk=zk_hosts,
            peers={p: f"127.0.0.1:{self.ports[p]}" for p in BROKERS if p != b}, profile=profile) for b in BROKERS}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in BROKERS)

    def start(self, *brokers: int) -> None:
        for b in brokers or BROKERS:
            self.brokers[b].start()
        for b in brokers or BROKERS:
            assert self.brokers[b].wait_ready(60), self.stderr(b)

    def stderr(self, broker: int) -> str:
        return (self.root / f"broker-{broker}.stderr").read_text(errors="replace")

    def stop(self) -> None:
        """One clean stop after the other (brokers stopping at once find their controller
        stopping too, and each retries its controlled shutdown until it gives up); the
        last is killed: with no replica left to lead, its controlled shutdown would retry
        for controlled.shutdown.max.retries x 5 s, as Kafka's does."""
        *first, last = self.brokers.values()
        for process in first:
            process.stop(30)
        last.kill()

    def segments(self, broker: int) -> bytes:
        directory = self.root / f"broker-{broker}" / f"{TOPIC}-0"
        return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))

    def isr_in_zookeeper(self) -> tuple[int, ...]:
        """The partition's ISR as /brokers/topics/<t>/partitions/0/state holds it."""
        client = KazooClient(hosts=self.zk_hosts)
        client.start(timeout=10)
        try:
            data, _ = client.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
        finally:
            client.stop()
            client.close()
        return tuple(sorted(json.loads(data)["isr"]))

    def in_isr(self, admin: AdminClient) -> tuple[int, ...] | None:
        """The ISR as clients see it (Metadata). Under kafka-0.8 a leader's ISR change
        goes to ZooKeeper only and reaches no broker's metadata cache until the
        controller's next request (0.8.2, KAFKA-1367): the ISR is ZooKeeper's there."""
        if self.profile == "kafka-0.8":
            return self.isr_in_zookeeper()
        state = partition_state(admin)
        return state[1] if state else None

    def trace(self, broker: int) -> list[dict]:
        lines = (self.root / f"broker-{broker}-trace.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]


@pytest.fixture(params=[None])
def cluster(request, tmp_path, zk_hosts):
    """Three brokers, started; ``request.param``: their profile (None: serve's default)."""
    cluster = Cluster(tmp_path, zk_hosts, request.param)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def partition_state(admin: AdminClient):
    """(leader, isr, replicas) of the topic's partition 0 as Metadata names them, or None."""
    topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
    if topic is None or topic.error is not None or 0 not in topic.partitions:
        return None
    partition = topic.partitions[0]
    return partition.leader, tuple(sorted(partition.isrs)), tuple(sorted(partition.replicas))



def produce(bootstrap: str, values: list[str]) -> dict[str, int]:
    """acks=all; the offsets of the acknowledged values."""
    acknowledged: dict[str, int] = {}
    errors = []

    def delivered(error, message):
        if error is None:
            acknowledged[message.value().decode()] = message.offset()
        else:
            errors.append(error)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                         "enable.idempotence": True, "linger.ms": 5})
    for value in values:
        producer.produce(TOPIC, value.encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not errors, errors
    return acknowledged


def read_all(bootstrap: str, expected: int, timeout_s: float = 30) -> list[str]:
    return [m.value().decode() for m in read_assigned(bootstrap, [(TOPIC, 0)], expected, timeout_s)]


def same_batches_everywhere(cluster: Cluster, brokers, records: int) -> bool:
    """Every replica's segments hold the same batches (a follower stores the leader's
    bytes as they are), with ``records`` records."""
    stored = {b: cluster.segments(b) for b in brokers}
    first = stored[brokers[0]]
    if any(data != first for data in stored.values()):
        return False
    return sum(len(batch.records) for batch in decode_batches(first)) == records


@pytest.mark.slow
@pytest.mark.parametrize("cluster", ["kafka-2.7", "kafka-3.0", "kafka-0.8"], indirect=True)
def test_three_brokers_replicate_fail_over_and_catch_up(cluster):
    """Every profile: kafka-3.0's followers truncate by the DivergingEpoch of Fetch 12,
    kafka-0.8's write ISR changes to ZooKeeper themselves and fetch without epochs."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)], operation_timeout=30)
    futures[TOPIC].result(60)
    state = wait_for(lambda: (s := partition_state(admin)) and s[1] == BROKERS and s, 30, "an ISR of all three")
    assert state[2] == BROKERS

    first = [f"before-{i}" for i in range(300)]
    acknowledged = produce(cluster.bootstrap, first)
    assert sorted(acknowledged.values()) == list(range(300))
    wait_for(lambda: same_batches_everywhere(cluster, BROKERS, 300), 30, "the same batches on every replica")
    assert cluster.in_isr(admin) == BROKERS
    assert read_all(cluster.bootstrap, 300) == first

    leader = state[0]
    cluster.brokers[leader].kill()
    survivors = tuple(b for b in BROKERS if b != leader)
    new_state = wait_for(lambda: (s := partition_state(admin)) and s[0] in survivors and s, 30, "a new leader")
    assert leader not in new_state[1]
    second = [f"after-{i}" for i in range(200)]
    acknowledged.update(produce(cluster.bootstrap, second))
    assert len(acknowledged) == 500

    cluster.start(leader)
    wait_for(lambda: cluster.in_isr(admin) == BROKERS, 60, "the restarted broker back in the ISR")
    wait_for(lambda: same_batches_everywhere(cluster, BROKERS, 500), 30, "the restarted broker caught up")
    values = read_all(cluster.bootstrap, 500)
    assert set(values) >= set(acknowledged), "an acknowledged record was lost"
    by_offset = sorted(acknowledged, key=acknowledged.get)
    assert values == by_offset  # each acknowledged record at the offset it was acknowledged at


def _frame_request(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    """A request frame with a proper header and ``body`` as its body's bytes."""
    writer = Writer()
    writer.int16(api_key)
    writer.int16(version)
    writer.int32(correlation_id)
    writer.string("garbage")
    if apis.request_header_version(api_key, version) >= 2:
        writer.tagged_fields({})
    return apis.frame(writer.getvalue() + body)


def _exchange(port: int, frame: bytes, api_key: int, version: int) -> dict | None:
    """Send one frame; the decoded answer, or None when the broker closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = connection.recv(65536)
            if not chunk:
                return None
            data += chunk
    return apis.decode_response(api_key, version, data[4:])[1]


def _metadata_answers(port: int) -> bool:
    body = _exchange(port, apis.encode_request(apis.RequestHeader(ApiKey.METADATA, 9, 1, "check"),
                                               {"topics": None, "allow_auto_topic_creation": False,
                                                "include_cluster_authorized_operations": False,
                                                "include_topic_authorized_operations": False}),
                     ApiKey.METADATA, 9)
    return body is not None and len(body["brokers"]) >= 1


@pytest.mark.slow
def test_garbage_and_stale_controller_requests_do_not_stop_a_broker(cluster):
    port = cluster.ports[2]
    for key, version in ((ApiKey.LEADER_AND_ISR, 4), (ApiKey.UPDATE_METADATA, 6), (ApiKey.STOP_REPLICA, 3),
                         (ApiKey.ALTER_ISR, 0), (ApiKey.CONTROLLED_SHUTDOWN, 3)):
        for garbage in (b"", b"\xff" * 40, bytes(range(256))):
            assert _exchange(port, _frame_request(key, version, garbage), key, version) is None
    # A well-formed LeaderAndIsr from a controller epoch older than the cluster's is fenced.
    stale = LeaderAndIsrRequest(1, 3, 0, {TopicPartition("x", 0): PartitionState(LeaderAndIsr(3, 5, (3,), 0, 0),
                                                                                (3,))}, (3,))
    body = inter_broker_api.leader_and_isr_request_body(stale, {})
    answer = _exchange(port, apis.encode_request(apis.RequestHeader(ApiKey.LEADER_AND_ISR, 4, 9, "old"), body),
                       ApiKey.LEADER_AND_ISR, 4)
    assert answer["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert all(_metadata_answers(cluster.ports[b]) for b in BROKERS)
    assert all(cluster.brokers[b].alive for b in BROKERS)


class GarbagePeer:
    """A "broker" that answers every request with a frame that does not decode."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests = 0
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.server.settimeout(0.2)
        while not self._stop:
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(5)
                try:
                    size = int.from_bytes(connection.recv(4), "big")
                    request = b""
                    while len(request) < size:
                        request += connection.recv(size - len(request))
                    self.requests += 1
                    correlation_id = request[4:8]
                    connection.sendall(apis.frame(correlation_id + b"\xff\xfe" * 9))
                    connection.recv(1)  # until the broker closes
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self.thread.join(5)
        self.server.close()


@pytest.mark.slow
def test_a_response_that_does_not_decode_closes_that_connection_only(tmp_path, zk_hosts):
    """Broker 1 with a --peer 2 that answers garbage: a fake registration of broker 2
    makes the controller send it UpdateMetadata; each answer closes the connection (a
    message_dropped event says why) and broker 1 goes on serving."""
    peer = GarbagePeer()
    port = free_port()
    broker = BrokerProcess(1, tmp_path / "broker-1", port, tmp_path / "trace.jsonl", CONFIG, time.monotonic(),
                           tmp_path / "broker-1.stderr", zk=zk_hosts, peers={2: f"127.0.0.1:{peer.port}"})
    fake = KazooClient(hosts=zk_hosts)
    try:
        broker.start()
        assert broker.wait_ready(60), (tmp_path / "broker-1.stderr").read_text()
        fake.start(timeout=10)
        fake.create("/brokers/ids/2", json.dumps({"broker_id": 2, "session": fake.client_id[0]}).encode(),
                    ephemeral=True)
        wait_for(lambda: peer.requests >= 1, 30, "a request to the garbage peer")

        def dropped():
            lines = (tmp_path / "trace.jsonl").read_text().splitlines()
            events = [json.loads(line) for line in lines if line.endswith("}")]
            return [e for e in events if e["type"] == "message_dropped" and e.get("dst") == 2
                    and "ended before the response" in e["reason"]]
        events = wait_for(dropped, 30, "the dropped answer")
        assert "ProtocolError" in events[0]["reason"]
        assert broker.alive and _metadata_answers(port)
    finally:
        fake.stop()
        fake.close()
        broker.stop(30)
        peer.close()
