"""Record batch v2 (magic 2): CRC-32C, the codecs, the mapping to the core's RecordBatch,
and kafka-python's record builder/reader as the independent implementation. The layout
follows apache/kafka 2.7.0 clients/.../common/record/DefaultRecordBatch.java and
DefaultRecord.java (read, not copied)."""
from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_core.records import RecordBatch, Records
from real_io.protocol import compression
from real_io.protocol.crc32c import crc32c, crc32c_python
from real_io.protocol.errors import ProtocolError
from real_io.protocol.record_batch import (CONTROL, HEADER_BYTES, TRANSACTIONAL, decode_batch, decode_batches,
                                           encode_batch, read_header)

CODECS = sorted(compression.NAMES)

# RFC 3720 appendix B.4 and the common "123456789" check value for CRC-32C.
VECTORS = [(bytes(32), 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E),
           (bytes(range(31, -1, -1)), 0x113FDB5C), (b"123456789", 0xE3069283), (b"", 0)]


@pytest.mark.parametrize("data, expected", VECTORS)
def test_crc32c_known_vectors_in_both_implementations(data, expected):
    assert crc32c_python(data) == expected
    assert crc32c(data) == expected


@given(st.binary(max_size=300))
def test_the_pure_python_crc32c_agrees_with_the_package(data):
    assert crc32c_python(data) == crc32c(data)


_latin1 = st.text(st.characters(max_codepoint=255), max_size=6)


@st.composite
def core_batches(draw):
    count = draw(st.integers(1, 5))
    values = draw(st.lists(st.none() | _latin1, min_size=count, max_size=count))
    keys = draw(st.lists(st.none() | _latin1, min_size=count, max_size=count))
    first = draw(st.integers(0, 2**40))
    stamps = [first + d for d in draw(st.lists(st.integers(-1000, 1000), min_size=count, max_size=count))]
    stamps[0] = first
    headers = draw(st.none() | st.lists(st.lists(st.tuples(_latin1, st.none() | _latin1), max_size=2),
                                        min_size=count, max_size=count).filter(any))
    return RecordBatch(draw(st.integers(0, 2**40)), draw(st.integers(-1, 2**31 - 1)),
                       Records(values, keys, 0, stamps, headers),
                       producer_id=draw(st.integers(-1, 2**40)), producer_epoch=draw(st.integers(-1, 2**15 - 1)),
                       base_sequence=draw(st.integers(-1, 2**31 - 1)),
                       attributes=draw(st.sampled_from([0, TRANSACTIONAL, 0x08])),
                       first_timestamp=first, max_timestamp=max(stamps))


def _with_attributes(batch: RecordBatch, attributes: int) -> RecordBatch:
    return RecordBatch(batch.base_offset, batch.leader_epoch, batch.records, producer_id=batch.producer_id,
                       producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                       attributes=attributes, first_timestamp=batch.first_timestamp,
                       max_timestamp=batch.max_timestamp)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=core_batches())
def test_core_batches_round_trip_through_the_wire_format(codec, batch):
    wire = encode_batch(batch, codec)
    decoded, end = decode_batch(wire)
    assert end == len(wire) == read_header(wire).size
    assert decoded == _with_attributes(batch, batch.attributes | codec)
    assert (decoded.records.timestamps, decoded.records.headers) == (batch.records.timestamps, batch.records.headers)
    assert encode_batch(decoded) == wire  # the codec bits kept in attributes re-encode the same bytes


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_of_every_codec_decode_into_core_batches(codec):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=True, producer_id=42,
                                        producer_epoch=3, base_sequence=100, batch_size=1 << 20)
    rows = [(i, 1_700_000_000_000 + i, None if i % 3 == 0 else b"key-%d" % i, bytes([i % 256]) * 50,
             [("trace", b"\x00\xff"), ("empty", None)] if i % 2 else []) for i in range(40)]
    for offset, stamp, key, value, headers in rows:
        builder.append(offset, timestamp=stamp, key=key, value=value, headers=headers)
    wire = bytes(builder.build())
    batch, end = decode_batch(wire)
    assert end == len(wire)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.attributes & 7) == (42, 3, 100, codec)
    assert batch.attributes & TRANSACTIONAL
    assert list(batch.records.keys) == [None if k is None else k.decode("latin-1") for _, _, k, _, _ in rows]
    assert list(batch.records.values) == [v.decode("latin-1") for _, _, _, v, _ in rows]
    assert batch.records.timestamps == tuple(stamp for _, stamp, _, _, _ in rows)
    assert batch.records.headers[1] == (("trace", "\x00\xff"), ("empty", None))
    assert batch.first_timestamp == rows[0][1] and batch.max_timestamp == rows[-1][1]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches_of_every_codec(codec):
    values = ["v%d" % i * 30 for i in range(20)]
    batch = RecordBatch(1000, 4, Records(values, ["k\xe9"] + [None] * 19, 0, list(range(500, 520)),
                                         [[("h", "\xff")]] + [[]] * 19),
                        producer_id=9, producer_epoch=2, base_sequence=7, first_timestamp=500, max_timestamp=519)
    (theirs,) = list(MemoryRecords(encode_batch(batch, codec)))
    theirs.validate_crc()
    assert (theirs.base_offset, theirs.leader_epoch, theirs.compression_type) == (1000, 4, codec)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 2, 7)
    records = list(theirs)
    assert [r.offset for r in records] == list(range(1000, 1020))
    assert [r.value for r in records] == [v.encode() for v in values]
    assert records[0].key == b"k\xe9" and records[0].headers == [("h", b"\xff")]
    assert [r.timestamp for r in records] == list(range(500, 520))


def _simple(count=3, codec=0) -> bytes:
    return encode_batch(RecordBatch(0, 0, Records(["x"] * count)), codec)


def test_a_flipped_bit_fails_the_crc():
    wire = bytearray(_simple())
    wire[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        decode_batch(bytes(wire))


def _recrc(wire: bytearray) -> bytes:
    """A batch whose CRC is made right again, so that the parser past it is exercised."""
    struct.pack_into(">I", wire, 17, crc32c(bytes(wire[21:])))
    return bytes(wire)


@pytest.mark.parametrize("offset, packed, message", [
    (16, b"\x01", "magic"),
    (57, struct.pack(">i", -1), "negative record count"),
    (57, struct.pack(">i", 2**31 - 1), "cannot fit"),
    (57, struct.pack(">i", 4), "bytes left|remain"),
    (21, struct.pack(">h", 5), "codec"),
    (21, struct.pack(">h", 1), "gzip"),  # says gzip, holds plain records
    (23, struct.pack(">i", 7), "last offset delta"),
])
def test_impossible_headers_are_protocol_errors(offset, packed, message):
    wire = bytearray(_simple())
    wire[offset:offset + len(packed)] = packed
    with pytest.raises(ProtocolError, match=message):
        decode_batch(_recrc(wire))


def test_negative_or_huge_batch_lengths_and_truncation_are_refused():
    wire = _simple()
    for length in (-1, 2**31 - 1, 3):
        with pytest.raises(ProtocolError):
            decode_batch(wire[:8] + struct.pack(">i", length) + wire[12:])
    for cut in (0, 10, HEADER_BYTES - 1, HEADER_BYTES, len(wire) - 1):
        with pytest.raises(ProtocolError, match="truncated"):
            decode_batch(wire[:cut])


def test_a_fetch_may_end_in_a_partial_batch_but_a_produce_may_not():
    two = _simple() + _simple()
    assert len(decode_batches(two + two[:30], allow_partial_tail=True)) == 2
    assert len(decode_batches(two + two[:HEADER_BYTES + 2], allow_partial_tail=True)) == 2
    with pytest.raises(ProtocolError):
        decode_batches(two + two[:30])


def test_non_contiguous_offset_deltas_are_refused():
    """The core numbers records base_offset + index (broker_core.records.RecordBatch);
    only compacted batches have gaps, and a producer never sends one."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=1, key=None, value=b"a", headers=[])
    builder.append(2, timestamp=1, key=None, value=b"b", headers=[])
    with pytest.raises(ProtocolError, match="offset delta"):
        decode_batch(bytes(builder.build()))


def test_a_compression_bomb_is_cut_off_at_the_limit():
    bomb = bytearray(_simple())
    body = gzip.compress(bytes(bomb[HEADER_BYTES:]) + bytes(2_000_000))
    wire = bytearray(bomb[:HEADER_BYTES]) + body
    struct.pack_into(">i", wire, 8, len(wire) - 12)
    struct.pack_into(">h", wire, 21, 1)
    with pytest.raises(ProtocolError, match="beyond"):
        decode_batch(_recrc(wire), max_bytes=100_000)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_garbage_behind_every_codec_is_a_protocol_error(codec):
    with pytest.raises(ProtocolError):
        compression.decompress(codec, b"\x00\x01garbage" * 3)


def test_snappy_reads_raw_blocks_as_well_as_xerial_frames():
    import cramjam
    data = b"librdkafka may send raw snappy" * 10
    assert compression.decompress(compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert compression.compress(compression.SNAPPY, data).startswith(b"\x82SNAPPY\x00")


def test_control_and_transactional_bits_survive_the_round_trip():
    batch = RecordBatch(3, 1, Records(["\x00\x00\x00\x00\x00\x00"], ["\x00\x00\x00\x01"]),
                        producer_id=5, producer_epoch=0, attributes=CONTROL | TRANSACTIONAL)
    decoded, _ = decode_batch(encode_batch(batch))
    assert decoded == batch and decoded.attributes == CONTROL | TRANSACTIONAL


def test_values_beyond_latin1_cannot_be_encoded():
    with pytest.raises(ProtocolError, match="latin-1"):
        encode_batch(RecordBatch(0, 0, Records(["\u20ac"])))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_raise_only_protocol_errors(data, fix_crc):
    if fix_crc and len(data) >= HEADER_BYTES:  # get past the CRC to the record parser
        wire = bytearray(data)
        wire[16] = 2
        struct.pack_into(">i", wire, 8, len(wire) - 12)
        data = _recrc(wire)
    for partial in (False, True):
        try:
            decode_batches(data, allow_partial_tail=partial)
        except ProtocolError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 255), st.sampled_from(CODECS))
def test_a_damaged_record_section_raises_only_protocol_errors(position, byte, codec):
    wire = bytearray(encode_batch(RecordBatch(0, 0, Records(["value"] * 4, ["k"] * 4, 0, [1, 2, 3, 4],
                                                            [[("h", "v")]] * 4)), codec))
    wire[HEADER_BYTES + position % (len(wire) - HEADER_BYTES)] = byte
    try:
        decode_batch(_recrc(wire))
    except ProtocolError:
        pass
