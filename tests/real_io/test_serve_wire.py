"""The served broker's APIs at the wire, request by request: what the clients' tests
cannot force (a retried idempotent batch, a fetch that waits, the offsets APIs)."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from broker_core.errors import ErrorCode
from broker_core.messages import ListOffsetsPartitionResult, ListOffsetsResponse
from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io import kafka_api
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.protocol.record_batch import decode_batches, encode_batch
from tests.real_io.serve_process import ServeProcess


class WireClient:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def send(self, key: int, version: int, body: dict) -> int:
        self.correlation += 1
        self.sock.sendall(apis.encode_request(RequestHeader(key, version, self.correlation, "wire"), body))
        return self.correlation

    def receive(self, key: int, version: int) -> tuple[int, dict]:
        size = struct.unpack(">i", self._exactly(4))[0]
        return apis.decode_response(key, version, self._exactly(size))

    def ask(self, key: int, version: int, body: dict) -> dict:
        correlation = self.send(key, version, body)
        answered, response = self.receive(key, version)
        assert answered == correlation
        return response

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = ServeProcess(tmp_path_factory.mktemp("wire") / "data").start()
    yield process
    assert process.stop() == 0


@pytest.fixture
def client(broker):
    wire = WireClient(broker.port)
    yield wire
    wire.close()


def create(client: WireClient, topic: str) -> None:
    response = client.ask(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": topic, "num_partitions": 1,
                                                               "replication_factor": 1, "assignments": [],
                                                               "configs": []}], "timeout_ms": 5000})
    assert response["topics"][0]["error_code"] == 0


def produce_body(topic: str, batch: RecordBatch, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": encode_batch(batch)}]}]}


def fetch_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}


def partition_of(response: dict, field: str = "responses", inner: str = "partitions") -> dict:
    return response[field][0][inner][0]


def test_a_retried_idempotent_batch_is_answered_with_the_original_offset_and_stored_once(client):
    create(client, "idem")
    init = client.ask(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init["error_code"] == 0 and init["producer_id"] >= 0
    batch = RecordBatch(0, -1, Records(["a", "b"], [None, None], 0, [1, 2], None),
                        producer_id=init["producer_id"], producer_epoch=init["producer_epoch"], base_sequence=0)
    first = partition_of(client.ask(ApiKey.PRODUCE, 8, produce_body("idem", batch)))
    retried = partition_of(client.ask(ApiKey.PRODUCE, 8, produce_body("idem", batch)))
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    assert (retried["error_code"], retried["base_offset"]) == (0, 0)
    fetched = partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("idem", 0, 0, 1)), inner="partition_responses")
    assert fetched["high_watermark"] == 2
    assert [b.records.values for b in decode_batches(fetched["record_set"])] == [("a", "b")]
    skipped = batch.with_offsets(0, -1)
    gap = RecordBatch(0, -1, skipped.records, producer_id=init["producer_id"], producer_epoch=0, base_sequence=5)
    refused = partition_of(client.ask(ApiKey.PRODUCE, 8, produce_body("idem", gap)))
    assert refused["error_code"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_fetch_waits_for_min_bytes_until_max_wait(broker, client):
    create(client, "waits")
    started = time.monotonic()
    empty = partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("waits", 0, 400, 1)), inner="partition_responses")
    waited = time.monotonic() - started
    assert empty["error_code"] == 0 and empty["record_set"] in (b"", None)
    assert 0.35 <= waited < 2.0
    client.send(ApiKey.FETCH, 11, fetch_body("waits", 0, 5000, 1))  # parked until a record arrives
    producer = WireClient(broker.port)
    time.sleep(0.2)
    started = time.monotonic()
    batch = RecordBatch(0, -1, Records(["wake"], [None], 0, [1], None))
    assert partition_of(producer.ask(ApiKey.PRODUCE, 8, produce_body("waits", batch, acks=1)))["error_code"] == 0
    _, response = client.receive(ApiKey.FETCH, 11)
    assert time.monotonic() - started < 2.0  # answered by the append, not the 5 s wait
    records = decode_batches(partition_of(response, inner="partition_responses")["record_set"])
    assert [b.records.values for b in records] == [("wake",)]
    producer.close()


def test_list_offsets_and_offset_for_leader_epoch(client):
    create(client, "offsets")
    batch = RecordBatch(0, -1, Records(["x", "y", "z"], [None] * 3, 0, [1, 2, 3], None))
    assert partition_of(client.ask(ApiKey.PRODUCE, 8, produce_body("offsets", batch)))["error_code"] == 0

    def list_offset(timestamp: int) -> dict:
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "offsets", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]}
        return partition_of(client.ask(ApiKey.LIST_OFFSETS, 5, body), field="topics")
    assert (list_offset(-2)["error_code"], list_offset(-2)["offset"], list_offset(-2)["leader_epoch"]) == (0, 0, 0)
    assert (list_offset(-1)["error_code"], list_offset(-1)["offset"], list_offset(-1)["leader_epoch"]) == (0, 3, 0)
    # By timestamp (2.7.0 Log.fetchOffsetByTimestamp): the first record at or after it, with
    # its timestamp and its batch's epoch; none after the last (offset and timestamp -1);
    # any other negative value is a timestamp too, below every record's.
    found = [(list_offset(t)["error_code"], list_offset(t)["offset"], list_offset(t)["timestamp"],
              list_offset(t)["leader_epoch"]) for t in (2, 12345, -7)]
    assert found == [(0, 1, 2, 0), (0, -1, -1, -1), (0, 0, 1, 0)]
    twice = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "offsets", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": t} for t in (2, -1)]}]}
    answers = client.ask(ApiKey.LIST_OFFSETS, 5, twice)["topics"][0]["partitions"]
    assert [(a["partition_index"], a["error_code"]) for a in answers] == [(0, 42)]  # duplicatePartitions
    body = {"replica_id": -1, "topics": [{"name": "offsets", "partitions": [
        {"partition_index": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]}
    epoch = partition_of(client.ask(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body), field="topics")
    assert (epoch["error_code"], epoch["leader_epoch"], epoch["end_offset"]) == (0, 0, 3)
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 5
    fenced = partition_of(client.ask(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body), field="topics")
    assert fenced["error_code"] == 75  # UNKNOWN_LEADER_EPOCH: newer than the broker knows


def test_metadata_without_auto_creation_and_invalid_names(client):
    response = client.ask(ApiKey.METADATA, 9, {"topics": [{"name": "absent"}, {"name": "bad name"}],
                                               "allow_auto_topic_creation": False})
    errors = {t["name"]: t["error_code"] for t in response["topics"]}
    assert errors == {"absent": 3, "bad name": 3}  # UNKNOWN_TOPIC_OR_PARTITION
    response = client.ask(ApiKey.METADATA, 9, {"topics": [{"name": "bad name"}], "allow_auto_topic_creation": True})
    assert response["topics"][0]["error_code"] == 17  # INVALID_TOPIC_EXCEPTION
    assert [(b["node_id"], b["host"]) for b in response["brokers"]] == [(1, "127.0.0.1")]
    assert response["controller_id"] == 1


def test_create_topics_refuses_absurd_counts_at_once(client):
    started = time.monotonic()
    response = client.ask(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "wide", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []},
        {"name": "placed", "num_partitions": 1, "replication_factor": 1, "configs": [],
         "assignments": [{"partition_index": 0, "broker_ids": [1]}]}], "timeout_ms": 5000})
    errors = {t["name"]: t["error_code"] for t in response["topics"]}
    assert errors == {"huge": 37, "wide": 38, "placed": 42}  # INVALID_PARTITIONS, _REPLICATION_FACTOR, _REQUEST
    assert time.monotonic() - started < 2


def test_an_acks_0_produce_to_a_partition_not_led_here_closes_only_that_connection(broker, client):
    """2.7.0 KafkaApis.handleProduceRequest: an acks=0 produce with an error in any
    partition closes the connection (closeConnection), the producer's only word of it;
    the core decides (CloseConnection) and the server closes that socket. Other
    connections are served on."""
    create(client, "closing")
    producer = WireClient(broker.port)
    batch = RecordBatch(0, -1, Records(["fine"], [None], 0, [1], None))
    producer.send(ApiKey.PRODUCE, 8, produce_body("closing", batch, acks=0))  # partition 0: led here
    metadata = producer.ask(ApiKey.METADATA, 9, {"topics": [{"name": "closing"}], "allow_auto_topic_creation": False})
    assert metadata["topics"][0]["error_code"] == 0  # still open
    elsewhere = produce_body("closing", RecordBatch(0, -1, Records(["lost"], [None], 0, [1], None)), acks=0)
    elsewhere["topics"][0]["partitions"][0]["partition_index"] = 5  # no such replica here
    producer.send(ApiKey.PRODUCE, 8, elsewhere)
    producer.sock.settimeout(5)
    assert producer.sock.recv(1) == b""  # closed by the broker
    producer.close()
    fetched = partition_of(client.ask(ApiKey.FETCH, 11, fetch_body("closing", 0, 0, 1)), inner="partition_responses")
    assert [b.records.values for b in decode_batches(fetched["record_set"])] == [("fine",)]


@pytest.mark.parametrize("version", [1, 3, 4, 5])
def test_list_offsets_answers_carry_the_epoch_from_v4_and_offset_not_available_from_v5(version):
    """2.7.0 KafkaApis.handleListOffsetRequestV1AndAbove: the leader epoch is set on the
    answer for v4+ (the field exists from v4, ListOffsetResponse.json), and an
    OffsetNotAvailableException answers OFFSET_NOT_AVAILABLE to v5+ only, older versions
    LEADER_NOT_AVAILABLE; both, and the found record's timestamp, then survive the encoder."""
    answer = ListOffsetsResponse(1, {TopicPartition("t", 0): ListOffsetsPartitionResult(ErrorCode.NONE, 9, 4, 1234),
                                     TopicPartition("t", 1): ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)})
    body = kafka_api.list_offsets_response(answer, {}, version)
    wire = apis.encode_response_parts(ApiKey.LIST_OFFSETS, version, 1, body)
    _, decoded = apis.decode_response(ApiKey.LIST_OFFSETS, version, b"".join(bytes(p) for p in wire)[4:])
    found, unavailable = decoded["topics"][0]["partitions"]
    assert (found["offset"], found.get("leader_epoch", -1)) == (9, 4 if version >= 4 else -1)
    assert found["timestamp"] == 1234  # a lookup by timestamp's record (the field exists from v1)
    assert unavailable["error_code"] == (78 if version >= 5 else 5)
