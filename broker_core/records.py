"""Records, record batches and their on-disk encoding.

A batch is the unit of append, replication and storage, as in Kafka's RecordBatch. Its
stored form carries a CRC over everything after the CRC field, so that recovery can
tell a torn or garbage tail from good data. (The wire protocol's RecordBatch v2 with
CRC-32C belongs to the real binding; this is the core's own segment format.)
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = _HEADER.size
_RECORD = struct.Struct(">iii")  # key length, value length (-1 = null), size_bytes
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


@dataclass(frozen=True, slots=True)
class RecordBatch:
    base_offset: int
    leader_epoch: int
    records: tuple[Record, ...]

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def size_bytes(self) -> int:
        return HEADER_BYTES + sum(r.wire_bytes for r in self.records)

    def encode(self) -> bytes:
        payload = _encode_records(self.records)
        head = struct.pack(">qii", self.base_offset, self.leader_epoch, len(self.records))
        crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
        return _HEADER.pack(self.base_offset, self.leader_epoch, len(self.records), len(payload), crc) + payload


def _encode_str(value: str | None) -> tuple[int, bytes]:
    if value is None:
        return -1, b""
    data = value.encode()
    return len(data), data


def _encode_records(records: tuple[Record, ...]) -> bytes:
    parts = []
    for record in records:
        key_len, key = _encode_str(record.key)
        value_len, value = _encode_str(record.value)
        parts.append(_RECORD.pack(key_len, value_len, record.size_bytes))
        parts.append(key)
        parts.append(value)
    return b"".join(parts)


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
    if count <= 0 or payload_len < 0 or base_offset < 0 or end_header + payload_len > len(data):
        raise DecodeError("impossible header")
    payload = bytes(data[end_header:end_header + payload_len])
    head = struct.pack(">qii", base_offset, leader_epoch, count)
    if zlib.crc32(struct.pack(">i", payload_len) + payload, zlib.crc32(head)) != crc:
        raise DecodeError("crc mismatch")
    records = []
    pos = 0
    try:
        for _ in range(count):
            key_len, value_len, size_bytes = _RECORD.unpack_from(payload, pos)
            pos += _RECORD.size
            key = None if key_len < 0 else payload[pos:pos + key_len].decode()
            pos += max(key_len, 0)
            value = None if value_len < 0 else payload[pos:pos + value_len].decode()
            pos += max(value_len, 0)
            records.append(Record(key, value, size_bytes))
    except (struct.error, UnicodeDecodeError) as exc:  # a CRC collision on garbage
        raise DecodeError(f"bad records: {exc}") from exc
    if pos != payload_len:
        raise DecodeError("payload length mismatch")
    return RecordBatch(base_offset, leader_epoch, tuple(records)), end_header + payload_len
