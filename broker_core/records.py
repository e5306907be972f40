"""Records and record batches: the model every layer shares.

A batch is the unit of append, replication and storage, as in Kafka's RecordBatch. How
the simulation stores one (the core's own segment format, with its CRC) is
``broker_core.segment_format``; the wire protocol's RecordBatch v2 with CRC-32C belongs
to the real binding.

Records are held by column (``Records``: keys, values, sizes), as a simulated run makes
hundreds of thousands of them and touches them only as a batch: a column is built,
sized, encoded and read back with no Python work per record. Per-record timestamps and
headers are optional columns, None unless a client sent them.

A batch also carries what the wire format's v2 batch header carries besides offsets:
producer id, producer epoch, base sequence (idempotent producers), attributes and the
first and max timestamps.
"""
from __future__ import annotations

from operator import add
from typing import Iterable, Iterator, NamedTuple, Protocol, Sequence, overload

# A stored batch header's bytes in the simulation's own segment format: base_offset,
# leader_epoch, record_count, payload_length and crc (broker_core.segment_format checks
# this). Only file positions count it; sizes the core compares with limits are v2 sizes.
HEADER_BYTES = 24
# Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD: the v2 batch header every batch has.
V2_BATCH_HEADER_BYTES = 61

# Kafka's RecordBatch.NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE and NO_TIMESTAMP.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


class BatchHeader(Protocol):
    """What the core reads of any batch: a RecordBatch, a stored batch's header
    (broker_core.storage.StoredBatch) or a binding's own batch (real_io's WireBatch)."""
    base_offset: int
    next_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def last_sequence(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...


class ClientBatch(BatchHeader, Protocol):
    """A client's batch as a leader appends it (PartitionLog.append_as_leader): a
    RecordBatch, or a binding's own batch (real_io's WireBatch, which keeps the client's
    bytes and stamps them)."""

    def with_offsets(self, base_offset: int, leader_epoch: int) -> ClientBatch:
        """The batch as stored: offsets and leader epoch assigned, all else as sent."""
        ...


class Record(NamedTuple):
    """One record, as a caller sees it; batches store records by column (``Records``)."""
    key: str | None
    value: str | None  # None is a tombstone
    size_bytes: int = 0  # the value's size the record stands for (values are short ids)


class Records(Sequence[Record]):
    """An immutable sequence of records stored by column: ``keys`` (None when no record
    has a key), ``values``, and ``sizes`` (one int when every record has that size);
    ``timestamps`` and ``headers`` (per record: a tuple of (key, value) pairs) are None
    when unused, as in every simulated run."""
    __slots__ = ("keys", "values", "sizes", "timestamps", "headers")

    def __init__(self, values: Sequence[str | None], keys: Sequence[str | None] | None = None,
                 sizes: int | Sequence[int] = 0, timestamps: Sequence[int] | None = None,
                 headers: Sequence[Sequence[tuple[str, str | None]]] | None = None):
        self.values = tuple(values)
        self.timestamps = None if timestamps is None else tuple(timestamps)
        self.headers = None if headers is None else tuple(tuple((k, v) for k, v in h) for h in headers)
        self.keys = None if keys is None or not any(k is not None for k in keys) else tuple(keys)
        if not isinstance(sizes, int):
            sizes = tuple(sizes)
            if sizes and all(size == sizes[0] for size in sizes):
                sizes = sizes[0]
        self.sizes: int | tuple[int, ...] = sizes
        if (self.keys is not None and len(self.keys) != len(self.values)) or (
                not isinstance(self.sizes, int) and len(self.sizes) != len(self.values)) or any(
                column is not None and len(column) != len(self.values) for column in (self.timestamps, self.headers)):
            raise ValueError("keys, values, sizes, timestamps and headers differ in length")

    @classmethod
    def of(cls, records: Iterable[Record]) -> Records:
        """Records from Record tuples (or a Records, returned as it is)."""
        if isinstance(records, Records):
            return records
        rows = tuple(records)
        return cls([r[1] for r in rows], [r[0] for r in rows], [r[2] for r in rows])

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> Records: ...

    def __getitem__(self, index: int | slice) -> Record | Records:
        if isinstance(index, slice):
            return Records(self.values[index], None if self.keys is None else self.keys[index],
                           self.sizes if isinstance(self.sizes, int) else self.sizes[index],
                           None if self.timestamps is None else self.timestamps[index],
                           None if self.headers is None else self.headers[index])
        return Record(None if self.keys is None else self.keys[index], self.values[index],
                      self.sizes if isinstance(self.sizes, int) else self.sizes[index])

    def __iter__(self) -> Iterator[Record]:
        keys = self.keys if self.keys is not None else (None,) * len(self.values)
        sizes = self.sizes if not isinstance(self.sizes, int) else (self.sizes,) * len(self.values)
        return map(Record._make, zip(keys, self.values, sizes))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Records):
            return (self.values, self.keys, self.sizes, self.timestamps, self.headers) == (
                other.values, other.keys, other.sizes, other.timestamps, other.headers)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.values, self.keys, self.sizes))

    def __repr__(self) -> str:
        return f"Records({list(self)!r})"

    def v2_bytes(self, first_timestamp: int = NO_TIMESTAMP) -> int:
        """The length of these records in a Kafka v2 batch (uncompressed), counted by
        column without encoding them: see ``v2_records_bytes``."""
        return v2_records_bytes(self, first_timestamp)


class RecordBatch:
    """Immutable by convention, and shared by every replica that stores it, so its
    size and its stored encoding (``encoding``, ``encoding_size``) are computed once.
    A plain class with slots: the simulation touches batches on every fetch, and
    attribute reads are its hottest path.

    Besides offsets and the leader epoch it carries the v2 header's producer_id,
    producer_epoch, base_sequence (idempotent producers; -1 otherwise), attributes and
    first/max timestamps. Its ``size_bytes`` is the length of its Kafka v2 encoding
    (uncompressed), the size every byte limit of the core compares, in the simulation
    as on the real broker's files (``v2_records_bytes``)."""
    __slots__ = ("base_offset", "leader_epoch", "records", "next_offset", "_size_bytes", "encoding",
                 "encoding_size", "producer_id", "producer_epoch", "base_sequence", "attributes", "first_timestamp",
                 "max_timestamp")

    def __init__(self, base_offset: int, leader_epoch: int, records: Iterable[Record], *,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, attributes: int = 0,
                 first_timestamp: int = NO_TIMESTAMP, max_timestamp: int = NO_TIMESTAMP):
        self.base_offset = base_offset
        self.leader_epoch = leader_epoch
        self.records = Records.of(records)
        self.next_offset = base_offset + len(self.records)
        self._size_bytes = -1
        # Its stored bytes and their length, once broker_core.segment_format has made
        # or counted them (None, -1 until then): computed once for every replica.
        self.encoding: bytes | None = None
        self.encoding_size = -1
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.attributes = attributes
        self.first_timestamp = first_timestamp
        self.max_timestamp = max_timestamp

    @property
    def v2_max_timestamp(self) -> int:
        """The max timestamp its v2 header carries: the one set, else its records'
        largest (as real_io's encoder writes it), else -1."""
        if self.max_timestamp != NO_TIMESTAMP or not self.records.timestamps:
            return self.max_timestamp
        return max(self.records.timestamps)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, len(self.records))

    def producer_fields(self) -> dict:
        """The v2 header fields other than offsets and leader epoch, where set."""
        fields = {}
        for name, unset in PRODUCER_FIELDS:
            value = getattr(self, name)
            if value != unset:
                fields[name] = value
        return fields

    def with_offsets(self, base_offset: int, leader_epoch: int) -> RecordBatch:
        """The batch a leader stores for a client's batch: offsets and leader epoch
        assigned, producer fields and records unchanged."""
        return RecordBatch(base_offset, leader_epoch, self.records, producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
                           attributes=self.attributes, first_timestamp=self.first_timestamp,
                           max_timestamp=self.max_timestamp)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return (self.base_offset, self.leader_epoch, self.records, self.producer_fields()) == (
            other.base_offset, other.leader_epoch, other.records, other.producer_fields())

    def __hash__(self) -> int:
        return hash((self.base_offset, self.leader_epoch, self.records))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.producer_fields().items())
        return (f"RecordBatch(base_offset={self.base_offset}, leader_epoch={self.leader_epoch}, "
                f"records={self.records!r}{extra})")

    @property
    def size_bytes(self) -> int:
        if self._size_bytes < 0:
            records = self.records
            first = self.first_timestamp
            if first == NO_TIMESTAMP and records.timestamps:
                first = records.timestamps[0]  # as real_io's v2 encoder takes it
            self._size_bytes = V2_BATCH_HEADER_BYTES + v2_records_bytes(records, first)
        return self._size_bytes


_SEQUENCE_LIMIT = 2**31  # sequence numbers are int32 and wrap to 0 after 2**31 - 1


def last_sequence(base_sequence: int, record_count: int) -> int:
    """Kafka's DefaultRecordBatch.lastSequence: sequences wrap at 2**31 - 1."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + record_count - 1) % _SEQUENCE_LIMIT


# The v2 header's fields other than offsets and leader epoch, with their "none" values.
PRODUCER_FIELDS = (("producer_id", NO_PRODUCER_ID), ("producer_epoch", NO_PRODUCER_EPOCH),
                   ("base_sequence", NO_SEQUENCE), ("attributes", 0),
                   ("first_timestamp", NO_TIMESTAMP), ("max_timestamp", NO_TIMESTAMP))


# -- the v2 size, counted by column ---------------------------------------------------
# A zigzag varint of n >= 0 takes k bytes while n < 2**(7k - 1): the tiers' bounds.
_VARINT_BOUNDS = (64, 8192, 1 << 20, 1 << 27, 1 << 34, 1 << 41, 1 << 48, 1 << 55, 1 << 62)


def varint_size(n: int) -> int:
    """Kafka's ByteUtils.sizeOfVarint / sizeOfVarlong: the bytes of n's zigzag varint."""
    zigzag = n << 1 if n >= 0 else ((-n) << 1) - 1
    return (zigzag.bit_length() + 6) // 7 or 1


def _offset_delta_tiers(count: int) -> Iterator[tuple[int, int]]:
    """(how many, varint size) of the offset deltas 0 .. count-1, by size."""
    low = 0
    for size, bound in enumerate(_VARINT_BOUNDS, 1):
        if low >= count:
            return
        high = min(bound, count)
        yield high - low, size
        low = high


def _text_parts(texts: Sequence[str | None], sizes: int | Sequence[int] = 0) -> tuple[int, list[int] | None]:
    """A key or value column's bytes per record (varint length, then the bytes; null:
    the varint -1): one constant when every record takes the same, else a list. A
    value's length is the size it stands for, where set; a null stays null."""
    if isinstance(sizes, int) and sizes:
        if None not in texts:
            return varint_size(sizes) + sizes, None
        lengths = [-1 if text is None else sizes for text in texts]
    elif isinstance(sizes, int):
        try:
            lengths = list(map(len, texts))  # type: ignore[arg-type]
        except TypeError:  # a null among them
            lengths = [-1 if text is None else len(text) for text in texts]
    else:
        lengths = [-1 if text is None else (size or len(text)) for text, size in zip(texts, sizes)]
    if lengths and -1 < min(lengths) and max(lengths) < 64:  # one-byte varints, no nulls: the common case
        return 1, lengths
    return 0, [length + varint_size(length) if length >= 0 else 1 for length in lengths]


def v2_records_bytes(records: Records, first_timestamp: int = NO_TIMESTAMP) -> int:
    """The records' length in a Kafka v2 batch, counted without encoding (2.7.0
    DefaultRecord.sizeInBytes): per record a varint of its body's length, then the body
    -- attributes (1 byte), varlong timestamp delta (from ``first_timestamp``), varint
    offset delta, the key and the value (varint length and bytes, -1 for null; a value
    counts the size it stands for), a varint header count and each header's key and
    value. Columns that are the same for every record are counted once: a simulated
    batch without keys, times or headers costs a few operations whatever its length."""
    count = len(records.values)
    constant = 1  # attributes
    varying: list[int] | None = None
    parts: list[tuple[int, list[int] | None]] = [
        (1, None) if records.keys is None else _text_parts(records.keys),
        _text_parts(records.values, records.sizes)]
    stamps = records.timestamps
    parts.append((1, None) if stamps is None else
                 (0, [varint_size(stamp - first_timestamp) for stamp in stamps]))
    if records.headers is None:
        parts.append((1, None))
    else:
        parts.append((0, [varint_size(len(pairs)) + sum(
            _header_text_size(name) + _header_text_size(value) for name, value in pairs)
            for pairs in records.headers]))
    for fixed, column in parts:
        constant += fixed
        if column is not None:
            varying = column if varying is None else list(map(add, varying, column))
    if varying is None:
        # Only the offset delta varies: whole tiers of records share one body length.
        total = 0
        for how_many, delta_size in _offset_delta_tiers(count):
            body = constant + delta_size
            total += how_many * (body + varint_size(body))
        return total
    total = 0
    start = 0
    for how_many, delta_size in _offset_delta_tiers(count):
        bodies = varying[start:start + how_many]
        start += how_many
        low, high = min(bodies) + constant + delta_size, max(bodies) + constant + delta_size
        total += sum(bodies) + how_many * (constant + delta_size)
        if varint_size(low) == varint_size(high):
            total += how_many * varint_size(low)
        else:
            total += sum(varint_size(body + constant + delta_size) for body in bodies)
    return total


def _header_text_size(text: str | None) -> int:
    return 1 if text is None else varint_size(len(text)) + len(text)
