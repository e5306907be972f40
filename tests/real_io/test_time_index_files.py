"""The segments' time indexes in the real binding: ``.timeindex`` files next to the
``.log`` and ``.index`` files of a real data directory, in Kafka's format, rebuilt at
recovery, and lookups by timestamp over record batches v2 (compressed ones too).
Kafka 2.7.0: core/src/main/scala/kafka/log/TimeIndex.scala, LogSegment.scala."""
from __future__ import annotations

import struct

import pytest

from broker_core.effects import ReplaceFile
from broker_core.log import PartitionLog
from broker_core.log_loader import recover_log
from broker_core.records import RecordBatch, Records
from broker_core.timestamp_lookup import fetch_offset_by_timestamp
from real_io.files import DataDir
from real_io.protocol import compression, record_batch
from real_io.wire_batch import parse_records
from tests.real_io.test_log_storage import TP, write
from tests.real_io.damage import DAMAGES, damage as damage_file

INTERVAL = 300
START_MS = 1_700_000_000_000


def stamped_batch(values: list[str], first_ms: int, codec: int = compression.NONE) -> bytes:
    """A producer's batch v2 whose records carry CreateTime ``first_ms``, +7 ms each."""
    records = Records(values, None, 0, [first_ms + 7 * i for i in range(len(values))])
    return record_batch.encode_batch(RecordBatch(0, -1, records), codec)


def appended(root, count: int, segment_bytes: int, codec: int = compression.NONE) -> tuple[DataDir, PartitionLog]:
    storage = DataDir(root)
    log = PartitionLog(TP, segment_bytes, storage, INTERVAL)
    for i in range(count):
        # every fifth batch comes from a producer whose clock lags: the largest timestamp does not grow
        first_ms = START_MS + 100 * i - (5000 if i % 5 == 4 else 0)
        [batch] = parse_records(stamped_batch([f"value-{i}-{j}" for j in range(3)], first_ms, codec))
        write(storage, log.append_as_leader(batch, 1)[1])
    log.high_watermark = log.log_end_offset
    return storage, log


def kafka_time_index(segment: bytes, base_offset: int) -> bytes:
    """The time index Kafka's LogSegment.recover builds from a segment's batches v2, read
    with the wire codec (not the core's code): (largest max timestamp so far, the last
    offset of the batch that reached it) at each offset index entry when it grew, and
    once more at the end."""
    out, position, last_entry, last_stamp, largest, largest_at = b"", 0, 0, -1, -1, -1
    while position < len(segment):
        header = record_batch.read_header(segment, position)
        if header.max_timestamp > largest:
            largest, largest_at = header.max_timestamp, header.base_offset + header.last_offset_delta
        if position - last_entry > INTERVAL:
            last_entry = position
            if largest > last_stamp:
                out += struct.pack(">qi", largest, largest_at - base_offset)
                last_stamp = largest
        position += header.size
    if largest > last_stamp:
        out += struct.pack(">qi", largest, largest_at - base_offset)
    return out


def test_sealed_segments_have_kafka_format_time_index_files(tmp_path):
    """One 12-byte entry (int64 timestamp, int32 relative offset, big-endian) per offset
    index entry where the largest timestamp grew, and the segment's largest last; the
    active segment's time index lives in memory until it is rolled."""
    _, log = appended(tmp_path, 300, 8000)
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(logs) > 3
    for path in logs[:-1]:
        index = path.with_suffix(".timeindex").read_bytes()
        assert len(index) >= 24 and index == kafka_time_index(path.read_bytes(), int(path.stem))
    assert not logs[-1].with_suffix(".timeindex").exists()


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP], ids=["plain", "gzip"])
def test_lookups_read_the_records_of_stored_batches(tmp_path, codec):
    """FileRecords.searchForTimestamp over real files: the first record at or after the
    target, inside a batch (a record's timestamp is the first timestamp plus its delta),
    in a compressed batch too; a lagging producer's batch is passed over when an
    earlier record already reached the target."""
    _, log = appended(tmp_path, 300, 8000, codec)
    assert len(log.segments) > 3
    for i in (0, 1, 57, 123, 248, 297):
        if i % 5 == 4:
            continue
        for j in range(3):
            found = fetch_offset_by_timestamp(log, START_MS + 100 * i + 7 * j)
            assert (found.offset, found.timestamp, found.leader_epoch) == (3 * i + j, START_MS + 100 * i + 7 * j, 1)
        between = fetch_offset_by_timestamp(log, START_MS + 100 * i + 15)
        assert (between.offset, between.timestamp) == (3 * (i + 1 + (i % 5 == 3)), START_MS + 100 * (i + 1 + (i % 5 == 3)))
    assert fetch_offset_by_timestamp(log, START_MS + 100 * 300) is None


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_deleted_or_damaged_time_index_file_is_rebuilt_at_load(tmp_path, damage):
    """LogSegment.recover rebuilds the time index (reset, an entry per offset index
    entry, the largest timestamp last); the rebuilt file equals the one written at the
    roll, and lookups after the restart answer as before."""
    _, log = appended(tmp_path, 300, 8000)
    path = tmp_path / "t-0" / f"{log.segments[1].base_offset:020d}.timeindex"
    good = damage_file(path, damage)
    before = [fetch_offset_by_timestamp(log, START_MS + t) for t in range(-50, 30_100, 333)]
    storage = DataDir(tmp_path)
    recovered, effects, report = recover_log(TP, storage, 8000, 0, False, INTERVAL)
    assert [e for e in effects if isinstance(e, ReplaceFile)] == [ReplaceFile(f"t-0/{path.name}", good)]
    write(storage, effects)
    assert path.read_bytes() == good and report.reason is None
    recovered.high_watermark = recovered.log_end_offset
    assert [fetch_offset_by_timestamp(recovered, START_MS + t) for t in range(-50, 30_100, 333)] == before
