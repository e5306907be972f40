"""Bytes mean the same in both bindings (issue 22): the size the core counts for a
simulated batch is the length of the same batch's Kafka v2 encoding, so segment.bytes
(and every byte limit) rolls a segment at the same record in the simulation, whose files
hold its own format, and on the real broker, whose files hold v2."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.log import PartitionLog
from broker_core.records import RecordBatch, Records, varint_size
from broker_core.storage import MemoryFiles
from broker_core.types import TopicPartition
from real_io.files import DataDir
from real_io.protocol import record_batch
from real_io.wire_batch import parse_records

from tests.real_io.test_log_storage import write

# The real binding maps bytes to str by latin-1 (real_io.protocol.record_batch): any
# latin-1 text is a key or value it can encode, one byte per character.
latin1 = st.text(st.characters(max_codepoint=255), max_size=80)
maybe_text = st.one_of(st.none(), latin1)
sizes = st.one_of(st.just(0), st.integers(1, 70), st.sampled_from([63, 64, 8191, 8192, 20_000]))


@st.composite
def simulated_batches(draw, max_records: int = 40):
    """A batch as the simulation (or a test) builds it: values are short ids standing
    for ``sizes`` bytes (one size for all, one per record, or none), keys or none,
    timestamps and headers or none, and any producer fields."""
    count = draw(st.integers(1, max_records))
    values = draw(st.lists(st.one_of(st.none(), st.text("0123456789:p", max_size=12)), min_size=count, max_size=count))
    keys = draw(st.one_of(st.none(), st.lists(maybe_text, min_size=count, max_size=count)))
    size = draw(st.one_of(sizes, st.lists(sizes, min_size=count, max_size=count)))
    first = draw(st.one_of(st.just(-1), st.integers(0, 2**41)))
    stamps = draw(st.one_of(st.none(), st.lists(st.integers(-1, 2**42), min_size=count, max_size=count)))
    headers = draw(st.one_of(st.none(), st.lists(
        st.lists(st.tuples(latin1, maybe_text), max_size=3), min_size=count, max_size=count)))
    fields = dict(producer_id=draw(st.sampled_from([-1, 0, 2**40])), producer_epoch=draw(st.sampled_from([-1, 7])),
                  base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 1])), first_timestamp=first,
                  max_timestamp=draw(st.sampled_from([-1, 2**41 + 5])))
    return RecordBatch(draw(st.integers(0, 2**40)), draw(st.integers(0, 2**20)),
                       Records(values, keys, size, stamps, headers), **fields)


def as_encoded(batch: RecordBatch) -> RecordBatch:
    """The same batch with every value replaced by bytes of the size it stands for: what
    a real producer would send for it."""
    records = batch.records
    sizes = records.sizes if not isinstance(records.sizes, int) else (records.sizes,) * len(records)
    values = [None if value is None else ("x" * size if size else value) for value, size in zip(records.values, sizes)]
    return RecordBatch(batch.base_offset, batch.leader_epoch,
                       Records(values, records.keys, 0, records.timestamps, records.headers),
                       producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                       base_sequence=batch.base_sequence, first_timestamp=batch.first_timestamp,
                       max_timestamp=batch.max_timestamp)


@settings(max_examples=300, deadline=None)
@given(simulated_batches())
def test_the_size_the_simulation_counts_is_the_v2_encodings_length(batch):
    """2.7.0 DefaultRecord.sizeInBytes and DefaultRecordBatch.RECORD_BATCH_OVERHEAD
    (clients/src/main/java/org/apache/kafka/common/record/DefaultRecord.java,
    DefaultRecordBatch.java): 61 header bytes, then per record a varint length and a
    body of attributes, timestamp and offset deltas, key, value, headers."""
    encoded = record_batch.encode_batch(as_encoded(batch))
    assert batch.size_bytes == len(encoded)
    [wire] = parse_records(encoded)
    assert wire.size_bytes == batch.size_bytes  # the real binding's batch reports the same


@given(st.integers(1, 20_000), st.integers(0, 200))
def test_long_uniform_batches_are_counted_by_tier(count, size):
    """The simulation's batches (no keys, times or headers; one size) are counted in a
    few operations: offset deltas past 63 and 8191 take two and three varint bytes."""
    batch = RecordBatch(0, 0, Records(["v"] * count, None, size))
    assert batch.size_bytes == len(record_batch.encode_batch(as_encoded(batch)))


def test_varint_sizes_are_kafkas_zigzag_ones():
    """2.7.0 ByteUtils.sizeOfVarint / sizeOfVarlong: zigzag, seven bits a byte."""
    assert [varint_size(n) for n in (0, -1, 63, 64, -64, -65, 8191, 8192, 2**62, -2**63)] == [
        1, 1, 1, 2, 1, 2, 2, 3, 10, 10]


def _segment_bases(log: PartitionLog) -> list[int]:
    return [segment.base_offset for segment in log.segments]


@settings(max_examples=100, deadline=None)
@given(st.lists(simulated_batches(max_records=12), min_size=1, max_size=25), st.integers(100, 4000))
def test_a_segment_rolls_at_the_same_record_in_both_bindings(tmp_path_factory, batches, segment_bytes):
    """2.7.0 LogSegment.shouldRoll (core/src/main/scala/kafka/log/LogSegment.scala):
    size > maxSegmentBytes - messagesSize. The simulation's log stores its own format,
    the real broker's v2; both count v2 bytes and read the same max timestamps, so the
    rolls fall on the same batches."""
    tp = TopicPartition("t", 0)
    files = MemoryFiles()
    simulated = PartitionLog(tp, segment_bytes, files.storage)
    real_dir = DataDir(tmp_path_factory.mktemp("real"))
    real = PartitionLog(tp, segment_bytes, real_dir)
    try:
        for batch in batches:
            _, effects = simulated.append_as_leader(batch.records, 1)
            files.apply_all(effects)
            [wire] = parse_records(record_batch.encode_batch(as_encoded(RecordBatch(0, -1, batch.records))))
            _, effects = real.append_as_leader(wire, 1)
            write(real_dir, effects)
        assert _segment_bases(simulated) == _segment_bases(real)
        # Rolls by size and, where the records carry timestamps, by segment.ms (the
        # batches' max timestamps, which the v2 header carries in both).
        assert [t.fields for t in simulated.roll_traces()] == [t.fields for t in real.roll_traces()]
        assert [s.log_bytes for s in simulated.segments] == [s.log_bytes for s in real.segments] == [
            s.size_bytes for s in real.segments]
    finally:
        real_dir.close()
