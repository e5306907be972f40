"""One partition's replica log: batch headers in segments, offsets, high watermark,
the leader-epoch cache and what the disk has made durable.

Every change to stored bytes is returned as effects (write, truncate, delete, replace,
fsync) for the runtime to carry out. The log keeps only each batch's header
(``StoredBatch``), never its records: reads return headers, which ``regions`` turns
into file regions for the runtime to resolve, and the values of stored records are
read through the runtime's storage port (``broker_core.storage``).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Sequence

from broker_core.effects import DeleteFile, Fsync, ReplaceFile, TruncateFile, WriteBytes
from broker_core.epoch_cache import LeaderEpochCache
from broker_core.errors import CoreError
from broker_core.producer_state import ProducerStateManager
from broker_core.records import DecodeError, Record, RecordBatch
from broker_core.storage import FileRegion, LogStorage, StoredBatch
from broker_core.types import TopicPartition

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
SEGMENT_SUFFIX = ".log"


@dataclass
class Segment:
    base_offset: int
    path: str
    size_bytes: int = 0


@dataclass(frozen=True)
class RecoveryReport:
    truncated_bytes: int
    reason: str | None
    deleted_segments: tuple[str, ...]


class PartitionLog:
    def __init__(self, tp: TopicPartition, segment_bytes: int, storage: LogStorage | None):
        self.tp = tp
        self.directory = str(tp)
        self.segment_bytes = segment_bytes
        self.storage = storage  # the runtime's read side of the data directory
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self.segments: list[Segment] = []
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

    # -- appends -------------------------------------------------------------------
    def append_as_leader(self, records: Sequence[Record] | RecordBatch, leader_epoch: int) -> tuple[RecordBatch, list]:
        """Append records, or a client's batch (its producer fields kept), at the log end."""
        if hasattr(records, "with_offsets"):  # a client's batch (the core's or a binding's)
            batch = records.with_offsets(self.log_end_offset, leader_epoch)
        else:
            batch = RecordBatch(self.log_end_offset, leader_epoch, records)
        return batch, self._append(batch)

    def batch_at(self, offset: int) -> StoredBatch | None:
        """The header of the stored batch holding ``offset``."""
        index = bisect_right(self._bases, offset) - 1
        if index < 0 or self.batches[index].next_offset <= offset:
            return None
        return self.batches[index]

    def append_as_follower(self, batch: Any) -> list:
        """Append a batch the leader sent (any object with a batch's header fields and
        ``encode()``: a RecordBatch, or the real binding's wire batch)."""
        if batch.base_offset != self.log_end_offset:
            raise CoreError(f"{self.tp}: follower append at {batch.base_offset}, log end is {self.log_end_offset}")
        return self._append(batch)

    def _append(self, batch: Any) -> list:
        effects: list[Any] = []
        data = batch.encode()
        if not self.segments:
            self.segments.append(Segment(batch.base_offset, self.segment_path(batch.base_offset)))
        elif self.segments[-1].size_bytes > 0 and self.segments[-1].size_bytes + len(data) > self.segment_bytes:
            # Kafka's Log.roll schedules flush(newOffset): a rolled segment is fsynced at once.
            effects.extend(self._fsync_up_to(batch.base_offset))
            self.segments.append(Segment(batch.base_offset, self.segment_path(batch.base_offset)))
        segment = self.segments[-1]
        effects.append(WriteBytes(segment.path, segment.size_bytes, data, batch))
        self.batches.append(StoredBatch(batch, len(self.segments) - 1, segment.size_bytes, batch.size_bytes))
        self._bases.append(batch.base_offset)
        segment.size_bytes += len(data)
        self.log_end_offset = batch.next_offset
        self.unflushed_messages += batch.next_offset - batch.base_offset
        if batch.producer_id >= 0:  # leader or follower alike (Kafka's Log.append, either origin)
            self.producers.record(batch)
        if batch.leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(batch.leader_epoch, batch.base_offset)
            effects.append(ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode()))
        return effects

    def assign_epoch(self, epoch: int) -> list:
        """A new leader records that its epoch starts at the current log end (KIP-101)."""
        if self.epochs.assign(epoch, self.log_end_offset):
            return [ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode())]
        return []

    # -- truncation ----------------------------------------------------------------
    def truncate_to(self, offset: int) -> list:
        """Remove every batch that holds an offset >= ``offset`` (whole batches only)."""
        # The first batch that holds an offset >= ``offset``: a batch straddling it goes too.
        index = max(bisect_right(self._bases, offset) - 1, 0)
        if index < len(self.batches) and self.batches[index].next_offset <= offset:
            index += 1
        if index >= len(self.batches):
            return []
        effects: list[Any] = []
        new_end = self.batches[index].base_offset
        segment_index, position = self.batches[index].segment, self.batches[index].position
        for segment in self.segments[segment_index + 1:]:
            effects.append(DeleteFile(segment.path))
        del self.segments[segment_index + 1:]
        if position == 0 and segment_index > 0:
            effects.append(DeleteFile(self.segments[segment_index].path))
            del self.segments[segment_index]
        else:
            self.segments[segment_index].size_bytes = position
            effects.append(TruncateFile(self.segments[segment_index].path, position))
        del self.batches[index:]
        del self._bases[index:]
        self.log_end_offset = new_end
        self.high_watermark = min(self.high_watermark, new_end)
        self.durable_offset = min(self.durable_offset, new_end)
        self.recovery_point = min(self.recovery_point, new_end)  # Kafka's Log.truncateTo
        if self.epochs.truncate_from_end(new_end):
            effects.append(ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode()))
        if self.producers:
            # Kafka reloads producer state after a truncation (Log.truncateTo ->
            # loadProducerState); the state must not remember batches the log lost.
            self.producers.rebuild(self.batches)
        return effects

    def drop_epochs_at_log_end(self) -> list:
        """Forget epochs that start at the log end (Kafka 2.1+ Log.truncateTo past the end)."""
        if self.epochs.truncate_from_end(self.log_end_offset):
            return [ReplaceFile(self.epoch_checkpoint_path, self.epochs.encode())]
        return []

    # -- reads ---------------------------------------------------------------------
    def read(self, from_offset: int, max_bytes: int, upper_offset: int | None = None) -> tuple[StoredBatch, ...]:
        """Whole batches from the one holding ``from_offset``; a batch is served only if it
        ends at or below ``upper_offset`` (the high watermark, for consumers). At least
        one batch is returned when any qualifies, even if larger than ``max_bytes``."""
        limit = self.log_end_offset if upper_offset is None else upper_offset
        if from_offset >= limit:
            return ()  # the reader is caught up: most follower fetches
        index = max(bisect_right(self._bases, from_offset) - 1, 0)
        out: list[StoredBatch] = []
        total = 0
        while index < len(self.batches):
            batch = self.batches[index]
            if batch.next_offset > limit:
                break
            if batch.next_offset > from_offset:
                size = batch.size_bytes
                if out and total + size > max_bytes:
                    break
                out.append(batch)
                total += size
            index += 1
        return tuple(out)

    def regions(self, batches: Sequence[StoredBatch]) -> tuple[FileRegion, ...]:
        """The file regions holding ``batches`` (consecutive stored batches, as ``read``
        returns them): one region per segment they touch."""
        out: list[FileRegion] = []
        start = 0
        for i in range(1, len(batches) + 1):
            if i == len(batches) or batches[i].segment != batches[start].segment:
                out.append(self._region(batches[start], batches[i - 1]))
                start = i
        return tuple(out)

    def _region(self, first: StoredBatch, last: StoredBatch) -> FileRegion:
        segment = self.segments[first.segment]
        index = bisect_right(self._bases, last.base_offset)  # the batch after ``last``
        if index < len(self.batches) and self.batches[index].segment == last.segment:
            end = self.batches[index].position
        else:
            end = segment.size_bytes
        return FileRegion(segment.path, first.position, end - first.position)

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
    def flush(self, now_ms: int) -> list:
        """Fsync every segment that holds unflushed data (Kafka's Log.flush())."""
        effects = self._fsync_up_to(self.log_end_offset)
        if effects:
            self.last_flush_ms = now_ms
        return effects

    def _fsync_up_to(self, offset: int) -> list:
        """Fsync the segments holding offsets from the durable offset up to ``offset``;
        the durable offset moves to ``offset`` when the last of them completes."""
        if self.durable_offset >= offset or not self.segments:
            return []
        self._fsync_token += 1
        token = self._fsync_token
        index = max(bisect_right(self._bases, self.durable_offset) - 1, 0)
        first_segment = self.batches[index].segment if self.batches else 0
        segments = [s for s in self.segments[first_segment:] if s.base_offset < offset]
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

    # -- recovery ------------------------------------------------------------------
    @classmethod
    def recover(cls, tp: TopicPartition, storage: LogStorage, segment_bytes: int, recovery_point: int = 0,
                clean_shutdown: bool = False) -> tuple["PartitionLog", list, RecoveryReport]:
        """Rebuild a log from the bytes a restarted process finds on disk.

        Segments are scanned in offset order through the storage port; the first batch
        that fails to decode (a torn write, garbage, a CRC mismatch) or breaks offset
        continuity ends the log: the rest of that segment is truncated and later
        segments are deleted. As in Kafka 2.7.0 (Log.recoverLog), CRCs are checked only
        from the segment holding the recovery point on, and not at all after a clean
        shutdown; the recovery point becomes the recovered log's end.
        """
        log = cls(tp, segment_bytes, storage)
        prefix = log.directory + "/"
        segment_paths = sorted(p for p in storage.paths() if p.startswith(prefix) and p.endswith(SEGMENT_SUFFIX))
        effects: list[Any] = []
        deleted: list[str] = []
        truncated_bytes = 0
        reason: str | None = None
        # The segments that may hold unflushed bytes: from the last one starting at or
        # below the recovery point (Kafka's logSegments(recoveryPoint, Long.MaxValue)).
        bases = [int(p[len(prefix):-len(SEGMENT_SUFFIX)]) for p in segment_paths]
        first_checked = max([b for b in bases if b <= recovery_point], default=0)
        for path, base in zip(segment_paths, bases):
            size = storage.size(path)
            verify = not clean_shutdown and base >= first_checked
            if reason is not None:
                effects.append(DeleteFile(path))
                deleted.append(path)
                truncated_bytes += size
                continue
            if log.batches and base != log.log_end_offset:
                reason = f"segment {path} starts at {base}, expected {log.log_end_offset}"
                effects.append(DeleteFile(path))
                deleted.append(path)
                truncated_bytes += size
                continue
            segment = Segment(base, path)
            log.segments.append(segment)
            position = 0
            while position < size:
                try:
                    batch, end = storage.decode_at(path, position, verify)
                except DecodeError as exc:
                    reason = f"{path} at byte {position}: {exc}"
                    break
                if batch.base_offset != (log.log_end_offset if log.batches else base):
                    reason = f"{path} at byte {position}: offset {batch.base_offset} out of sequence"
                    break
                log.batches.append(StoredBatch(batch, len(log.segments) - 1, position, batch.size_bytes))
                log._bases.append(batch.base_offset)
                log.log_end_offset = batch.next_offset
                position = end
            segment.size_bytes = position
            if position < size:
                truncated_bytes += size - position
                effects.append(TruncateFile(path, position))
        if log.batches:
            log.log_start_offset = log.batches[0].base_offset
        if not log.batches and log.segments:
            log.log_end_offset = log.log_start_offset = log.segments[0].base_offset
        # Kafka loads its last producer snapshot and replays the log after it
        # (Log.loadProducerState); isrlab keeps no snapshot and replays the whole log.
        log.producers.rebuild(log.batches)
        # What a restarted process reads may be page cache only (after a crash, not a
        # power loss): nothing counts as durable until the first flush.
        log.durable_offset = log.log_start_offset
        log.recovery_point = log.log_end_offset  # Kafka: activeSegment.readNextOffset
        epochs_raw = storage.read_file(log.epoch_checkpoint_path)
        if epochs_raw is not None:
            log.epochs = LeaderEpochCache.decode(epochs_raw)
            if log.epochs.truncate_from_end(log.log_end_offset):
                effects.append(ReplaceFile(log.epoch_checkpoint_path, log.epochs.encode()))
        return log, effects, RecoveryReport(truncated_bytes, reason, tuple(deleted))
