"""Records, record batches and their on-disk encoding.

A batch is the unit of append, replication and storage, as in Kafka's RecordBatch. Its
stored form carries a CRC-32 over the header fields (all but the CRC itself) and the
records, so that recovery can tell a torn or garbage tail from good data. (The wire protocol's RecordBatch v2 with
CRC-32C belongs to the real binding; this is the core's own segment format.)

Records are held by column (``Records``: keys, values, sizes), as a simulated run makes
hundreds of thousands of them and touches them only as a batch: a column is built,
sized, encoded and read back with no Python work per record. Per-record timestamps and
headers are optional columns, None unless a client sent them.

A batch also carries what the wire format's v2 batch header carries besides offsets:
producer id, producer epoch, base sequence (idempotent producers), attributes and the
first and max timestamps. A batch that leaves them all at their "none" values (-1, 0)
is stored exactly as before they existed, so logs of non-idempotent runs keep their bytes.
"""
from __future__ import annotations

import json
import json.encoder
import struct
import zlib
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Protocol, Sequence, cast, overload

# base_offset, leader_epoch, record_count, payload_length, crc
_HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = _HEADER.size
_RECORD_OVERHEAD_BYTES = 14  # a rough per-record framing cost, as in Kafka's varint format

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

    def payload_bytes(self) -> int:
        """The bytes the records stand for: ``size_bytes`` where set, else key and
        value; plus the headers' keys and values when there are headers."""
        if isinstance(self.sizes, int) and self.sizes:
            total = self.sizes * len(self.values)
        else:
            total = sum(size or len(key or "") + len(value or "") for key, value, size in self)
        if self.headers is not None:
            total += sum(len(k) + len(v or "") for pairs in self.headers for k, v in pairs)
        return total

    def encode(self, batch_fields: dict | None = None) -> bytes:
        """The stored payload: the JSON array ``[keys, values, sizes]``, followed by an
        object of the batch's v2 header fields and optional columns when any is set."""
        if self.timestamps is not None or self.headers is not None:
            batch_fields = dict(batch_fields or {})
            if self.timestamps is not None:
                batch_fields["timestamps"] = self.timestamps
            if self.headers is not None:
                batch_fields["headers"] = self.headers
        if batch_fields:
            return _json_encode([self.keys, self.values, self.sizes, batch_fields]).encode()
        return _json_encode([self.keys, self.values, self.sizes]).encode()

    def encoded_length(self, fields_length: int) -> int:
        """``len(self.encode(fields))`` for batch fields whose JSON object is
        ``fields_length`` characters long (0: none), counted without encoding; -1 when
        it cannot be counted cheaply (a string JSON escapes, timestamps or headers)."""
        if self.timestamps is not None or self.headers is not None:
            return -1
        values = _text_column_length(self.values)
        keys = 4 if self.keys is None else _text_column_length(self.keys)  # null
        if values < 0 or keys < 0:
            return -1
        sizes = self.sizes
        if isinstance(sizes, int):
            sizes_length = len(str(sizes))
        else:
            sizes_length = 2 + max(len(sizes) - 1, 0)
            for size in sizes:
                sizes_length += len(str(size))
        # [keys,values,sizes] or [keys,values,sizes,fields]
        return 4 + keys + values + sizes_length + (fields_length + 1 if fields_length else 0)

    @classmethod
    def decode(cls, payload: bytes) -> Records:
        return cls.decode_with_fields(payload)[0]

    @classmethod
    def decode_with_fields(cls, payload: bytes) -> tuple[Records, dict]:
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
        return cls(values, keys, sizes, timestamps, headers), fields


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
        data = self.batch.encode()
        if len(data) != self.size:
            raise AssertionError(f"batch at {self.batch.base_offset} encoded to {len(data)} bytes, "
                                 f"counted {self.size}")
        return data


def materialize(data: Any) -> Any:
    """The bytes of a ``WriteBytes``' data, made if they were not yet (bytes, or a
    buffer such as the real binding's view of a request, are returned as they are)."""
    return data.materialize() if isinstance(data, BatchBytes) else data


class RecordBatch:
    """Immutable by convention, and shared by every replica that stores it, so its
    size and encoding are computed once. A plain class with slots: the simulation
    touches batches on every fetch, and attribute reads are its hottest path.

    Besides offsets and the leader epoch it carries the v2 header's producer_id,
    producer_epoch, base_sequence (idempotent producers; -1 otherwise), attributes and
    first/max timestamps. The size model does not depend on them: Kafka's v2 header
    has these fields whether they are set or not."""
    __slots__ = ("base_offset", "leader_epoch", "records", "next_offset", "_size_bytes", "_encoded",
                 "_encoded_size", "producer_id", "producer_epoch", "base_sequence", "attributes", "first_timestamp",
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
        self._encoded: bytes | None = None
        self._encoded_size = -1
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.attributes = attributes
        self.first_timestamp = first_timestamp
        self.max_timestamp = max_timestamp

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, len(self.records))

    def producer_fields(self) -> dict:
        """The v2 header fields other than offsets and leader epoch, where set."""
        fields = {}
        for name, unset in _PRODUCER_FIELDS:
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
            self._size_bytes = HEADER_BYTES + records.payload_bytes() + _RECORD_OVERHEAD_BYTES * len(records)
        return self._size_bytes

    def encoded_size(self) -> int:
        """``len(self.encode())``, counted without encoding when it can be (see
        Records.encoded_length); cached, as the batch is shared by every replica."""
        if self._encoded_size < 0:
            fields = (_field_length("producer_id", self.producer_id, NO_PRODUCER_ID)
                      + _field_length("producer_epoch", self.producer_epoch, NO_PRODUCER_EPOCH)
                      + _field_length("base_sequence", self.base_sequence, NO_SEQUENCE)
                      + _field_length("attributes", self.attributes, 0)
                      + _field_length("first_timestamp", self.first_timestamp, NO_TIMESTAMP)
                      + _field_length("max_timestamp", self.max_timestamp, NO_TIMESTAMP))
            # {"a":1,"b":2}: the braces take the place of the last field's comma
            payload = self.records.encoded_length(fields + 1 if fields else 0)
            self._encoded_size = HEADER_BYTES + payload if payload >= 0 else len(self.encode())
        return self._encoded_size

    def stored_bytes(self) -> BatchBytes:
        """The bytes a log writes for this batch, made when first read."""
        return BatchBytes(self, self.encoded_size())

    def encode(self) -> bytes:
        if self._encoded is None:
            payload = self.records.encode(self.producer_fields())
            count = len(self.records)
            head = struct.pack(">qii", self.base_offset, self.leader_epoch, count)
            crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
            self._encoded = _HEADER.pack(self.base_offset, self.leader_epoch, count, len(payload), crc) + payload
        return self._encoded


_SEQUENCE_LIMIT = 2**31  # sequence numbers are int32 and wrap to 0 after 2**31 - 1


def last_sequence(base_sequence: int, record_count: int) -> int:
    """Kafka's DefaultRecordBatch.lastSequence: sequences wrap at 2**31 - 1."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + record_count - 1) % _SEQUENCE_LIMIT
_PRODUCER_FIELDS = (("producer_id", NO_PRODUCER_ID), ("producer_epoch", NO_PRODUCER_EPOCH),
                    ("base_sequence", NO_SEQUENCE), ("attributes", 0),
                    ("first_timestamp", NO_TIMESTAMP), ("max_timestamp", NO_TIMESTAMP))



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


def decode_batch(data: bytes | bytearray | memoryview, position: int, verify: bool = True) -> tuple[RecordBatch, int]:
    """Decode the batch at ``position``; returns it and the position after it.

    Raises DecodeError for a short read, an impossible header or (with ``verify``) a
    CRC mismatch.
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
    if verify and zlib.crc32(struct.pack(">i", payload_len) + payload, zlib.crc32(head)) != crc:
        raise DecodeError("crc mismatch")
    try:
        records, fields = Records.decode_with_fields(payload)
        batch = RecordBatch(base_offset, leader_epoch, records, **_checked_producer_fields(fields))
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a CRC collision on garbage
        raise DecodeError(f"bad records: {exc}") from exc
    if len(records) != count:
        raise DecodeError("records do not match the header")
    return batch, end_header + payload_len


def _checked_producer_fields(fields: dict) -> dict:
    known = {name for name, _ in _PRODUCER_FIELDS}
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
