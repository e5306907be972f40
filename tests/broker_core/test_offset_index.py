"""The segments' sparse offset index: its file format, its lookup, reads of sealed
segments through it (the log keeps no headers of theirs), its rebuild at recovery, and
truncation across segment boundaries. Kafka 2.7.0: core/src/main/scala/kafka/log/
OffsetIndex.scala, LogSegment.scala, Log.scala."""
from __future__ import annotations

import struct

import pytest

from broker_core.effects import DeleteFile, ReplaceFile, TruncateFile
from broker_core.log_loader import recover_log
from broker_core.offset_index import ENTRY_BYTES, OffsetIndex
from broker_core.records import Record
from broker_core.segment_format import decode_batch, encode_batch
from broker_core.storage import BytesLogStorage, MemoryFiles
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog

TP = TopicPartition("t", 0)


class IndexedLog(AppliedLog):
    def __init__(self, segment_bytes: int, index_interval_bytes: int):
        super().__init__(TP, segment_bytes)
        self.index_interval_bytes = index_interval_bytes


def build(count: int, segment_bytes: int = 1 << 30, interval: int = 100, values_per_batch: int = 1) -> IndexedLog:
    log = IndexedLog(segment_bytes, interval)
    for i in range(count):
        log.append_as_leader(tuple(Record(f"k{i}", f"value-{i}-{j}") for j in range(values_per_batch)), i // 7)
    return log


def batch_positions(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, last offset, position) of every batch in a segment's bytes."""
    out, position = [], 0
    while position < len(data):
        batch, end = decode_batch(data, position)
        out.append((batch.base_offset, batch.next_offset - 1, position))
        position = end
    return out


def expected_index(data: bytes, base_offset: int, interval: int) -> bytes:
    """Kafka's rule written out independently: an entry (last offset - base, position)
    for a batch when more than ``interval`` bytes lie between the last entry's batch
    (or the segment's start) and this batch's start."""
    out, last_entry = b"", 0
    for _, last, position in batch_positions(data):
        if position - last_entry > interval:
            out += struct.pack(">ii", last - base_offset, position)
            last_entry = position
    return out


def test_a_rolled_segment_gets_an_index_of_8_byte_entries_every_interval_bytes():
    """Kafka 2.7.0 LogSegment.append (an entry when bytesSinceLastIndexEntry >
    indexIntervalBytes: the batch's last offset, relative to the segment's base, and its
    position, as OffsetIndex.append writes them: two big-endian int32) and
    LogSegment.onBecomeInactiveSegment (the index trimmed when the segment is rolled)."""
    log = build(300, segment_bytes=4500, interval=200)
    sealed = log.segments[:-1]
    assert len(sealed) >= 3
    for segment in sealed:
        data = bytes(log.disk.files[segment.path])
        index = bytes(log.disk.files[segment.index_path])
        assert index == expected_index(data, segment.base_offset, 200)
        assert len(index) % ENTRY_BYTES == 0 and len(index) // ENTRY_BYTES >= 10
        assert len(index) // ENTRY_BYTES <= len(batch_positions(data)) // 3  # sparse: not one per batch
    # The active segment's index lives in memory until it is rolled.
    assert log.segments[-1].index_path not in log.disk.files


def test_lookup_gives_the_last_entry_at_or_below_the_target():
    """Kafka 2.7.0 OffsetIndex.lookup (largestLowerBoundSlotFor): the largest indexed
    offset <= the target, or the segment's start when there is none."""
    index = OffsetIndex(100, struct.pack(">iiiiii", 4, 300, 9, 700, 20, 1500))
    assert index.lookup(100) == 0 and index.lookup(103) == 0  # below the first entry
    assert index.lookup(104) == 300 and index.lookup(108) == 300
    assert index.lookup(109) == 700 and index.lookup(119) == 700
    assert index.lookup(120) == 1500 and index.lookup(10**9) == 1500
    assert [index.entry(n) for n in range(len(index))] == [(104, 300), (109, 700), (120, 1500)]


def test_a_sealed_segment_keeps_no_headers_in_memory():
    """The log holds the active segment's headers only; sealed segments keep their base
    offset, size and (for the few last used) their index."""
    log = build(300, segment_bytes=3000, interval=100)
    active = log.segments[-1]
    assert len(log.segments) > 5
    assert log.active_batches and all(b.base_offset >= active.base_offset for b in log.active_batches)
    assert len(log.active_batches) < 300 // (len(log.segments) - 1)


def test_reads_of_sealed_segments_through_the_index_equal_those_of_one_big_segment():
    """Kafka 2.7.0 LogSegment.translateOffset: the index gives a position, batch headers
    are read from there. Every read (any start offset, any size limit, any upper bound)
    returns the same batches, with the same bytes, as the same log held in one segment
    whose headers are all in memory."""
    sealed = build(150, segment_bytes=2500, interval=100, values_per_batch=2)
    whole = build(150, values_per_batch=2)
    assert len(sealed.segments) >= 4 and len(whole.segments) == 1
    for from_offset in range(0, 300, 7):
        for max_bytes in (1, 500, 3000, 10**9):
            for upper in (None, 150, 299):
                got = sealed.read(from_offset, max_bytes, upper)
                assert [(b.base_offset, b.next_offset, b.size_bytes) for b in got] == [
                    (b.base_offset, b.next_offset, b.size_bytes) for b in whole.read(from_offset, max_bytes, upper)]
                assert [encode_batch(b) for r in sealed.regions(got) for b in sealed.disk.storage.batches_in(r)] == [
                    encode_batch(b) for b in sealed.load(from_offset, upper)][:len(got)]
    assert sealed.records() == whole.records()
    assert [sealed.batch_at(o).base_offset for o in range(300)] == [whole.batch_at(o).base_offset for o in range(300)]


class CountingStorage(BytesLogStorage):
    """The in-memory port, counting the headers read (what a lookup costs)."""
    def __init__(self, files: MemoryFiles):
        super().__init__(files.files.get, files.files.keys)
        self.headers_read = 0

    def header_at(self, path, position):
        self.headers_read += 1
        return super().header_at(path, position)


def test_a_read_from_a_sealed_segment_scans_only_from_the_index_entry():
    """The scan starts at the indexed position: a one-batch read deep inside a sealed
    segment reads at most the batches of one index interval, not the segment."""
    log = build(400, segment_bytes=1 << 14, interval=256)
    assert len(log.segments) >= 2
    counting = CountingStorage(log.disk)
    log.storage = counting
    segment = log.segments[0]
    batches_in_segment = len(batch_positions(bytes(log.disk.files[segment.path])))
    target = segment.base_offset + batches_in_segment - 3
    [batch] = log.read(target, 1)
    assert batch.base_offset == target
    per_interval = 256 // min(b.end - b.position for b in log.active_batches) + 2
    assert counting.headers_read <= per_interval < batches_in_segment // 4


@pytest.mark.parametrize("damage", ["missing", "cut", "garbage", "stale"])
def test_a_missing_or_damaged_index_is_rebuilt_at_recovery(damage):
    """Kafka 2.7.0 Log.loadSegmentFiles: a missing offset index (NoSuchFileException) or
    a corrupt one (OffsetIndex.sanityCheck: CorruptIndexException) makes the segment be
    recovered, which rebuilds its index from the log (LogSegment.recover). isrlab scans
    every header at recovery anyway, so it compares the file with the rebuilt index."""
    log = build(300, segment_bytes=3000, interval=100)
    files = {p: bytes(d) for p, d in log.disk.files.items()}
    target = log.segments[1].index_path
    good = files[target]
    if damage == "missing":
        del files[target]
    elif damage == "cut":
        files[target] = good[:-3]
    elif damage == "garbage":
        files[target] = bytes(len(good))  # zeros: every entry at offset base+0, position 0
    else:
        files[target] = good[:-ENTRY_BYTES]  # sane, but an entry short
    recovered, effects, report = recover_log(TP, MemoryFiles(files).storage, 3000, 0, False, 100)
    assert ReplaceFile(target, good) in effects
    assert report.truncated_bytes == 0 and report.reason is None
    assert [e for e in effects if isinstance(e, ReplaceFile)] == [ReplaceFile(target, good)]
    assert recovered.records() == log.records()


def test_recovery_deletes_index_files_of_no_sealed_segment():
    """Kafka 2.7.0 Log.loadSegmentFiles deletes an orphaned index (no log file); the
    active segment's index lives in memory in isrlab, so a file of it goes too."""
    log = build(300, segment_bytes=3000, interval=100)
    files = {p: bytes(d) for p, d in log.disk.files.items()}
    orphan = f"{TP}/{99999:020d}.index"
    active_index = log.segments[-1].index_path
    files[orphan] = b"\0" * 8
    files[active_index] = b"\0" * 16
    recovered, effects, _ = recover_log(TP, MemoryFiles(files).storage, 3000, 0, False, 100)
    assert DeleteFile(orphan) in effects and DeleteFile(active_index) in effects
    assert not [e for e in effects if isinstance(e, ReplaceFile)]
    assert recovered.records() == log.records()


def test_a_damaged_index_found_while_running_is_not_used():
    """A sealed segment's index read back (not loaded) that fails the sanity check is
    replaced by an empty one: the read scans from the segment's start, still right."""
    log = build(300, segment_bytes=3000, interval=100)
    expected = [(b.base_offset, b.position) for b in log.read(0, 10**9)]
    for segment in log.segments[:-1]:
        segment.index = None
        log.disk.files[segment.index_path] = bytearray(b"\xff" * 12)
    log._loaded_indexes.clear()
    assert [(b.base_offset, b.position) for b in log.read(0, 10**9)] == expected
    for offset in range(0, 300, 13):
        assert log.batch_at(offset).base_offset == offset


def test_truncation_into_a_sealed_segment_makes_it_active_again():
    """Kafka 2.7.0 Log.truncateTo: later segments deleted (their index too), the segment
    holding the offset truncated with its index (LogSegment.truncateTo,
    OffsetIndex.truncateTo) and active again; appends continue and roll again."""
    log = build(300, segment_bytes=3000, interval=100)
    third = log.segments[2]
    target = third.base_offset + 5
    later = log.segments[3:]
    effects = log.truncate_to(target)
    for segment in later:
        assert DeleteFile(segment.path) in effects and DeleteFile(segment.index_path) in effects
    assert any(isinstance(e, TruncateFile) and e.path == third.path for e in effects)
    assert DeleteFile(third.index_path) in effects
    assert log.segments[-1] is third and log.log_end_offset == target
    assert [b.base_offset for b in log.active_batches] == list(range(third.base_offset, target))
    assert [o for o, _ in log.records()] == list(range(target))
    for i in range(300, 400):  # append past the next roll: the index is written afresh
        log.append_as_leader((Record(None, f"again-{i}"),), 9)
    assert log.segments[-1] is not third
    data = bytes(log.disk.files[third.path])
    assert bytes(log.disk.files[third.index_path]) == expected_index(data, third.base_offset, 100)
    recovered, effects, report = recover_log(TP, log.disk.storage, 3000, 0, False, 100)
    assert report.reason is None and not [e for e in effects if isinstance(e, ReplaceFile)]
    assert recovered.records() == log.records()


def test_truncation_at_a_segment_base_deletes_it_and_reactivates_the_one_before():
    log = build(300, segment_bytes=3000, interval=100)
    second, third = log.segments[1], log.segments[2]
    effects = log.truncate_to(third.base_offset)
    assert DeleteFile(third.path) in effects and DeleteFile(third.index_path) in effects
    assert DeleteFile(second.index_path) in effects
    assert log.segments[-1] is second and log.log_end_offset == third.base_offset
    assert [b.base_offset for b in log.active_batches] == list(range(second.base_offset, third.base_offset))
    assert [b.end for b in log.active_batches][-1] == second.size_bytes
    assert [o for o, _ in log.records()] == list(range(third.base_offset))


def test_truncation_replays_producer_state_from_sealed_segments():
    """Kafka 2.7.0 Log.truncateTo -> loadProducerState: the producer state is rebuilt
    from what the log keeps, sealed segments included (read through the port)."""
    from broker_core.records import RecordBatch
    log = IndexedLog(2000, 100)
    for i in range(120):
        batch = RecordBatch(0, -1, (Record(None, f"p{i}"),), producer_id=7, producer_epoch=0, base_sequence=i)
        log.append_as_leader(batch, 0)
    assert len(log.segments) > 3
    cut = log.segments[-1].base_offset - 1  # the last batch of a sealed segment goes
    log.truncate_to(cut)
    entry = log.producers.entries[7]
    assert entry.last_sequence == cut - 1
    assert [m.first_offset for m in entry.batches] == list(range(cut - 5, cut))


def test_a_late_follower_catches_up_from_the_leaders_sealed_segments():
    """Through the in-test router (MemoryFiles disks): a replica that starts after the
    leader rolled many segments fetches them all through the leader's indexes, and
    every replica ends with the same records and the same index files."""
    from tests.broker_core.test_replication import produce_batches
    from tests.harness import Cluster
    cluster = Cluster(assignment={0: [1, 2, 3]}, config={"log.segment.bytes": 1500, "log.index.interval.bytes": 200})
    cluster.start(1)
    cluster.start(2)
    assert cluster.wait_for(lambda: cluster.settled(replicas=[1, 2]), 5000)
    acked = produce_batches(cluster, "v", 150, acks=1)
    assert len(acked) == 150
    cluster.start(3)
    assert cluster.wait_for(cluster.settled, 60000)
    leader = cluster.leader()
    values = {b: cluster.values(b) for b in cluster.brokers}
    assert values[3] == values[leader] and acked == values[leader]
    leader_log = cluster.partition(leader).log
    assert len(leader_log.segments) >= 5 and len(leader_log.active_batches) < 150 // 4
    indexes = {b: {p: bytes(d) for p, d in cluster.disks[b].files.items() if p.endswith(".index")}
               for b in cluster.brokers}
    assert indexes[3] == indexes[leader] and len(indexes[leader]) == len(leader_log.segments) - 1


def test_only_the_newest_headers_of_the_active_segment_stay_in_memory():
    """A large active segment keeps its newest headers only (``active_headers``); reads
    and truncations before them go through its in-memory index and the port, and give
    what a log holding every header gives."""
    small = build(300, interval=100)
    small.active_headers = 6
    for i in range(300, 330):
        small.append_as_leader((Record(None, f"more-{i}"),), 50)
    whole = build(300, interval=100)
    whole.active_headers = 10**9
    for i in range(300, 330):
        whole.append_as_leader((Record(None, f"more-{i}"),), 50)
    assert len(small.segments) == 1 and len(small.active_batches) <= 6
    for from_offset in range(0, 330, 9):
        for max_bytes in (1, 700, 10**9):
            assert [(b.base_offset, b.position, b.end) for b in small.read(from_offset, max_bytes)] == [
                (b.base_offset, b.position, b.end) for b in whole.read(from_offset, max_bytes)]
    assert small.records() == whole.records()
    for log in (small, whole):
        log.truncate_to(123)  # far before the headers in memory
    assert [(b.base_offset, b.position) for b in small.active_batches] == [
        (b.base_offset, b.position) for b in whole.active_batches][-len(small.active_batches):]
    assert small.active_batches[-1].base_offset == 122 and bytes(small.segments[0].index.data) == bytes(
        whole.segments[0].index.data)
    for log in (small, whole):
        for i in range(40):
            log.append_as_leader((Record(None, f"after-{i}"),), 60)
    assert small.records() == whole.records()
    recovered, _, _ = recover_log(TP, small.disk.storage, 1 << 30, 0, False, 100)
    assert recovered.records() == whole.records()


def test_the_sanity_check_refuses_an_index_that_cannot_belong_to_the_segment():
    """Kafka 2.7.0 OffsetIndex.sanityCheck: a size that is not a multiple of 8, or a
    last offset below the base offset, is a corrupt index; isrlab also refuses entries
    past the segment's end."""
    entries = struct.pack(">iiii", 3, 100, 9, 400)
    assert OffsetIndex(50, entries).is_sane(next_offset=70, segment_size=500)
    assert OffsetIndex(50, b"").is_sane(next_offset=70, segment_size=500)
    assert not OffsetIndex(50, entries[:-1]).is_sane(70, 500)  # a torn entry
    assert not OffsetIndex(50, struct.pack(">ii", -1, 0)).is_sane(70, 500)  # below the base offset
    assert not OffsetIndex(50, entries).is_sane(next_offset=59, segment_size=500)  # past the next segment
    assert not OffsetIndex(50, entries).is_sane(next_offset=70, segment_size=400)  # past the file's end
