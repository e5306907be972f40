"""ListOffsets by timestamp (a client's ``offsetsForTimes``): the first offset whose
record carries a timestamp at or after the one asked for.

Kafka 2.7.0, three layers, kept as three functions here:

- ``Partition.fetchOffsetForTimestamp`` (``offset_for_timestamp``): the leader answers
  only offsets below the last offset a client may read -- the high watermark for
  READ_UNCOMMITTED, the last stable offset for READ_COMMITTED, which is the high
  watermark too, as isrlab has no transactions. Nothing found, while a new leader's
  high watermark still lags its epoch's start: OFFSET_NOT_AVAILABLE (the same rule as
  for the latest offset). Nothing found otherwise: no error, offset and timestamp -1.
- ``Log.fetchOffsetByTimestamp`` (``fetch_offset_by_timestamp``): the first segment
  whose largest timestamp is >= the target (its last write's time when it has no
  timestamp), and only that one.
- ``LogSegment.findOffsetByTimestamp`` and ``FileRecords.searchForTimestamp``
  (``find_offset_by_timestamp``): the time index gives an offset, the offset index its
  batch's position; from there the first batch whose max timestamp is >= the target
  has its records read, and the first record at or after the target (and at or after
  the log start) is the answer, with its batch's leader epoch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker_core.errors import ErrorCode
from broker_core.log import PartitionLog
from broker_core.messages import ListOffsetsPartitionResult
from broker_core.records import NO_TIMESTAMP
from broker_core.storage import FileRegion
from broker_core.time_index import TimeIndex, batch_max_timestamp, headers_from


@dataclass(frozen=True)
class TimestampAndOffset:
    """FileRecords.TimestampAndOffset: a record's timestamp and offset, and the leader
    epoch of its batch (-1 when the batch carries none)."""
    timestamp: int
    offset: int
    leader_epoch: int


def offset_for_timestamp(log: PartitionLog, target: int, offsets_unavailable: bool) -> ListOffsetsPartitionResult:
    """Partition.fetchOffsetForTimestamp for a client (READ_UNCOMMITTED, or READ_COMMITTED
    without transactions) and a target that is a timestamp. ``offsets_unavailable``:
    the leader's high watermark lags its epoch's start (2.7's maybeOffsetsError)."""
    found = fetch_offset_by_timestamp(log, target)
    if found is not None and found.offset < log.high_watermark:
        return ListOffsetsPartitionResult(ErrorCode.NONE, found.offset, found.leader_epoch, found.timestamp)
    if offsets_unavailable:
        return ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)
    return ListOffsetsPartitionResult(ErrorCode.NONE, -1, -1, NO_TIMESTAMP)


def fetch_offset_by_timestamp(log: PartitionLog, target: int) -> TimestampAndOffset | None:
    """Log.fetchOffsetByTimestamp for a target timestamp: the first segment whose largest
    timestamp reaches it is searched; None when no segment does or that one holds no
    such record (Kafka looks no further)."""
    for i, segment in enumerate(log.segments):
        if segment.largest_timestamp >= target:
            return find_offset_by_timestamp(log, i, target, log.log_start_offset)
    return None


def find_offset_by_timestamp(log: PartitionLog, i: int, target: int, starting_offset: int) -> TimestampAndOffset | None:
    """LogSegment.findOffsetByTimestamp on segment ``i``: the first record whose
    timestamp is >= ``target`` and whose offset is >= ``starting_offset``."""
    segment = log.segments[i]
    _, indexed_offset = _time_index_of(log, i).lookup(target)
    # The log's own offset index lookup: the active segment's in memory, a sealed one's
    # loaded through the port (and checked) when it is not.
    position = log._index_of(i).lookup(max(indexed_offset, starting_offset))
    for header, start, end in headers_from(log.port, segment.path, position, segment.size_bytes):
        if batch_max_timestamp(header) < target or header.next_offset <= starting_offset:
            continue
        for batch in log.port.batches_in(FileRegion(segment.path, start, end - start)):
            offset = batch.base_offset
            for timestamp in record_timestamps(batch):
                if timestamp >= target and offset >= starting_offset:
                    return TimestampAndOffset(timestamp, offset, max(batch.leader_epoch, -1))
                offset += 1
    return None


def record_timestamps(batch: Any) -> tuple[int, ...]:
    """Each record's timestamp as the v2 format gives it: the first timestamp plus the
    record's delta, i.e. the first timestamp for every record of a batch stored
    without per-record ones."""
    stamps = batch.records.timestamps
    if stamps is not None:
        return tuple(stamps)
    return (getattr(batch, "first_timestamp", NO_TIMESTAMP),) * (batch.next_offset - batch.base_offset)


def _time_index_of(log: PartitionLog, i: int) -> TimeIndex:
    """Segment ``i``'s time index: the active segment's in memory; a sealed one's read
    from its file, or an empty one (a scan from the segment's start, slower, never
    wrong) when the file is missing or fails the sanity check."""
    segment = log.segments[i]
    if segment.time_index is not None:
        return segment.time_index
    index = TimeIndex(segment.base_offset, log.port.read_file(segment.time_index_path) or b"")
    return index if index.is_sane(log.segments[i + 1].base_offset) else TimeIndex(segment.base_offset)
