"""A segment's sparse offset index (Kafka 2.7.0 ``kafka.log.OffsetIndex``, written as
``LogSegment.append`` and ``LogSegment.recover`` write it).

The file ``<base offset, 20 digits>.index`` lies next to its segment's ``.log``. It is a
sequence of 8-byte entries, each two big-endian int32: a batch's last offset relative
to the segment's base offset, and the file position where that batch starts. An entry
is added for a batch when more than ``index.interval.bytes`` bytes of the segment lie
between the last entry's batch (or the segment's start) and this batch's start, so
entries grow with the segment's bytes, never with its number of batches.

To find offset ``t``: the last entry whose offset is <= ``t`` gives a position at or
before the batch holding ``t`` (``lookup``; no such entry: the segment's start), and
batch headers are read from there on (``LogSegment.translateOffset``).
"""
from __future__ import annotations

import struct

INDEX_SUFFIX = ".index"
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # Kafka's log.index.interval.bytes
_ENTRY = struct.Struct(">ii")
ENTRY_BYTES = _ENTRY.size
_MAX_INT32 = 2**31 - 1


class OffsetIndex:
    """The entries of one segment's index, as the bytes of its file."""
    __slots__ = ("base_offset", "data", "last_entry_position")

    def __init__(self, base_offset: int, data: bytes | bytearray = b""):
        self.base_offset = base_offset
        self.data = bytearray(data)
        # Where the batch of the last entry starts (0 without one): Kafka's
        # bytesSinceLastIndexEntry is the segment's size minus it.
        self.last_entry_position = self.entry(len(self) - 1)[1] if self.data else 0

    def __len__(self) -> int:
        return len(self.data) // ENTRY_BYTES

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position)."""
        relative, position = _ENTRY.unpack_from(self.data, n * ENTRY_BYTES)
        return self.base_offset + relative, position

    def maybe_append(self, last_offset: int, position: int, interval_bytes: int) -> bool:
        """Kafka's LogSegment.append: an entry for the batch at ``position`` (whose last
        offset is ``last_offset``) when more than ``interval_bytes`` lie before it since
        the last entry. True when an entry was added."""
        if position - self.last_entry_position <= interval_bytes:
            return False
        relative = last_offset - self.base_offset
        if not 0 <= relative <= _MAX_INT32 or position > _MAX_INT32:
            return False  # beyond what an entry can name: the scan from an earlier entry still finds it
        self.data += _ENTRY.pack(relative, position)
        self.last_entry_position = position
        return True

    def lookup(self, target_offset: int) -> int:
        """The position to scan from for ``target_offset``: that of the last entry whose
        offset is <= it, or 0 (Kafka's OffsetIndex.lookup, largestLowerBoundSlotFor)."""
        low, high = 0, len(self) - 1
        found = 0
        while low <= high:
            middle = (low + high) // 2
            offset, position = self.entry(middle)
            if offset <= target_offset:
                found = position
                low = middle + 1
            else:
                high = middle - 1
        return found

    def is_sane(self, next_offset: int, segment_size: int) -> bool:
        """Kafka's OffsetIndex.sanityCheck (a whole number of entries, none below the
        base offset), plus that the first and last entries lie inside the segment: cheap
        enough for every load of an index while the broker runs. An index failing it is
        not used; recovery compares every entry with a rebuild."""
        if len(self.data) % ENTRY_BYTES:
            return False
        if not self.data:
            return True
        (first_offset, first_position), (last_offset, last_position) = self.entry(0), self.entry(len(self) - 1)
        return (self.base_offset <= first_offset <= last_offset < next_offset
                and 0 <= first_position <= last_position < segment_size)
