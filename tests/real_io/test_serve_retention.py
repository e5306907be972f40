"""Retention on the real broker (issue 22): one ``isrlab serve`` deletes its oldest
segment files by retention.bytes on Kafka's schedule (2.7.0 LogManager's
kafka-log-retention task, first 30 s after start), and a confluent-kafka client sees the
earliest offset move (ListOffsets earliest answers the log start) and reads from it."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from tests.real_io.reading import read_assigned
from tests.real_io.serve_process import ServeProcess

SEGMENT_BYTES = 4000
RETENTION_BYTES = 12000


def _segment_files(data_dir) -> dict[int, int]:
    """Base offset -> size of every segment file of t-0."""
    return {int(p.name[:-4]): p.stat().st_size for p in (data_dir / "t-0").glob("*.log")}


def _earliest(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused"})
    try:
        low, _high = consumer.get_watermark_offsets(CTopicPartition("t", 0), timeout=5)
        return low
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_real_broker_deletes_segment_files_by_retention_bytes_and_earliest_moves(tmp_path):
    """2.7.0 Log.deleteRetentionSizeBreachedSegments over the real broker's v2 files: the
    oldest segment files go while the log less them stays at or above retention.bytes;
    the earliest offset becomes the first file's base offset."""
    config = {"log.segment.bytes": SEGMENT_BYTES, "log.retention.bytes": RETENTION_BYTES,
              "log.retention.check.interval.ms": 1000}
    broker = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl", config=config).start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
        for i in range(400):
            producer.produce("t", value=b"%03d" % i + b"x" * 97, key=b"k%d" % i)
            if i % 40 == 39:
                producer.flush(10)
        assert producer.flush(10) == 0
        before = _segment_files(tmp_path / "data")
        assert len(before) > 5 and 0 in before
        assert _earliest(broker.bootstrap) == 0
        deadline = time.monotonic() + 60  # the first check runs 30 s after start
        while _earliest(broker.bootstrap) == 0 and time.monotonic() < deadline:
            time.sleep(1)
        earliest = _earliest(broker.bootstrap)
        after = _segment_files(tmp_path / "data")
        assert earliest > 0 and min(after) == earliest
        assert set(after) == {base for base in before if base >= earliest}
        # Kafka's rule over the files' sizes (v2 batches: what the core counts).
        excess, expected = sum(before.values()) - RETENTION_BYTES, 0
        for base in sorted(before):
            if excess - before[base] < 0:
                expected = base
                break
            excess -= before[base]
        assert earliest == expected and sum(after.values()) >= RETENTION_BYTES
        records = read_assigned(broker.bootstrap, [("t", 0)], 400 - earliest, timeout_s=15)
        assert [r.offset() for r in records] == list(range(earliest, 400))
        assert records[0].value()[:3] == b"%03d" % earliest
    finally:
        assert broker.stop() == 0, (tmp_path / "data.stderr").read_text()
