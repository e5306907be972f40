"""The segments' offset indexes in the real binding: ``.index`` files next to the
``.log`` files of a real data directory, in Kafka's format, used to read sealed
segments whose headers the log no longer holds, and rebuilt when damaged. Kafka
2.7.0: core/src/main/scala/kafka/log/OffsetIndex.scala, LogSegment.scala."""
from __future__ import annotations

import struct

import pytest

from broker_core.effects import ReplaceFile
from broker_core.log import PartitionLog
from broker_core.log_loader import recover_log
from real_io.files import DataDir
from real_io.protocol import record_batch
from tests.real_io.test_log_storage import TP, client_batch, write
from real_io.wire_batch import parse_records
from tests.real_io.damage import DAMAGES, damage as damage_file

INTERVAL = 300


def appended(root, count: int, segment_bytes: int) -> tuple[DataDir, PartitionLog]:
    storage = DataDir(root)
    log = PartitionLog(TP, segment_bytes, storage, INTERVAL)
    for i in range(count):
        [batch] = parse_records(client_batch([f"value-{i}" * (1 + i % 3)]))
        write(storage, log.append_as_leader(batch, 1 + i // 50)[1])
    return storage, log


def kafka_index(segment: bytes, base_offset: int) -> bytes:
    """The index Kafka's LogSegment.recover builds from a segment's record batches v2,
    read with the wire codec (not the core's code): (last offset - base, position) for a
    batch starting more than the interval after the last entry's batch."""
    out, position, last_entry = b"", 0, 0
    while position < len(segment):
        header = record_batch.read_header(segment, position)
        if position - last_entry > INTERVAL:
            out += struct.pack(">ii", header.base_offset + header.last_offset_delta - base_offset, position)
            last_entry = position
        position += header.size
    return out


def test_sealed_segments_have_kafka_format_index_files(tmp_path):
    """Kafka 2.7.0 LogSegment.append / OffsetIndex.append: one 8-byte entry (relative
    offset, position; big-endian int32s) per index.interval.bytes of the segment."""
    storage, log = appended(tmp_path, 400, 8000)
    directory = tmp_path / "t-0"
    logs = sorted(directory.glob("*.log"))
    assert len(logs) > 3
    for path in logs[:-1]:
        base = int(path.stem)
        index = path.with_suffix(".index").read_bytes()
        assert index and index == kafka_index(path.read_bytes(), base)
    assert not logs[-1].with_suffix(".index").exists()  # the active segment's is in memory


def test_reads_of_sealed_segments_equal_those_of_one_segment(tmp_path):
    """A fetch from a sealed segment (index lookup, headers read from the file) refers
    to the same bytes as the same fetch from one segment whose headers are in memory."""
    small_storage, small = appended(tmp_path / "small", 400, 8000)
    whole_storage, whole = appended(tmp_path / "whole", 400, 1 << 30)
    assert len(small.segments) > 3 and len(whole.segments) == 1
    assert len(small.active_batches) < 400 // 3
    for from_offset in range(0, 400, 11):
        for max_bytes in (1, 2000, 1 << 20):
            got = small.read(from_offset, max_bytes)
            assert [b.base_offset for b in got] == [b.base_offset for b in whole.read(from_offset, max_bytes)]
            sent = b"".join(small_storage.read_region(r) for r in small.regions(got))
            expected = b"".join(whole_storage.read_region(r) for r in whole.regions(whole.read(from_offset, max_bytes)))
            assert sent == expected


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_deleted_or_damaged_index_file_is_rebuilt_at_load(tmp_path, damage):
    """Kafka 2.7.0 Log.loadSegmentFiles: no index file, or one failing
    OffsetIndex.sanityCheck, makes the segment recovered and its index rebuilt
    (LogSegment.recover)."""
    _, log = appended(tmp_path, 400, 8000)
    index_path = tmp_path / "t-0" / f"{log.segments[1].base_offset:020d}.index"
    good = damage_file(index_path, damage)
    storage = DataDir(tmp_path)
    recovered, effects, report = recover_log(TP, storage, 8000, 0, False, INTERVAL)
    assert [e for e in effects if isinstance(e, ReplaceFile)] == [
        ReplaceFile(f"t-0/{log.segments[1].base_offset:020d}.index", good)]
    write(storage, effects)
    assert index_path.read_bytes() == good
    assert report.reason is None and recovered.records() == log.records()
