"""A segment's sparse time index (Kafka 2.7.0 ``kafka.log.TimeIndex``, written as
``LogSegment.append``, ``onBecomeInactiveSegment`` and ``LogSegment.recover`` write it).

The file ``<base offset, 20 digits>.timeindex`` lies next to its segment's ``.log`` and
``.index``. It is a sequence of 12-byte entries: a big-endian int64 timestamp and an
int32 offset relative to the segment's base offset. An entry (T, O) says that the
largest timestamp of the records up to O is T: a record with a timestamp above T lies
after O. Entries are offered when the offset index takes one (every
``index.interval.bytes``), with the segment's largest timestamp so far and the offset
of the batch that carried it; one is kept only when its timestamp is larger than the
last entry's, so timestamps increase along the file (a segment whose batches carry no
timestamp has an empty time index). A segment that stops being the active one gets a
last entry for its largest timestamp, so the file's last entry is the segment's
largest timestamp.

To find the first record whose timestamp is >= ``t`` (``LogSegment.findOffsetByTimestamp``):
the last entry whose timestamp is <= ``t`` gives an offset after which such records
lie; the offset index gives the position of that offset's batch, and batches are read
from there (``broker_core.timestamp_lookup``).
"""
from __future__ import annotations

import struct
from typing import Any, Iterator

from broker_core.offset_index import OffsetIndex
from broker_core.records import NO_TIMESTAMP, RecordBatch

TIME_INDEX_SUFFIX = ".timeindex"
_ENTRY = struct.Struct(">qi")
ENTRY_BYTES = _ENTRY.size
_MAX_INT32 = 2**31 - 1


def batch_max_timestamp(batch: Any) -> int:
    """The max timestamp a batch's v2 header carries (-1 none): the simulation's
    batches may leave it unset and carry their records' timestamps only."""
    if type(batch) is RecordBatch:
        return batch.v2_max_timestamp
    return getattr(batch, "max_timestamp", NO_TIMESTAMP)


class TimeIndex:
    """The entries of one segment's time index, as the bytes of its file."""
    __slots__ = ("base_offset", "data", "last_timestamp", "last_offset")

    def __init__(self, base_offset: int, data: bytes | bytearray = b""):
        self.base_offset = base_offset
        self.data = bytearray(data)
        self.last_timestamp, self.last_offset = self._last_entry()

    def __len__(self) -> int:
        return len(self.data) // ENTRY_BYTES

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (timestamp, absolute offset)."""
        timestamp, relative = _ENTRY.unpack_from(self.data, n * ENTRY_BYTES)
        return timestamp, self.base_offset + relative

    def _last_entry(self) -> tuple[int, int]:
        """TimeIndex.lastEntryFromIndexFile: the last entry, or (-1, base offset)."""
        return self.entry(len(self) - 1) if len(self) else (NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """TimeIndex.maybeAppend: an entry only when ``timestamp`` is larger than the last
        one's (an equal one is the roll's or a close's repeat of the last entry). An
        offset below the last entry's, or one an int32 cannot name relative to the
        base, is not appended: the scan from an earlier entry still finds it."""
        if timestamp <= self.last_timestamp:
            return False
        relative = offset - self.base_offset
        if (len(self) and offset < self.last_offset) or not 0 <= relative <= _MAX_INT32:
            return False
        self.data += _ENTRY.pack(timestamp, relative)
        self.last_timestamp, self.last_offset = timestamp, offset
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """TimeIndex.lookup: the last entry whose timestamp is <= the target, or
        (-1, base offset) when there is none (largestLowerBoundSlotFor by KEY)."""
        low, high = 0, len(self) - 1
        found = (NO_TIMESTAMP, self.base_offset)
        while low <= high:
            middle = (low + high) // 2
            entry = self.entry(middle)
            if entry[0] <= target_timestamp:
                found = entry
                low = middle + 1
            else:
                high = middle - 1
        return found

    def truncate_to(self, offset: int) -> None:
        """TimeIndex.truncateTo: remove every entry whose offset is >= ``offset``."""
        keep = len(self)
        while keep and self.entry(keep - 1)[1] >= offset:
            keep -= 1
        del self.data[keep * ENTRY_BYTES:]
        self.last_timestamp, self.last_offset = self._last_entry()

    def is_sane(self, next_offset: int) -> bool:
        """TimeIndex.sanityCheck (a whole number of entries, the last timestamp not below
        the first, no offset below the base), plus that the last offset lies before
        ``next_offset`` (the segment's end). An index failing it is not used: a lookup
        then scans the segment from its start, slower, never wrong."""
        if len(self.data) % ENTRY_BYTES:
            return False
        if not self.data:
            return True
        first_timestamp, first_offset = self.entry(0)
        return (self.last_timestamp >= first_timestamp
                and self.base_offset <= first_offset <= self.last_offset < next_offset)


def headers_from(port: Any, path: str, position: int, end: int) -> Iterator[tuple[Any, int, int]]:
    """The batch headers of segment file ``path`` from ``position`` up to ``end``, each
    with its position and the position after it, read through the storage port."""
    while position < end:
        header, after = port.header_at(path, position)
        yield header, position, after
        position = after


def largest_timestamp_after(port: Any, path: str, position: int, end: int) -> tuple[int, int]:
    """FileRecords.largestTimestampAfter: the largest max timestamp of the batches from
    ``position`` on and the last offset of the (first) batch carrying it; (-1, -1) none."""
    largest, offset = NO_TIMESTAMP, -1
    for header, _, _ in headers_from(port, path, position, end):
        timestamp = batch_max_timestamp(header)
        if timestamp > largest:
            largest, offset = timestamp, header.next_offset - 1
    return largest, offset


def largest_after_truncation(index: TimeIndex, offset_index: OffsetIndex, port: Any, path: str, size: int,
                             new_end: int) -> tuple[int, int]:
    """LogSegment.truncateTo's time part, for a segment now ending at offset ``new_end``
    and byte ``size`` (its offset index already cut there): ``index`` loses its entries
    at or past ``new_end`` (all of them when it fails the sanity check), and the
    segment's largest timestamp and its offset are returned (loadLargestTimestamp: the
    last entry's, or a larger one found by reading the batches from that entry's
    offset on)."""
    index.truncate_to(new_end)
    if not index.is_sane(new_end):
        index.truncate_to(index.base_offset)
    start = offset_index.lookup(index.last_offset)
    largest, offset = largest_timestamp_after(port, path, start, size)
    if largest > index.last_timestamp:
        return largest, offset
    return index.last_timestamp, (index.last_offset if index.last_timestamp >= 0 else -1)
