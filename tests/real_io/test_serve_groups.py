"""Consumer groups end to end against one ``isrlab serve`` (issue 24): kafka-python and
confluent-kafka subscribe, commit, and a new consumer of the group resumes from the
commit; two kafka-python members share a topic and one leaves (a rebalance moves its
partitions); kcat's balanced consumer (-G); and the coordinator's answers to group
requests a client would not send (an unknown protocol type, a follower's SyncGroup with
assignments), over the wire."""
from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from confluent_kafka import Consumer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from tests.real_io.protocol_strategies import message_value
from tests.real_io.serve_process import ServeProcess
from tests.real_io.waiting import wait_for

pytestmark = pytest.mark.slow

# One broker: __consumer_offsets of one replica (Kafka's default 3 could never be
# created) and few partitions (each is loaded when led); no initial rebalance delay, so
# a lone member's first join is answered at once.
CONFIG = {"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 3,
          "group.initial.rebalance.delay.ms": 0}
TOPIC_PARTITIONS = 4
KP = {"request_timeout_ms": 10000, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500,
      "max_poll_interval_ms": 20000, "auto_offset_reset": "earliest", "enable_auto_commit": False}


@pytest.fixture
def broker(tmp_path):
    process = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl", config=CONFIG).start()
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


def create_and_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])
    admin.close()
    produce(bootstrap, topic, values)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000)
    for i, value in enumerate(values):
        producer.send(topic, value=value, partition=i % TOPIC_PARTITIONS)
    producer.flush(20)
    producer.close(5)


def kafka_python_poll(consumer: KafkaConsumer, expected: int, timeout_s: float = 40) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            values.extend(r.value for r in records)
    return values


def test_kafka_python_subscribes_commits_and_a_new_consumer_resumes_from_the_commit(broker):
    first = [f"a{i}".encode() for i in range(20)]
    create_and_produce(broker.bootstrap, "kp-orders", first)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group", **KP)
    consumer.subscribe(["kp-orders"])
    assert sorted(kafka_python_poll(consumer, len(first))) == sorted(first)
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition("kp-orders", p)) for p in range(TOPIC_PARTITIONS)}
    assert committed == {p: len(first) // TOPIC_PARTITIONS for p in range(TOPIC_PARTITIONS)}
    consumer.close()

    later = [f"b{i}".encode() for i in range(8)]
    produce(broker.bootstrap, "kp-orders", later)
    resumed = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group", **KP)
    resumed.subscribe(["kp-orders"])
    got = kafka_python_poll(resumed, len(later))
    got += kafka_python_poll(resumed, len(later) + 1, timeout_s=1)  # and nothing more
    resumed.close()
    assert sorted(got) == sorted(later)


def confluent_poll(consumer: Consumer, expected: int, timeout_s: float = 40) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert not message.error(), message.error()
            values.append(message.value())
    return values


def test_confluent_kafka_subscribes_commits_and_a_new_consumer_resumes_from_the_commit(broker):
    first = [f"c{i}".encode() for i in range(20)]
    create_and_produce(broker.bootstrap, "ck-orders", first)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "ck-group", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    consumer = Consumer(config)
    consumer.subscribe(["ck-orders"])
    assert sorted(confluent_poll(consumer, len(first))) == sorted(first)
    consumer.commit(asynchronous=False)
    consumer.close()

    later = [f"d{i}".encode() for i in range(8)]
    produce(broker.bootstrap, "ck-orders", later)
    resumed = Consumer(config)
    resumed.subscribe(["ck-orders"])
    got = confluent_poll(resumed, len(later))
    got += confluent_poll(resumed, len(later) + 1, timeout_s=1)
    resumed.close()
    assert sorted(got) == sorted(later)


def _owned(consumer: KafkaConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_two_kafka_python_members_share_the_partitions_and_the_survivor_takes_them_back(broker):
    """A second member joins: the rebalance splits the partitions (range, two each); it
    leaves (LeaveGroup on close): the first gets all four back. Both poll in turn, as
    kafka-python drives its heartbeats and rejoins from poll. Each poll may take a second:
    with polls of 100 ms at load 8, kafka-python 3.0.12 was seen to time out inside its
    join, join again at the next poll, and so rebalance for 40 s (its log: "timeout in
    ensure_active_group", then a new JoinGroup after the SyncGroup answer)."""
    create_and_produce(broker.bootstrap, "shared", [b"x"] * 8)
    everything = set(range(TOPIC_PARTITIONS))
    one = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="pair", **KP)
    one.subscribe(["shared"])
    wait_for(lambda: one.poll(timeout_ms=100) is not None and _owned(one) == everything, 40, "the first member's join")
    two = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="pair", **KP)
    two.subscribe(["shared"])

    def split() -> bool:
        one.poll(timeout_ms=1000)
        two.poll(timeout_ms=1000)
        mine, theirs = _owned(one), _owned(two)
        return mine.isdisjoint(theirs) and mine | theirs == everything and len(mine) == len(theirs) == 2
    wait_for(split, 40, "the partitions split between two members")
    two.close()
    wait_for(lambda: one.poll(timeout_ms=100) is not None and _owned(one) == everything, 40,
             "the survivor taking every partition back")
    one.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make test installs it)")
def test_kcat_balanced_consumer_reads_the_topic_through_a_group(broker):
    values = [f"k{i}".encode() for i in range(12)]
    create_and_produce(broker.bootstrap, "kc-orders", values)
    run = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", "kc-group", "-X", "auto.offset.reset=earliest",
                          "-c", str(len(values)), "-q", "-f", "%s\n", "kc-orders"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.split()) == sorted(v.decode() for v in values)


# -- over the wire: requests a client would not send -------------------------------------
RETRIED = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class Wire:
    """One connection speaking the group APIs at fixed versions (JoinGroup 7, SyncGroup
    5, Heartbeat 4)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer, self.correlation = reader, writer, 0

    async def ask(self, key: int, version: int, body: dict) -> dict:
        self.correlation += 1
        self.writer.write(apis.encode_request(RequestHeader(key, version, self.correlation, "wire"), body))
        size = int.from_bytes(await asyncio.wait_for(self.reader.readexactly(4), 30), "big")
        correlation, answer = apis.decode_response(key, version, await self.reader.readexactly(size))
        assert correlation == self.correlation
        return answer

    async def find(self, group: str) -> None:
        """FindCoordinator until this broker is named, as clients begin: the first one
        creates __consumer_offsets (COORDINATOR_NOT_AVAILABLE meanwhile)."""
        deadline = time.monotonic() + 30
        while (await self.ask(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}))["error_code"] != 0:
            assert time.monotonic() < deadline, "no coordinator"
            await asyncio.sleep(0.1)

    async def join(self, group: str, protocol_type: str = "consumer", member_id: str = "") -> dict:
        await self.find(group)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = await self.ask(ApiKey.JOIN_GROUP, 7, {
                "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "member_id": member_id, "group_instance_id": None, "protocol_type": protocol_type,
                "protocols": [{"name": "range", "metadata": b""}]})
            if answer["error_code"] == 79:  # MEMBER_ID_REQUIRED (KIP-394): again with the id
                member_id = answer["member_id"]
            elif answer["error_code"] in RETRIED:
                await asyncio.sleep(0.1)
            else:
                return answer
        raise AssertionError(f"JoinGroup still refused: {answer}")

    async def sync(self, group: str, generation: int, member_id: str, assignments: dict[str, bytes]) -> dict:
        return await self.ask(ApiKey.SYNC_GROUP, 5, {
            "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()]})

    def close(self) -> None:
        self.writer.close()


async def _wire(port: int) -> Wire:
    return Wire(*await asyncio.open_connection("127.0.0.1", port))


async def _protocol_types(port: int) -> tuple[dict, dict]:
    one, two = await _wire(port), await _wire(port)
    try:
        first = await one.join("typed", protocol_type="no-such-type")
        second = await two.join("typed", protocol_type="consumer")
        return first, second
    finally:
        one.close()
        two.close()


def test_an_unknown_protocol_type_is_a_group_of_its_own_and_another_type_is_refused(broker):
    """GroupCoordinator.handleJoinGroup (2.7.0): the broker does not know protocol types;
    the first member's is the group's, and a member of another type is
    INCONSISTENT_GROUP_PROTOCOL (23)."""
    first, second = asyncio.run(_protocol_types(broker.port))
    assert (first["error_code"], first["protocol_type"], first["generation_id"]) == (0, "no-such-type", 1)
    assert second["error_code"] == 23


async def _follower_assigns(port: int) -> tuple[dict, dict]:
    leader, follower = await _wire(port), await _wire(port)
    try:
        joined = await leader.join("synced")
        me = joined["member_id"]
        assert (await leader.sync("synced", joined["generation_id"], me, {me: b"alone"}))["assignment"] == b"alone"
        second = asyncio.create_task(follower.join("synced"))  # held: the group prepares a rebalance
        while (await leader.ask(ApiKey.HEARTBEAT, 4, {"group_id": "synced", "generation_id": joined["generation_id"],
                                                      "member_id": me, "group_instance_id": None}))["error_code"] != 27:
            await asyncio.sleep(0.1)
        rejoined = await leader.join("synced", member_id=me)
        other = await second
        assert rejoined["leader"] == me and other["leader"] == me and other["generation_id"] == 2
        # The follower's SyncGroup, with assignments of its own, waits for the leader's.
        follower_sync = asyncio.create_task(follower.sync("synced", 2, other["member_id"],
                                                          {other["member_id"]: b"mine", me: b"stolen"}))
        await asyncio.sleep(0.3)
        leader_sync = await leader.sync("synced", 2, me, {me: b"leader-part", other["member_id"]: b"follower-part"})
        return leader_sync, await follower_sync
    finally:
        leader.close()
        follower.close()


def test_a_followers_sync_group_assignments_are_ignored(broker):
    """GroupCoordinator.doSyncGroup (2.7.0): only the leader's assignment is taken; a
    follower's SyncGroup waits for it, whatever assignments it carries."""
    leader_sync, follower_sync = asyncio.run(_follower_assigns(broker.port))
    assert (leader_sync["error_code"], leader_sync["assignment"]) == (0, b"leader-part")
    assert (follower_sync["error_code"], follower_sync["assignment"]) == (0, b"follower-part")


# -- bad input through the coordinator ----------------------------------------------------
GROUP_VERSIONS = [(key, version) for key, (lo, hi) in sorted(apis.SERVED_GROUP_APIS.items())
                  for version in range(lo, hi + 1)]


def _send_one(port: int, key: int, version: int, body: dict, wait_s: float) -> str:
    """"answered", "held" (no answer within ``wait_s``: a JoinGroup or SyncGroup the
    coordinator keeps; the connection is then dropped) or "closed"."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(apis.encode_request(RequestHeader(key, version, 77, "fuzz"), body))
        try:
            size = sock.recv(4, socket.MSG_WAITALL)
        except socket.timeout:
            return "held"
        if len(size) < 4:
            return "closed"
        payload = b""
        while len(payload) < int.from_bytes(size, "big"):
            chunk = sock.recv(65536)
            assert chunk, "a response cut short"
            payload += chunk
    correlation, _ = apis.decode_response(key, version, payload)
    assert correlation == 77
    return "answered"


def test_random_group_requests_are_answered_held_or_closed_and_the_broker_goes_on(broker):
    """Any group request the codec reads, at any version (random ids, generations,
    instance ids, protocol types, timeouts, assignments from a non-leader): the broker
    answers it with an error code or holds it as a rebalance would, never logs an
    exception, and goes on serving (2.7.0 KafkaApis: a handler's failure is an error
    response, never the broker's)."""
    assert asyncio.run(_find_once(broker.port)) == 0  # __consumer_offsets is up
    outcomes: list[str] = []

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def one(data):
        key, version = data.draw(st.sampled_from(GROUP_VERSIONS))
        body = data.draw(message_value(apis.request_schema(key), version))
        outcomes.append(_send_one(broker.port, key, version, body, 1.0))

    one()
    assert outcomes.count("answered") > len(outcomes) // 2, outcomes
    assert "isrlab serve: closing" not in broker.stderr_path.read_text()
    assert asyncio.run(_find_once(broker.port)) == 0  # still serving


async def _find_once(port: int) -> int:
    wire = await _wire(port)
    try:
        await wire.find("any")
        return 0
    finally:
        wire.close()
