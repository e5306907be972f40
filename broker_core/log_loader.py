"""Loading a partition's log at startup: a PartitionLog rebuilt from the bytes a
restarted process finds on disk, and the effects that repair them.

Kafka 2.7.0 does this inside Log (``loadSegments``, ``recoverLog``,
``loadProducerState``); Kafka 3.x moved it to its own LogLoader, as here: the log
itself (``broker_core.log``) only appends, reads, truncates and flushes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from broker_core.effects import DeleteFile, Effect, ReplaceFile, TruncateFile
from broker_core.epoch_cache import LeaderEpochCache
from broker_core.log import SEGMENT_SUFFIX, PartitionLog
from broker_core.log_swaps import PendingRenames, complete_swaps
from broker_core.offset_index import DEFAULT_INDEX_INTERVAL_BYTES, INDEX_SUFFIX
from broker_core.segment_format import DecodeError
from broker_core.storage import LogStorage, StoredBatch
from broker_core.time_index import TIME_INDEX_SUFFIX, TimeIndex, batch_max_timestamp
from broker_core.types import TopicPartition


@dataclass(frozen=True)
class RecoveryReport:
    truncated_bytes: int
    reason: str | None
    deleted_segments: tuple[str, ...]


def recover_log(tp: TopicPartition, storage: LogStorage, segment_bytes: int, recovery_point: int = 0,
                clean_shutdown: bool = False, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                now_ms: int = 0, compacted: bool = False) -> tuple[PartitionLog, list, RecoveryReport]:
    """Rebuild a log from the bytes a restarted process finds on disk.

    Segments are scanned in offset order through the storage port; the first batch
    that fails to decode (a torn write, garbage, a CRC mismatch) or breaks offset
    continuity ends the log: the rest of that segment is truncated and later
    segments are deleted. As in Kafka 2.7.0 (Log.recoverLog), CRCs are checked only
    from the segment holding the recovery point on, and not at all after a clean
    shutdown; the recovery point becomes the recovered log's end. Every batch's
    header is read (isrlab keeps no producer snapshots: the producer state is
    replayed from them), so each sealed segment's index is rebuilt as it is scanned
    and rewritten when the file differs (Kafka rebuilds a missing or corrupt index,
    Log.loadSegmentFiles -> recoverSegment); the active segment's index lives in
    memory, and index files of no sealed segment are deleted. Each segment's v2 size
    and timestamps come from the scan; its creation and last-modified times are
    ``now_ms`` (Kafka reads the file's modification time; the storage port has none).

    First a log cleaner's interrupted swap is finished or undone (broker_core.log_swaps).
    A ``compacted`` log's offsets may leave gaps (the cleaner removed records, and whole
    batches): a batch or segment may start past the offset expected, never before it.
    """
    prefix = str(tp) + "/"
    swap_effects, renames = complete_swaps(p for p in storage.paths() if p.startswith(prefix))
    view = PendingRenames(storage, renames, [e.path for e in swap_effects if isinstance(e, DeleteFile)])
    log = PartitionLog(tp, segment_bytes, view, index_interval_bytes)
    paths = sorted(p for p in view.paths() if p.startswith(prefix))
    segment_paths = [p for p in paths if p.endswith(SEGMENT_SUFFIX)]
    bases = [int(p[len(prefix):-len(SEGMENT_SUFFIX)]) for p in segment_paths]
    effects, report = _recover_segments(log, segment_paths, bases, recovery_point, clean_shutdown, now_ms, compacted)
    effects.extend(_recover_indexes(log, paths))
    log.storage = storage  # the renames are carried out before anything else reads
    # What a restarted process reads may be page cache only (after a crash, not a
    # power loss): nothing counts as durable until the first flush.
    log.durable_offset = log.log_start_offset
    log.recovery_point = log.log_end_offset  # Kafka: activeSegment.readNextOffset
    effects.extend(_recover_epochs(log))
    return log, swap_effects + effects, report


def _recover_segments(log: PartitionLog, segment_paths: Sequence[str], bases: Sequence[int], recovery_point: int,
                      clean_shutdown: bool, now_ms: int, compacted: bool) -> tuple[list[Effect], RecoveryReport]:
    """recover_log's scan of the segments, in offset order; sets the log's offsets."""
    effects: list[Effect] = []
    deleted: list[str] = []
    truncated_bytes = 0
    reason: str | None = None
    # The segments that may hold unflushed bytes: from the last one starting at or
    # below the recovery point (Kafka's logSegments(recoveryPoint, Long.MaxValue)).
    first_checked = max([b for b in bases if b <= recovery_point], default=0)
    first_base: int | None = None  # the first batch's base offset
    for path, base in zip(segment_paths, bases):
        size = log.port.size(path)
        if reason is None and first_base is not None and (base < log.log_end_offset if compacted
                                                           else base != log.log_end_offset):
            reason = f"segment {path} starts at {base}, expected {log.log_end_offset}"
        if reason is not None:
            effects.append(DeleteFile(path))
            deleted.append(path)
            truncated_bytes += size
            continue
        log.segments.append(log.new_segment(base, now_ms))
        reason, first = _recover_segment(log, size, not clean_shutdown and base >= first_checked,
                                         base if first_base is None else None, compacted)
        if first_base is None:
            first_base = first
        position = log.segments[-1].size_bytes
        if position < size:
            truncated_bytes += size - position
            effects.append(TruncateFile(path, position))
    if compacted and log.segments:
        # A cleaned log starts at its first segment's base (Kafka: the log start is at
        # least that base), and ends at least at the active segment's (readNextOffset).
        log.log_start_offset = log.segments[0].base_offset
        log.log_end_offset = max(log.log_end_offset, log.segments[-1].base_offset)
    elif first_base is not None:
        log.log_start_offset = first_base
    elif log.segments:
        log.log_end_offset = log.log_start_offset = log.segments[0].base_offset
    return effects, RecoveryReport(truncated_bytes, reason, tuple(deleted))


def _recover_segment(log: PartitionLog, size: int, verify: bool, first_base: int | None,
                     compacted: bool = False) -> tuple[str | None, int | None]:
    """Scan the last segment appended to the log's ``segments`` (Kafka's
    LogSegment.recover): its newest headers become the active ones, its index is
    built, its batches replayed into the producer state; returns why the scan stopped
    early (or None) and the segment's first base offset (None when it is empty).
    ``first_base``: the offset the segment's first batch must have when it is the
    log's first batch (else it continues the log end)."""
    segment = log.segments[-1]
    time_index = segment.time_index = TimeIndex(segment.base_offset)
    i = len(log.segments) - 1
    batches: list[StoredBatch] = []
    position = 0
    reason = None
    first = None
    while position < size:
        try:
            batch, end = log.port.decode_at(segment.path, position, verify)
        except DecodeError as exc:
            reason = f"{segment.path} at byte {position}: {exc}"
            break
        expected = log.log_end_offset if first_base is None else first_base
        if batch.base_offset < expected if compacted else batch.base_offset != expected:
            reason = f"{segment.path} at byte {position}: offset {batch.base_offset} out of sequence"
            break
        first_base = None
        if first is None:
            first = batch.base_offset
        batches.append(StoredBatch(batch, i, position, batch.size_bytes, end))
        if len(batches) > log.active_headers:  # the newer half stays, as after appends
            del batches[:len(batches) // 2]
        max_timestamp = batch_max_timestamp(batch)
        if segment.log_bytes == 0:
            segment.rolling_timestamp = max_timestamp
        if max_timestamp > segment.max_timestamp:
            segment.max_timestamp, segment.offset_of_max_timestamp = max_timestamp, batch.next_offset - 1
        if segment.held_index.maybe_append(batch.next_offset - 1, position, log.index_interval_bytes):
            time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
        # Kafka loads its last producer snapshot and replays the log after it
        # (Log.loadProducerState); isrlab keeps no snapshot and replays the whole log.
        if batch.producer_id >= 0:
            log.producers.record(batch)
        log.log_end_offset = batch.next_offset
        segment.log_bytes += batch.size_bytes
        position = end
    log.set_active_headers(batches)
    segment.size_bytes = position
    # "A normally closed segment always appends the biggest timestamp ever seen" (2.7.0)
    time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
    return reason, first


def _recover_indexes(log: PartitionLog, paths: Sequence[str]) -> list[Effect]:
    """Each sealed segment's offset and time index files as its scan rebuilt them
    (rewritten when missing or different; its time index then lives in the file
    only); every other index file deleted (the active segment's, whose indexes live in
    memory, and those of deleted segments or of none)."""
    effects: list[Effect] = []
    sealed = log.segments[:-1]
    for segment in sealed:
        for path, expected in ((segment.index_path, bytes(segment.held_index.data)),
                               (segment.time_index_path, bytes(segment.time_index.data if segment.time_index else b""))):
            if log.port.read_file(path) != expected:
                effects.append(ReplaceFile(path, expected))
        segment.time_index = None
        log.hold_index(segment)
    kept = {path for segment in sealed for path in (segment.index_path, segment.time_index_path)}
    effects.extend(DeleteFile(p) for p in paths
                   if (p.endswith(INDEX_SUFFIX) or p.endswith(TIME_INDEX_SUFFIX)) and p not in kept)
    return effects


def _recover_epochs(log: PartitionLog) -> list[Effect]:
    """The leader-epoch checkpoint read back, without the epochs that start at or past the
    recovered log's end (2.7.0 Log: truncateFromEnd after loadSegments), rewritten
    when that dropped any."""
    raw = log.port.read_file(log.epoch_checkpoint_path)
    if raw is None:
        return []
    log.epochs = LeaderEpochCache.decode(raw)
    if log.epochs.truncate_from_end(log.log_end_offset):
        return [ReplaceFile(log.epoch_checkpoint_path, log.epochs.encode())]
    return []
