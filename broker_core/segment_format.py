"""The core's own segment format: how the simulation stores a RecordBatch.

A segment file is a sequence of stored batches. Each is a header (base offset, leader
epoch, record count, payload length and a CRC-32 over the header fields, all but the
CRC itself, and the payload) followed by the payload: the records' columns as compact
JSON. The CRC lets recovery tell a torn or garbage tail from good data. A batch that
leaves its v2 header fields at their "none" values (-1, 0) is stored exactly as before
those fields existed, so logs of non-idempotent runs keep their bytes.

The real binding stores Kafka's record batch v2 with CRC-32C instead
(``real_io.protocol.record_batch``); the model both share is ``broker_core.records``.

The log writes a batch as ``BatchBytes`` (its length counted without encoding); the
bytes are made only when something reads them (``materialize``).
"""
from __future__ import annotations

import json
import json.encoder
import struct
import zlib
from typing import Any, Callable, cast

from broker_core.cleaned_batch import CleanedBatch
from broker_core.records import (
    HEADER_BYTES, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, PRODUCER_FIELDS, RecordBatch, Records)

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
if _HEADER.size != HEADER_BYTES:  # the size model (records.py) counts this header
    raise AssertionError(f"a stored batch header is {_HEADER.size} bytes, the size model counts {HEADER_BYTES}")


def encode_records(records: Records, batch_fields: dict | None = None) -> bytes:
    """The stored payload: the JSON array ``[keys, values, sizes]``, followed by an
    object of the batch's v2 header fields and optional columns when any is set."""
    if records.timestamps is not None or records.headers is not None:
        batch_fields = dict(batch_fields or {})
        if records.timestamps is not None:
            batch_fields["timestamps"] = records.timestamps
        if records.headers is not None:
            batch_fields["headers"] = records.headers
    if batch_fields:
        return _json_encode([records.keys, records.values, records.sizes, batch_fields]).encode()
    return _json_encode([records.keys, records.values, records.sizes]).encode()


def encoded_records_length(records: Records, fields_length: int) -> int:
    """``len(encode_records(records, fields))`` for batch fields whose JSON object is
    ``fields_length`` characters long (0: none), counted without encoding; -1 when
    it cannot be counted cheaply (a string JSON escapes, timestamps or headers)."""
    if records.timestamps is not None or records.headers is not None:
        return -1
    values = _text_column_length(records.values)
    keys = 4 if records.keys is None else _text_column_length(records.keys)  # null
    if values < 0 or keys < 0:
        return -1
    sizes = records.sizes
    if isinstance(sizes, int):
        sizes_length = len(str(sizes))
    else:
        sizes_length = 2 + max(len(sizes) - 1, 0)
        for size in sizes:
            sizes_length += len(str(size))
    # [keys,values,sizes] or [keys,values,sizes,fields]
    return 4 + keys + values + sizes_length + (fields_length + 1 if fields_length else 0)


def decode_records(payload: bytes) -> tuple[Records, dict]:
    """The records and the batch fields stored with them (empty for a plain batch)."""
    decoded = json.loads(payload)
    if not isinstance(decoded, list) or len(decoded) not in (3, 4):
        raise ValueError("payload must be [keys, values, sizes] or [keys, values, sizes, fields]")
    keys, values, sizes = decoded[:3]
    fields = decoded[3] if len(decoded) == 4 else {}
    if len(decoded) == 4 and (not isinstance(fields, dict) or not fields):
        raise ValueError("batch fields must be a non-empty object")
    if not isinstance(values, list) or not all(_is_text(v) for v in values):
        raise ValueError("values must be a list of strings or nulls")
    if keys is not None and (not isinstance(keys, list) or not all(_is_text(k) for k in keys)):
        raise ValueError("keys must be null or a list of strings or nulls")
    if not (_is_size(sizes) or (isinstance(sizes, list) and all(_is_size(n) for n in sizes))):
        raise ValueError("sizes must be a non-negative int or a list of them")
    timestamps = fields.pop("timestamps", None)
    headers = fields.pop("headers", None)
    if timestamps is not None and not (isinstance(timestamps, list) and all(_is_int(t) for t in timestamps)):
        raise ValueError("timestamps must be a list of integers")
    if headers is not None and not (isinstance(headers, list) and all(_is_headers(h) for h in headers)):
        raise ValueError("headers must be a list of [key, value] pair lists")
    return Records(values, keys, sizes, timestamps, headers), fields


# The characters compact ASCII JSON writes as they are: printable ASCII but the quote
# and the backslash (json.encoder's ESCAPE_ASCII escapes every other one).
_JSON_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")


def is_plain_json_text(text: str) -> bool:
    """Whether JSON writes ``text`` as it is between its quotes (no escapes). Faster
    than str.isprintable: the ASCII bytes are filtered by a table in C."""
    return text.isascii() and not text.encode("ascii").translate(None, _JSON_PLAIN)


def _text_column_length(column: tuple[str | None, ...]) -> int:
    """The length of a column of strings and nulls as compact ASCII JSON, or -1 when a
    string holds a character JSON escapes (outside printable ASCII, a quote or a
    backslash): those are rare enough to be counted by encoding."""
    count = len(column)
    try:
        joined = "".join(cast("tuple[str, ...]", column))
        nulls = 0
    except TypeError:  # a null among them (a tombstone, a record without a key): rare
        nulls = column.count(None)
        joined = "".join([text for text in column if text is not None])
    if not is_plain_json_text(joined):
        return -1
    # [ "a","b",null ]: quotes around each string, 4 per null, commas between
    return 2 + len(joined) + 2 * (count - nulls) + 4 * nulls + max(count - 1, 0)


def _field_length(name: str, value: int, unset: int) -> int:
    """A set batch field's ``"name":value,`` in the JSON object of batch fields (0 unset)."""
    return 0 if value == unset else len(name) + 4 + len(str(value))


class BatchBytes:
    """A RecordBatch's stored bytes before they are made: their exact length, known
    without encoding, and the batch that encodes them (``materialize``). The log hands
    these to the simulated disk, which keeps them as they are until something reads
    the file's bytes (a recovery, a fsync's durable copy, a torn write, a bit flip), so
    that a run without crashes never encodes a batch."""
    __slots__ = ("batch", "size")

    def __init__(self, batch: RecordBatch, size: int) -> None:
        self.batch = batch
        self.size = size

    def __len__(self) -> int:
        return self.size

    def materialize(self) -> bytes:
        data = encode_batch(self.batch)
        if len(data) != self.size:
            raise AssertionError(f"batch at {self.batch.base_offset} encoded to {len(data)} bytes, "
                                 f"counted {self.size}")
        return data


def materialize(data: Any) -> Any:
    """The bytes of a ``WriteBytes``' data, made if they were not yet (bytes, or a
    buffer such as the real binding's view of a request, are returned as they are)."""
    return data.materialize() if isinstance(data, BatchBytes) else data


def encoded_size(batch: RecordBatch) -> int:
    """``len(encode_batch(batch))``, counted without encoding when it can be (see
    encoded_records_length); cached, as the batch is shared by every replica."""
    if batch.encoding_size < 0:
        fields = (_field_length("producer_id", batch.producer_id, NO_PRODUCER_ID)
                  + _field_length("producer_epoch", batch.producer_epoch, NO_PRODUCER_EPOCH)
                  + _field_length("base_sequence", batch.base_sequence, NO_SEQUENCE)
                  + _field_length("attributes", batch.attributes, 0)
                  + _field_length("first_timestamp", batch.first_timestamp, NO_TIMESTAMP)
                  + _field_length("max_timestamp", batch.max_timestamp, NO_TIMESTAMP))
        # {"a":1,"b":2}: the braces take the place of the last field's comma
        payload = encoded_records_length(batch.records, fields + 1 if fields else 0)
        batch.encoding_size = HEADER_BYTES + payload if payload >= 0 else len(encode_batch(batch))
    return batch.encoding_size


def stored_bytes(batch: RecordBatch) -> BatchBytes:
    """The bytes a log writes for ``batch``, made when first read."""
    return BatchBytes(batch, encoded_size(batch))


def encode_batch(batch: RecordBatch) -> bytes:
    """The batch's stored bytes: header, CRC and payload (made once, then cached)."""
    if batch.encoding is None:
        payload = encode_records(batch.records, batch.producer_fields())
        count = len(batch.records)
        head = struct.pack(">qii", batch.base_offset, batch.leader_epoch, count)
        crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
        batch.encoding = _HEADER.pack(batch.base_offset, batch.leader_epoch, count, len(payload), crc) + payload
    return batch.encoding


def encode_cleaned_batch(batch: CleanedBatch) -> bytes:
    """A batch the log cleaner rewrote, in the same format: its records' offsets stored
    as deltas from the base offset (``offset_deltas``) and its last offset as
    ``last_offset_delta``, as v2 keeps both (MemoryRecords.buildRetainedRecordsInto), so
    that offsets survive the gaps. A RETAIN_EMPTY batch has no record: its header's
    count is 0, which only a payload with ``offset_deltas`` may say."""
    fields: dict = {name: getattr(batch, name) for name, unset in PRODUCER_FIELDS if getattr(batch, name) != unset}
    fields["offset_deltas"] = [offset - batch.base_offset for offset in batch.offsets]
    fields["last_offset_delta"] = batch.next_offset - 1 - batch.base_offset
    payload = encode_records(batch.records, fields)
    count = len(batch.records)
    head = struct.pack(">qii", batch.base_offset, batch.leader_epoch, count)
    crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
    return _HEADER.pack(batch.base_offset, batch.leader_epoch, count, len(payload), crc) + payload


def _cleaned(base_offset: int, leader_epoch: int, records: Records, fields: dict) -> CleanedBatch:
    """The CleanedBatch a payload with ``offset_deltas`` stands for (ValueError when its
    offsets do not fit the batch)."""
    deltas = fields.pop("offset_deltas")
    last = fields.pop("last_offset_delta", None)
    if not (isinstance(deltas, list) and all(_is_int(d) for d in deltas) and _is_int(last)):
        raise ValueError("offset_deltas must be a list of integers with an integer last_offset_delta")
    return CleanedBatch(base_offset, base_offset + last + 1, leader_epoch, [base_offset + d for d in deltas],
                        records, **_checked_producer_fields(fields))


def _unserializable(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _compact_json_encoder() -> Callable[[Any], str]:
    """json's compact ASCII encoding of a value. CPython's C encoder is built once here:
    JSONEncoder.encode builds a new one on every call, a Python call chain per batch
    encoded. The bytes are those JSONEncoder writes (no circular-reference check: a
    batch's columns hold no cycles)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # other interpreters
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
    encoder = make(None, _unserializable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    return lambda value: "".join(encoder(value, 0))


_json_encode = _compact_json_encoder()


class DecodeError(ValueError):
    pass


def decode_batch(data: bytes | bytearray | memoryview, position: int,
                 verify: bool = True) -> tuple[RecordBatch | CleanedBatch, int]:
    """Decode the batch at ``position``; returns it and the position after it.

    Raises DecodeError for a short read, an impossible header or (with ``verify``) a
    CRC mismatch.
    """
    end_header = position + HEADER_BYTES
    if end_header > len(data):
        raise DecodeError("truncated header")
    base_offset, leader_epoch, count, payload_len, crc = _HEADER.unpack_from(data, position)
    if count < 0 or (count == 0 and payload_len == 0) or payload_len < 0 or base_offset < 0:
        raise DecodeError("impossible header")
    if end_header + payload_len > len(data):
        raise DecodeError("truncated batch (a torn write)")
    payload = bytes(data[end_header:end_header + payload_len])
    head = struct.pack(">qii", base_offset, leader_epoch, count)
    if verify and zlib.crc32(struct.pack(">i", payload_len) + payload, zlib.crc32(head)) != crc:
        raise DecodeError("crc mismatch")
    try:
        records, fields = decode_records(payload)
        batch: RecordBatch | CleanedBatch
        if "offset_deltas" in fields:
            batch = _cleaned(base_offset, leader_epoch, records, fields)
        elif count == 0:
            raise ValueError("a batch with no record that the cleaner did not write")
        else:
            batch = RecordBatch(base_offset, leader_epoch, records, **_checked_producer_fields(fields))
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a CRC collision on garbage
        raise DecodeError(f"bad records: {exc}") from exc
    if len(records) != count:
        raise DecodeError("records do not match the header")
    return batch, end_header + payload_len


def _checked_producer_fields(fields: dict) -> dict:
    known = {name for name, _ in PRODUCER_FIELDS}
    for name, value in fields.items():
        if name not in known or not _is_int(value):
            raise ValueError(f"unknown or non-integer batch field {name!r}")
    return fields


def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_headers(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_text(pair[1])
        for pair in value)


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
