"""Record batch v2 (magic 2) to and from the core's RecordBatch.

Layout (DefaultRecordBatch in Kafka's clients): base_offset int64, batch_length int32
(the bytes after it), partition_leader_epoch int32, magic int8 = 2, crc uint32 (CRC-32C
of everything from attributes to the end), attributes int16 (bits 0-2 compression, 3
timestamp type, 4 transactional, 5 control), last_offset_delta int32, first_timestamp
int64, max_timestamp int64, producer_id int64, producer_epoch int16, base_sequence int32,
record count int32, then the records (compressed as one block when bits 0-2 say so).
A record: varint length, attributes int8 (unused), varlong timestamp delta, varint
offset delta, varint key length (-1 = null) and key, varint value length and value,
varint header count, and per header a varint key length, key, varint value length
(-1 = null) and value.

Mapping to the core (broker_core.records): partition_leader_epoch -> leader_epoch;
producer id/epoch, base sequence, attributes, first/max timestamps -> the batch's
fields of the same names; per record: timestamp = first_timestamp + delta (the
``timestamps`` column, None when the batch has no timestamps at all: first timestamp
-1 and every delta 0), key, value and headers (None when no record has one). The core's keys and values are str: bytes
map to str by latin-1, one code point per byte, so any bytes round-trip exactly and
``len`` of a key or value is its size in bytes (the core's size model stays exact).
Header keys (UTF-8 strings in Kafka) go through latin-1 too, for the same exactness.
The core numbers records base_offset + index, so a batch whose offset deltas are not
0, 1, 2, ... (only compaction makes such batches) is refused with a ProtocolError by
``decode_batch``; a batch the log cleaner wrote is read with ``decode_stored_batch`` (a
CleanedBatch: increasing offset deltas up to the last offset delta, perhaps no record)
and written with ``encode_cleaned_batch``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from broker_core.cleaned_batch import CleanedBatch
from broker_core.records import NO_TIMESTAMP, RecordBatch, Records
from real_io.protocol import compression
from real_io.protocol.crc32c import crc32c
from real_io.protocol.errors import ProtocolError
from real_io.protocol.primitives import Reader, Writer

MAGIC = 2
_HEAD = struct.Struct(">qiibIhiqqqhii")
HEADER_BYTES = _HEAD.size  # 61
_CRC_START = 21  # attributes onwards is checksummed
_LENGTH_OFFSET = 12  # batch_length counts the bytes after base_offset and itself

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return _LENGTH_OFFSET + self.batch_length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK


def read_header(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header of the batch at ``position``, checked for a sane length and magic
    (not for its CRC, nor that the whole batch is present)."""
    if len(data) - position < HEADER_BYTES:
        raise ProtocolError(f"truncated batch header: {len(data) - position} of {HEADER_BYTES} bytes")
    header = BatchHeader(*_HEAD.unpack_from(data, position))
    if header.magic != MAGIC:
        raise ProtocolError(f"record batch magic {header.magic}; only magic 2 is supported")
    if header.batch_length < HEADER_BYTES - _LENGTH_OFFSET:
        raise ProtocolError(f"batch length {header.batch_length} is shorter than a header")
    if header.record_count < 0:
        raise ProtocolError(f"negative record count {header.record_count}")
    return header


def _checked_header(data: bytes | bytearray | memoryview, position: int) -> tuple[BatchHeader, int]:
    """The header at ``position`` and the batch's end, once the whole batch is present and
    its CRC-32C matches."""
    header = read_header(data, position)
    end = position + header.size
    if end > len(data):
        raise ProtocolError(f"truncated batch: {header.size} bytes announced, {len(data) - position} present")
    if crc32c(memoryview(data)[position + _CRC_START:end]) != header.crc:
        raise ProtocolError("record batch CRC-32C mismatch")
    return header, end


def decode_batch(data: bytes | bytearray | memoryview, position: int = 0,
                 max_bytes: int = compression.DEFAULT_MAX_BYTES) -> tuple[RecordBatch, int]:
    """The batch at ``position`` as a core RecordBatch, and the position after it."""
    header, end = _checked_header(data, position)
    body = bytes(data[position + HEADER_BYTES:end])
    if header.compression not in compression.NAMES:
        raise ProtocolError(f"unknown compression codec {header.compression}")
    body = compression.decompress(header.compression, body, max_bytes)
    records = _decode_records(body, header)
    return RecordBatch(header.base_offset, header.partition_leader_epoch, records,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence, attributes=header.attributes,
                       first_timestamp=header.first_timestamp, max_timestamp=header.max_timestamp), end


def decode_stored_batch(data: bytes | bytearray | memoryview, position: int = 0,
                        max_bytes: int = compression.DEFAULT_MAX_BYTES) -> tuple[RecordBatch | CleanedBatch, int]:
    """A batch as a segment file stores it, cleaned or not: a RecordBatch when its
    offset deltas are 0..n-1, else a CleanedBatch (Kafka's buildRetainedRecordsInto keeps
    each record's offset delta and the original last offset delta)."""
    header, end = _checked_header(data, position)
    if header.compression not in compression.NAMES:
        raise ProtocolError(f"unknown compression codec {header.compression}")
    body = compression.decompress(header.compression, bytes(data[position + HEADER_BYTES:end]), max_bytes)
    deltas: list[int] = []
    records = _decode_records(body, header, deltas)
    fields = dict(producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                  base_sequence=header.base_sequence, attributes=header.attributes,
                  first_timestamp=header.first_timestamp, max_timestamp=header.max_timestamp)
    if deltas and deltas == list(range(len(deltas))) and header.last_offset_delta == len(deltas) - 1:
        return RecordBatch(header.base_offset, header.partition_leader_epoch, records, **fields), end
    base = header.base_offset
    try:
        batch = CleanedBatch(base, base + header.last_offset_delta + 1, header.partition_leader_epoch,
                             [base + d for d in deltas], records, **fields)
    except ValueError as exc:
        raise ProtocolError(f"offset deltas {deltas[:5]}...: {exc}") from None
    return batch, end


def encode_cleaned_batch(batch: CleanedBatch) -> bytes:
    """A batch the log cleaner rewrote: each record's offset delta from its offset, the
    original last offset delta, and the header of an empty batch (RETAIN_EMPTY)."""
    stamps = batch.records.timestamps
    first = batch.first_timestamp if batch.first_timestamp != -1 or not stamps else stamps[0]
    max_timestamp = batch.max_timestamp if batch.max_timestamp != -1 or not stamps else max(stamps)
    codec = batch.attributes & COMPRESSION_MASK
    deltas = [offset - batch.base_offset for offset in batch.offsets]
    body = compression.compress(codec, _encode_records(batch.records, first, deltas))
    head = _HEAD.pack(batch.base_offset, HEADER_BYTES - _LENGTH_OFFSET + len(body), batch.leader_epoch, MAGIC, 0,
                      batch.attributes, batch.next_offset - 1 - batch.base_offset, first, max_timestamp,
                      batch.producer_id, batch.producer_epoch, batch.base_sequence, len(batch.records))
    crc = crc32c(head[_CRC_START:] + body)
    return head[:17] + struct.pack(">I", crc) + head[_CRC_START:] + body


def decode_batches(data: bytes | bytearray | memoryview, allow_partial_tail: bool = False,
                   max_bytes: int = compression.DEFAULT_MAX_BYTES) -> list[RecordBatch]:
    """Every batch in a records field. A fetch response may end in a partial batch
    (clients skip it: ``allow_partial_tail``); a produce request may not."""
    batches, position = [], 0
    while position < len(data):
        if allow_partial_tail and (len(data) - position < HEADER_BYTES or
                                   position + read_header(data, position).size > len(data)):
            break
        batch, position = decode_batch(data, position, max_bytes)
        batches.append(batch)
    return batches


def _decode_records(body: bytes, header: BatchHeader, deltas: list[int] | None = None) -> Records:
    """The records of a batch's body. ``deltas``: collect each record's offset delta
    there, allowing gaps (a cleaned batch); without it they must be 0..n-1."""
    count = header.record_count
    if count > len(body):
        raise ProtocolError(f"{count} records cannot fit in {len(body)} bytes")
    reader = Reader(body)
    keys, values, timestamps, headers = [], [], [], []
    for index in range(count):
        length = reader.varint()
        if length < 0 or length > reader.remaining:
            raise ProtocolError(f"record length {length} with {reader.remaining} bytes left")
        record = Reader(body, reader.pos, reader.pos + length)
        reader.pos += length
        record.int8()  # record attributes: unused by Kafka
        timestamps.append(header.first_timestamp + record.varlong())
        delta = record.varint()
        if deltas is not None:
            if delta > header.last_offset_delta or (deltas and delta <= deltas[-1]) or delta < 0:
                raise ProtocolError(f"record {index} has offset delta {delta} out of order")
            deltas.append(delta)
        elif delta != index:
            raise ProtocolError(f"record {index} has a non-contiguous offset delta")
        keys.append(_varint_text(record, "key"))
        values.append(_varint_text(record, "value"))
        pairs = []
        for _ in range(_count(record, "header")):
            name = _varint_text(record, "header key")
            if name is None:
                raise ProtocolError("null header key")
            pairs.append((name, _varint_text(record, "header value")))
        headers.append(pairs)
        if record.remaining:
            raise ProtocolError(f"record {index} has {record.remaining} bytes beyond its fields")
    if reader.remaining:
        raise ProtocolError(f"{reader.remaining} bytes after the last record")
    if count and deltas is None and header.last_offset_delta != count - 1:
        raise ProtocolError(f"last offset delta {header.last_offset_delta} for {count} records")
    if header.first_timestamp == NO_TIMESTAMP and all(t == NO_TIMESTAMP for t in timestamps):
        return Records(values, keys, 0, None, headers if any(headers) else None)  # a batch without times
    return Records(values, keys, 0, timestamps, headers if any(headers) else None)


def validate_batch(data: bytes | bytearray | memoryview, position: int = 0,
                   max_bytes: int = compression.DEFAULT_MAX_BYTES) -> tuple[BatchHeader, int]:
    """What a leader checks of a producer's batch before appending it, without building
    its records: the header, the CRC-32C, the codec, and a walk over every record's
    framing (the varint lengths and deltas only; keys, values and headers are skipped,
    not copied). It refuses exactly what ``decode_batch`` refuses. Returns the header and
    the position after the batch. Kafka 2.7.0 does the same work in
    LogValidator.assignOffsetsNonCompressed, whose ``batch.forEach`` reads every record
    (DefaultRecord.readFrom: sizes, null header keys, nothing left over) without keeping
    it, and DefaultRecordBatch.RecordIterator (the declared count must use up the batch)."""
    header, end = _checked_header(data, position)
    codec = header.compression
    if codec not in compression.NAMES:
        raise ProtocolError(f"unknown compression codec {codec}")
    if codec == compression.NONE:
        if end - position - HEADER_BYTES > max_bytes:
            raise ProtocolError(f"none data expands beyond {max_bytes} bytes")
        _walk_records(data, position + HEADER_BYTES, end, header)
    else:
        body = compression.decompress(codec, bytes(data[position + HEADER_BYTES:end]), max_bytes)
        _walk_records(body, 0, len(body), header)
    return header, end


def _walk_records(buf: bytes | bytearray | memoryview, pos: int, stop: int, header: BatchHeader) -> None:
    """``_decode_records``' checks, in the same order, over ``buf[pos:stop]`` in place:
    record by record (``_walk_record``), and records shaped like the one before them a
    run at a time (``_same_shape_run``)."""
    count = header.record_count
    if count > stop - pos:
        raise ProtocolError(f"{count} records cannot fit in {stop - pos} bytes")
    index = 0
    shape = None  # the field widths of the record just walked, when it had the plain shape
    previous = pos
    next_try, misses = 1, 0
    while index < count:
        if shape is not None and index >= next_try:
            ran = _same_shape_run(buf, previous, pos, stop, index, count, shape)
            if ran:
                pos += ran * (pos - previous)
                index += ran
                next_try = index + 1
                shape = None
                continue
            misses += 1  # records that differ: look again less and less often
            next_try = index + (1 << min(misses, 10))
        previous = pos
        pos, shape = _walk_record(buf, pos, stop, index)
        index += 1
    if pos != stop:
        raise ProtocolError(f"{stop - pos} bytes after the last record")
    if count and header.last_offset_delta != count - 1:
        raise ProtocolError(f"last offset delta {header.last_offset_delta} for {count} records")


def _walk_record(buf: bytes | bytearray | memoryview, pos: int, stop: int,
                 index: int) -> tuple[int, tuple[int, int, int, int] | None]:
    """Record ``index`` at ``pos``: the position after it, and its field widths (length,
    timestamp delta, offset delta, value length) when it has the plain shape (each of
    those in a few bytes, a null key, no headers). A producer's record mostly has it:
    those fields are read inline, the rest through ``_varint``, since a call per field
    would be most of the walk's cost."""
    start = pos
    if pos + 2 >= stop or (first := buf[pos]) >= 0x80 and buf[pos + 1] >= 0x80 and buf[pos + 2] >= 0x80:
        length, pos = _varint(buf, pos, stop, 5)
    elif first < 0x80:  # the record's length: up to three bytes read inline
        length, pos = (first >> 1) ^ -(first & 1), pos + 1
    elif (second := buf[pos + 1]) < 0x80:
        raw = (first & 0x7F) | (second << 7)
        length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
    else:
        raw = (first & 0x7F) | ((second & 0x7F) << 7) | (buf[pos + 2] << 14)
        length, pos = (raw >> 1) ^ -(raw & 1), pos + 3
    if length <= 0 or length > stop - pos:
        raise ProtocolError(f"record length {length} with {stop - pos} bytes left")
    end = pos + length
    length_width = pos - start
    pos += 1  # attributes: unused
    if pos + 1 < end and buf[pos] < 0x80:  # the timestamp delta (its value is not checked)
        pos, timestamp_width = pos + 1, 1
    elif pos + 1 < end and buf[pos + 1] < 0x80:
        pos, timestamp_width = pos + 2, 2
    else:
        pos, timestamp_width = _varint(buf, pos, end, 10)[1], 0
    zigzag = index << 1  # the offset delta must be the index: its varint compared, not decoded
    if zigzag < 0x80 and pos < end and buf[pos] == zigzag:
        pos, delta_width = pos + 1, 1
    elif zigzag < 0x4000 and pos + 1 < end and buf[pos] == zigzag & 0x7F | 0x80 and buf[pos + 1] == zigzag >> 7:
        pos, delta_width = pos + 2, 2
    else:
        delta, pos = _varint(buf, pos, end, 5)
        if delta != index:
            raise ProtocolError(f"record {index} has a non-contiguous offset delta")
        delta_width = 0
    null_key = pos < end and buf[pos] == 1  # (zigzag -1)
    if null_key:
        pos += 1
    else:
        pos = _skip_bytes(buf, pos, end, "key")
    # The value (skipped, not read): a length of up to three bytes that leaves exactly
    # one byte, a zero header count, is the whole check; anything else the long way.
    # (A null value, -1, takes the long way too.)
    value_at = pos
    if pos + 2 >= end:
        value = -1
    elif (first := buf[pos]) < 0x80:
        value, after = (first >> 1) ^ -(first & 1), pos + 1
    elif (second := buf[pos + 1]) < 0x80:
        raw = (first & 0x7F) | (second << 7)
        value, after = (raw >> 1) ^ -(raw & 1), pos + 2
    elif (third := buf[pos + 2]) < 0x80:
        raw = (first & 0x7F) | ((second & 0x7F) << 7) | (third << 14)
        value, after = (raw >> 1) ^ -(raw & 1), pos + 3
    else:
        value = -1
    if value >= 0 and after + value == end - 1 and buf[end - 1] == 0:
        if timestamp_width and delta_width and null_key:
            return end, (length_width, timestamp_width, delta_width, after - value_at)
        return end, None
    return _skip_value_and_headers(buf, pos, end, index), None


# The offset delta of record i is the varint of zigzag 2i: one byte below 64, two below 8192
# (and the walk also takes a two-byte spelling of a smaller one, as the decoder does).
_DELTA_1 = bytes(range(0, 128, 2))
_DELTA_2_LOW = bytes(((2 * i) & 0x7F) | 0x80 for i in range(8192))
_DELTA_2_HIGH = bytes((2 * i) >> 7 for i in range(8192))


def _same_shape_run(buf: bytes | bytearray | memoryview, previous: int, pos: int, stop: int, index: int,
                    count: int, shape: tuple[int, int, int, int]) -> int:
    """How many records from ``pos`` (record ``index``) repeat the plain shape of the one
    at ``previous``, byte for byte where the walk would find the same fields (lengths, a
    null key, no headers) and field by field where it compares (one- or two-byte
    timestamp deltas, each record's own offset delta): a column of bytes, taken with a
    stride of that record's size, is checked at once. Such records are exactly those the
    walk would accept with the same widths; 0 when not all of the run does (then the
    walk goes on record by record)."""
    size = pos - previous
    length_width, timestamp_width, delta_width, value_width = shape
    limit = 64 if delta_width == 1 else 8192
    run = min(count - index, (stop - pos) // size, limit - index)
    if run < 2:
        return 0
    span = (run - 1) * size + 1

    def column(offset: int) -> bytes:
        return bytes(buf[pos + offset:pos + offset + span:size])

    for offset in range(length_width):
        if column(offset) != bytes((buf[previous + offset],)) * run:
            return 0
    at = length_width + 1  # past the attributes (unused)
    if timestamp_width == 1:
        if max(column(at)) >= 0x80:
            return 0
    elif min(column(at)) < 0x80 or max(column(at + 1)) >= 0x80:
        return 0
    at += timestamp_width
    if delta_width == 1:
        if column(at) != _DELTA_1[index:index + run]:
            return 0
    elif column(at) != _DELTA_2_LOW[index:index + run] or column(at + 1) != _DELTA_2_HIGH[index:index + run]:
        return 0
    at += delta_width
    if column(at) != b"\x01" * run or column(size - 1) != bytes(run):  # a null key; no headers
        return 0
    for offset in range(at + 1, at + 1 + value_width):
        if column(offset) != bytes((buf[previous + offset],)) * run:
            return 0
    return run


def _skip_value_and_headers(buf: bytes | bytearray | memoryview, pos: int, end: int, index: int) -> int:
    value, pos = _varint(buf, pos, end, 5)
    if value != -1:
        if value < 0 or value > end - pos:
            raise ProtocolError(f"value length {value} with {end - pos} bytes left")
        pos += value
    if pos < end and buf[pos] == 0:  # no headers
        pos += 1
    else:
        pos = _skip_headers(buf, pos, end)
    if pos != end:
        raise ProtocolError(f"record {index} has {end - pos} bytes beyond its fields")
    return pos


def _skip_headers(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
    headers, pos = _varint(buf, pos, end, 5)
    if headers < 0 or headers > end - pos:
        raise ProtocolError(f"header count {headers} with {end - pos} bytes left")
    for _ in range(headers):
        name, pos = _varint(buf, pos, end, 5)
        if name == -1:
            raise ProtocolError("null header key")
        if name < 0 or name > end - pos:
            raise ProtocolError(f"header key length {name} with {end - pos} bytes left")
        pos = _skip_bytes(buf, pos + name, end, "header value")
    return pos


def _varint(buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint (``max_bytes`` 5) or varlong (10) at ``pos``, read no further
    than ``end``, and the position after it (as Reader.varint / varlong). Up to three
    bytes (every length below 1 MiB) unrolled."""
    if pos + 2 < end:
        raw = buf[pos]
        if raw < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:
            raw = (raw & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
        third = buf[pos + 2]
        if third < 0x80:
            raw = (raw & 0x7F) | ((second & 0x7F) << 7) | (third << 14)
            return (raw >> 1) ^ -(raw & 1), pos + 3
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ProtocolError(f"need 1 bytes at offset {pos}, 0 remain")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            raw &= 0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise ProtocolError(f"varint longer than {max_bytes} bytes at offset {pos}")


def _skip_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int, what: str) -> int:
    """Past a varint-length field (-1 = null) that the walk does not need."""
    n, pos = _varint(buf, pos, end, 5)
    if n == -1:
        return pos
    if n < 0 or n > end - pos:
        raise ProtocolError(f"{what} length {n} with {end - pos} bytes left")
    return pos + n


def _count(reader: Reader, what: str) -> int:
    n = reader.varint()
    if n < 0 or n > reader.remaining:
        raise ProtocolError(f"{what} count {n} with {reader.remaining} bytes left")
    return n


def _varint_text(reader: Reader, what: str) -> str | None:
    n = reader.varint()
    if n == -1:
        return None
    if n < 0 or n > reader.remaining:
        raise ProtocolError(f"{what} length {n} with {reader.remaining} bytes left")
    return reader.raw(n).decode("latin-1")


def encode_batch(batch: RecordBatch, codec: int | None = None) -> bytes:
    """The wire bytes of a core batch, compressed by ``codec`` (by default the codec
    its attributes name, as Kafka serves a batch as the producer compressed it)."""
    if codec is None:
        codec = batch.attributes & COMPRESSION_MASK
    attributes = (batch.attributes & ~COMPRESSION_MASK) | codec
    records = batch.records
    count = len(records)
    first = batch.first_timestamp
    stamps = records.timestamps
    if first == -1 and stamps:
        first = stamps[0]
    max_timestamp = batch.max_timestamp
    if max_timestamp == -1 and stamps:
        max_timestamp = max(stamps)
    body = compression.compress(codec, _encode_records(records, first, range(count)))
    head = _HEAD.pack(batch.base_offset, HEADER_BYTES - _LENGTH_OFFSET + len(body), batch.leader_epoch, MAGIC, 0,
                      attributes, max(count - 1, 0), first, max_timestamp, batch.producer_id,
                      batch.producer_epoch, batch.base_sequence, count)
    crc = crc32c(head[_CRC_START:] + body)
    return head[:17] + struct.pack(">I", crc) + head[_CRC_START:] + body


def _encode_records(records: Records, first_timestamp: int, deltas) -> bytes:
    out = Writer()
    keys = records.keys or (None,) * len(records)
    stamps = records.timestamps
    headers = records.headers
    for index, (key, value) in enumerate(zip(keys, records.values)):
        record = Writer()
        record.int8(0)
        record.varlong(0 if stamps is None else stamps[index] - first_timestamp)
        record.varint(deltas[index])
        _write_text(record, key)
        _write_text(record, value)
        pairs = () if headers is None else headers[index]
        record.varint(len(pairs))
        for name, header_value in pairs:
            _write_text(record, name)
            _write_text(record, header_value)
        out.varint(len(record.out))
        out.raw(record.out)
    return out.getvalue()


def _write_text(writer: Writer, text: str | None) -> None:
    if text is None:
        writer.varint(-1)
        return
    try:
        data = text.encode("latin-1")
    except UnicodeEncodeError:
        raise ProtocolError(f"{text[:20]!r} holds characters beyond latin-1 (the core's bytes mapping)") from None
    writer.varint(len(data))
    writer.raw(data)
