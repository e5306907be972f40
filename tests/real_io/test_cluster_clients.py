"""Issue 21's cluster tests with real clients: one local cluster (real_io/cluster.py) of
three brokers with a fault proxy on every link, RF 3, min.insync.replicas 2, acks=all,
driven by confluent-kafka and kafka-python.

- kill -9 of a partition's leader while both clients produce: both go on after the
  election, nothing acknowledged is lost, and the killed broker, restarted, recovers
  its log from its files and rejoins the ISR;
- kill -9 of the controller: another broker becomes controller and moves the
  leadership of the partitions the dead one led;
- the leader of a partition cut from ZooKeeper (both ways, longer than its session):
  leadership moves, an acks=all write sent to the old leader is never acknowledged,
  and after the heal the old leader's files end where the new leader's do.

The module shares one cluster (starting one takes seconds); each test uses topics of its
own and leaves every broker running and every link healed (the ``healthy`` fixture
checks this before each test, and repairs it after a failed one).
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kazoo.client import KazooClient

from broker_core.errors import ErrorCode
from broker_core.records import RecordBatch, Records
from real_io.cluster import CHROOT, CLIENT_NODE, LocalCluster
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.protocol.record_batch import decode_batches, encode_batch
from tests.real_io.reading import read_assigned
from tests.real_io.waiting import wait_for

pytestmark = pytest.mark.slow

BROKERS = (1, 2, 3)
SESSION_MS = 6000
# ZooKeeper grants sessions of 2 to 20 ticks: 500 ms ticks allow the 6 s session.
ZK_TICK_MS = 500
CONFIG = {"zookeeper.session.timeout.ms": SESSION_MS, "min.insync.replicas": 2,
          "replica.fetch.wait.max.ms": 200}
ELECTION_S = SESSION_MS / 1000 + 30  # a dead broker's session expires, then the controller acts
# What a leader that cannot reach min ISR answers an acks=all write it appended.
NOT_WRITTEN = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
QUIET = {"log_level": 0}  # librdkafka's own log of brokers going away is expected here


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers behind the fault proxy. At the end they stop one after another
    with a controlled shutdown, but the last is killed: with no replica left to hand
    over, its controlled shutdown would retry until the stop timeout. Leaving the block
    stops whatever is still running, ZooKeeper and the proxy included."""
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=len(BROKERS), config=CONFIG,
                      zk_tick_ms=ZK_TICK_MS, proxy=True, stop_timeout_s=10) as running:
        yield running
        *first, last = BROKERS
        for broker in first:
            running.brokers[broker].stop(10)
        running.kill(last)


@pytest.fixture(scope="module")
def zk(cluster):
    """A kazoo client in the brokers' chroot, as an operator's tools read the metadata."""
    client = KazooClient(hosts=cluster.zk_hosts + CHROOT)
    client.start(timeout=10)
    yield ZooKeeperView(client)
    client.stop()
    client.close()


@pytest.fixture
def healthy(cluster, zk):
    """Every broker running and registered, no cut in the proxy: before the test, and
    again after it (a failed test must not fail the next one)."""
    _restore(cluster)
    yield cluster
    _restore(cluster)


def _restore(cluster: LocalCluster) -> None:
    assert cluster.proxy is not None
    cluster.proxy.heal()
    for broker, state in cluster.states().items():
        if state == "paused":
            cluster.resume(broker)
        elif state != "alive":
            restart(cluster, broker)
    wait_for(lambda: cluster.registered_brokers() == list(BROKERS), ELECTION_S, "every broker registered")


class ZooKeeperView:
    """What the controller and the leaders wrote, in Kafka's layout."""

    def __init__(self, client: KazooClient):
        self.client = client

    def _json(self, path: str) -> dict | None:
        if self.client.exists(path) is None:
            return None
        return json.loads(self.client.get(path)[0])

    def controller(self) -> int | None:
        data = self._json("/controller")
        return None if data is None else data["brokerid"]

    def controller_epoch(self) -> int:
        return int(self.client.get("/controller_epoch")[0])

    def state(self, topic: str, partition: int) -> dict | None:
        """leader, leader_epoch, isr (sorted) of the partition."""
        data = self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if data is None:
            return None
        return {"leader": data["leader"], "leader_epoch": data["leader_epoch"], "isr": tuple(sorted(data["isr"]))}

    def full_isr(self, topic: str, partitions: int) -> bool:
        return all((s := self.state(topic, p)) is not None and s["isr"] == BROKERS for p in range(partitions))



def restart(cluster: LocalCluster, broker: int) -> None:
    """A killed broker's session holds /brokers/ids/<id> until it expires, and a broker
    started before that exits (as Kafka 2.7's does): wait for the expiry first."""
    wait_for(lambda: broker not in cluster.registered_brokers(), ELECTION_S, f"broker {broker}'s session to expire")
    assert cluster.restart(broker, 60), cluster.brokers[broker].last_words()
    wait_for(lambda: broker in cluster.registered_brokers(), 30, f"broker {broker} registered again")


def create_topic(cluster: LocalCluster, zk: ZooKeeperView, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)],
                        operation_timeout=30)[topic].result(60)
    wait_for(lambda: zk.full_isr(topic, partitions), 30, f"{topic}'s ISRs of all three")


def segments(cluster: LocalCluster, broker: int, topic: str, partition: int) -> bytes:
    directory = cluster.broker_dir(broker) / "data" / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def same_files_everywhere(cluster: LocalCluster, topic: str, partition: int) -> int | None:
    """The number of records when every replica's segments hold the same bytes (a
    follower stores the leader's batches as they are), else None."""
    stored = {segments(cluster, b, topic, partition) for b in BROKERS}
    if len(stored) != 1:
        return None
    return sum(len(batch.records) for batch in decode_batches(stored.pop()))


def trace_events(cluster: LocalCluster, broker: int, after_line: int = 0) -> list[dict]:
    lines = (cluster.broker_dir(broker) / "trace.jsonl").read_text().splitlines()[after_line:]
    return [json.loads(line) for line in lines if line.endswith("}")]


# -- producers ---------------------------------------------------------------------------
class LoadProducer:
    """A thread producing numbered values to one partition until stopped, acks=all and
    idempotent; ``acknowledged`` maps each acknowledged value to its offset."""

    def __init__(self, name: str, topic: str, partition: int):
        self.name, self.topic, self.partition = name, topic, partition
        self.acknowledged: dict[str, int] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "LoadProducer":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.name} did not finish within {timeout_s}s"

    def _acked(self, value: str, offset: int) -> None:
        self.acknowledged[value] = offset

    def _failed(self, value: str, error) -> None:
        self.errors.append(f"{value}: {error}")

    def _run(self) -> None:
        raise NotImplementedError


class ConfluentLoad(LoadProducer):
    def __init__(self, bootstrap: str, topic: str, partition: int = 0):
        super().__init__("confluent", topic, partition)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": 60000, "linger.ms": 5, **QUIET})

    def _run(self) -> None:
        def delivered(error, message):
            value = message.value().decode()
            if error is None:
                self._acked(value, message.offset())
            else:
                self._failed(value, error)
        while not self._stop.is_set():
            self.producer.produce(self.topic, f"{self.name}-{self.sent}".encode(), partition=self.partition,
                                  on_delivery=delivered)
            self.sent += 1
            self.producer.poll(0.005)
        self.producer.flush(70)  # message.timeout.ms bounds each message's fate


class KafkaPythonLoad(LoadProducer):
    def __init__(self, bootstrap: str, topic: str, partition: int = 0):
        super().__init__("kafka-python", topic, partition)
        # Idempotent by default (InitProducerId); retries until delivery.timeout.ms.
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                      request_timeout_ms=10000, delivery_timeout_ms=60000)
        assert self.producer.config["enable_idempotence"]

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"{self.name}-{self.sent}"
            future = self.producer.send(self.topic, value.encode(), partition=self.partition)
            future.add_callback(lambda metadata, v=value: self._acked(v, metadata.offset))
            future.add_errback(lambda error, v=value: self._failed(v, error))
            self.sent += 1
            time.sleep(0.005)
        self.producer.flush(70)
        self.producer.close(10)


def produce_all(bootstrap: str, topic: str, partition: int, values: list[str]) -> dict[str, int]:
    """kafka-python, acks=all: every value acknowledged; their offsets."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=10000,
                             delivery_timeout_ms=60000)
    try:
        futures = {value: producer.send(topic, value.encode(), partition=partition) for value in values}
        producer.flush(70)
        return {value: future.get(0).offset for value, future in futures.items()}
    finally:
        producer.close(10)


# -- reading back --------------------------------------------------------------------------
def confluent_read(bootstrap: str, topic: str, partition: int, expected: int, timeout_s: float = 30) -> list[str]:
    return [m.value().decode() for m in read_assigned(bootstrap, [(topic, partition)], expected, timeout_s, **QUIET)]


def kafka_python_read(bootstrap: str, topic: str, partition: int, expected: int, timeout_s: float = 30) -> list[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=500, request_timeout_ms=10000)
    consumer.assign([KTopicPartition(topic, partition)])
    consumer.seek_to_beginning()
    values, deadline = [], time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        values.extend(record.value.decode() for record in consumer)
    consumer.close()
    return values


def assert_nothing_acknowledged_lost(values: list[str], acknowledged: dict[str, int]) -> None:
    """Every acknowledged value is read back at the offset it was acknowledged at."""
    lost = [value for value, offset in acknowledged.items() if offset >= len(values) or values[offset] != value]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"


# -- the tests ---------------------------------------------------------------------------------
def test_kill_9_of_the_leader_under_load_loses_nothing_acknowledged(healthy, zk):
    """Both clients produce to one partition; its leader is SIGKILLed; both go on
    producing through the new leader; the killed broker, restarted, recovers its log
    from its files (no clean shutdown) and rejoins the ISR holding the same bytes."""
    cluster, topic = healthy, "under-load"
    create_topic(cluster, zk, topic, 1)
    producers = [ConfluentLoad(cluster.bootstrap, topic).start(), KafkaPythonLoad(cluster.bootstrap, topic).start()]
    try:
        wait_for(lambda: all(len(p.acknowledged) >= 100 for p in producers), 60, "100 acknowledgements each")
        before = zk.state(topic, 0)
        leader = before["leader"]
        trace_lines = len(trace_events(cluster, leader))
        cluster.kill(leader)
        acked_at_kill = {p.name: len(p.acknowledged) for p in producers}
        after = wait_for(lambda: (s := zk.state(topic, 0)) and s["leader"] not in (leader, -1) and s,
                         ELECTION_S, "a new leader")
        assert after["leader_epoch"] > before["leader_epoch"] and leader not in after["isr"]
        wait_for(lambda: all(len(p.acknowledged) >= acked_at_kill[p.name] + 100 for p in producers), 60,
                 "100 more acknowledgements each after the election")
    finally:
        for producer in producers:
            producer.stop()
    acknowledged = {v: o for p in producers for v, o in p.acknowledged.items()}
    assert len(set(acknowledged.values())) == len(acknowledged), "two acknowledged records at one offset"

    restart(cluster, leader)
    wait_for(lambda: zk.full_isr(topic, 1), 60, f"broker {leader} back in the ISR")
    recovered = [e for e in trace_events(cluster, leader, trace_lines)
                 if e["type"] == "log_recovered" and e["partition"] == f"{topic}-0"]
    assert recovered and recovered[0]["clean_shutdown"] is False and recovered[0]["log_end_offset"] >= 200
    records = wait_for(lambda: same_files_everywhere(cluster, topic, 0), 30, "the same bytes on every replica")
    assert records >= len(acknowledged)

    for read in (confluent_read, kafka_python_read):
        values = read(cluster.bootstrap, topic, 0, records)
        assert len(values) == records, read.__name__
        assert_nothing_acknowledged_lost(values, acknowledged)
        assert len(set(values)) == len(values), "a record stored twice (idempotence)"


def test_the_controllers_death_elects_a_new_controller(healthy, zk):
    """kill -9 of the controller: another broker wins /controller with a higher epoch
    and, as controller, moves the leadership of the partitions the dead one led (a
    partition per broker: one of them was the controller's); kafka-python then writes
    to every partition, and the restarted broker is brought back into every ISR."""
    cluster, topic, partitions = healthy, "controller-death", 3
    create_topic(cluster, zk, topic, partitions)
    before = {p: produce_all(cluster.bootstrap, topic, p, [f"before-{p}-{i}" for i in range(20)])
              for p in range(partitions)}
    controller, epoch = zk.controller(), zk.controller_epoch()
    led = [p for p in range(partitions) if zk.state(topic, p)["leader"] == controller]
    assert led, "the controller leads no partition: the test would not show a leader moved by the new one"
    cluster.kill(controller)

    successor = wait_for(lambda: (c := zk.controller()) not in (None, controller) and c, ELECTION_S,
                         "a new controller")
    assert zk.controller_epoch() > epoch
    wait_for(lambda: all((s := zk.state(topic, p))["leader"] not in (controller, -1) and controller not in s["isr"]
                         for p in range(partitions)), 30, "new leaders without the dead controller")
    after = {p: produce_all(cluster.bootstrap, topic, p, [f"after-{p}-{i}" for i in range(20)])
             for p in range(partitions)}

    restart(cluster, controller)
    wait_for(lambda: zk.full_isr(topic, partitions), 60, f"broker {controller} back in every ISR")
    assert zk.controller() == successor  # a broker joining does not take the controller's place
    for p in range(partitions):
        records = wait_for(lambda: same_files_everywhere(cluster, topic, p), 30, f"partition {p}'s replicas equal")
        values = kafka_python_read(cluster.bootstrap, topic, p, records)
        assert len(values) == records == 40
        assert_nothing_acknowledged_lost(values, {**before[p], **after[p]})


class WireClient:
    """One connection to a broker at the wire: what no client library lets a test force
    (a request to one chosen broker, whatever the metadata says)."""

    def __init__(self, address: str, timeout_s: float):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation = 0

    def ask(self, key: int, version: int, body: dict) -> dict | None:
        """The answer, or None when none came within the timeout."""
        self.correlation += 1
        self.sock.sendall(apis.encode_request(RequestHeader(key, version, self.correlation, "cluster-test"), body))
        try:
            size = struct.unpack(">i", self._exactly(4))[0]
            correlation, response = apis.decode_response(key, version, self._exactly(size))
        except TimeoutError:
            return None
        assert correlation == self.correlation
        return response

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def leaders_in_metadata(cluster: LocalCluster, broker: int, topic: str) -> dict[int, int]:
    """Each partition's leader as ``broker`` answers Metadata (its own cache); no entry
    for a partition its cache does not know yet."""
    client = WireClient(cluster.link_address(CLIENT_NODE, f"broker-{broker}"), 10)
    try:
        answer = client.ask(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                 "include_cluster_authorized_operations": False,
                                                 "include_topic_authorized_operations": False})
    finally:
        client.close()
    assert answer is not None
    return {p["partition_index"]: p["leader_id"] for p in answer["topics"][0]["partitions"]}


def leader_in_metadata(cluster: LocalCluster, broker: int, topic: str, partition: int) -> int:
    """The partition's leader as ``broker`` answers Metadata (its own cache)."""
    return leaders_in_metadata(cluster, broker, topic)[partition]


def produce_to(cluster: LocalCluster, broker: int, topic: str, partition: int, value: str, timeout_ms: int):
    """One acks=all Produce sent to ``broker`` itself; its partition's answer, or None
    when none came (a timeout well past the request's own ``timeout_ms``)."""
    batch = RecordBatch(0, -1, Records([value], [None], 0, [int(time.time() * 1000)], None))
    body = {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "records": encode_batch(batch)}]}]}
    client = WireClient(cluster.link_address(CLIENT_NODE, f"broker-{broker}"), timeout_ms / 1000 + 10)
    try:
        answer = client.ask(ApiKey.PRODUCE, 8, body)
    finally:
        client.close()
    return None if answer is None else answer["responses"][0]["partitions"][0]


def test_a_leader_cut_from_zookeeper_loses_leadership_and_its_writes_are_fenced(healthy, zk):
    """broker-L <-> zk cut both ways for longer than L's session: ZooKeeper expires it,
    the controller (another broker) elects a new leader and the followers leave L.
    L, still believing it leads, takes an acks=all write and never acknowledges it (the
    ISR it knows cannot catch up: min ISR 2 is out of reach). Clients go on through the
    new leader. After the heal L registers again, becomes a follower and truncates the
    fenced write: its files end where the new leader's do."""
    cluster, topic, partitions = healthy, "zk-cut", 3
    create_topic(cluster, zk, topic, partitions)
    controller = zk.controller()
    # A leader that is not the controller, so that a controller outside the cut elects.
    led_elsewhere = [p for p in range(partitions) if zk.state(topic, p)["leader"] != controller]
    assert led_elsewhere, f"broker {controller} leads every partition: the spread assignment changed"
    partition = led_elsewhere[0]
    old = zk.state(topic, partition)
    leader = old["leader"]
    acknowledged = produce_all(cluster.bootstrap, topic, partition, [f"before-{i}" for i in range(30)])
    trace_lines = len(trace_events(cluster, leader))

    cluster.proxy.set_cuts("zk-cut", [(f"broker-{leader}", "zk"), ("zk", f"broker-{leader}")])
    try:
        new = wait_for(lambda: (s := zk.state(topic, partition)) and s["leader"] not in (leader, -1) and s,
                       ELECTION_S, "a new leader")
        assert new["leader_epoch"] > old["leader_epoch"] and leader not in new["isr"]
        others = [b for b in BROKERS if b != leader]
        wait_for(lambda: all(leader_in_metadata(cluster, b, topic, partition) == new["leader"] for b in others),
                 30, "the other brokers following the new leader")
        assert leader_in_metadata(cluster, leader, topic, partition) == leader  # it does not know yet

        answer = produce_to(cluster, leader, topic, partition, "fenced-write", timeout_ms=3000)
        # Appended, never acknowledged: the ISR L knows waits for followers that left.
        assert answer is None or answer["error_code"] in NOT_WRITTEN, answer
        # Bootstrapped from the brokers ZooKeeper still reaches: isrlab reserves a broker's
        # first producer id block at its first InitProducerId, which the cut-off broker
        # could not write (Kafka reserves it at startup: broker_core/producer_ids.py).
        reachable = ",".join(cluster.link_address(CLIENT_NODE, f"broker-{b}") for b in others)
        acknowledged.update(produce_all(reachable, topic, partition, [f"during-{i}" for i in range(30)]))
        assert cluster.states()[leader] == "alive"
    finally:
        cluster.proxy.clear("zk-cut")

    wait_for(lambda: leader in cluster.registered_brokers(), ELECTION_S, f"broker {leader} registered again")
    wait_for(lambda: zk.full_isr(topic, partitions), 60, f"broker {leader} back in every ISR")
    records = wait_for(lambda: same_files_everywhere(cluster, topic, partition), 30,
                       "the old leader's files ending where the new leader's do")
    assert records == len(acknowledged) == 60
    since_cut = trace_events(cluster, leader, trace_lines)
    kinds = [e["type"] for e in since_cut]
    # The same process learnt at the heal that ZooKeeper had expired its session.
    assert "session_expired" in kinds and "broker_registered" in kinds[kinds.index("session_expired"):], kinds
    truncated = [e for e in since_cut if e["type"] == "log_truncated" and e["partition"] == f"{topic}-{partition}"]
    assert any("fenced-write" in e["removed"] for e in truncated), truncated
    values = confluent_read(cluster.bootstrap, topic, partition, records)
    assert "fenced-write" not in values
    assert_nothing_acknowledged_lost(values, acknowledged)
