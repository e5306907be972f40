"""Records by column: what goes in comes out, on disk and as a sequence."""
import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.records import HEADER_BYTES, DecodeError, Record, RecordBatch, Records, decode_batch

text = st.one_of(st.none(), st.text(max_size=8))
records = st.lists(st.builds(Record, text, text, st.integers(0, 10_000)), min_size=1, max_size=20)


@given(records, st.integers(0, 2**40), st.integers(0, 2**20))
def test_any_records_survive_encoding(rows, base, epoch):
    batch = RecordBatch(base, epoch, tuple(rows))
    decoded, end = decode_batch(batch.encode(), 0)
    assert end == len(batch.encode())
    assert decoded == batch
    assert list(decoded.records) == rows
    assert decoded.next_offset == base + len(rows)
    assert decoded.size_bytes == batch.size_bytes == HEADER_BYTES + sum(r.wire_bytes for r in rows)


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
