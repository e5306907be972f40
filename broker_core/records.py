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
from dataclasses import dataclass
from functools import cached_property

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = _HEADER.size
_RECORD_OVERHEAD_BYTES = 14  # a rough per-record framing cost, as in Kafka's varint format


@dataclass(frozen=True, slots=True)
class Record:
    key: str | None
    value: str | None  # None is a tombstone
    size_bytes: int = 0  # the payload size the record stands for (values are short ids)

    @property
    def wire_bytes(self) -> int:
        if self.size_bytes:
            return self.size_bytes + _RECORD_OVERHEAD_BYTES
        return len(self.key or "") + len(self.value or "") + _RECORD_OVERHEAD_BYTES


@dataclass(frozen=True)
class RecordBatch:
    base_offset: int
    leader_epoch: int
    records: tuple[Record, ...]

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    # Batches are immutable and shared by every replica that stores them, so their
    # size and encoding are computed once.
    @cached_property
    def size_bytes(self) -> int:
        return HEADER_BYTES + sum(r.wire_bytes for r in self.records)

    def encode(self) -> bytes:
        return self._encoded

    @cached_property
    def _encoded(self) -> bytes:
        payload = _encode_records(self.records)
        head = struct.pack(">qii", self.base_offset, self.leader_epoch, len(self.records))
        crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
        return _HEADER.pack(self.base_offset, self.leader_epoch, len(self.records), len(payload), crc) + payload


_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


def _encode_records(records: tuple[Record, ...]) -> bytes:
    return _json_encode([[r.key, r.value, r.size_bytes] for r in records]).encode()


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
