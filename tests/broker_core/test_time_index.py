"""The segments' time index and ListOffsets by timestamp in the core: the file format,
the lookup rules, and the index kept through roll, truncation, recovery and retention.
Kafka 2.7.0: core/src/main/scala/kafka/log/TimeIndex.scala, LogSegment.scala,
Log.scala (fetchOffsetByTimestamp), cluster/Partition.scala (fetchOffsetForTimestamp),
clients/.../record/FileRecords.java (searchForTimestamp)."""
from __future__ import annotations

import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.effects import DeleteFile, ReplaceFile
from broker_core.errors import ErrorCode
from broker_core.log_loader import recover_log
from broker_core.messages import ListOffsetsRequest, ProduceRequest
from broker_core.records import Records
from broker_core.segment_format import decode_batch
from broker_core.storage import MemoryFiles
from broker_core.time_index import ENTRY_BYTES, TimeIndex
from broker_core.timestamp_lookup import fetch_offset_by_timestamp, offset_for_timestamp
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog
from tests.harness import Cluster

TP = TopicPartition("t", 0)


class IndexedLog(AppliedLog):
    def __init__(self, segment_bytes: int, index_interval_bytes: int):
        super().__init__(TP, segment_bytes)
        self.index_interval_bytes = index_interval_bytes


def build(stamps: list[list[int]], segment_bytes: int = 3000, interval: int = 100) -> IndexedLog:
    """A log of one batch per list of record timestamps, the leader epoch changing every
    seventh batch, every batch made high-watermark-visible."""
    log = IndexedLog(segment_bytes, interval)
    for i, batch in enumerate(stamps):
        values = [f"value-{i}-{j}" for j in range(len(batch))]
        log.append_as_leader(Records(values, timestamps=batch), i // 7)
    log.high_watermark = log.log_end_offset
    return log


def rising(count: int, per_batch: int = 2, step: int = 10, start: int = 1000) -> list[list[int]]:
    """Timestamps growing by ``step`` per record (one producer's CreateTime)."""
    return [[start + step * (i * per_batch + j) for j in range(per_batch)] for i in range(count)]


def kafka_time_index(data: bytes, base_offset: int, interval: int) -> bytes:
    """The time index Kafka's LogSegment.recover builds, written out independently from
    a segment's batches: the largest timestamp so far and the last offset of the batch
    that first reached it, offered at each offset index entry (a batch starting more
    than ``interval`` bytes after the last entry's) and kept when it grows, then the
    largest timestamp once more (TimeIndex.maybeAppend keeps it if it grew)."""
    out, last_entry, last_stamp, largest, largest_at, position = b"", 0, -1, -1, -1, 0
    while position < len(data):
        batch, end = decode_batch(data, position)
        if max(batch.records.timestamps) > largest:
            largest, largest_at = max(batch.records.timestamps), batch.next_offset - 1
        if position - last_entry > interval:
            last_entry = position
            if largest > last_stamp:
                out += struct.pack(">qi", largest, largest_at - base_offset)
                last_stamp = largest
        position = end
    if largest > last_stamp:
        out += struct.pack(">qi", largest, largest_at - base_offset)
    return out


def model_answer(log: IndexedLog, stamps: list[list[int]], target: int) -> tuple[int, int] | None:
    """Log.fetchOffsetByTimestamp written over the records themselves: the first segment
    whose largest timestamp is >= target, and in it the first record at or after target
    at or after the log start; (timestamp, offset) or None."""
    flat = [(offset, t) for offset, t in enumerate(t for batch in stamps for t in batch)]
    bounds = [s.base_offset for s in log.segments] + [log.log_end_offset]
    for base, end in zip(bounds, bounds[1:]):
        records = [(o, t) for o, t in flat if base <= o < end]
        if records and max(t for _, t in records) >= target:
            found = [(t, o) for o, t in records if t >= target and o >= log.log_start_offset]
            return found[0] if found else None
    return None


def test_a_rolled_segment_gets_kafkas_12_byte_time_index_entries():
    """TimeIndex.maybeAppend (8-byte timestamp, 4-byte offset relative to the base,
    big-endian; appended only when the timestamp grows), offered by LogSegment.append
    with each offset index entry, and onBecomeInactiveSegment's last entry at roll.
    Timestamps that go back and forth leave entries only where the largest grew."""
    rng = random.Random(7)
    stamps = [[1000 + i * 5 + rng.randrange(-40, 40) for _ in range(2)] for i in range(300)]
    log = build(stamps, segment_bytes=4500, interval=200)
    sealed = log.segments[:-1]
    assert len(sealed) >= 3
    for segment in sealed:
        data = bytes(log.disk.files[segment.path])
        index = bytes(log.disk.files[segment.time_index_path])
        assert index == kafka_time_index(data, segment.base_offset, 200)
        assert len(index) % ENTRY_BYTES == 0 and len(index) // ENTRY_BYTES >= 5
        entries = TimeIndex(segment.base_offset, index)
        assert entries.last_timestamp == segment.max_timestamp  # the last entry: the segment's largest
        assert segment.time_index is None  # a sealed segment's lives in its file
    assert log.segments[-1].time_index_path not in log.disk.files  # the active one's in memory


def test_a_segment_without_timestamps_has_an_empty_time_index():
    """2.7.0 TimeIndex.maybeAppend: "If all the messages are in message format v0, the
    timestamp will always be NoTimestamp. In that case, the time index will be empty."
    (The simulation's batches carry no timestamp.)"""
    log = IndexedLog(3000, 100)
    for i in range(200):
        log.append_as_leader(Records([f"value-{i}"]), 0)
    log.high_watermark = log.log_end_offset
    assert len(log.segments) > 3
    assert all(log.disk.files[s.time_index_path] == b"" for s in log.segments[:-1])
    assert fetch_offset_by_timestamp(log, 0) is None


def test_lookup_gives_the_last_entry_at_or_below_the_target():
    """TimeIndex.lookup (largestLowerBoundSlotFor by KEY): the entry with the largest
    timestamp <= the target, or (NO_TIMESTAMP, baseOffset) below the first."""
    index = TimeIndex(100, struct.pack(">qiqiqi", 50, 3, 70, 9, 90, 20))
    assert index.lookup(0) == (-1, 100) and index.lookup(49) == (-1, 100)
    assert index.lookup(50) == (50, 103) and index.lookup(69) == (50, 103)
    assert index.lookup(70) == (70, 109) and index.lookup(10**12) == (90, 120)


def test_maybe_append_keeps_only_growing_timestamps_and_truncate_drops_offsets_at_or_past():
    """TimeIndex.maybeAppend ignores a timestamp not larger than the last entry's (the
    roll's and close's repeated last entry); TimeIndex.truncateTo removes every entry
    whose offset is >= the offset."""
    index = TimeIndex(10)
    assert not index.maybe_append(-1, 10)  # no timestamp: nothing
    assert index.maybe_append(5, 12) and not index.maybe_append(5, 14) and not index.maybe_append(4, 15)
    assert index.maybe_append(8, 15) and index.maybe_append(9, 20)
    assert [index.entry(n) for n in range(len(index))] == [(5, 12), (8, 15), (9, 20)]
    index.truncate_to(16)
    assert [index.entry(n) for n in range(len(index))] == [(5, 12), (8, 15)]
    index.truncate_to(15)
    assert (index.last_timestamp, index.last_offset) == (5, 12)
    index.truncate_to(10)
    assert len(index) == 0 and (index.last_timestamp, index.last_offset) == (-1, 10)


def test_fetch_offset_by_timestamp_before_between_and_after():
    """Log.fetchOffsetByTimestamp on rising timestamps: before the first record the
    first offset, an exact timestamp its record, one between two records the later,
    after the last none; each with its record's timestamp and batch's leader epoch."""
    log = build(rising(200), segment_bytes=2500)
    assert len(log.segments) > 4
    first = fetch_offset_by_timestamp(log, 0)
    assert (first.timestamp, first.offset, first.leader_epoch) == (1000, 0, 0)
    exact = fetch_offset_by_timestamp(log, 1000 + 10 * 250)
    assert (exact.timestamp, exact.offset, exact.leader_epoch) == (3500, 250, 250 // 2 // 7)
    between = fetch_offset_by_timestamp(log, 1000 + 10 * 250 + 3)
    assert (between.timestamp, between.offset) == (3510, 251)
    assert fetch_offset_by_timestamp(log, 1000 + 10 * 400) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 500), min_size=1, max_size=4), min_size=1, max_size=120),
       st.integers(600, 3000), st.sampled_from([0, 64, 200]), st.integers(0, 600), st.integers(0, 120))
def test_lookup_by_timestamp_equals_a_scan_of_the_records(stamps, segment_bytes, interval, target, cut):
    """Any timestamps (going back and forth), any segment and index sizes: the answer
    through the time and offset indexes equals Log.fetchOffsetByTimestamp written over
    the records (first segment whose largest timestamp reaches the target, its first
    record at or after it); so does it after a truncation and after a recovery."""
    log = build(stamps, segment_bytes, interval)
    for probe in (target, 0, 250, 501):
        found = fetch_offset_by_timestamp(log, probe)
        assert (None if found is None else (found.timestamp, found.offset)) == model_answer(log, stamps, probe)
    offsets = [o for o, _ in enumerate(t for batch in stamps for t in batch)]
    batch_starts = [0]
    for batch in stamps:
        batch_starts.append(batch_starts[-1] + len(batch))
    keep = next((i for i, start in enumerate(batch_starts) if start >= min(cut, len(offsets))), len(stamps))
    log.truncate_to(batch_starts[keep])
    kept = stamps[:keep]
    log.high_watermark = log.log_end_offset
    for probe in (target, 0, 250):
        found = fetch_offset_by_timestamp(log, probe)
        assert (None if found is None else (found.timestamp, found.offset)) == model_answer(log, kept, probe)
    recovered, _, _ = recover_log(TP, log.disk.storage, segment_bytes, 0, False, interval)
    recovered.high_watermark = recovered.log_end_offset
    for probe in (target, 0, 250):
        found = fetch_offset_by_timestamp(recovered, probe)
        assert (None if found is None else (found.timestamp, found.offset)) == model_answer(recovered, kept, probe)


def test_the_log_start_bounds_the_answer():
    """Log.fetchOffsetByTimestamp searches with startingOffset = logStartOffset: a record
    below the log start is never the answer, the first at or after it is."""
    log = build(rising(100), segment_bytes=1 << 20)
    log.log_start_offset = 50
    found = fetch_offset_by_timestamp(log, 0)
    assert (found.timestamp, found.offset) == (1500, 50)


def test_only_offsets_below_the_high_watermark_are_answered():
    """Partition.fetchOffsetForTimestamp for a client (READ_UNCOMMITTED: lastFetchableOffset
    is the high watermark): a record found at or above it is answered as none found
    (error NONE, offset and timestamp -1: ListOffsetResponse.UNKNOWN_OFFSET), or as
    OFFSET_NOT_AVAILABLE while a new leader's high watermark lags its epoch start."""
    log = build(rising(50))
    log.high_watermark = 30
    found = offset_for_timestamp(log, 1000 + 10 * 29, False)
    assert (found.error, found.offset, found.timestamp, found.leader_epoch) == (ErrorCode.NONE, 29, 1290, 2)
    none = offset_for_timestamp(log, 1000 + 10 * 30, False)
    assert (none.error, none.offset, none.timestamp, none.leader_epoch) == (ErrorCode.NONE, -1, -1, -1)
    assert offset_for_timestamp(log, 1000 + 10 * 30, True).error is ErrorCode.OFFSET_NOT_AVAILABLE
    assert offset_for_timestamp(log, 1000, True).offset == 0  # found below it: answered even then


def test_truncation_into_a_sealed_segment_takes_its_time_index_back():
    """Log.truncateTo / LogSegment.truncateTo: later segments go with their .timeindex
    files, the segment holding the offset becomes active with its time index read back,
    cut (TimeIndex.truncateTo) and its largest timestamp found again
    (loadLargestTimestamp); at its next roll its file is written whole again."""
    stamps = rising(150)
    log = build(stamps, segment_bytes=2500)
    assert len(log.segments) >= 4
    segment = log.segments[1]
    cut = segment.base_offset + 10
    later = [s.time_index_path for s in log.segments[2:-1]]
    effects = log.truncate_to(cut)
    assert all(DeleteFile(path) in effects for path in later)
    assert DeleteFile(segment.time_index_path) in effects and segment.time_index_path not in log.disk.files
    assert log.segments[-1] is segment and segment.time_index is not None
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (1000 + 10 * (cut - 1), cut - 1)
    assert all(t < 1000 + 10 * cut for t, _ in (segment.time_index.entry(n) for n in range(len(segment.time_index))))
    for i in range(cut // 2, 150):  # the same batches again: the same files as the first time
        log.append_as_leader(Records(["again", "again"], timestamps=stamps[i]), 30)
    assert bytes(log.disk.files[segment.time_index_path]) == kafka_time_index(
        bytes(log.disk.files[segment.path]), segment.base_offset, 100)


def test_recovery_rebuilds_a_missing_or_damaged_time_index_and_keeps_a_good_one():
    """Kafka rebuilds the indexes of the segments it recovers (LogSegment.recover: the
    time index reset, rebuilt, and the largest timestamp appended); isrlab scans every
    segment at recovery and rewrites a .timeindex that differs, deletes one of no
    sealed segment (the active one's lives in memory, with the last entry too)."""
    log = build(rising(150), segment_bytes=2500)
    files = {p: bytes(d) for p, d in log.disk.files.items()}
    recovered, effects, _ = recover_log(TP, MemoryFiles(files).storage, 2500, 0, False, 100)
    assert not [e for e in effects if isinstance(e, ReplaceFile) and e.path.endswith(".timeindex")]
    active = recovered.segments[-1]
    assert (active.time_index.last_timestamp, active.time_index.last_offset) == (
        active.max_timestamp, recovered.log_end_offset - 1)
    target, orphan = log.segments[1].time_index_path, f"{TP}/{99999:020d}.timeindex"
    good = files[target]
    for damaged in (None, good[:-5], b"\x7f" * len(good)):
        broken = dict(files, **{orphan: b"x" * 12, log.segments[-1].time_index_path: good})
        if damaged is None:
            del broken[target]
        else:
            broken[target] = damaged
        recovered, effects, _ = recover_log(TP, MemoryFiles(broken).storage, 2500, 0, False, 100)
        assert [e for e in effects if isinstance(e, ReplaceFile)] == [ReplaceFile(target, good)]
        assert DeleteFile(orphan) in effects and DeleteFile(log.segments[-1].time_index_path) in effects


def test_a_damaged_sealed_time_index_read_while_running_is_not_used():
    """A sealed segment's .timeindex that fails TimeIndex.sanityCheck is not used: the
    lookup scans the segment from its start, with the same answers."""
    log = build(rising(150), segment_bytes=2500)
    expected = [fetch_offset_by_timestamp(log, t) for t in range(900, 4100, 37)]
    for segment in log.segments[:-1]:
        log.disk.files[segment.time_index_path] = bytearray(struct.pack(">qi", 10**12, -5) + b"\1")
    assert [fetch_offset_by_timestamp(log, t) for t in range(900, 4100, 37)] == expected


def test_retention_deletes_the_time_index_with_its_segment():
    """Log.deleteSegments: a segment goes with its .log, .index and .timeindex files."""
    log = build(rising(150), segment_bytes=2500)
    doomed = log.segments[:2]
    effects = log.delete_oldest_segments(2, 0)
    for segment in doomed:
        assert DeleteFile(segment.time_index_path) in effects and segment.time_index_path not in log.disk.files
    found = fetch_offset_by_timestamp(log, 0)
    assert found.offset == log.log_start_offset == log.segments[0].base_offset


def test_list_offsets_by_timestamp_is_answered_by_the_leader_only():
    """KafkaApis.handleListOffsetRequestV1AndAbove -> Partition.fetchOffsetForTimestamp
    (fetchOnlyFromLeader for a client): the leader answers the offset, its record's
    timestamp and its batch's leader epoch; a follower answers NOT_LEADER_OR_FOLLOWER;
    a timestamp after every record answers offset -1 without an error."""
    cluster = Cluster(brokers=(1, 2, 3))
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    leader = cluster.leader()
    cid = cluster.send(leader, ProduceRequest(cluster.next_correlation_id(), -1, 30000, {
        TP: Records(["a", "b", "c"], timestamps=[5000, 6000, 7000])}))
    assert cluster.wait_for(lambda: cid in cluster.responses, 40000, step_ms=1)
    epoch = cluster.partition(leader).leader_epoch

    def ask(broker: int, timestamp: int):
        response = cluster.request_and_wait(broker, lambda c: ListOffsetsRequest(c, {TP: timestamp}), 1000)
        result = response.partitions[TP]
        return result.error, result.offset, result.timestamp, result.leader_epoch
    assert ask(leader, 5500) == (ErrorCode.NONE, 1, 6000, epoch)
    assert ask(leader, 0) == (ErrorCode.NONE, 0, 5000, epoch)
    assert ask(leader, 7001) == (ErrorCode.NONE, -1, -1, -1)
    follower = next(b for b in (1, 2, 3) if b != leader)
    assert ask(follower, 5500)[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
