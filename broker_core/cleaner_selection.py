"""Which log the cleaner cleans next, and which offsets of it (Kafka 2.7.0's LogCleanerManager).

Pure functions over a description of each compacted log (``CleanableLog``): its config,
log start and end, the cleaner checkpoint (the first dirty offset of the last cleaning)
and its segments, the last one being the active segment. A binding (or PartitionLog, in
a later slice) builds these from what it holds; nothing here reads a file or a clock.

The rules, each from core/src/main/scala/kafka/log/LogCleanerManager.scala:

- ``cleanable_offsets`` (cleanableOffsets): the first dirty offset is the checkpoint,
  reset to the log start when it lies below the log start or beyond the log end; the
  first uncleanable offset is the least of the active segment's base offset and the base
  of the first dirty segment whose largest timestamp is within min.compaction.lag.ms of
  now; never below the first dirty offset.
- ``max_compaction_delay`` (maxCompactionDelay): how far past max.compaction.lag.ms the
  earliest first-batch timestamp of the dirty, non-active segments is; a log with a delay
  must be cleaned whatever its dirty ratio.
- ``LogToClean`` (LogCleaner.scala's case class and calculateCleanableBytes): clean bytes
  (segments below the first dirty offset), cleanable bytes (segments from the first dirty
  one to the first uncleanable one) and their ratio.
- ``grab_filthiest`` (grabFilthiestCompactedLog): compacted logs with bytes, not in
  progress; kept when they must be cleaned now and have cleanable bytes, or when their
  ratio exceeds min.cleanable.dirty.ratio (strictly); the highest ratio wins. Kafka's
  ``max`` keeps the first of equal logs in its pool's order, which is a hash map's; isrlab
  breaks ties by topic and partition, so the choice is deterministic.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Collection, Iterable, Sequence

from broker_core.config import NEVER, BrokerConfig, cleanup_policies
from broker_core.types import TopicPartition


class SegmentInfo:
    """What the cleaner needs of one segment. ``largest_timestamp_ms`` is the largest
    record timestamp (-1: none, then the last modified time stands in, as
    LogSegment.largestTimestamp does); ``first_batch_timestamp_ms`` the first batch's max
    timestamp (-1: none; LogSegment.getFirstBatchTimestamp); ``last_modified_ms`` the
    time the segment was last written (Kafka reads the file's mtime; the cleaner gives
    a cleaned segment the last modified time of the last segment it replaces);
    ``index_bytes`` its offset index's size (groupSegmentsBySize bounds it)."""
    __slots__ = ("base_offset", "size_bytes", "largest_timestamp_ms", "first_batch_timestamp_ms",
                 "last_modified_ms", "index_bytes")

    def __init__(self, base_offset: int, size_bytes: int, *, largest_timestamp_ms: int = -1,
                 first_batch_timestamp_ms: int = -1, last_modified_ms: int = 0, index_bytes: int = 0):
        self.base_offset = base_offset
        self.size_bytes = size_bytes
        self.largest_timestamp_ms = largest_timestamp_ms
        self.first_batch_timestamp_ms = first_batch_timestamp_ms
        self.last_modified_ms = last_modified_ms
        self.index_bytes = index_bytes

    @property
    def largest_timestamp(self) -> int:
        """LogSegment.largestTimestamp: the largest record timestamp, else last modified."""
        return self.largest_timestamp_ms if self.largest_timestamp_ms >= 0 else self.last_modified_ms

    @property
    def first_batch_timestamp(self) -> int:
        """LogSegment.getFirstBatchTimestamp: Long.MaxValue when there is none."""
        return self.first_batch_timestamp_ms if self.first_batch_timestamp_ms >= 0 else NEVER

    def __repr__(self) -> str:
        return (f"SegmentInfo({self.base_offset}, {self.size_bytes} bytes, largest ts {self.largest_timestamp_ms}, "
                f"modified {self.last_modified_ms})")


class CleanableLog:
    """One log as the cleaner manager sees it. ``segments`` ascend by base offset and the
    last is the active segment; ``checkpoint`` is the cleaner-offset-checkpoint's entry
    for the log (None: none yet)."""
    __slots__ = ("tp", "config", "log_start_offset", "log_end_offset", "checkpoint", "segments", "_bases")

    def __init__(self, tp: TopicPartition, config: BrokerConfig, log_start_offset: int, log_end_offset: int,
                 segments: Sequence[SegmentInfo], checkpoint: int | None = None):
        if not segments:
            raise ValueError(f"{tp}: a log has at least its active segment")
        self.tp = tp
        self.config = config
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.checkpoint = checkpoint
        self.segments = tuple(segments)
        self._bases = [segment.base_offset for segment in self.segments]
        if any(a >= b for a, b in zip(self._bases, self._bases[1:])):
            raise ValueError(f"{tp}: segment base offsets must ascend: {self._bases}")

    @property
    def compact(self) -> bool:
        """LogConfig.compact: cleanup.policy names compact."""
        return "compact" in cleanup_policies(self.config.log_cleanup_policy)

    @property
    def delete(self) -> bool:
        return "delete" in cleanup_policies(self.config.log_cleanup_policy)

    @property
    def active_segment(self) -> SegmentInfo:
        return self.segments[-1]

    def log_segments(self, start: int, end: int) -> tuple[SegmentInfo, ...]:
        """Log.logSegments(from, to): from the segment holding ``start`` (or the first,
        when none does) to the last whose base offset is below ``end``."""
        if start == end:
            return ()
        if end < start:
            raise ValueError(f"{self.tp}: segment range from {start} beyond {end}")
        first = max(bisect_right(self._bases, start) - 1, 0)
        return self.segments[first:bisect_left(self._bases, end)]

    def non_active_segments_from(self, start: int) -> tuple[SegmentInfo, ...]:
        """Log.nonActiveLogSegmentsFrom."""
        active_base = self.active_segment.base_offset
        return () if start > active_base else self.log_segments(start, active_base)


class CleanableOffsets:
    """LogCleanerManager.OffsetsToClean."""
    __slots__ = ("first_dirty_offset", "first_uncleanable_dirty_offset", "force_update_checkpoint")

    def __init__(self, first_dirty_offset: int, first_uncleanable_dirty_offset: int, force_update_checkpoint: bool):
        self.first_dirty_offset = first_dirty_offset
        self.first_uncleanable_dirty_offset = first_uncleanable_dirty_offset
        self.force_update_checkpoint = force_update_checkpoint

    def __repr__(self) -> str:
        return (f"CleanableOffsets({self.first_dirty_offset}, {self.first_uncleanable_dirty_offset}, "
                f"force_update_checkpoint={self.force_update_checkpoint})")


def cleanable_offsets(log: CleanableLog, now_ms: int) -> CleanableOffsets:
    """LogCleanerManager.cleanableOffsets (2.7.0); isrlab has no transactions, so no
    first unstable offset bounds the range."""
    checkpoint = log.log_start_offset if log.checkpoint is None else log.checkpoint
    force = checkpoint < log.log_start_offset or checkpoint > log.log_end_offset
    first_dirty = log.log_start_offset if force else checkpoint
    candidates = [log.active_segment.base_offset]
    min_lag_ms = max(log.config.log_cleaner_min_compaction_lag_ms, 0)
    if min_lag_ms > 0:
        for segment in log.non_active_segments_from(first_dirty):
            if segment.largest_timestamp > now_ms - min_lag_ms:
                candidates.append(segment.base_offset)
                break
    return CleanableOffsets(first_dirty, max(first_dirty, min(candidates)), force)


def max_compaction_delay(log: CleanableLog, first_dirty_offset: int, now_ms: int) -> int:
    """LogCleanerManager.maxCompactionDelay: how long ago the earliest dirty non-active
    segment's first batch passed max.compaction.lag.ms (0: not yet)."""
    stamps = [s.first_batch_timestamp for s in log.non_active_segments_from(first_dirty_offset)]
    earliest = min((t for t in stamps if t > 0), default=NEVER)
    clean_until_ms = now_ms - max(log.config.log_cleaner_max_compaction_lag_ms, 0)
    return clean_until_ms - earliest if earliest < clean_until_ms else 0


class LogToClean:
    """LogCleaner.scala's LogToClean: a log with its cleanable range and dirty ratio."""
    __slots__ = ("log", "first_dirty_offset", "uncleanable_offset", "need_compaction_now", "clean_bytes",
                 "first_uncleanable_offset", "cleanable_bytes", "force_update_checkpoint")

    def __init__(self, log: CleanableLog, first_dirty_offset: int, uncleanable_offset: int,
                 need_compaction_now: bool = False, force_update_checkpoint: bool = False):
        self.log = log
        self.first_dirty_offset = first_dirty_offset
        self.uncleanable_offset = uncleanable_offset
        self.need_compaction_now = need_compaction_now
        self.force_update_checkpoint = force_update_checkpoint
        self.clean_bytes = sum(s.size_bytes for s in log.log_segments(-1, first_dirty_offset))
        # LogCleanerManager.calculateCleanableBytes: up to the base of the segment holding
        # the uncleanable offset (the active segment's when that is where it lies).
        holding = log.non_active_segments_from(uncleanable_offset)
        self.first_uncleanable_offset = (holding[0] if holding else log.active_segment).base_offset
        start = min(first_dirty_offset, self.first_uncleanable_offset)
        self.cleanable_bytes = sum(s.size_bytes for s in log.log_segments(start, self.first_uncleanable_offset))

    @property
    def tp(self) -> TopicPartition:
        return self.log.tp

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """cleanableBytes / totalBytes (NaN for an empty log in Kafka; such logs are
        filtered out before any ratio is compared)."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    def __repr__(self) -> str:
        return (f"LogToClean({self.tp}, dirty [{self.first_dirty_offset}, {self.first_uncleanable_offset}), "
                f"ratio {self.cleanable_ratio:.3f}, now={self.need_compaction_now})")


def log_to_clean(log: CleanableLog, now_ms: int) -> LogToClean:
    """One log's LogToClean as grabFilthiestCompactedLog builds it."""
    offsets = cleanable_offsets(log, now_ms)
    delay_ms = max_compaction_delay(log, offsets.first_dirty_offset, now_ms)
    return LogToClean(log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset, delay_ms > 0,
                      offsets.force_update_checkpoint)


def is_cleanable_now(candidate: LogToClean) -> bool:
    """grabFilthiestCompactedLog's filter: overdue by max.compaction.lag.ms with bytes to
    clean, or a dirty ratio above min.cleanable.dirty.ratio (strictly above)."""
    return ((candidate.need_compaction_now and candidate.cleanable_bytes > 0)
            or candidate.cleanable_ratio > candidate.log.config.log_cleaner_min_cleanable_ratio)


def grab_filthiest(logs: Iterable[CleanableLog], now_ms: int,
                   in_progress: Collection[TopicPartition] = ()) -> LogToClean | None:
    """LogCleanerManager.grabFilthiestCompactedLog (2.7.0): the compacted log to clean
    next, or None. Logs being cleaned (``in_progress``) are skipped. The caller marks the
    chosen one in progress and, when ``force_update_checkpoint``, writes its first dirty
    offset to the checkpoint as Kafka does."""
    candidates = []
    for log in sorted(logs, key=lambda log: (log.tp.topic, log.tp.partition)):
        if not log.compact or log.tp in in_progress:
            continue
        candidate = log_to_clean(log, now_ms)
        if candidate.total_bytes > 0 and is_cleanable_now(candidate):
            candidates.append(candidate)
    best: LogToClean | None = None
    for candidate in candidates:  # the first of the highest ratio, as Scala's max keeps it
        if best is None or candidate.cleanable_ratio > best.cleanable_ratio:
            best = candidate
    return best
