"""ListOffsets by timestamp on the real broker (issue 22): confluent-kafka's and
kafka-python's ``offsets_for_times`` against one ``isrlab serve``, over records produced
with explicit CreateTime timestamps by both clients, before the first, at and between
records and after the last; and again after a restart, from the recovered time indexes
(and after kill -9, from the rebuilt ones). Kafka 2.7.0 KafkaApis
handleListOffsetRequestV1AndAbove, Log.fetchOffsetByTimestamp."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from tests.real_io.serve_process import ServeProcess

START_MS = 1_600_000_000_000
STEP_MS = 1000
COUNT = 200
CONFIG = {"log.segment.bytes": 3000, "log.index.interval.bytes": 256}


def timestamp_of(i: int) -> int:
    return START_MS + STEP_MS * i


def produce(bootstrap: str) -> None:
    """The first half through confluent-kafka, the second through kafka-python, each
    record with timestamp= set (the clients write it as the record's CreateTime)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(COUNT // 2):
        producer.produce("times", value=b"v%03d" % i + b"x" * 40, timestamp=timestamp_of(i))
        if i % 20 == 19:
            producer.flush(10)
    assert producer.flush(10) == 0
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=5000)
    futures = [kp.send("times", b"v%03d" % i + b"x" * 40, timestamp_ms=timestamp_of(i)) for i in range(COUNT // 2, COUNT)]
    kp.flush(10)
    assert [f.get(5).offset for f in futures] == list(range(COUNT // 2, COUNT))
    kp.close(5)


def cases() -> dict[int, int]:
    """Target timestamp -> expected offset (-1: none)."""
    return {0: 0, START_MS - 1: 0, timestamp_of(0): 0, timestamp_of(37): 37, timestamp_of(37) + 1: 38,
            timestamp_of(COUNT // 2) - 500: COUNT // 2, timestamp_of(150) + 999: 151,
            timestamp_of(COUNT - 1): COUNT - 1, timestamp_of(COUNT - 1) + 1: -1, timestamp_of(COUNT * 10): -1}


def confluent_offsets(bootstrap: str, targets: list[int]) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused"})
    try:
        return [(tp.offset, tp.error.code() if tp.error else 0) for tp in
                (consumer.offsets_for_times([CTopicPartition("times", 0, t)], timeout=10)[0] for t in targets)]
    finally:
        consumer.close()


def kafka_python_offsets(bootstrap: str, targets: list[int]) -> list[tuple[int, int] | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=5000)
    try:
        tp = KTopicPartition("times", 0)
        answers = [consumer.offsets_for_times({tp: t})[tp] for t in targets]
        return [None if a is None else (a.offset, a.timestamp) for a in answers]
    finally:
        consumer.close()


def check_answers(bootstrap: str) -> None:
    expected = cases()
    targets = sorted(expected)
    # librdkafka answers "none" as offset -1 (OFFSET_END), with no error.
    assert confluent_offsets(bootstrap, targets) == [(expected[t], 0) for t in targets]
    assert kafka_python_offsets(bootstrap, targets) == [
        None if expected[t] < 0 else (expected[t], timestamp_of(expected[t])) for t in targets]


@pytest.mark.parametrize("stop", ["sigterm", "kill_9"])
def test_offsets_for_times_from_both_clients_before_and_after_a_restart(tmp_path, stop):
    data = tmp_path / "data"
    broker = ServeProcess(data, config=CONFIG).start()
    try:
        produce(broker.bootstrap)
        check_answers(broker.bootstrap)
    finally:
        if stop == "sigterm":
            assert broker.stop() == 0
        else:
            broker.kill()
    logs = sorted((data / "times-0").glob("*.log"))
    assert len(logs) > 3
    assert all(p.with_suffix(".timeindex").stat().st_size % 12 == 0 for p in logs[:-1])
    assert sum(p.with_suffix(".timeindex").stat().st_size for p in logs[:-1]) >= 12 * len(logs[:-1])
    if stop == "kill_9":
        for path in logs[:-1]:
            path.with_suffix(".timeindex").unlink()  # what recovery must rebuild
    broker = ServeProcess(data, config=CONFIG).start()
    try:
        check_answers(broker.bootstrap)
        assert all(p.with_suffix(".timeindex").stat().st_size >= 12 for p in logs[:-1])
    finally:
        assert broker.stop() == 0
