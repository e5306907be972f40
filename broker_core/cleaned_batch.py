"""A batch the log cleaner rewrote: records with gaps between their offsets.

A ``RecordBatch`` holds consecutive offsets (``next_offset = base_offset + len(records)``).
A cleaned v2 batch does not: Kafka 2.7.0 MemoryRecords.buildRetainedRecordsInto rebuilds
it with the original batch's base offset, each retained record keeping its own offset
(its offset delta), and ``overrideLastOffset(originalBatch.lastOffset())`` so that the
batch still ends where it ended. That keeps the producer's last sequence
(``base_sequence + last_offset_delta``), which an idempotent producer's next batch is
checked against. A batch with no record left is written as a bare header
(DefaultRecordBatch.writeEmptyHeader) when it is a producer's last batch
(BatchRetention.RETAIN_EMPTY); ``offsets`` and ``records`` are then empty.

It has a ``RecordBatch``'s header fields (``BatchHeader``), so the log can store and
serve it like any other batch, and the cleaner can clean it again.
"""
from __future__ import annotations

from typing import Sequence, Union

from broker_core.records import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RecordBatch,
                                 Records, last_sequence)


class CleanedBatch:
    __slots__ = ("base_offset", "next_offset", "leader_epoch", "offsets", "records", "producer_id",
                 "producer_epoch", "base_sequence", "attributes", "first_timestamp", "max_timestamp", "_size_bytes")

    def __init__(self, base_offset: int, next_offset: int, leader_epoch: int, offsets: Sequence[int],
                 records: Records, *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, attributes: int = 0, first_timestamp: int = NO_TIMESTAMP,
                 max_timestamp: int = NO_TIMESTAMP):
        offsets = tuple(offsets)
        if len(offsets) != len(records):
            raise ValueError("one offset per record")
        if any(not base_offset <= o < next_offset for o in offsets) or any(
                a >= b for a, b in zip(offsets, offsets[1:])):
            raise ValueError(f"offsets {offsets} not increasing within [{base_offset}, {next_offset})")
        self.base_offset = base_offset
        self.next_offset = next_offset
        self.leader_epoch = leader_epoch
        self.offsets = offsets
        self.records = records
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.attributes = attributes
        self.first_timestamp = first_timestamp
        self.max_timestamp = max_timestamp
        self._size_bytes = -1

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def last_sequence(self) -> int:
        """DefaultRecordBatch.lastSequence: from the last offset delta, which cleaning keeps."""
        return last_sequence(self.base_sequence, self.next_offset - self.base_offset)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def size_bytes(self) -> int:
        """The size model of ``RecordBatch.size_bytes``: a header, plus each record's
        payload and framing (a bare header for an empty batch)."""
        if self._size_bytes < 0:  # counted once, by the one size model
            self._size_bytes = RecordBatch(self.base_offset, self.leader_epoch, self.records).size_bytes
        return self._size_bytes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CleanedBatch):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.base_offset, self.next_offset, self.offsets))

    def _fields(self) -> tuple:
        return (self.base_offset, self.next_offset, self.leader_epoch, self.offsets, self.records, self.producer_id,
                self.producer_epoch, self.base_sequence, self.attributes, self.first_timestamp, self.max_timestamp)

    def __repr__(self) -> str:
        return (f"CleanedBatch({self.base_offset}..{self.last_offset}, epoch {self.leader_epoch}, "
                f"offsets={list(self.offsets)}, records={self.records!r})")


# What the cleaner reads and writes: a batch as appended, or one it cleaned before.
CleanableBatch = Union[RecordBatch, CleanedBatch]


def record_offsets(batch: CleanableBatch) -> Sequence[int]:
    """Each record's offset: consecutive in a RecordBatch, as kept in a CleanedBatch (or
    in any batch that lists them, such as the real binding's stored cleaned batch)."""
    if isinstance(batch, CleanedBatch):
        return batch.offsets
    offsets = getattr(batch, "offsets", None)
    return range(batch.base_offset, batch.next_offset) if offsets is None else offsets


def select(records: Records, indexes: Sequence[int]) -> Records:
    """The records at ``indexes``, every column kept (timestamps and headers included)."""
    sizes = records.sizes if isinstance(records.sizes, int) else [records.sizes[i] for i in indexes]
    return Records([records.values[i] for i in indexes],
                   None if records.keys is None else [records.keys[i] for i in indexes], sizes,
                   None if records.timestamps is None else [records.timestamps[i] for i in indexes],
                   None if records.headers is None else [records.headers[i] for i in indexes])


def retained(batch: CleanableBatch, indexes: Sequence[int]) -> CleanedBatch:
    """The batch with only the records at ``indexes`` (none: the bare header of
    RETAIN_EMPTY): base offset, last offset, leader epoch and producer fields kept
    (buildRetainedRecordsInto). The first and max timestamps are recomputed from the
    records' own timestamps where they have them (MemoryRecordsBuilder does); a batch
    without per-record timestamps keeps its header's."""
    offsets = record_offsets(batch)
    records = select(batch.records, indexes)
    first_timestamp, max_timestamp = batch.first_timestamp, batch.max_timestamp
    if records.timestamps:
        first_timestamp, max_timestamp = records.timestamps[0], max(records.timestamps)
    return CleanedBatch(batch.base_offset, batch.next_offset, batch.leader_epoch, [offsets[i] for i in indexes],
                        records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                        base_sequence=batch.base_sequence, attributes=batch.attributes,
                        first_timestamp=first_timestamp, max_timestamp=max_timestamp)
