"""Records, record batches and their on-disk encoding.

A batch is the unit of append, replication and storage, as in Kafka's RecordBatch. Its
stored form carries a CRC-32 over the header fields (all but the CRC itself) and the
records, so that recovery can tell a torn or garbage tail from good data. (The wire protocol's RecordBatch v2 with
CRC-32C belongs to the real binding; this is the core's own segment format.)
"""
from __future__ import annotations

import json
import struct
import zlib
from typing import NamedTuple

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = _HEADER.size
_RECORD_OVERHEAD_BYTES = 14  # a rough per-record framing cost, as in Kafka's varint format


class Record(NamedTuple):
    """A tuple, not a dataclass: a run makes one per produced record, and a tuple is
    built at half the cost and JSON-encodes as the stored ``[key, value, size]``."""
    key: str | None
    value: str | None  # None is a tombstone
    size_bytes: int = 0  # the payload size the record stands for (values are short ids)

    @property
    def wire_bytes(self) -> int:
        if self.size_bytes:
            return self.size_bytes + _RECORD_OVERHEAD_BYTES
        return len(self.key or "") + len(self.value or "") + _RECORD_OVERHEAD_BYTES


class RecordBatch:
    """Immutable by convention, and shared by every replica that stores it, so its
    size and encoding are computed once. A plain class with slots: the simulation
    touches batches on every fetch, and attribute reads are its hottest path."""
    __slots__ = ("base_offset", "leader_epoch", "records", "next_offset", "_size_bytes", "_encoded")

    def __init__(self, base_offset: int, leader_epoch: int, records: tuple[Record, ...]):
        self.base_offset = base_offset
        self.leader_epoch = leader_epoch
        self.records = records
        self.next_offset = base_offset + len(records)
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
        if self._size_bytes < 0:  # Record.wire_bytes summed without a call per record
            payload = sum(size or len(key or "") + len(value or "") for key, value, size in self.records)
            self._size_bytes = HEADER_BYTES + payload + _RECORD_OVERHEAD_BYTES * len(self.records)
        return self._size_bytes

    def encode(self) -> bytes:
        if self._encoded is None:
            payload = _encode_records(self.records)
            count = len(self.records)
            head = struct.pack(">qii", self.base_offset, self.leader_epoch, count)
            crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
            self._encoded = _HEADER.pack(self.base_offset, self.leader_epoch, count, len(payload), crc) + payload
        return self._encoded


_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def _encode_records(records: tuple[Record, ...]) -> bytes:
    return _json_encode(records).encode()  # each record encodes as [key, value, size_bytes]


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
        raw = json.loads(payload)
        records = tuple(Record(k, v, int(s)) for k, v, s in raw)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a CRC collision on garbage
        raise DecodeError(f"bad records: {exc}") from exc
    if len(records) != count or any(not _is_text(r.key) or not _is_text(r.value) for r in records):
        raise DecodeError("records do not match the header")
    return RecordBatch(base_offset, leader_epoch, records), end_header + payload_len


def _is_text(value) -> bool:
    return value is None or isinstance(value, str)
