"""Log compaction on the real broker (issue 22, compaction slice 3): one ``isrlab serve``
with log.cleanup.policy=compact cleans its v2 segment files (Kafka 2.7.0
core/src/main/scala/kafka/log/LogCleaner.scala, CleanerThread.doWork; Log.replaceSegments),
confluent-kafka reads one value per key from the start, kcat -Z tombstones are honoured,
a keyless record is refused (LogValidator.validateKey: INVALID_RECORD), and a kill -9
at random points of cleaning recovers to the old or the cleaned segments
(Log.loadSegments, completeSwapOperations)."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from tests.real_io.serve_process import ServeProcess

CONFIG = {"log.segment.bytes": 1500, "log.cleanup.policy": "compact", "log.cleaner.backoff.ms": 100,
          "log.cleaner.min.cleanable.ratio": 0.01, "log.cleaner.delete.retention.ms": 0,
          "log.cleaner.step.records": 20}
KEYS = 10


def _cleanings(trace) -> list[dict]:
    if not trace.exists():
        return []
    return [e for e in map(json.loads, trace.read_text().splitlines()) if e["type"] == "segments_cleaned"]


def _produce(bootstrap: str, count: int, start: int = 0, odd_keys_only: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
    for i in range(start, start + count):
        key = i % KEYS | 1 if odd_keys_only else i % KEYS
        producer.produce("t", key=b"k%d" % key, value=b"v%04d" % i + b"x" * 40)
        if i % 50 == 49:
            producer.flush(10)
    assert producer.flush(10) == 0


def _read_all(bootstrap: str, timeout_s: float = 15) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of t-0 from the beginning to the end (librdkafka's partition EOF)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([CTopicPartition("t", 0, OFFSET_BEGINNING)])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return records
                continue  # the coordinator lookup's refusal (the group is never joined)
            records.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition within {timeout_s} s ({len(records)} records)")


def _wait_for_cleaning(trace, past_offset: int = 0, timeout_s: float = 30) -> None:
    """Until a cleaning covered offsets up to ``past_offset``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(c["end_offset"] > past_offset for c in _cleanings(trace)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no cleaning past offset {past_offset}: {_cleanings(trace)}")


@pytest.mark.slow
def test_a_compacted_topic_read_from_the_start_after_cleaning_shows_the_last_value_per_key(tmp_path):
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace, config=CONFIG).start()
    try:
        _produce(broker.bootstrap, 400)
        _wait_for_cleaning(trace)
        time.sleep(1)
        records = _read_all(broker.bootstrap)
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(offsets) and len(records) < 400
        last = {}
        for _, key, value in records:
            last[key] = value
        # The active segment is never cleaned: its keys may appear more than once, but
        # the last value read of each key is the last one written.
        assert last == {b"k%d" % k: b"v%04d" % (390 + k) + b"x" * 40 for k in range(KEYS)}
        # A keyless record: INVALID_RECORD (LogValidator.validateKey, 2.7.0).
        errors = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
        producer.produce("t", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    finally:
        assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_tombstones_are_honoured_by_the_cleaner(tmp_path):
    """kcat -Z sends an empty value as NULL: a tombstone. With delete.retention.ms 0 the
    cleaner removes the key once a later cleaning has the tombstone below its horizon."""
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace, config=CONFIG).start()
    try:
        _produce(broker.bootstrap, 200)
        lines = "".join(f"k{k}:\n" for k in range(0, KEYS, 2))  # tombstones for the even keys
        subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "t", "-K", ":", "-Z"], input=lines.encode(),
                       check=True, timeout=30)
        _produce(broker.bootstrap, 300, start=200, odd_keys_only=True)  # more segments: the tombstones get cleaned
        _wait_for_cleaning(trace, 210)  # past the tombstones (offsets 200-204)
        time.sleep(1)
        last = {}
        for _, key, value in _read_all(broker.bootstrap):
            last[key] = value
        for k in range(0, KEYS, 2):  # a tombstoned key: gone, or its tombstone (never an old value)
            assert last.get(b"k%d" % k) is None, k
        assert all(last[b"k%d" % k] is not None for k in range(1, KEYS, 2))
    finally:
        assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()




@pytest.mark.slow
def test_kill_9_at_random_points_of_cleaning_recovers_old_or_cleaned_segments(tmp_path):
    """Log.replaceSegments and loadSegments (2.7.0): a kill -9 at a random moment of
    cleaning, several rounds; after each restart every record read is one written, at
    its own offset, and each key's last value is its last write."""
    rng = random.Random(22)
    trace = tmp_path / "trace.jsonl"
    config = {**CONFIG, "log.cleaner.step.records": 3, "log.cleaner.min.cleanable.ratio": 0.5}
    written: dict[int, tuple[bytes, bytes]] = {}
    produced = 0
    for _round in range(4):
        broker = ServeProcess(tmp_path / "data", trace=trace, config=config).start()
        try:
            _produce(broker.bootstrap, 150, start=produced)
            produced += 150
            time.sleep(rng.uniform(0.0, 0.6))
        finally:
            broker.kill()
        broker = ServeProcess(tmp_path / "data", trace=trace, config=config).start()
        try:
            records = _read_all(broker.bootstrap)
        finally:
            assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()
        values = {}
        for offset, key, value in records:
            assert int(value[1:5]) == offset or offset not in written or written[offset] == (key, value)
            values[key] = value
        assert values == {b"k%d" % (i % KEYS): b"v%04d" % i + b"x" * 40 for i in range(produced - KEYS, produced)}
        assert [o for o, _, _ in records] == sorted(o for o, _, _ in records)
        written.update((o, (k, v)) for o, k, v in records)
    assert _cleanings(trace), "the kills never met a cleaning"
