"""Records, record batches and their on-disk encoding.

A batch is the unit of append, replication and storage, as in Kafka's RecordBatch. Its
stored form carries a CRC-32 over the header fields (all but the CRC itself) and the
records, so that recovery can tell a torn or garbage tail from good data. (The wire protocol's RecordBatch v2 with
CRC-32C belongs to the real binding; this is the core's own segment format.)

Records are held by column (``Records``: keys, values, sizes), as a simulated run makes
hundreds of thousands of them and touches them only as a batch: a column is built,
sized, encoded and read back with no Python work per record.
"""
from __future__ import annotations

import json
import struct
import zlib
from typing import Iterable, Iterator, NamedTuple, Sequence, overload

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = _HEADER.size
_RECORD_OVERHEAD_BYTES = 14  # a rough per-record framing cost, as in Kafka's varint format


class Record(NamedTuple):
    """One record, as a caller sees it; batches store records by column (``Records``)."""
    key: str | None
    value: str | None  # None is a tombstone
    size_bytes: int = 0  # the payload size the record stands for (values are short ids)

    @property
    def wire_bytes(self) -> int:
        if self.size_bytes:
            return self.size_bytes + _RECORD_OVERHEAD_BYTES
        return len(self.key or "") + len(self.value or "") + _RECORD_OVERHEAD_BYTES


class Records(Sequence[Record]):
    """An immutable sequence of records stored by column: ``keys`` (None when no record
    has a key), ``values``, and ``sizes`` (one int when every record has that size)."""
    __slots__ = ("keys", "values", "sizes")

    def __init__(self, values: Sequence[str | None], keys: Sequence[str | None] | None = None,
                 sizes: int | Sequence[int] = 0):
        self.values = tuple(values)
        self.keys = None if keys is None or not any(k is not None for k in keys) else tuple(keys)
        if not isinstance(sizes, int):
            sizes = tuple(sizes)
            if sizes and all(size == sizes[0] for size in sizes):
                sizes = sizes[0]
        self.sizes: int | tuple[int, ...] = sizes
        if (self.keys is not None and len(self.keys) != len(self.values)) or (
                not isinstance(self.sizes, int) and len(self.sizes) != len(self.values)):
            raise ValueError("keys, values and sizes differ in length")

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
                           self.sizes if isinstance(self.sizes, int) else self.sizes[index])
        return Record(None if self.keys is None else self.keys[index], self.values[index],
                      self.sizes if isinstance(self.sizes, int) else self.sizes[index])

    def __iter__(self) -> Iterator[Record]:
        keys = self.keys if self.keys is not None else (None,) * len(self.values)
        sizes = self.sizes if not isinstance(self.sizes, int) else (self.sizes,) * len(self.values)
        return map(Record._make, zip(keys, self.values, sizes))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Records):
            return (self.values, self.keys, self.sizes) == (other.values, other.keys, other.sizes)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.values, self.keys, self.sizes))

    def __repr__(self) -> str:
        return f"Records({list(self)!r})"

    def payload_bytes(self) -> int:
        """The bytes the records stand for: ``size_bytes`` where set, else key and value."""
        if isinstance(self.sizes, int) and self.sizes:
            return self.sizes * len(self.values)
        return sum(size or len(key or "") + len(value or "") for key, value, size in self)

    def encode(self) -> bytes:
        """The stored payload: the JSON array ``[keys, values, sizes]``."""
        return _json_encode([self.keys, self.values, self.sizes]).encode()

    @classmethod
    def decode(cls, payload: bytes) -> Records:
        keys, values, sizes = json.loads(payload)
        if not isinstance(values, list) or not all(_is_text(v) for v in values):
            raise ValueError("values must be a list of strings or nulls")
        if keys is not None and (not isinstance(keys, list) or not all(_is_text(k) for k in keys)):
            raise ValueError("keys must be null or a list of strings or nulls")
        if not (_is_size(sizes) or (isinstance(sizes, list) and all(_is_size(n) for n in sizes))):
            raise ValueError("sizes must be a non-negative int or a list of them")
        return cls(values, keys, sizes)


class RecordBatch:
    """Immutable by convention, and shared by every replica that stores it, so its
    size and encoding are computed once. A plain class with slots: the simulation
    touches batches on every fetch, and attribute reads are its hottest path."""
    __slots__ = ("base_offset", "leader_epoch", "records", "next_offset", "_size_bytes", "_encoded")

    def __init__(self, base_offset: int, leader_epoch: int, records: Iterable[Record]):
        self.base_offset = base_offset
        self.leader_epoch = leader_epoch
        self.records = Records.of(records)
        self.next_offset = base_offset + len(self.records)
        self._size_bytes = -1
        self._encoded: bytes | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return (self.base_offset, self.leader_epoch, self.records) == (other.base_offset, other.leader_epoch,
                                                                       other.records)

    def __hash__(self) -> int:
        return hash((self.base_offset, self.leader_epoch, self.records))

    def __repr__(self) -> str:
        return f"RecordBatch(base_offset={self.base_offset}, leader_epoch={self.leader_epoch}, records={self.records!r})"

    @property
    def size_bytes(self) -> int:
        if self._size_bytes < 0:
            records = self.records
            self._size_bytes = HEADER_BYTES + records.payload_bytes() + _RECORD_OVERHEAD_BYTES * len(records)
        return self._size_bytes

    def encode(self) -> bytes:
        if self._encoded is None:
            payload = self.records.encode()
            count = len(self.records)
            head = struct.pack(">qii", self.base_offset, self.leader_epoch, count)
            crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
            self._encoded = _HEADER.pack(self.base_offset, self.leader_epoch, count, len(payload), crc) + payload
        return self._encoded


_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


class DecodeError(ValueError):
    pass


def decode_batch(data: bytes | bytearray | memoryview, position: int) -> tuple[RecordBatch, int]:
    """Decode the batch at ``position``; returns it and the position after it.

    Raises DecodeError for a short read, an impossible header or a CRC mismatch.
    """
    end_header = position + HEADER_BYTES
    if end_header > len(data):
        raise DecodeError("truncated header")
    base_offset, leader_epoch, count, payload_len, crc = _HEADER.unpack_from(data, position)
    if count <= 0 or payload_len < 0 or base_offset < 0:
        raise DecodeError("impossible header")
    if end_header + payload_len > len(data):
        raise DecodeError("truncated batch (a torn write)")
    payload = bytes(data[end_header:end_header + payload_len])
    head = struct.pack(">qii", base_offset, leader_epoch, count)
    if zlib.crc32(struct.pack(">i", payload_len) + payload, zlib.crc32(head)) != crc:
        raise DecodeError("crc mismatch")
    try:
        records = Records.decode(payload)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a CRC collision on garbage
        raise DecodeError(f"bad records: {exc}") from exc
    if len(records) != count:
        raise DecodeError("records do not match the header")
    return RecordBatch(base_offset, leader_epoch, records), end_header + payload_len


def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
