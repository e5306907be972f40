"""The final read's records as JSON text (analysis.read_records.ReadRecords): the same text the
trace's encoder writes for the ``[offset, value]`` pairs, on the %-format path (plain
values) and on the encoded path (nulls, quotes, backslashes, control and non-ASCII
characters)."""
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis.trace import dumps_compact
from broker_core.records import RecordBatch, Records
from analysis.read_records import ReadRecords

plain = st.text(st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'), max_size=6)
escaped = st.text(max_size=4).filter(lambda s: not s.isascii() or any(c in s for c in '"\\') or not s.isprintable())
values = st.one_of(plain, plain, plain, escaped, st.none())


@st.composite
def logs(draw):
    batches, offset = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 6))):
        vals = draw(st.lists(values, min_size=1, max_size=6))
        batches.append(RecordBatch(offset, 0, Records(vals)))
        offset += len(vals) + draw(st.integers(0, 2))  # compacted gaps between batches
    return batches


# The escaped strategy filters, which a busy machine can make look slow: the check is on
# what is generated, not how fast.
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(logs(), st.data())
def test_the_text_is_what_the_encoder_writes_for_the_pairs(batches, data):
    got, expected = ReadRecords(), []
    position = data.draw(st.integers(0, 8))
    end = data.draw(st.none() | st.integers(0, 60))
    # the read fetches a few batches at a time, as the reader does
    chunks = [batches[i:i + 2] for i in range(0, len(batches), 2)]
    for chunk in chunks:
        pairs = [(b.base_offset + i, v) for b in chunk for i, v in enumerate(b.records.values)
                 if (b.base_offset + i) >= position and (end is None or b.base_offset + i < end)]
        assert got.add(chunk, position, end) == bool(pairs)
        expected += pairs
        if pairs:
            position = pairs[-1][0] + 1
            assert got.next_offset == position
    assert got.json().text == dumps_compact([[o, v] for o, v in expected])
    assert got.next_offset == (expected[-1][0] + 1 if expected else 0)


def test_both_paths_are_taken():
    got = ReadRecords()
    got.add([RecordBatch(0, 0, Records(["a", "b"])), RecordBatch(2, 0, Records(['q"', None, "\u00e9"]))], 1, None)
    assert got.json().text == '[[1,"b"],[2,"q\\""],[3,null],[4,"\\u00e9"]]'
    assert ReadRecords().json().text == "[]"


SLOW_FINAL_READ = """
name: slow-final-read
cluster:
  brokers: 3
  topics: [{name: t, partitions: 1, replication_factor: 3}]
network: {latency_ms: 40}
workload:
  producers: [{topic: t, acks: 1, rate: 5000, linger: 50ms, record_bytes: 1000}]
duration: 10s
final: {max_wait: 300ms}
"""


def test_a_final_read_that_runs_out_of_time_writes_what_it_got(tmp_path):
    # 10 MB at 1 MB per fetch and 80 ms per round trip cannot be read in 300 ms: the
    # reader gives up with the records of the fetches that answered, written as text
    from analysis.history import load_history
    from scenarios.parse import parse_scenario
    from scenarios.runner import run_scenario
    result = run_scenario(parse_scenario(SLOW_FINAL_READ, "slow-final-read.yaml"), 1, tmp_path)
    history = load_history(result.trace_path)
    [read] = history.of("read")
    gave_up = read.completion
    assert gave_up.type == "info" and gave_up["reason"] == "final_read_timed_out"
    assert not result.summary.final_read_complete
    got = gave_up["records"]
    assert 0 < len(got) < 10000
    acked = {}
    for op in history.of("send"):
        if op.outcome == "ok":
            for i, value in enumerate(op.invoke["values"]):
                acked[op.completion["offset"] + i] = value
    assert [offset for offset, _ in got] == list(range(len(got)))
    assert all(acked[offset] == value for offset, value in got if offset in acked)
    assert sum(offset in acked for offset, _ in got) > len(got) // 2


def test_a_cleaned_batch_gives_its_records_at_their_own_offsets():
    """A batch the log cleaner rebuilt keeps each record's offset, with gaps
    (broker_core/cleaned_batch.py): the reads and the keys follow them, not base + i."""
    from analysis.read_records import keys_from, records_from
    from broker_core.cleaned_batch import CleanedBatch
    cleaned = CleanedBatch(10, 20, 0, [11, 12, 15, 19], Records(["a", "b", None, "d"], ["k1", "k2", "k3", "k4"]))
    after = RecordBatch(20, 0, Records(["e"], ["k5"]))
    assert records_from([cleaned, after], 12, None) == [(12, "b"), (15, None), (19, "d"), (20, "e")]
    assert keys_from([cleaned, after], 12, None) == ["k2", "k3", "k4", "k5"]
    assert records_from([cleaned], 0, 16) == [(11, "a"), (12, "b"), (15, None)]
    got = ReadRecords()
    assert got.add([cleaned, after], 13, None)
    assert got.json().text == '[[15,null],[19,"d"],[20,"e"]]' and got.keys == ["k3", "k4", "k5"]
    assert got.next_offset == 21
    assert records_from([CleanedBatch(0, 5, 0, [], Records([]))], 0, None) == []  # a producer's kept empty batch
