"""A PartitionLog as the log cleaner sees it, and the swap of a cleaned group into it.

The cleaner's algorithm (broker_core.cleaner, cleaner_selection) knows nothing of files:
it reads ``SegmentInfo`` and a ``SegmentReader`` and hands back ``CleanedGroup``s. This
module is the log's side of that seam, kept out of broker_core.log (which appends, reads,
truncates and flushes) so that the cleaning's file steps are in one place:

- ``cleanable_log``: the log's segments as ``SegmentInfo`` (v2 sizes, timestamps, last
  modified times), with the cleaner checkpoint's entry.
- ``SegmentBatches``: a segment's batches read whole through the storage port
  (``LogStorage.cleanable_in``, in the binding's format).
- ``replace_segments``: Kafka 2.7.0 Log.replaceSegments for one group, as file effects
  whose every prefix recovery can finish or undo (``broker_core.log_loader``,
  ``complete_swaps``): the new segment written durably as ``<base>.log.cleaned``; each
  replaced segment renamed ``.deleted`` (Log.asyncDeleteSegment's rename); ``.cleaned``
  renamed ``.swap`` (the commit point); the ``.deleted`` files removed; ``.swap`` renamed
  to the segment's name; its offset index written. Kafka renames to ``.swap`` before the
  old segments become ``.deleted``; isrlab renames them first, so that a ``.swap`` alone
  decides the outcome (Kafka's completeSwapOperations finds the segments a swap replaces
  by offsets, and misses a replaced segment all of whose records a cleaning removed).
"""
from __future__ import annotations

from collections import deque
from typing import Sequence, cast

from broker_core.cleaned_batch import CleanableBatch
from broker_core.cleaner import CleanedGroup
from broker_core.cleaner_selection import CleanableLog, SegmentInfo
from broker_core.config import BrokerConfig
from broker_core.effects import DeleteFile, Effect, RenameFile, ReplaceFile
from broker_core.time_index import TimeIndex
from broker_core.errors import CoreError
from broker_core.log import PartitionLog, Segment
from broker_core.log_swaps import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from broker_core.offset_index import OffsetIndex
from broker_core.storage import FileRegion


def segment_info(log: PartitionLog, segment: Segment) -> SegmentInfo:
    """LogSegment's figures the cleaner manager reads: the v2 size, the first batch's and
    the largest timestamp, the last modified time and the index's size."""
    if segment.index is not None:
        index_bytes = len(segment.index.data)
    else:
        index_bytes = log.port.size(segment.index_path) if log.storage is not None else 0
    return SegmentInfo(segment.base_offset, segment.log_bytes, largest_timestamp_ms=segment.max_timestamp,
                       first_batch_timestamp_ms=segment.rolling_timestamp, last_modified_ms=segment.modified_ms,
                       index_bytes=index_bytes)


def cleanable_log(log: PartitionLog, config: BrokerConfig, checkpoint: int | None) -> CleanableLog:
    return CleanableLog(log.tp, config, log.log_start_offset, log.log_end_offset,
                        [segment_info(log, segment) for segment in log.segments], checkpoint)


class SegmentBatches:
    """The cleaner's SegmentReader over a log: a sealed segment's batches, read whole
    through the storage port (the cleaner never reads the active segment)."""

    def __init__(self, log: PartitionLog):
        self.log = log

    def segment_batches(self, base_offset: int) -> Sequence[CleanableBatch]:
        segment = next((s for s in self.log.segments if s.base_offset == base_offset), None)
        if segment is None:
            raise CoreError(f"{self.log.tp}: no segment at {base_offset} to clean")
        if segment.size_bytes == 0:
            return ()
        return self.log.port.cleanable_in(FileRegion(segment.path, 0, segment.size_bytes))


def has_segments(log: PartitionLog, bases: Sequence[int]) -> bool:
    """Whether the log still has these segments as consecutive sealed ones (retention
    or a truncation may have removed some while the cleaning ran: then it is dropped,
    as Kafka aborts a cleaning whose log changed under it)."""
    present = [s.base_offset for s in log.segments[:-1]]
    if not bases or bases[0] not in present:
        return False
    start = present.index(bases[0])
    return present[start:start + len(bases)] == list(bases)


def replace_segments(log: PartitionLog, group: CleanedGroup) -> list[Effect]:
    """Swap ``group``'s new segment in for the segments it replaces (see the module's
    docstring for the order of the file steps and why)."""
    port = log.port
    first = next(i for i, s in enumerate(log.segments) if s.base_offset == group.base_offset)
    count = len(group.replaced)
    old = log.segments[first:first + count]
    encoded = [port.stored_bytes(batch) for batch in group.batches]
    new = _cleaned_segment(log, group, old[0].path, [len(data) for data in encoded])
    data = b"".join(encoded)
    cleaned, swap = new.path + CLEANED_SUFFIX, new.path + SWAP_SUFFIX
    effects: list[Effect] = [ReplaceFile(cleaned, data)]  # written and fsynced before any rename
    for segment in old:
        effects += [RenameFile(segment.path, segment.path + DELETED_SUFFIX), DeleteFile(segment.index_path),
                    DeleteFile(segment.time_index_path)]
    effects.append(RenameFile(cleaned, swap))
    effects += [DeleteFile(segment.path + DELETED_SUFFIX) for segment in old]
    effects += [RenameFile(swap, new.path), ReplaceFile(new.index_path, bytes(new.held_index.data))]
    time_index = cast(TimeIndex, new.time_index)
    new.time_index = None  # sealed: read from its file when a lookup needs it
    effects.append(ReplaceFile(new.time_index_path, bytes(time_index.data)))
    log.segments[first:first + count] = [new]
    log._loaded_indexes = deque(s for s in log._loaded_indexes if s not in old)
    log.hold_index(new)
    for batch in log.active_batches:
        batch.segment -= count - 1  # positions in ``segments`` moved down
    return effects


def _cleaned_segment(log: PartitionLog, group: CleanedGroup, path: str, lengths: Sequence[int]) -> Segment:
    """The in-memory Segment of a group's new file: sizes and timestamps from its
    batches, the last replaced segment's last modified time (cleanSegments), and its
    offset index built over the positions the batches will have."""
    segment = Segment(group.base_offset, path, index=OffsetIndex(group.base_offset),
                      created_ms=group.last_modified_ms, modified_ms=group.last_modified_ms)
    time_index = TimeIndex(group.base_offset)
    position = 0
    for batch, length in zip(group.batches, lengths):
        max_timestamp = _max_timestamp(batch)
        if segment.log_bytes == 0 and segment.rolling_timestamp < 0:
            segment.rolling_timestamp = max_timestamp
        if max_timestamp > segment.max_timestamp:
            segment.max_timestamp = max_timestamp
            segment.offset_of_max_timestamp = batch.next_offset - 1
        # LogSegment.append, as cleanInto appends: both indexes at the same batches
        if segment.held_index.maybe_append(batch.next_offset - 1, position, log.index_interval_bytes) \
                and segment.max_timestamp >= 0:
            time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
        position += length
        segment.log_bytes += batch.size_bytes
    if segment.max_timestamp >= 0:  # onBecomeInactiveSegment: the largest timestamp last
        time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)
    segment.time_index = time_index
    segment.size_bytes = position
    return segment


def _max_timestamp(batch: CleanableBatch) -> int:
    v2 = getattr(batch, "v2_max_timestamp", None)
    return v2 if v2 is not None else batch.max_timestamp
