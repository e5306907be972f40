"""Deleting groups and offsets, and offset expiry, against one ``isrlab serve`` with real
clients (issue 24): confluent-kafka's AdminClient.delete_consumer_groups and
kafka-python's KafkaAdminClient.delete_groups / delete_group_offsets. An active group
is GROUP_NOT_EMPTY (Kafka's NON_EMPTY_GROUP, 68); an empty one is deleted and a new
consumer of it starts from auto.offset.reset; offsets expire with a small
offsets.retention.minutes (and a commit's own retention sooner). Rules: Kafka 2.7.0's
GroupCoordinator.handleDeleteGroups / handleDeleteOffsets and
GroupMetadataManager.cleanupGroupMetadata (docs/groups.md)."""
from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError, NonEmptyGroupError

from real_io.protocol.apis import ApiKey
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_groups import (
    CONFIG, KP, TOPIC_PARTITIONS, _wire, confluent_poll, create_and_produce, kafka_python_poll)

pytestmark = pytest.mark.slow


def _serve(tmp_path, config: dict):
    process = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl", config={**CONFIG, **config}).start()
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


@pytest.fixture
def broker(tmp_path):
    yield from _serve(tmp_path, {})


@pytest.fixture
def expiring_broker(tmp_path):
    """Offsets kept one minute (the least offsets.retention.minutes allows), checked
    every half second."""
    yield from _serve(tmp_path, {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 500})


def _confluent_delete(admin: AdminClient, group: str) -> int:
    """The group's error code from delete_consumer_groups (0: deleted)."""
    future = admin.delete_consumer_groups([group], request_timeout=15)[group]
    try:
        future.result()
    except KafkaException as failure:
        return failure.args[0].code()
    return 0


def test_confluent_kafka_deletes_an_empty_group_and_not_an_active_one(broker):
    values = [f"v{i}".encode() for i in range(20)]
    create_and_produce(broker.bootstrap, "del-orders", values)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "del-group", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    consumer = Consumer(config)
    consumer.subscribe(["del-orders"])
    assert sorted(confluent_poll(consumer, len(values))) == sorted(values)
    consumer.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _confluent_delete(admin, "del-group") == KafkaError.NON_EMPTY_GROUP
    consumer.close()  # LeaveGroup: the group is Empty, its offsets kept
    assert _confluent_delete(admin, "del-group") == 0
    assert _confluent_delete(admin, "del-group") == KafkaError.GROUP_ID_NOT_FOUND
    again = Consumer(config)  # no commit: auto.offset.reset (earliest) reads everything again
    again.subscribe(["del-orders"])
    got = confluent_poll(again, len(values))
    again.close()
    assert sorted(got) == sorted(values)


def test_kafka_python_deletes_offsets_and_groups(broker):
    """delete_group_offsets of a subscribed topic while the consumer is in the group is
    GROUP_SUBSCRIBED_TO_TOPIC per partition; delete_groups NonEmptyGroup; once the
    consumer left, both succeed and a new consumer starts from auto.offset.reset
    (latest: none of the old records)."""
    values = [f"k{i}".encode() for i in range(12)]
    create_and_produce(broker.bootstrap, "kpdel", values)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-del", **KP)
    consumer.subscribe(["kpdel"])
    assert sorted(kafka_python_poll(consumer, len(values))) == sorted(values)
    consumer.commit()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    tps = [TopicPartition("kpdel", p) for p in range(TOPIC_PARTITIONS)]
    errors = admin.delete_group_offsets("kp-del", tps[:1])
    assert [e.errno for e in errors.values()] == [GroupSubscribedToTopicError.errno]
    assert admin.delete_groups(["kp-del"]) == {"kp-del": NonEmptyGroupError.__name__}
    consumer.close()
    assert admin.delete_group_offsets("kp-del", tps[:1]) == {tps[0]: NoError}
    assert admin.delete_groups(["kp-del"]) == {"kp-del": "OK"}  # kafka-python's word for NONE
    assert admin.delete_groups(["kp-del"]) == {"kp-del": GroupIdNotFoundError.__name__}
    admin.close()
    fresh = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-del",
                          **{**KP, "auto_offset_reset": "latest"})
    fresh.subscribe(["kpdel"])
    assert kafka_python_poll(fresh, 1, timeout_s=8) == []
    assert {fresh.committed(tp) for tp in tps} == {None}
    fresh.close()


async def _commit_and_fetch(port: int, stamps: list[tuple[float, dict]], until_s: float) -> None:
    """A simple commit with OffsetCommit v2's retention_time_ms (1 s) to group "short"
    and one without (the broker's minute) to group "long", then their OffsetFetch
    answers every half second until ``until_s``."""
    wire = await _wire(port)
    try:
        for group, retention in (("short", 1000), ("long", -1)):
            await wire.find(group)
            answer = await wire.ask(ApiKey.OFFSET_COMMIT, 2, {
                "group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": retention,
                "topics": [{"name": "exp", "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == 0, answer
        start = time.monotonic()
        while time.monotonic() - start < until_s:
            offsets = {}
            for group in ("short", "long"):
                answer = await wire.ask(ApiKey.OFFSET_FETCH, 7, {
                    "group_id": group, "topics": [{"name": "exp", "partition_indexes": [0]}], "require_stable": False})
                offsets[group] = answer["topics"][0]["partitions"][0]["committed_offset"]
            stamps.append((time.monotonic() - start, offsets))
            if offsets["long"] == -1:
                return
            await asyncio.sleep(0.5)
    finally:
        wire.close()


def test_offsets_expire_with_the_brokers_retention_and_a_commits_own_sooner(expiring_broker):
    """removeExpiredOffsets: a commit with its own retention expires at commit + 1 s;
    a simple consumer's plain commit at commit + offsets.retention.minutes (1), found
    by the periodic check; OffsetFetch then answers -1."""
    create_and_produce(expiring_broker.bootstrap, "exp", [b"x"] * 8)
    stamps: list[tuple[float, dict]] = []
    asyncio.run(_commit_and_fetch(expiring_broker.port, stamps, until_s=75))
    first_short_gone = next(t for t, o in stamps if o["short"] == -1)
    assert first_short_gone < 5, stamps[:10]
    assert all(o["long"] == 5 for t, o in stamps if t < 55), stamps
    assert stamps[-1][1] == {"short": -1, "long": -1}, stamps[-3:]
