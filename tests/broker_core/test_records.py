"""Records by column: what goes in comes out, on disk (the core's segment format) and as a sequence."""
import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.records import Record, RecordBatch, Records
from broker_core.segment_format import DecodeError, decode_batch, encode_batch, encoded_size, stored_bytes

text = st.one_of(st.none(), st.text(max_size=8))
records = st.lists(st.builds(Record, text, text, st.integers(0, 10_000)), min_size=1, max_size=20)


@given(records, st.integers(0, 2**40), st.integers(0, 2**20))
def test_any_records_survive_encoding(rows, base, epoch):
    batch = RecordBatch(base, epoch, tuple(rows))
    decoded, end = decode_batch(encode_batch(batch), 0)
    assert end == len(encode_batch(batch))
    assert decoded == batch
    assert list(decoded.records) == rows
    assert decoded.next_offset == base + len(rows)
    assert decoded.size_bytes == batch.size_bytes  # the v2 size: tests/real_io/test_v2_sizes.py


def test_columns_collapse_when_uniform():
    unkeyed = Records(["a", "b", None], None, [100, 100, 100])
    assert unkeyed.keys is None and unkeyed.sizes == 100
    assert unkeyed == Records(["a", "b", None], [None, None, None], 100)
    assert unkeyed == (Record(None, "a", 100), Record(None, "b", 100), Record(None, None, 100))
    keyed = Records(["a", "b"], ["k", None], [1, 2])
    assert keyed.keys == ("k", None) and keyed.sizes == (1, 2)
    assert keyed[1] == Record(None, "b", 2)
    assert list(keyed[1:]) == [Record(None, "b", 2)]
    with pytest.raises(ValueError):
        Records(["a"], ["k", "l"])


def _stored(payload: bytes, count: int) -> bytes:
    head = struct.pack(">qii", 0, 0, count)
    crc = zlib.crc32(struct.pack(">i", len(payload)) + payload, zlib.crc32(head))
    return struct.pack(">qiiiI", 0, 0, count, len(payload), crc) + payload


@pytest.mark.parametrize("payload", [
    [None, ["a"]],                    # two columns
    [None, "a", 1],                   # values not a list
    [None, [1], 1],                   # a value that is not text
    [["k", 2], ["a", "b"], 1],        # a key that is not text
    [None, ["a"], -1],                # a negative size
    [None, ["a"], [True]],            # a size that is not an int
    {"values": ["a"]},                # not an array
])
def test_well_checksummed_nonsense_is_a_decode_error(payload):
    data = _stored(json.dumps(payload).encode(), 1)
    with pytest.raises(DecodeError):
        decode_batch(data, 0)


def test_a_record_count_that_disagrees_with_the_header_is_a_decode_error():
    data = _stored(json.dumps([None, ["a", "b"], 1]).encode(), 3)
    with pytest.raises(DecodeError, match="header"):
        decode_batch(data, 0)


@given(records, st.integers(0, 2**40), st.integers(0, 2**20), st.integers(0, 2**40), st.integers(0, 32767),
       st.integers(0, 2**31 - 1), st.integers(0, 255), st.integers(0, 2**41))
def test_the_v2_batch_fields_and_optional_columns_survive_encoding(rows, base, epoch, producer_id, producer_epoch,
                                                                   sequence, attributes, timestamp):
    """Kafka's RecordBatch v2 (DefaultRecordBatch.java, 2.7.0) carries producer id, epoch,
    base sequence, attributes and first/max timestamps; records carry timestamps and headers."""
    columns = Records([r.value for r in rows], [r.key for r in rows], [r.size_bytes for r in rows],
                      timestamps=[timestamp + i for i in range(len(rows))],
                      headers=[[("h", str(i))] if i % 2 else [] for i in range(len(rows))])
    batch = RecordBatch(base, epoch, columns, producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=sequence, attributes=attributes, first_timestamp=timestamp,
                        max_timestamp=timestamp + len(rows) - 1)
    decoded, _ = decode_batch(encode_batch(batch), 0)
    assert decoded == batch
    assert decoded.producer_fields() == batch.producer_fields()
    assert decoded.records.timestamps == columns.timestamps and decoded.records.headers == columns.headers
    assert decoded.last_sequence == (sequence + len(rows) - 1) % 2**31
    assert decoded.size_bytes == batch.size_bytes  # the v2 size: tests/real_io/test_v2_sizes.py


def test_a_batch_without_producer_fields_is_stored_as_before_they_existed():
    """Logs of runs without idempotent producers keep their bytes (and traces their sizes)."""
    batch = RecordBatch(3, 1, (Record("k", "v", 100),))
    assert encode_batch(batch).endswith(b'[["k"],["v"],100]')
    assert batch.producer_fields() == {} and batch.last_sequence == -1


def test_a_client_batch_takes_the_leaders_offsets_and_keeps_its_producer_fields():
    client = RecordBatch(0, -1, (Record(None, "a"), Record(None, "b")), producer_id=9, producer_epoch=2,
                         base_sequence=40)
    stored = client.with_offsets(100, 7)
    assert (stored.base_offset, stored.next_offset, stored.leader_epoch) == (100, 102, 7)
    assert stored.producer_fields() == {"producer_id": 9, "producer_epoch": 2, "base_sequence": 40}
    assert stored.records is client.records


def test_malformed_batch_fields_are_a_decode_error():
    for payload in ([None, ["a"], 1, {}], [None, ["a"], 1, {"producer_id": "x"}], [None, ["a"], 1, {"what": 1}],
                    [None, ["a"], 1, {"timestamps": ["x"]}], [None, ["a"], 1, {"headers": [[["k"]]]}]):
        with pytest.raises(DecodeError):
            decode_batch(_stored(json.dumps(payload).encode(), 1), 0)


producer_field = st.one_of(st.just(None), st.integers(-2**40, 2**40))


@given(records, st.integers(0, 2**40), st.integers(0, 2**20), st.booleans(),
       st.lists(producer_field, min_size=6, max_size=6),
       st.one_of(st.none(), st.lists(st.integers(-2**40, 2**40), min_size=20, max_size=20)))
def test_a_batch_counts_its_encoded_size_without_encoding(rows, base, epoch, plain_ascii, fields, timestamps):
    """The log places batches by their counted size (positions, segment rolls, the
    offset index) and writes them unencoded: the count must be the encoding's length,
    whatever the strings (escaped ones are counted by encoding), sizes and set fields."""
    if plain_ascii:
        rows = [Record(r.key and r.key.encode("ascii", "ignore").decode().replace('"', "").replace("\\", ""),
                       r.value and "".join(c for c in r.value if " " <= c <= "~" and c not in '"\\'), r.size_bytes)
                for r in rows]
    names = ("producer_id", "producer_epoch", "base_sequence", "attributes", "first_timestamp", "max_timestamp")
    kwargs = {name: value for name, value in zip(names, fields) if value is not None}
    column = Records([r.value for r in rows], [r.key for r in rows], [r.size_bytes for r in rows],
                     None if timestamps is None else timestamps[:len(rows)])
    counted = RecordBatch(base, epoch, column, **kwargs)
    size = encoded_size(counted)
    assert size == len(encode_batch(RecordBatch(base, epoch, column, **kwargs)))
    stored = stored_bytes(counted)
    assert len(stored) == size and stored.materialize() == encode_batch(counted)


def test_plain_batches_are_counted_not_encoded():
    batch = RecordBatch(7, 1, Records(["producer-0:1", None, "x"], ["k", None, "k2"], [100, 5, 100]), producer_id=3)
    assert encoded_size(batch) == len(encode_batch(RecordBatch(7, 1, batch.records, producer_id=3)))
    assert batch.encoding is None  # counted, not encoded
