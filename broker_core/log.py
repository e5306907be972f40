"""One partition's replica log: segments, offsets, high watermark, the leader-epoch
cache and what the disk has made durable.

Every change to stored bytes is returned as effects (write, truncate, delete, replace,
fsync) for the runtime to carry out. The log never keeps records. Of the active (last)
segment it keeps the newest batches' headers (``StoredBatch``, at most
``ACTIVE_HEADERS``), so that appends, the reads at the log's tail and truncations near
it need no disk; of a sealed segment only its base offset, path and size. Any other
batch is found as Kafka finds it: the segment's sparse offset index
(``broker_core.offset_index``; written next to the segment when it is rolled) gives a
position, and batch headers are read from there through the runtime's storage port
(``broker_core.storage``). Memory therefore grows with the number of segments, not
with the number of batches. A log is rebuilt from its files at startup by
``broker_core.log_loader``.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import takewhile
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence, cast

from broker_core.cleaned_batch import CleanedBatch
from broker_core.effects import DeleteFile, Effect, Fsync, ReplaceFile, Trace, TruncateFile, WriteBytes
from broker_core.epoch_cache import LeaderEpochCache
from broker_core.errors import CoreError
from broker_core.offset_index import DEFAULT_INDEX_INTERVAL_BYTES, INDEX_SUFFIX, OffsetIndex
from broker_core.producer_state import ProducerStateManager
from broker_core.records import ClientBatch, Record, RecordBatch, Records
from broker_core.segment_format import BatchBytes, DecodeError, encode_cleaned_batch, stored_bytes
from broker_core.storage import FileRegion, LogStorage, StoredBatch
from broker_core.time_index import TIME_INDEX_SUFFIX, TimeIndex, largest_after_truncation
from broker_core.types import TopicPartition

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
SEGMENT_SUFFIX = ".log"
# How many sealed segments' indexes stay loaded (Kafka maps them and lets the OS page
# them out; here the least recently used one is dropped and read again when needed).
LOADED_INDEXES = 8
# At most this many of the active segment's newest batch headers stay in memory (the
# tail every caught-up reader and every append needs); when there are more, the older
# half is dropped and read through the index and the port like a sealed segment's.
ACTIVE_HEADERS = 4096


@dataclass
class Segment:
    base_offset: int
    path: str
    size_bytes: int = 0  # the file's length: positions in it are in the binding's format
    # Its batches' Kafka v2 sizes, summed: what segment.bytes and retention.bytes count,
    # so that a threshold means the same in the simulation (whose files hold its own
    # format) as on the real broker (whose files hold v2, where the two are equal).
    log_bytes: int = 0
    # The active segment's index is always here; a sealed one's only while loaded.
    index: OffsetIndex | None = None
    # Time (Kafka 2.7.0 LogSegment): when it was made (``created``), its first batch's max
    # timestamp (``rollingBasedTimestamp``, -1 none), its largest timestamp so far
    # (``maxTimestampSoFar``, -1 none) and when it was last written (the file's
    # ``lastModified``, which stands in for the largest timestamp when no batch has one).
    created_ms: int = 0
    rolling_timestamp: int = -1
    max_timestamp: int = -1
    modified_ms: int = 0
    # The last offset of the batch that carried max_timestamp (offsetOfMaxTimestampSoFar),
    # and the time index: the active segment's in memory, a sealed one's in its file.
    offset_of_max_timestamp: int = -1
    time_index: TimeIndex | None = None

    @property
    def largest_timestamp(self) -> int:
        """LogSegment.largestTimestamp: what retention by time compares."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.modified_ms

    @property
    def index_path(self) -> str:
        return self.path[:-len(SEGMENT_SUFFIX)] + INDEX_SUFFIX

    @property
    def time_index_path(self) -> str:
        return self.path[:-len(SEGMENT_SUFFIX)] + TIME_INDEX_SUFFIX

    @property
    def held_index(self) -> OffsetIndex:
        """The index, where the caller knows it is loaded (the active segment's always is)."""
        assert self.index is not None, f"{self.path}: its index is not loaded"
        return self.index


def _base_of(segment: Segment) -> int:
    return segment.base_offset


class PartitionLog:
    def __init__(self, tp: TopicPartition, segment_bytes: int, storage: LogStorage | None,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES):
        self.tp = tp
        self.directory = str(tp)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.roll_ms = 7 * 24 * 3_600_000  # segment.ms (log.roll.hours 168), less the jitter
        self.roll_jitter_ms = 0
        # Rolls since the caller last looked, as (new segment's base offset, "size" or
        # "time"): the partition traces them (segment_rolled) and clears the list.
        self.rolls: list[tuple[int, str]] = []
        self.storage = storage  # the runtime's read side of the data directory
        self.active_batches: list[StoredBatch] = []  # the active segment's newest headers
        self.active_headers = ACTIVE_HEADERS
        self._active_bases: list[int] = []
        self.segments: list[Segment] = []
        self._loaded_indexes: deque[Segment] = deque()  # sealed segments with their index loaded
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.epochs = LeaderEpochCache()
        self.producers = ProducerStateManager()  # idempotent producers' last batches
        self.durable_offset = 0  # log end offset covered by the last completed fsync
        # Kafka's Log.recoveryPoint: below it the log was flushed (or recovered), so a
        # restart need not check it; checkpointed in recovery-point-offset-checkpoint.
        self.recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush_ms = 0
        self._fsync_token = 0
        self._fsync_targets: dict[int, tuple[int, str]] = {}  # token -> (offset, last path)

    # -- paths ---------------------------------------------------------------------
    def segment_path(self, base_offset: int) -> str:
        return f"{self.directory}/{base_offset:020d}{SEGMENT_SUFFIX}"

    @property
    def epoch_checkpoint_path(self) -> str:
        return f"{self.directory}/{EPOCH_CHECKPOINT}"

    def new_segment(self, base_offset: int, now_ms: int = 0) -> Segment:
        return Segment(base_offset, self.segment_path(base_offset), index=OffsetIndex(base_offset),
                       created_ms=now_ms, modified_ms=now_ms, time_index=TimeIndex(base_offset))

    # -- appends -------------------------------------------------------------------
    def append_as_leader(self, records: Sequence[Record] | ClientBatch, leader_epoch: int,
                         now_ms: int = 0) -> tuple[ClientBatch, list]:
        """Append records, or a client's batch (its producer fields kept), at the log end."""
        # A client's batch (the core's or a binding's). Plain Records are asked first, as
        # hasattr's miss raises and catches an AttributeError per append.
        if type(records) is not Records and hasattr(records, "with_offsets"):
            batch = records.with_offsets(self.log_end_offset, leader_epoch)
        else:
            batch = RecordBatch(self.log_end_offset, leader_epoch, records)
        return batch, self._append(batch, now_ms)

    def append_as_follower(self, batch: Any, now_ms: int = 0) -> list[Effect]:
        """Append a batch the leader sent: a RecordBatch (stored in the core's segment
        format, ``broker_core.segment_format``), or any other object with a batch's
        header fields and ``encode()`` (the real binding's wire batch)."""
        if batch.base_offset < self.log_end_offset:  # past it: a compacted leader's gap
            raise CoreError(f"{self.tp}: follower append at {batch.base_offset}, log end is {self.log_end_offset}")
        return self._append(batch, now_ms)

    def _append(self, batch: Any, now_ms: int = 0) -> list[Effect]:
        effects: list[Effect] = []
        # The core's own batches are written as BatchBytes: their length is exact, their
        # bytes are made only when something reads them (most simulated runs never do).
        # Their fields are read typed, once (any other batch's by name).
        if type(batch) is RecordBatch:
            own = cast(RecordBatch, batch)
            data: bytes | BatchBytes = stored_bytes(own)
            size_bytes = own.size_bytes
            max_timestamp = own.v2_max_timestamp
        else:
            # A compacted leader's cleaned batch reaches a simulated follower as the object
            # (the real binding's has encode()): stored as the cleaner stores one.
            data = encode_cleaned_batch(batch) if type(batch) is CleanedBatch else batch.encode()
            size_bytes = batch.size_bytes
            max_timestamp = getattr(batch, "max_timestamp", -1)
        size = len(data)
        base_offset: int = batch.base_offset
        next_offset: int = batch.next_offset
        segments = self.segments
        sealed = None
        active = segments[-1] if segments else None
        if active is None:
            segments.append(self.new_segment(base_offset, now_ms))
        elif active.log_bytes > 0 and (active.log_bytes + size_bytes > self.segment_bytes
                                       or now_ms - active.created_ms > self.roll_ms - self.roll_jitter_ms
                                       or active.rolling_timestamp >= 0):
            # Most appends fit and are young: _roll_reason (the whole rule) only when not.
            reason = self._roll_reason(active, size_bytes, max_timestamp, now_ms)
            if reason is not None:
                sealed = active
                effects.extend(self._roll(base_offset, reason, now_ms))
        segment = segments[-1]
        if segment.rolling_timestamp < 0 and segment.log_bytes == 0:
            segment.rolling_timestamp = max_timestamp
        if max_timestamp > segment.max_timestamp:
            segment.max_timestamp = max_timestamp
            segment.offset_of_max_timestamp = next_offset - 1
        segment.modified_ms = now_ms
        position = segment.size_bytes
        effects.append(WriteBytes(segment.path, position, data, batch))
        if sealed is not None:
            # Kafka trims a rolled segment's index to its entries (onBecomeInactiveSegment);
            # here it is written then, whole, after the write that needed the roll.
            effects.append(ReplaceFile(sealed.index_path, bytes(sealed.held_index.data)))
            effects.append(self._seal_time_index(sealed))
            self.hold_index(sealed)
        stored = StoredBatch(batch, len(segments) - 1, position, size_bytes, position + size)
        self.active_batches.append(stored)
        self._active_bases.append(base_offset)
        if len(self.active_batches) > self.active_headers:
            self._drop_older_headers()
        if segment.held_index.maybe_append(next_offset - 1, position, self.index_interval_bytes) \
                and segment.max_timestamp >= 0:  # LogSegment.append: both indexes at the same batches
            cast(TimeIndex, segment.time_index).maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
        segment.size_bytes += size
        segment.log_bytes += size_bytes
        self.log_end_offset = next_offset
        self.unflushed_messages += next_offset - base_offset
        if stored.producer_id >= 0:  # leader or follower alike (Kafka's Log.append, either origin)
            self.producers.record(batch)
        if stored.leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(stored.leader_epoch, base_offset)
            effects.append(ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode()))
        return effects

    def _roll(self, base_offset: int, reason: str, now_ms: int) -> list[Effect]:
        """Start a new active segment at ``base_offset``. Kafka's Log.roll schedules
        flush(newOffset): the rolled segment is fsynced at once."""
        effects = self._fsync_up_to(base_offset)
        self.segments.append(self.new_segment(base_offset, now_ms))
        self.active_batches, self._active_bases = [], []
        self.rolls.append((base_offset, reason))
        return effects

    @staticmethod
    def _seal_time_index(segment: Segment) -> ReplaceFile:
        """LogSegment.onBecomeInactiveSegment: the largest timestamp as a last entry, then
        the file written whole (as the offset index); a sealed segment's time index is
        read from its file when a lookup by timestamp needs it."""
        index = cast(TimeIndex, segment.time_index)
        index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
        segment.time_index = None
        return ReplaceFile(segment.time_index_path, bytes(index.data))

    def _roll_reason(self, segment: Segment, size_bytes: int, max_timestamp: int, now_ms: int) -> str | None:
        """Kafka 2.7.0 LogSegment.shouldRoll for a non-empty segment, or None: "size"
        when size > segment.bytes - messagesSize (v2 bytes), "time" when the time waited
        for a roll (timeWaitedForRoll: the batch's max timestamp less the segment's first
        batch's, or without timestamps now less the segment's creation) passes segment.ms
        less the jitter. Kafka's other reasons (a full index, an offset beyond int32 of
        the base) are not modelled: the index grows as needed."""
        if segment.log_bytes <= 0:
            return None
        if segment.log_bytes + size_bytes > self.segment_bytes:
            return "size"
        first = segment.rolling_timestamp
        waited = max_timestamp - first if first >= 0 else now_ms - segment.created_ms
        return "time" if waited > self.roll_ms - self.roll_jitter_ms else None

    def assign_epoch(self, epoch: int) -> list[Effect]:
        """A new leader records that its epoch starts at the current log end (KIP-101)."""
        if self.epochs.assign(epoch, self.log_end_offset):
            return [ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode())]
        return []

    def roll_traces(self) -> list[Trace]:
        """``segment_rolled`` for the rolls since the last call (the caller emits them)."""
        traces = [Trace("segment_rolled", {"partition": str(self.tp), "base_offset": base, "reason": reason})
                  for base, reason in self.rolls]
        self.rolls.clear()
        return traces

    # -- the log start: retention and the leader's start ---------------------------
    def maybe_increment_log_start_offset(self, offset: int) -> list[Effect]:
        """Kafka 2.7.0 Log.maybeIncrementLogStartOffset: move the log start up (never
        past the high watermark), drop the epochs and producers wholly below it."""
        offset = min(offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return []
        self.log_start_offset = offset
        self.producers.truncate_head(offset)
        if self.epochs.truncate_from_start(offset):
            return [ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode())]
        return []

    def delete_oldest_segments(self, count: int, now_ms: int) -> list[Effect]:
        """Kafka 2.7.0 Log.deleteSegments: delete the ``count`` oldest segments, their
        files with them; when that is every segment, first roll an empty one at the log
        end (a log always has one); then the log start moves to the first segment left."""
        effects: list[Effect] = []
        if count >= len(self.segments):
            count = len(self.segments)
            base = self.log_end_offset
            self.segments.append(self.new_segment(base, now_ms))
            self.active_batches, self._active_bases = [], []
            self.rolls.append((base, "retention"))
            effects.append(WriteBytes(self.segment_path(base), 0, b""))  # the file exists, as Kafka's does
        deleted = self.segments[:count]
        del self.segments[:count]
        self._loaded_indexes = deque(s for s in self._loaded_indexes if s.base_offset >= self.segments[0].base_offset)
        for batch in self.active_batches:
            batch.segment -= count  # positions in ``segments`` moved down
        for segment in deleted:
            effects += [DeleteFile(segment.path), DeleteFile(segment.index_path), DeleteFile(segment.time_index_path)]
        effects += self.maybe_increment_log_start_offset(self.segments[0].base_offset)
        return effects

    # -- finding batches -----------------------------------------------------------
    def _segment_holding(self, offset: int) -> int:
        """The index of the last segment starting at or below ``offset`` (0 if none)."""
        return max(bisect_right(self.segments, offset, key=_base_of) - 1, 0)

    def _batches_from(self, offset: int) -> Iterator[StoredBatch]:
        """The stored batches, in order, from the one holding ``offset`` (or the first
        after it): a sealed segment's read through its index and the storage port, the
        active segment's newest from memory (its older ones like a sealed segment's)."""
        if not self.segments:
            return
        active = len(self.segments) - 1
        for i in range(self._segment_holding(offset), active):
            yield from self._sealed_batches(i, offset)
        batches = self.active_batches
        if batches and batches[0].position > 0 and offset < batches[0].base_offset:
            yield from self._sealed_batches(active, offset, batches[0].position)
        for j in range(max(bisect_right(self._active_bases, offset) - 1, 0), len(batches)):
            if batches[j].next_offset > offset:
                yield batches[j]

    def _sealed_batches(self, i: int, offset: int, end: int | None = None,
                        start: int | None = None) -> Iterator[StoredBatch]:
        """Kafka's LogSegment.translateOffset and onwards: the batches of segment ``i``
        ending after ``offset``, read through the port from the position its index gives
        for it (or ``start``) up to ``end``."""
        segment = self.segments[i]
        if self.storage is None:
            raise CoreError(f"{self.tp}: no storage to read segment {segment.path} from")
        if start is not None:
            position = start
        else:
            position = self._index_of(i).lookup(offset) if offset > segment.base_offset else 0
        end = segment.size_bytes if end is None else end
        while position < end:
            try:
                header, after = self.storage.header_at(segment.path, position)
            except DecodeError as exc:
                raise CoreError(f"{self.tp}: {segment.path} holds no batch at byte {position} "
                                f"of {segment.size_bytes}: {exc}") from None
            if header.next_offset > offset:
                yield StoredBatch(header, i, position, header.size_bytes, after)
            position = after

    @property
    def port(self) -> LogStorage:
        """The storage port, where the caller knows the log has one (every log that has
        sealed segments or recovers from files does)."""
        assert self.storage is not None, f"{self.tp}: a log without a storage port read its files"
        return self.storage

    def _index_of(self, i: int) -> OffsetIndex:
        """Sealed segment ``i``'s index, read through the port when it is not loaded. One
        that fails the sanity check (or is missing) is replaced by an empty one, which
        makes every lookup scan from the segment's start: slower, never wrong."""
        segment = self.segments[i]
        if segment.index is None:
            index = OffsetIndex(segment.base_offset, self.port.read_file(segment.index_path) or b"")
            if not index.is_sane(self.segments[i + 1].base_offset, segment.size_bytes):
                index = OffsetIndex(segment.base_offset)
            segment.index = index
            self.hold_index(segment)
        return segment.index

    def hold_index(self, segment: Segment) -> None:
        """Keep a sealed segment's index loaded, dropping the least recently loaded one
        beyond ``LOADED_INDEXES``."""
        self._loaded_indexes.append(segment)
        while len(self._loaded_indexes) > LOADED_INDEXES:
            dropped = self._loaded_indexes.popleft()
            if dropped is not self.segments[-1]:
                dropped.index = None

    def batch_at(self, offset: int) -> StoredBatch | None:
        """The header of the stored batch holding ``offset``."""
        batch = next(self._batches_from(offset), None)
        return batch if batch is not None and batch.base_offset <= offset else None

    # -- truncation ----------------------------------------------------------------
    def truncate_to(self, offset: int) -> list[Effect]:
        """Remove every batch that holds an offset >= ``offset`` (whole batches only)."""
        # The first batch that holds an offset >= ``offset``: a batch straddling it goes too.
        first = next(self._batches_from(offset), None)
        if first is None:
            return []
        effects: list[Effect] = []
        was_active = len(self.segments) - 1
        new_end, i, position = first.base_offset, first.segment, first.position
        removed_bytes = sum(b.size_bytes for b in takewhile(lambda b: b.segment == i, self._batches_from(new_end)))
        for segment in self.segments[i + 1:]:
            effects += [DeleteFile(segment.path), DeleteFile(segment.index_path), DeleteFile(segment.time_index_path)]
        del self.segments[i + 1:]
        if position == 0 and i > 0:
            segment = self.segments[i]
            effects += [DeleteFile(segment.path), DeleteFile(segment.index_path), DeleteFile(segment.time_index_path)]
            del self.segments[i]
            i -= 1
            position = self.segments[i].size_bytes
        else:
            self.segments[i].size_bytes = position
            self.segments[i].log_bytes -= removed_bytes
            effects.append(TruncateFile(self.segments[i].path, position))
        if i < was_active:
            # A sealed segment becomes the active one: its headers are read back and its
            # index is held in memory again (Kafka resizes it for appends, LogSegment.truncateTo).
            self._activate(i, position)
            effects.append(DeleteFile(self.segments[i].index_path))
        else:
            self._trim_active(position)
        effects += self._truncate_time_index(new_end)
        self.log_end_offset = new_end
        self.high_watermark = min(self.high_watermark, new_end)
        self.durable_offset = min(self.durable_offset, new_end)
        self.recovery_point = min(self.recovery_point, new_end)  # Kafka's Log.truncateTo
        if self.epochs.truncate_from_end(new_end):
            effects.append(ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode()))
        if self.producers:
            # Kafka reloads producer state after a truncation (Log.truncateTo ->
            # loadProducerState); the state must not remember batches the log lost.
            # isrlab keeps no producer snapshots: it replays every header, sealed
            # segments' through the storage port.
            self.producers.rebuild(self._batches_from(self.segments[0].base_offset))
        return effects

    def _truncate_time_index(self, new_end: int) -> list[Effect]:
        """LogSegment.truncateTo for time, on the (new) active segment: a sealed one's
        time index is read back from its file (which goes: the active one's lives in
        memory), entries at or past the new end go, and the largest timestamp is found
        again (only when the segment had one, as Kafka's loadLargestTimestamp)."""
        segment = self.segments[-1]
        effects: list[Effect] = []
        if segment.time_index is None:
            raw = self.port.read_file(segment.time_index_path) if segment.max_timestamp >= 0 else None
            segment.time_index = TimeIndex(segment.base_offset, raw or b"")
            effects.append(DeleteFile(segment.time_index_path))
        if segment.max_timestamp >= 0:
            segment.max_timestamp, segment.offset_of_max_timestamp = largest_after_truncation(
                segment.time_index, segment.held_index, self.port, segment.path, segment.size_bytes, new_end)
        return effects

    def _activate(self, i: int, end: int) -> None:
        """Make sealed segment ``i`` (now the last) active, its first ``end`` bytes kept."""
        segment = self.segments[i]
        self._loaded_indexes = deque(s for s in self._loaded_indexes if s.base_offset < segment.base_offset)
        segment.index = OffsetIndex(segment.base_offset)
        batches = []
        for batch in self._sealed_batches(i, segment.base_offset, end, start=0):
            segment.index.maybe_append(batch.next_offset - 1, batch.position, self.index_interval_bytes)
            batches.append(batch)
            if len(batches) > self.active_headers:
                del batches[:len(batches) // 2]
        self.set_active_headers(batches)

    def _trim_active(self, end: int) -> None:
        """Drop the active segment's headers and index entries from position ``end`` on.
        The next entry is then spaced from the last one kept (Kafka counts from the
        truncation point): the index stays the one a rebuild from the bytes makes.
        When no header in memory is left, those from the last entry on are read back."""
        batches = self.active_batches
        keep = bisect_right([b.position for b in batches], end - 1)
        index = self.segments[-1].held_index
        while len(index) and index.entry(len(index) - 1)[1] >= end:
            del index.data[-8:]
        index.last_entry_position = index.entry(len(index) - 1)[1] if len(index) else 0
        if keep == 0 and end > 0 and (not batches or batches[0].position > 0):
            self.set_active_headers(list(self._sealed_batches(len(self.segments) - 1, self.segments[-1].base_offset,
                                                              end, start=index.last_entry_position)))
        else:
            del batches[keep:]
            del self._active_bases[keep:]

    def set_active_headers(self, batches: list[StoredBatch]) -> None:
        """The active segment's headers to hold in memory: its newest, in order, at
        most ``active_headers`` of them (a truncation's or a recovery's read-back)."""
        self.active_batches = batches
        self._active_bases = [b.base_offset for b in batches]

    def _drop_older_headers(self) -> None:
        """Keep the newer half of the active segment's headers in memory."""
        drop = len(self.active_batches) // 2
        del self.active_batches[:drop]
        del self._active_bases[:drop]

    def drop_epochs_at_log_end(self) -> list[Effect]:
        """Forget epochs that start at the log end (Kafka 2.1+ Log.truncateTo past the end)."""
        if self.epochs.truncate_from_end(self.log_end_offset):
            return [ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode())]
        return []

    # -- reads ---------------------------------------------------------------------
    def read(self, from_offset: int, max_bytes: int, upper_offset: int | None = None,
             min_one: bool = True) -> tuple[StoredBatch, ...]:
        """Whole batches from the one holding ``from_offset``; a batch is served only if it
        ends at or below ``upper_offset`` (the high watermark, for consumers). At least
        one batch is returned when any qualifies, even if larger than ``max_bytes``,
        unless ``min_one`` is False (2.7.0 Log.read's minOneMessage: Kafka then sends a
        partial batch the consumer drops, here none)."""
        limit = self.log_end_offset if upper_offset is None else upper_offset
        if from_offset >= limit:
            return ()  # the reader is caught up: most follower fetches
        active = self.active_batches
        if active and from_offset >= active[0].base_offset:
            # The tail every caught-up reader asks for: the headers in memory, taken
            # without _batches_from's generator (one per fetch otherwise).
            first = max(bisect_right(self._active_bases, from_offset) - 1, 0)
            return self._take(active[first:], from_offset, limit, max_bytes, min_one)
        return self._take(self._batches_from(from_offset), from_offset, limit, max_bytes, min_one)

    @staticmethod
    def _take(batches: Iterable[StoredBatch], from_offset: int, limit: int, max_bytes: int,
              min_one: bool = True) -> tuple[StoredBatch, ...]:
        """``read``'s rule over the batches from the one holding ``from_offset`` on."""
        out: list[StoredBatch] = []
        total = 0
        for batch in batches:
            if batch.next_offset <= from_offset:
                continue
            if batch.next_offset > limit:
                break
            size = batch.size_bytes
            if (out or not min_one) and total + size > max_bytes:
                break
            out.append(batch)
            total += size
        return tuple(out)

    def regions(self, batches: Sequence[StoredBatch]) -> tuple[FileRegion, ...]:
        """The file regions holding ``batches`` (consecutive stored batches, as ``read``
        returns them): one region per segment they touch."""
        out: list[FileRegion] = []
        start = 0
        for i in range(1, len(batches) + 1):
            if i == len(batches) or batches[i].segment != batches[start].segment:
                first, last = batches[start], batches[i - 1]
                out.append(FileRegion(self.segments[first.segment].path, first.position, last.end - first.position))
                start = i
        return tuple(out)

    def load(self, from_offset: int = 0, upper_offset: int | None = None) -> tuple:
        """The stored batch objects from the one holding ``from_offset`` up to those
        ending at or below ``upper_offset``, read through the storage port."""
        if self.storage is None:
            raise CoreError(f"{self.tp}: no storage to read stored batches from")
        batches: list = []
        for region in self.regions(self.read(from_offset, 2**62, upper_offset)):
            batches.extend(self.storage.batches_in(region))
        return tuple(batches)

    def records(self) -> list[tuple[int, Record]]:
        return [(b.base_offset + i, r) for b in self.load() for i, r in enumerate(b.records)]

    # -- durability ----------------------------------------------------------------
    def flush(self, now_ms: int) -> list[Effect]:
        """Fsync every segment that holds unflushed data (Kafka's Log.flush())."""
        effects = self._fsync_up_to(self.log_end_offset)
        if effects:
            self.last_flush_ms = now_ms
        return effects

    def _fsync_up_to(self, offset: int) -> list[Effect]:
        """Fsync the segments holding offsets from the durable offset up to ``offset``;
        the durable offset moves to ``offset`` when the last of them completes."""
        if self.durable_offset >= offset or not self.segments:
            return []
        self._fsync_token += 1
        token = self._fsync_token
        segments = [s for s in self.segments[self._segment_holding(self.durable_offset):] if s.base_offset < offset]
        self._fsync_targets[token] = (offset, segments[-1].path)
        self.unflushed_messages = 0
        return [Fsync(s.path, token) for s in segments]

    def fsync_completed(self, path: str, token: int) -> bool:
        """Returns whether the durable offset moved (on the completion of the last
        segment of that flush)."""
        target = self._fsync_targets.get(token)
        if target is None or path != target[1]:
            return False
        # fsyncs complete in order: this one covers every earlier flush too.
        for done in [t for t in self._fsync_targets if t <= token]:
            del self._fsync_targets[done]
        if target[0] <= self.durable_offset:
            return False
        self.durable_offset = min(target[0], self.log_end_offset)
        self.recovery_point = max(self.recovery_point, self.durable_offset)  # Kafka's Log.flush
        return True

    def needs_flush_by_messages(self, interval_messages: int) -> bool:
        """Kafka's check after every append (Log.append): unflushed messages only."""
        return self.durable_offset < self.log_end_offset and self.unflushed_messages >= interval_messages

    def needs_flush_by_time(self, now_ms: int, interval_ms: int) -> bool:
        """The log flusher's check (LogManager.flushDirtyLogs): time since the last flush."""
        return self.durable_offset < self.log_end_offset and now_ms - self.last_flush_ms >= interval_ms
