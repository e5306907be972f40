"""Properties of the log's storage, over random appends, truncations and damage."""
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.broker_core.test_log import files_of
from tests.broker_core.logs import AppliedLog, recover

TP = TopicPartition("t", 0)
operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3), st.lists(st.text(max_size=5), min_size=1, max_size=4)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
), max_size=25)


def build(ops, segment_bytes):
    log = AppliedLog(TP, segment_bytes)
    files: dict = {}
    epoch = 0
    for op in ops:
        if op[0] == "append":
            epoch += op[1]
            _, effects = log.append_as_leader(tuple(Record(None, v) for v in op[2]), epoch)
        else:
            effects = log.truncate_to(op[1])
        files_of(effects, files)
    return log, files


@settings(max_examples=150, deadline=None)
@given(operations, st.sampled_from([64, 200, 1 << 30]))
def test_recovery_gives_back_exactly_what_was_written(ops, segment_bytes):
    log, files = build(ops, segment_bytes)
    recovered, fixes, report = recover(TP, files, segment_bytes)
    assert recovered.records() == log.records()
    assert recovered.log_end_offset == log.log_end_offset
    assert recovered.epochs.entries == log.epochs.entries
    assert report.truncated_bytes == 0


@settings(max_examples=150, deadline=None)
@given(operations, st.integers(0, 10_000), st.integers(0, 7))
def test_a_damaged_tail_is_cut_off_and_never_served(ops, position, bit):
    log, files = build(ops, 1 << 30)
    segments = sorted(p for p in files if p.endswith(".log") and files[p])
    if not segments:
        return
    path = segments[-1]
    data = bytearray(files[path])
    at = position % len(data)
    data[at] ^= 1 << bit
    files[path] = bytes(data)
    recovered, _, _ = recover(TP, files, 1 << 30)
    original = log.records()
    # what survives is a prefix of what was written, and nothing else
    assert recovered.records() == original[:len(recovered.records())]
