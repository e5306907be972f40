"""The log cleaner: one cleaning of one log, as Kafka 2.7.0's Cleaner does it, in bounded steps.

``Cleaning`` is a deterministic state machine. A runtime (in a later slice: a cleaner
timer in each binding) calls ``step(budget)``, which does at most ``budget`` units of
work (one record read, or one batch that holds no record) and returns whether the
cleaning is done, so cleaning interleaves with traffic instead of stopping the broker
for a whole log. It never reads a file itself: it asks a ``SegmentReader`` for a
segment's batches, and hands back new batches per group of segments (``CleanedGroup``)
for the log to swap in, and the offset for the cleaner checkpoint.

The work, from core/src/main/scala/kafka/log/LogCleaner.scala (Cleaner):

1. The offset map (buildOffsetMap, buildOffsetMapForSegment): every keyed record of the
   dirty range [first dirty offset, first uncleanable offset) sets key -> its offset, so
   the map ends with each key's last offset; its latest offset is the last batch's last
   offset and then each dirty segment's end. Kafka's map is bounded
   (log.cleaner.dedupe.buffer.size) and a full map ends the range early; isrlab's is a
   dict with no bound, so the whole dirty range is always mapped.
2. The delete horizon (Cleaner.clean): the last modified time of the last segment below
   the first dirty offset, minus delete.retention.ms (0 when no segment lies below it, so
   a log's first cleaning keeps every tombstone). A segment whose last modified time is
   after the horizon keeps its tombstones (cleanSegments: retainDeletesAndTxnMarkers).
3. The groups (groupSegmentsBySize): the segments from the log's first up to the end of
   the mapped range, in runs whose sizes sum to at most segment.bytes (and whose indexes
   to at most the index size bound, and whose offsets span at most Int.MaxValue), each
   cleaned into one new segment with the first segment's base offset and the last one's
   last modified time (cleanSegments).
4. Each batch (cleanInto's RecordFilter and MemoryRecords.filterTo): a record is kept
   when it lies beyond the map's latest offset, or it has a key, its offset is at least
   the map's offset for that key (absent keys: -1), and it has a value or its segment
   keeps tombstones (shouldRetainRecord). Keyless records are dropped (Kafka counts them
   as invalid; a compacted topic refuses them at produce). A batch that keeps every
   record is written unchanged (writeOriginalBatch); one that keeps some is rebuilt with
   its base offset, last offset and producer fields (``broker_core.cleaned_batch``); one
   that keeps none is dropped (BatchRetention.DELETE_EMPTY) unless it is the last batch of
   an active producer, which stays as an empty batch (RETAIN_EMPTY) so the producer's
   last sequence and epoch survive. Offsets never change.

isrlab has no transactions, so Kafka's aborted-transaction and marker handling
(CleanedTransactionMetadata, BatchRetention.DELETE) has nothing to act on here.
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from broker_core import mutants
from broker_core.cleaned_batch import CleanableBatch, record_offsets, retained
from broker_core.cleaner_selection import LogToClean, SegmentInfo

# LogConfig's segment.index.bytes default (10 MiB): groupSegmentsBySize's index bound.
DEFAULT_MAX_INDEX_BYTES = 10485760
_INT_MAX = 2**31 - 1  # a v2 batch's offset delta and an index entry's relative offset are int32


class SegmentReader(Protocol):
    """Where a cleaning reads a segment's batches, in offset order (in a later slice,
    PartitionLog over the runtime's storage port)."""

    def segment_batches(self, base_offset: int) -> Sequence[CleanableBatch]: ...


class CleanedGroup:
    """One group's result: the batches of the new segment that replaces the segments
    ``replaced`` (their base offsets). The new segment has base offset ``base_offset``
    (the first replaced one's) and last modified time ``last_modified_ms`` (the last
    replaced one's, as cleanSegments sets it)."""
    __slots__ = ("base_offset", "replaced", "batches", "last_modified_ms")

    def __init__(self, replaced: Sequence[int], batches: Sequence[CleanableBatch], last_modified_ms: int):
        self.replaced = tuple(replaced)
        self.base_offset = self.replaced[0]
        self.batches = tuple(batches)
        self.last_modified_ms = last_modified_ms

    @property
    def size_bytes(self) -> int:
        return sum(batch.size_bytes for batch in self.batches)

    def __repr__(self) -> str:
        return f"CleanedGroup(replaces {list(self.replaced)}, {len(self.batches)} batches)"


class CleanerStats:
    """Counts of one cleaning (Kafka's CleanerStats, the parts a trace or benchmark wants)."""
    __slots__ = ("map_records_read", "records_read", "records_retained", "invalid_records", "tombstones_removed",
                 "bytes_read", "bytes_written")

    def __init__(self) -> None:
        self.map_records_read = 0
        self.records_read = 0
        self.records_retained = 0
        self.invalid_records = 0  # keyless records found (and dropped)
        self.tombstones_removed = 0  # null values not kept (superseded, or past the delete horizon)
        self.bytes_read = 0
        self.bytes_written = 0


def group_segments_by_size(segments: Sequence[SegmentInfo], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[tuple[SegmentInfo, ...]]:
    """Cleaner.groupSegmentsBySize (2.7.0): consecutive segments in groups whose log
    sizes and index sizes stay within the bounds and whose offsets span at most
    Int.MaxValue (a segment's last offset estimated by the next one's base, or by the
    first uncleanable offset for the last); every group has at least one segment."""
    groups: list[tuple[SegmentInfo, ...]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size, index_size = segments[i].size_bytes, segments[i].index_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
            if (log_size + candidate.size_bytes > max_size or index_size + candidate.index_bytes > max_index_size
                    or last_offset - group[-1].base_offset > _INT_MAX):
                break
            group.append(candidate)
            log_size += candidate.size_bytes
            index_size += candidate.index_bytes
            i += 1
        groups.append(tuple(group))
    return groups


def delete_horizon_ms(to_clean: LogToClean) -> int:
    """Cleaner.clean: the last modified time of the last segment below the first dirty
    offset less delete.retention.ms; 0 when there is none."""
    if mutants.TOMBSTONE_REMOVED_EARLY:
        return 2 ** 62  # every segment is past the horizon: no tombstone is retained
    below = to_clean.log.log_segments(0, to_clean.first_dirty_offset) if to_clean.first_dirty_offset > 0 else ()
    if not below:
        return 0
    return below[-1].last_modified_ms - to_clean.log.config.log_cleaner_delete_retention_ms


class _Walk:
    """A resumable position in a run of segments: which segment, its batches (read when
    it is reached), which batch, which record."""
    __slots__ = ("segments", "segment_index", "batches", "batch_index", "record_index")

    def __init__(self, segments: Sequence[SegmentInfo]):
        self.segments = tuple(segments)
        self.segment_index = 0
        self.batches: Sequence[CleanableBatch] | None = None
        self.batch_index = 0
        self.record_index = 0

    def next_segment(self) -> None:
        self.segment_index += 1
        self.batches = None
        self.batch_index = self.record_index = 0


class Cleaning:
    """One cleaning of the log ``to_clean`` (as grab_filthiest chose it).
    ``producer_last_offsets`` maps each active producer id to the last offset of its
    last batch (Log.lastRecordsOfActiveProducers' lastDataOffset): those batches stay,
    empty if need be."""

    def __init__(self, to_clean: LogToClean, reader: SegmentReader, producer_last_offsets: Mapping[int, int],
                 max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES, delete_horizon: int | None = None):
        if to_clean.first_dirty_offset >= to_clean.first_uncleanable_offset:
            raise ValueError(f"{to_clean.tp}: nothing to clean in [{to_clean.first_dirty_offset}, "
                             f"{to_clean.first_uncleanable_offset})")
        self.to_clean = to_clean
        self.reader = reader
        self.producer_last_offsets = dict(producer_last_offsets)
        self.max_index_bytes = max_index_bytes
        # Cleaner.clean computes it; Cleaner.doClean takes it given (Kafka's tests do so too).
        self.delete_horizon_ms = delete_horizon_ms(to_clean) if delete_horizon is None else delete_horizon
        self.offset_map: dict[str, int] = {}
        self.latest_offset = -1  # OffsetMap.latestOffset
        self.stats = CleanerStats()
        self.groups: list[CleanedGroup] = []  # each group's result, as it completes
        self.done = False
        log = to_clean.log
        self._dirty = log.log_segments(to_clean.first_dirty_offset, to_clean.first_uncleanable_offset)
        self._walk = _Walk(self._dirty)
        self._mapping = True
        self._groups: list[tuple[SegmentInfo, ...]] = []
        self._group_index = 0
        self._out: list[CleanableBatch] = []  # the current group's new batches
        self._kept: list[int] = []  # the current batch's retained record indexes

    @property
    def next_dirty_offset(self) -> int:
        """The offset the cleaner checkpoint takes when this cleaning is done (doClean's
        endOffset: the map's latest offset + 1)."""
        if self._mapping:
            raise RuntimeError("the offset map is not built yet")
        return self.latest_offset + 1

    def step(self, budget: int) -> bool:
        """At most ``budget`` units of work (a record, or a batch with no record); True
        once the cleaning is done and every group is in ``groups``."""
        if budget < 1:
            raise ValueError("a step needs a budget of at least 1")
        while budget > 0 and not self.done:
            budget -= self._map_some(budget) if self._mapping else self._clean_some(budget)
        return self.done

    def run(self) -> Cleaning:
        """The whole cleaning at once (tests, and a binding with no need to interleave)."""
        while not self.step(1 << 30):
            pass
        return self

    # -- phase 1: the offset map ---------------------------------------------------------
    def _map_some(self, budget: int) -> int:
        walk = self._walk
        if walk.segment_index >= len(walk.segments):
            self._start_cleaning()
            return 0
        batches = self._batches_of(walk)
        if walk.batch_index >= len(batches):  # the segment's end: fast-forward over a gap
            following = walk.segment_index + 1
            self.latest_offset = (walk.segments[following].base_offset if following < len(walk.segments)
                                  else self.to_clean.first_uncleanable_offset) - 1
            walk.next_segment()
            return 0
        batch = batches[walk.batch_index]
        start = self.to_clean.first_dirty_offset
        keys, offsets = batch.records.keys, record_offsets(batch)
        end = min(len(offsets), walk.record_index + budget)
        if keys is not None:
            offset_map = self.offset_map
            for i in range(walk.record_index, end):
                key = keys[i]
                if key is not None and offsets[i] >= start:
                    offset_map[key] = offsets[i]
        used = max(end - walk.record_index, 1 if not offsets else 0)
        self.stats.map_records_read += end - walk.record_index
        walk.record_index = end
        if end == len(offsets):
            if batch.next_offset - 1 >= start:
                self.latest_offset = batch.next_offset - 1
            walk.batch_index += 1
            walk.record_index = 0
        return used

    def _start_cleaning(self) -> None:
        self._mapping = False
        if mutants.CLEANER_DROPS_LAST_VALUE:
            # each key's latest offset counts as superseded: its last value goes too
            self.offset_map = {key: offset + 1 for key, offset in self.offset_map.items()}
        to_clean = self.to_clean
        log = to_clean.log
        segments = log.log_segments(0, self.latest_offset + 1)
        self._groups = group_segments_by_size(segments, log.config.log_segment_bytes, self.max_index_bytes,
                                              to_clean.first_uncleanable_offset)
        self._walk = _Walk(self._groups[0] if self._groups else ())
        if not self._groups:
            self.done = True

    # -- phase 2: rewrite each group -------------------------------------------------------
    def _clean_some(self, budget: int) -> int:
        walk = self._walk
        if walk.segment_index >= len(walk.segments):
            self._finish_group()
            return 0
        batches = self._batches_of(walk)
        if walk.batch_index >= len(batches):
            walk.next_segment()
            return 0
        batch = batches[walk.batch_index]
        segment = walk.segments[walk.segment_index]
        retain_deletes = segment.last_modified_ms > self.delete_horizon_ms
        count = len(batch.records)
        end = min(count, walk.record_index + budget)
        self._keep_records(batch, walk.record_index, end, retain_deletes)
        used = max(end - walk.record_index, 1 if count == 0 else 0)
        walk.record_index = end
        if end == count:
            self._close_batch(batch)
            walk.batch_index += 1
            walk.record_index = 0
        return used

    def _keep_records(self, batch: CleanableBatch, begin: int, end: int, retain_deletes: bool) -> None:
        """Cleaner.shouldRetainRecord for the records ``begin`` to ``end`` of ``batch``."""
        records, offsets = batch.records, record_offsets(batch)
        keys, values = records.keys, records.values
        latest, offset_map, kept = self.latest_offset, self.offset_map, self._kept
        for i in range(begin, end):
            offset = offsets[i]
            if offset > latest:
                kept.append(i)
                continue
            key = None if keys is None else keys[i]
            if key is None:
                self.stats.invalid_records += 1
            elif offset >= offset_map.get(key, -1) and (values[i] is not None or retain_deletes):
                kept.append(i)
            elif values[i] is None:
                self.stats.tombstones_removed += 1
        self.stats.records_read += end - begin

    def _close_batch(self, batch: CleanableBatch) -> None:
        """MemoryRecords.filterTo's choice for a batch whose records are all filtered."""
        kept, self._kept = self._kept, []
        self.stats.bytes_read += batch.size_bytes
        if len(kept) == len(batch.records) and kept:
            out: CleanableBatch | None = batch  # writeOriginalBatch: every record kept
        elif kept or self._retain_empty(batch):
            out = retained(batch, kept)
        else:
            out = None  # BatchRetention.DELETE_EMPTY
        if out is not None:
            self._out.append(out)
            self.stats.records_retained += len(kept)
            self.stats.bytes_written += out.size_bytes

    def _retain_empty(self, batch: CleanableBatch) -> bool:
        """cleanInto's isBatchLastRecordOfProducer: an active producer's last batch."""
        return batch.producer_id >= 0 and self.producer_last_offsets.get(batch.producer_id) == batch.next_offset - 1

    def _finish_group(self) -> None:
        group = self._groups[self._group_index]
        self.groups.append(CleanedGroup([s.base_offset for s in group], self._out, group[-1].last_modified_ms))
        self._out = []
        self._group_index += 1
        if self._group_index < len(self._groups):
            self._walk = _Walk(self._groups[self._group_index])
        else:
            self.done = True

    def _batches_of(self, walk: _Walk) -> Sequence[CleanableBatch]:
        if walk.batches is None:
            walk.batches = self.reader.segment_batches(walk.segments[walk.segment_index].base_offset)
        return walk.batches
