"""Real clients change topics on one ``isrlab serve``: confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient create topics with replica assignments, add partitions
and delete topics (Kafka 2.7's CreateTopics, CreatePartitions and DeleteTopics); bad
input gets Kafka's error code and the broker goes on serving."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient, NewPartitions as KpNewPartitions, NewTopic as KpNewTopic

from tests.real_io.reading import read_assigned
from tests.real_io.serve_process import ServeProcess
from tests.real_io.waiting import wait_until


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("topic-admin") / "data"
    process = ServeProcess(data).start()
    yield process, data
    assert process.stop() == 0


def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def error_of(future) -> int | None:
    try:
        future.result(timeout=15)
        return None
    except KafkaException as failure:
        return failure.args[0].code()


def produce(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000,
                         "topic.metadata.refresh.interval.ms": 500})
    delivered = []
    for value in values:
        producer.produce(topic, value.encode(), partition=partition, on_delivery=lambda e, m: delivered.append(e))
    producer.flush(15)
    assert delivered == [None] * len(values)


def topic_dirs(data: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data.rglob(f"{topic}-*") if p.is_dir())



def listed(admin: AdminClient, topic: str) -> bool:
    return topic in admin.list_topics(timeout=10).topics


def test_confluent_creates_a_topic_with_a_replica_assignment(served):
    process, _ = served
    admin = admin_of(process.bootstrap)
    futures = admin.create_topics([NewTopic("assigned", 3, replica_assignment=[[1], [1], [1]])], request_timeout=10)
    assert error_of(futures["assigned"]) is None
    metadata = admin.list_topics("assigned", timeout=10).topics["assigned"]
    assert sorted(metadata.partitions) == [0, 1, 2]
    assert all(p.replicas == [1] and p.leader == 1 for p in metadata.partitions.values())


@pytest.mark.parametrize("assignment, code", [
    ([[1, 1]], KafkaError.INVALID_REPLICA_ASSIGNMENT),
    ([[1], [1, 2]], KafkaError.INVALID_REPLICA_ASSIGNMENT),
])
def test_confluent_bad_assignments_get_kafkas_error_code(served, assignment, code):
    process, _ = served
    admin = admin_of(process.bootstrap)
    futures = admin.create_topics([NewTopic("bad-assignment", len(assignment), replica_assignment=assignment)], request_timeout=10)
    assert error_of(futures["bad-assignment"]) == code
    assert not listed(admin, "bad-assignment")


def test_confluent_validate_only_creates_nothing(served):
    process, _ = served
    admin = admin_of(process.bootstrap)
    futures = admin.create_topics([NewTopic("checked", 1, replica_assignment=[[1]])], validate_only=True,
                                  request_timeout=10)
    assert error_of(futures["checked"]) is None
    assert not listed(admin, "checked")


def test_confluent_adds_partitions_and_a_producer_writes_to_the_new_one(served):
    process, _ = served
    admin = admin_of(process.bootstrap)
    assert error_of(admin.create_topics([NewTopic("grow", 1, 1)], request_timeout=10)["grow"]) is None
    assert error_of(admin.create_partitions([NewPartitions("grow", 3)], request_timeout=10)["grow"]) is None
    assert wait_until(lambda: len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 3)
    produce(process.bootstrap, "grow", 2, ["on-the-new-partition"])
    records = read_assigned(process.bootstrap, [("grow", 2)], 1, 10)
    assert [(r.partition(), r.value()) for r in records] == [(2, b"on-the-new-partition")]


@pytest.mark.parametrize("request_, code", [
    (NewPartitions("grow2", 1), KafkaError.INVALID_PARTITIONS),
    (NewPartitions("grow2", 3, [[9]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
    (NewPartitions("no-such-topic", 2), KafkaError.UNKNOWN_TOPIC_OR_PART),
])
def test_confluent_bad_create_partitions_get_kafkas_error_code(served, request_, code):
    process, _ = served
    admin = admin_of(process.bootstrap)
    if not listed(admin, "grow2"):
        assert error_of(admin.create_topics([NewTopic("grow2", 2, 1)], request_timeout=10)["grow2"]) is None
    assert error_of(admin.create_partitions([request_], request_timeout=10)[request_.topic]) == code
    assert len(admin.list_topics("grow2", timeout=10).topics["grow2"].partitions) == 2


def test_confluent_deletes_a_topic_its_files_and_its_metadata(served):
    process, data = served
    admin = admin_of(process.bootstrap)
    assert error_of(admin.create_topics([NewTopic("doomed", 2, 1)], request_timeout=10)["doomed"]) is None
    produce(process.bootstrap, "doomed", 0, ["a", "b"])
    assert "doomed-0" in topic_dirs(data, "doomed")
    assert error_of(admin.delete_topics(["doomed"], request_timeout=10)["doomed"]) is None
    assert wait_until(lambda: not listed(admin, "doomed"))
    assert wait_until(lambda: topic_dirs(data, "doomed") == [])
    again = admin.delete_topics(["doomed"], request_timeout=10)["doomed"]
    assert error_of(again) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # the name is free again, with an empty log
    assert error_of(admin.create_topics([NewTopic("doomed", 1, 1)], request_timeout=10)["doomed"]) is None
    assert read_assigned(process.bootstrap, [("doomed", 0)], 1, 2) == []


def test_kafka_python_creates_with_assignments_adds_partitions_and_deletes(served):
    process, data = served
    admin = KafkaAdminClient(bootstrap_servers=process.bootstrap, request_timeout_ms=10000)
    try:
        created = admin.create_topics([KpNewTopic("kp-admin", -1, -1, replica_assignments={0: [1], 1: [1]})])
        assert [t["error_code"] for t in created["topics"]] == [0]
        added = admin.create_partitions({"kp-admin": KpNewPartitions(4)})
        assert [r.error_code for r in added.results] == [0]
        lower = admin.create_partitions({"kp-admin": KpNewPartitions(2)}, validate_only=True, raise_errors=False)
        assert [r.error_code for r in lower.results] == [KafkaError.INVALID_PARTITIONS]
        deleted = admin.delete_topics(["kp-admin"])
        assert [t["error_code"] for t in deleted["topics"]] == [0]
        assert wait_until(lambda: topic_dirs(data, "kp-admin") == [])
    finally:
        admin.close()


def test_bad_topic_admin_requests_on_the_wire_get_error_codes_and_the_broker_goes_on(served):
    """Requests no client library would send: an empty or path-like topic name, a negative
    count, DeleteTopics v2 (before TOPIC_DELETION_DISABLED existed) for an unknown topic,
    a CreateTopics mixing counts and an assignment. Each gets Kafka's error code."""
    from real_io.protocol.apis import ApiKey
    from tests.real_io.test_serve_wire import WireClient
    process, _ = served
    wire = WireClient(int(process.bootstrap.rsplit(":", 1)[1]))
    try:
        grown = wire.ask(ApiKey.CREATE_PARTITIONS, 1, {"timeout_ms": 5000, "validate_only": False, "topics": [
            {"name": "", "count": 2, "assignments": None}, {"name": "../x", "count": -1, "assignments": None}]})
        assert sorted((r["name"], r["error_code"]) for r in grown["results"]) == [("", 3), ("../x", 3)]
        gone = wire.ask(ApiKey.DELETE_TOPICS, 2, {"timeout_ms": 5000, "topic_names": ["", "never-was"]})
        assert sorted((r["name"], r["error_code"]) for r in gone["responses"]) == [("", 3), ("never-was", 3)]
        mixed = wire.ask(ApiKey.CREATE_TOPICS, 4, {"timeout_ms": 5000, "validate_only": False, "topics": [
            {"name": "mixed", "num_partitions": 2, "replication_factor": -1, "configs": [],
             "assignments": [{"partition_index": 0, "broker_ids": [1]}]}]})
        assert [(t["name"], t["error_code"]) for t in mixed["topics"]] == [("mixed", 42)]
    finally:
        wire.sock.close()
    admin = admin_of(process.bootstrap)
    assert error_of(admin.create_topics([NewTopic("after", 1, 1)], request_timeout=10)["after"]) is None
