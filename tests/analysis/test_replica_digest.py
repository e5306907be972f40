"""The replica digests the divergence checker compares follow the recipe in
docs/trace-schema.md: per block of 100 offsets, SHA-256 over the JSON array of the
block's first offset and each offset's value, "<absent>" where the replica holds
nothing."""
import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from broker_core.records import Record, RecordBatch
from analysis.replica_digest import ABSENT, REPLICA_DIGEST_CHUNK, _chunk_json, record_digests, replica_digests


def documented(values: dict[int, str | None], start: int, upto: int) -> list[list]:
    out = []
    first = start - start % REPLICA_DIGEST_CHUNK
    while first < upto:
        offsets = range(max(first, start), min(first + REPLICA_DIGEST_CHUNK, upto))
        block = [offsets.start] + [values.get(offset, "<absent>") for offset in offsets]
        out.append([first, hashlib.sha256(json.dumps(block, separators=(",", ":")).encode()).hexdigest()[:16]])
        first += REPLICA_DIGEST_CHUNK
    return out


def batches(spans: list[tuple[int, int]]) -> tuple[list[RecordBatch], dict[int, str | None]]:
    out, values = [], {}
    for base, count in spans:
        records = tuple(Record(None, None if (base + i) % 17 == 0 else f"v{base + i}") for i in range(count))
        out.append(RecordBatch(base, 0, records))
        values.update({base + i: r.value for i, r in enumerate(records)})
    return out, values


def test_contiguous_log_from_zero():
    log, values = batches([(0, 30), (30, 120), (150, 7)])
    assert replica_digests(log, 0, 157) == documented(values, 0, 157)


def test_log_starting_mid_block_and_range_ending_inside_a_batch():
    log, values = batches([(120, 40), (160, 90)])
    assert replica_digests(log, 135, 201) == documented(values, 135, 201)
    assert replica_digests(log, 135, 201)[0][0] == 100


def test_missing_offsets_hash_as_absent():
    log, values = batches([(0, 10), (25, 10)])  # a hole at 10..24, nothing after 35
    assert replica_digests(log, 0, 60) == documented(values, 0, 60)
    assert replica_digests(log, 0, 60) != replica_digests(batches([(0, 35)])[0], 0, 60)


def test_a_different_value_changes_only_its_block():
    log, values = batches([(0, 250)])
    other = list(log)
    records = list(other[0].records)
    records[130] = Record(None, "changed")
    other[0] = RecordBatch(0, 0, tuple(records))
    mine, theirs = replica_digests(log, 0, 250), replica_digests(other, 0, 250)
    assert [c[0] for c in mine] == [0, 100, 200]
    assert [a == b for a, b in zip(mine, theirs)] == [True, False, True]


def test_range_at_the_log_end():
    log, values = batches([(0, 5)])
    assert replica_digests(log, 5, 5) == documented(values, 5, 5)
    assert replica_digests(log, 0, 0) == []


def test_shared_batches_reuse_digests_and_different_ones_do_not():
    log, values = batches([(0, 60), (60, 90), (150, 40)])
    memo: dict = {}
    assert replica_digests(log, 0, 190, memo) == documented(values, 0, 190)
    assert memo  # filled
    assert replica_digests(log, 0, 190, memo) == documented(values, 0, 190)
    # Equal offsets but other batch objects (a recovered log): computed, not reused.
    other, other_values = batches([(0, 60), (60, 90), (150, 40)])
    changed = RecordBatch(60, 0, (Record(None, "x"),) + tuple(other[1].records)[1:])
    other[1] = changed
    other_values[60] = "x"
    assert replica_digests(other, 0, 190, memo) == documented(other_values, 0, 190)
    assert replica_digests(other, 0, 190, memo) != replica_digests(log, 0, 190, memo)


def test_records_read_one_by_one_digest_as_the_batches_holding_them():
    """The real binding digests its replica from the records it read back: the same
    digests as the batches, holes included."""
    log, values = batches([(0, 60), (60, 90), (170, 40)])  # a hole at 150..169
    records = sorted(values.items())
    assert record_digests(records, 0, 210) == replica_digests(log, 0, 210) == documented(values, 0, 210)
    assert record_digests(records[5:], 5, 120) == documented(values, 5, 120)
    assert record_digests([], 0, 0) == []


@given(st.integers(0, 2**40), st.lists(st.one_of(st.none(), st.text(max_size=6), st.just(ABSENT),
                                                st.text("ab:-0123", max_size=6)), max_size=8))
def test_a_chunk_hashes_the_json_the_recipe_names(first, values):
    """Plain values are joined without the JSON encoder; the text hashed must still be
    the recipe's compact ASCII JSON, whatever the values (escaped ones, nulls)."""
    block = [first, *values]
    assert _chunk_json(block) == json.dumps(block, separators=(",", ":"), ensure_ascii=True)


def test_a_cleaned_batch_is_digested_at_its_records_own_offsets():
    """The simulation digests batches, the real binding records one by one: a cleaned
    batch's gaps are ABSENT offsets in both."""
    from analysis.replica_digest import record_digests, replica_digests
    from broker_core.cleaned_batch import CleanedBatch
    from broker_core.records import RecordBatch, Records
    cleaned = CleanedBatch(90, 120, 0, [91, 99, 104, 119], Records(["a", "b", None, "d"], ["k1", "k2", "k3", "k4"]))
    after = RecordBatch(120, 0, Records(["e"], ["k5"]))
    records = [(91, "a"), (99, "b"), (104, None), (119, "d"), (120, "e")]
    assert replica_digests([cleaned, after], 90, 121) == record_digests(records, 90, 121)
    assert replica_digests([cleaned, after], 90, 121) != replica_digests(
        [RecordBatch(90, 0, Records(["a", "b", None, "d"])), after], 90, 121)
