"""The leader's check of a producer's batch v2 (record_batch.validate_batch): it walks
every record's framing in place instead of decoding the records, and must refuse
exactly what the full decoder (record_batch.decode_batch) refuses. Then the batch is
appended from the request's own buffer, stamped in place."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.log import PartitionLog
from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io.files import DataDir
from real_io.protocol import compression
from real_io.protocol.crc32c import crc32c
from real_io.protocol.errors import ProtocolError
from real_io.protocol.primitives import Reader, Writer
from real_io.protocol.record_batch import HEADER_BYTES, decode_batch, encode_batch, validate_batch
from real_io.wire_batch import parse_records

CODECS = sorted(compression.NAMES)


def _recrc(wire: bytearray) -> bytearray:
    struct.pack_into(">I", wire, 17, crc32c(bytes(wire[21:])))
    return wire


def _sample(codec: int = compression.NONE, count: int = 4) -> bytearray:
    records = Records([f"value{i}" for i in range(count)], ["k", None] * (count // 2) + ["k"] * (count % 2), 0,
                      list(range(1, count + 1)), [[("h", "v"), ("n", None)]] * count)
    return bytearray(encode_batch(RecordBatch(0, 0, records), codec))


def _raw_batch(records: list[bytes], count: int | None = None, last_offset_delta: int | None = None) -> bytearray:
    """An uncompressed batch around hand-made records (each a record body, without its
    length), with the header's record count and last offset delta as given."""
    body = Writer()
    for record in records:
        body.varint(len(record))
        body.raw(record)
    wire = _sample(count=1)[:HEADER_BYTES] + body.getvalue()
    count = len(records) if count is None else count
    struct.pack_into(">i", wire, 8, len(wire) - 12)
    struct.pack_into(">i", wire, 23, count - 1 if last_offset_delta is None else last_offset_delta)
    struct.pack_into(">i", wire, 57, count)
    return _recrc(wire)


def _record(index: int, value: bytes = b"v") -> bytes:
    record = Writer()
    record.int8(0)
    record.varlong(0)
    record.varint(index)
    record.varint(-1)  # null key
    record.varint(len(value))
    record.raw(value)
    record.varint(0)  # no headers
    return record.getvalue()


def _same_verdict(data: bytes) -> None:
    """validate_batch refuses ``data`` exactly when decode_batch does, and agrees on
    where the batch ends."""
    try:
        expected = decode_batch(data)[1]
    except ProtocolError:
        expected = None
    try:
        got = validate_batch(data)[1]
    except ProtocolError:
        got = None
    assert got == expected


@pytest.mark.parametrize("codec", CODECS)
def test_a_well_formed_batch_passes_and_ends_where_the_decoder_ends(codec):
    wire = bytes(_sample(codec)) + b"tail"
    header, end = validate_batch(wire)
    assert end == decode_batch(wire)[1] == len(wire) - 4
    assert header.record_count == 4


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(0, 255), st.integers(1, 3), st.sampled_from(CODECS))
def test_the_walk_refuses_exactly_what_the_decoder_refuses(position, byte, span, codec):
    """Any damage to the record section (CRC made right again, so the walk is reached):
    the in-place walk and the full decode give the same verdict."""
    wire = _sample(codec)
    start = HEADER_BYTES + position % (len(wire) - HEADER_BYTES)
    wire[start:start + span] = bytes([byte]) * len(wire[start:start + span])
    _same_verdict(bytes(_recrc(wire)))


_MANY = bytearray(encode_batch(RecordBatch(0, 0, Records(["v"] * 130, [None] * 130, 0,
                                                          [1000 + 70 * i for i in range(130)], None))))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(0, 255))
def test_two_byte_deltas_get_the_decoders_verdict(position, byte):
    """130 records: from the 64th on, offset and timestamp deltas take two bytes, which
    the walk compares and skips without decoding; damage anywhere in the records must
    still get decode_batch's verdict."""
    wire = bytearray(_MANY)
    wire[HEADER_BYTES + position % (len(wire) - HEADER_BYTES)] = byte
    _same_verdict(bytes(_recrc(wire)))


_LARGE = bytearray(encode_batch(RecordBatch(0, 0, Records(["a" * 8200, "b" * 70, "c" * 20000, "d" * 9000],
                                                           [None] * 4, 0, [5, 6, 7, 8], None))))


def _framing_positions(wire: bytearray) -> list[int]:
    """The first nine bytes of each record (its length, attributes, deltas, key and
    value lengths) and each record's last byte (its header count)."""
    out, pos = [], HEADER_BYTES
    while pos < len(wire):
        reader = Reader(bytes(wire), pos)
        length = reader.varint()
        out += [*range(pos, pos + 9), reader.pos + length - 1]
        pos = reader.pos + length
    return out


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(0, 255), st.integers(1, 2))
def test_three_byte_lengths_get_the_decoders_verdict(choice, byte, span):
    """Records over 8 KiB: their lengths and their values' take three bytes, which the
    walk reads inline; damage to any framing byte must still get decode_batch's verdict."""
    wire = bytearray(_LARGE)
    positions = _framing_positions(wire)
    start = positions[choice % len(positions)]
    wire[start:start + span] = bytes([byte]) * span
    _same_verdict(bytes(_recrc(wire)))


_UNIFORM = {
    "10 KiB": bytearray(encode_batch(RecordBatch(0, 0, Records(["x" * 10240] * 70, [None] * 70, 0,
                                                               [5 + i % 3 for i in range(70)], None)))),
    "small": bytearray(encode_batch(RecordBatch(0, 0, Records(["ab"] * 300, [None] * 300, 0,
                                                              [7 + (i * 37) % 200 for i in range(300)], None)))),
}


@pytest.mark.parametrize("name", sorted(_UNIFORM))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 100_000), st.integers(0, 255), st.booleans())
def test_records_of_one_shape_checked_a_run_at_a_time_get_the_decoders_verdict(name, choice, byte, framing):
    """Records shaped like the one before them (same lengths, null key, no headers) are
    checked a column at a time (record_batch._same_shape_run), across the offset delta's
    change of width at record 64 and timestamp deltas of one and two bytes; damage to
    any byte, mostly to the framing, must still get decode_batch's verdict."""
    wire = bytearray(_UNIFORM[name])
    positions = _framing_positions(wire) if framing else range(HEADER_BYTES, len(wire))
    wire[positions[choice % len(positions)]] = byte
    _same_verdict(bytes(_recrc(wire)))


def test_a_run_of_one_shape_is_accepted_whole_and_a_stray_key_is_found():
    wire = bytes(_UNIFORM["small"])
    assert validate_batch(wire)[1] == decode_batch(wire)[1] == len(wire)
    records = [_record(i, b"vv") for i in range(200)]
    records[150] = records[150].replace(b"\x01\x04vv", b"\x02k\x02v", 1)  # a key where the run has none
    keyed = bytes(_raw_batch(records))
    assert validate_batch(keyed)[1] == decode_batch(keyed)[1] == len(keyed)
    records[150] = records[150][:-1] + b"\x02"  # a header count where the run has none
    with pytest.raises(ProtocolError):
        validate_batch(bytes(_raw_batch(records)))
    with pytest.raises(ProtocolError):
        decode_batch(bytes(_raw_batch(records)))


def test_an_offset_delta_in_a_longer_encoding_than_needed_is_read_as_its_value():
    """A varint may spend more bytes than its value needs (0x80 0x00 is 0); Kafka's
    ByteUtils.readVarint reads it, and so do the decoder and the walk."""
    record = bytearray(_record(0))
    record[2:3] = b"\x80\x00"  # the offset delta 0 in two bytes
    wire = bytes(_raw_batch([bytes(record)]))
    assert decode_batch(wire)[1] == validate_batch(wire)[1] == len(wire)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=30), max_size=4), st.integers(-1, 6), st.integers(-1, 6))
def test_hand_made_record_sections_get_the_decoders_verdict(records, count, last_offset_delta):
    _same_verdict(bytes(_raw_batch(records, count, last_offset_delta)))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_get_the_decoders_verdict(data):
    if len(data) >= HEADER_BYTES:
        wire = bytearray(data)
        wire[16] = 2
        struct.pack_into(">i", wire, 8, len(wire) - 12)
        data = bytes(_recrc(wire))
    _same_verdict(data)


def test_a_batch_whose_record_count_disagrees_with_its_records_is_refused():
    """Kafka 2.7.0 clients/.../record/DefaultRecordBatch.java RecordIterator.makeNext
    ("Incorrect declared batch size, records still remaining in file") and
    uncompressedIterator's readNext ("premature EOF reached"), which
    LogValidator.assignOffsetsNonCompressed (core/.../log/LogValidator.scala) runs over
    every record of a client's batch: a declared count must use up the batch exactly."""
    three = [_record(0), _record(1), _record(2)]
    assert validate_batch(bytes(_raw_batch(three)))[0].record_count == 3
    with pytest.raises(ProtocolError, match="after the last record"):
        validate_batch(bytes(_raw_batch(three, count=2)))  # fewer declared: records remain
    with pytest.raises(ProtocolError, match="bytes left|remain"):
        validate_batch(bytes(_raw_batch(three, count=4, last_offset_delta=3)))  # more declared: runs out
    with pytest.raises(ProtocolError, match="last offset delta"):
        # LogValidator.validateBatch: the offset range must agree with the count
        validate_batch(bytes(_raw_batch(three, last_offset_delta=5)))


def test_a_record_whose_length_runs_past_the_batch_is_refused():
    """Kafka 2.7.0 DefaultRecord.readFrom(ByteBuffer, ...) returns null when the
    record's varint length exceeds what the buffer holds, and DefaultRecordBatch's
    uncompressed readNext turns that into InvalidRecordException; DefaultRecord.readFrom
    (private) also requires a record's fields to use up exactly its length ("Invalid
    record size"). The walk skips values without reading them, so it must check each
    length against the record's end, not the request's."""
    record = _record(0, b"value")
    wire = _raw_batch([record])
    wire[HEADER_BYTES] = 2 * (len(record) + 40)  # zigzag varint: the record claims 40 more bytes
    with pytest.raises(ProtocolError, match="record length"):
        validate_batch(bytes(_recrc(wire)) + bytes(100))  # bytes behind the batch do not count
    long_value = bytearray(record)
    long_value[4] = 2 * 50  # the value claims 50 bytes inside a record that has 5
    with pytest.raises(ProtocolError, match="value length"):
        validate_batch(bytes(_raw_batch([bytes(long_value), _record(1)])))
    short_value = bytearray(_record(0, bytes(5)))
    short_value[4] = 2 * 3  # the value is shorter than the record: bytes beyond its fields
    with pytest.raises(ProtocolError, match="beyond its fields"):
        validate_batch(bytes(_raw_batch([bytes(short_value)])))


def test_a_bad_crc_is_refused_before_the_walk():
    """Kafka 2.7.0 Log.analyzeAndValidateRecords: batch.ensureValid() checks the
    CRC-32C of a v2 batch first (CorruptRecordException)."""
    wire = _sample()
    wire[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        validate_batch(bytes(wire))


def test_a_request_buffers_batch_is_stamped_in_place_and_written_as_it_is(tmp_path):
    """The batch in a request's buffer is not copied: the leader writes the base offset
    and leader epoch into that buffer (Kafka's LogValidator.assignOffsetsNonCompressed
    does so to the request's MemoryRecords) and the segment receives those bytes; the
    CRC, which does not cover them, still holds."""
    request = bytearray(b"head") + _sample() + bytearray(b"tail")
    sent = bytes(request)
    [batch] = parse_records(memoryview(request)[4:-4])
    storage = DataDir(tmp_path)
    log = PartitionLog(TopicPartition("t", 0), 1 << 20, storage)
    log.log_end_offset = 7
    stored, effects = log.append_as_leader(batch, 3)
    for effect in effects:
        storage.carry_out(effect)
    segment = (tmp_path / "t-0" / f"{7:020d}.log").read_bytes()
    assert segment == bytes(request[4:-4])  # the stamped request bytes, as they are
    decoded, _ = decode_batch(segment)  # checks the CRC
    assert (decoded.base_offset, decoded.leader_epoch, stored.base_offset) == (7, 3, 7)
    assert segment[16:] == sent[4 + 16:-4]  # magic, CRC, attributes and records untouched
    assert request[:4] == b"head" and request[-4:] == b"tail"


@pytest.mark.parametrize("value_length", [b"\x01", b"\x81\x00", b"\x81\x80\x00"])
def test_a_null_value_in_any_encoding_needs_its_header_count_after_it(value_length):
    """A null value (-1, in one byte or spent over three) followed by nothing: the
    decoder wants a header count after it; the walk must not take the varint's last
    byte for one."""
    record = b"\x00\x00\x00\x01" + value_length  # attributes, deltas 0, null key, null value
    wire = bytes(_raw_batch([record]))
    with pytest.raises(ProtocolError):
        decode_batch(wire)
    with pytest.raises(ProtocolError):
        validate_batch(wire)
    _same_verdict(bytes(_raw_batch([record + b"\x00"])))
