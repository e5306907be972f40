"""A consumer's whole fetch response is limited by the request's MaxBytes (the client's
fetch.max.bytes) and the broker's fetch.max.bytes, as Kafka 2.7.0 limits it
(KafkaApis.handleFetchRequest: fetchMaxBytes = min(request.maxBytes, fetch.max.bytes,
maxQuotaWindowBytes); ReplicaManager.readFromLocalLog: each partition reads at most
what is left, and only the first partition with data may exceed it by one batch).

librdkafka's 0082_fetch_max_bytes found the broker ignoring it: a consumer with
fetch.max.bytes 1000000 and receive.message.max.bytes 1000512 received 58 MB and
dropped the connection over and over ("Invalid response size"). Here the same consumer
settings with confluent-kafka, and the raw Fetch over the wire."""
from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.protocol.primitives import Reader
from tests.real_io.serve_process import ServeProcess


CONFIG = {"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 3,
          "group.initial.rebalance.delay.ms": 0}
PARTITIONS = 3
PER_PARTITION = 3
VALUE = b"x" * (900 * 1024)  # under 1 MB with its batch's overhead, as 0082's


@pytest.fixture
def broker(tmp_path):
    process = ServeProcess(tmp_path / "data", config=CONFIG).start()
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


def fill(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1,
                         "message.max.bytes": 2000000})
    for partition in range(PARTITIONS):
        for _ in range(PER_PARTITION):
            producer.produce(topic, VALUE, partition=partition)
    assert producer.flush(60) == 0


def test_a_consumer_with_a_small_fetch_max_bytes_reads_every_large_record(broker):
    topic = "fetch-limit"
    fill(broker.bootstrap, topic)
    errors = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-limit",
                         "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 20000000,
                         "fetch.max.bytes": 1000000, "receive.message.max.bytes": 1000512,
                         "error_cb": errors.append})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    try:
        while got < PARTITIONS * PER_PARTITION and time.monotonic() < deadline and not errors:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
    finally:
        consumer.close()
    assert not errors and got == PARTITIONS * PER_PARTITION, (got, errors)


def raw_fetch(bootstrap: str, topic: str, max_bytes: int) -> list[int]:
    """Bytes of records per partition in one Fetch v11 of every partition from offset 0."""
    host, port = bootstrap.split(":")
    partitions = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                   "partition_max_bytes": 20000000} for p in range(PARTITIONS)]
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": partitions}]}
    frame = apis.encode_request(RequestHeader(ApiKey.FETCH, 11, 7, "raw"), body)
    with socket.create_connection((host, int(port)), timeout=20) as conn:
        conn.sendall(frame)
        size = int.from_bytes(_exactly(conn, 4), "big", signed=True)
        payload = _exactly(conn, size)
    reader = Reader(payload)
    assert reader.int32() == 7  # response header v0: the correlation id
    answer = apis.response_schema(ApiKey.FETCH).decode(11, reader)
    sizes = {r["partition"]: len(r["record_set"] or b"") for t in answer["responses"] for r in t["partition_responses"]}
    return [sizes[p] for p in range(PARTITIONS)]


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


def test_the_first_partition_with_data_may_exceed_the_limit_by_one_batch_the_others_get_what_is_left(broker):
    topic = "fetch-limit-raw"
    fill(broker.bootstrap, topic)
    small = raw_fetch(broker.bootstrap, topic, 1000000)
    assert small[0] > 900 * 1024 and small[1:] == [0, 0], small  # one batch of partition 0, nothing after
    roomy = raw_fetch(broker.bootstrap, topic, 4 * 1024 * 1024)
    assert sum(roomy) <= 4 * 1024 * 1024 and all(size > 0 for size in roomy[:2]), roomy
