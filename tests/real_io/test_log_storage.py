"""The storage seam in the real binding: the core's log over real files holding record
batches v2 exactly as clients send and receive them."""
from __future__ import annotations

import pytest

from broker_core.effects import Fsync
from broker_core.log import PartitionLog
from broker_core.log_loader import recover_log
from broker_core.records import RecordBatch, Records
from broker_core.storage import FileRegion
from broker_core.types import TopicPartition
from real_io.files import DataDir
from real_io.protocol import compression, record_batch
from real_io.protocol.errors import ProtocolError
from real_io.wire_batch import WireBatch, parse_records

TP = TopicPartition("t", 0)


def client_batch(values, codec=compression.NONE, producer_id=-1, base_sequence=-1):
    """What a producer sends: offsets unset (0), keys, timestamps and headers set."""
    records = Records(values, [f"k{v}" for v in values], 0, [1700000000000 + i for i in range(len(values))],
                      [[("h", f"x{v}")] for v in values])
    core = RecordBatch(0, -1, records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=base_sequence)
    return record_batch.encode_batch(core, codec)


def write(storage: DataDir, effects) -> None:
    for effect in effects:
        if isinstance(effect, Fsync):
            storage.fsync(effect.path)
        else:
            storage.carry_out(effect)


def appended(tmp_path, batches, segment_bytes=1 << 30, epoch=3):
    storage = DataDir(tmp_path)
    log = PartitionLog(TP, segment_bytes, storage)
    for data in batches:
        [batch] = parse_records(data)
        stored, effects = log.append_as_leader(batch, epoch)
        write(storage, effects)
    return storage, log


def test_a_stored_batch_is_the_clients_bytes_with_offset_and_epoch_assigned(tmp_path):
    """Kafka 2.7.0 LogValidator.validateMessagesAndAssignOffsetsCompressed /
    assignOffsetsNonCompressed (core/src/main/scala/kafka/log/LogValidator.scala) and
    DefaultRecordBatch.setLastOffset / setPartitionLeaderEpoch: the leader writes the
    base offset and partition leader epoch into the producer's v2 batch; both lie outside
    the CRC, so the batch keeps its CRC and, compressed, its compression."""
    sent = [client_batch(["a", "b"]), client_batch(["c"], compression.GZIP), client_batch(["d", "e"], compression.ZSTD)]
    storage, log = appended(tmp_path, sent)
    segment = (tmp_path / "t-0" / f"{0:020d}.log").read_bytes()
    assert len(segment) == sum(len(d) for d in sent)
    position = 0
    for expected_base, data in zip((0, 2, 3), sent):
        stored, end = record_batch.decode_batch(segment, position)  # checks the CRC-32C
        assert stored.base_offset == expected_base and stored.leader_epoch == 3
        assert segment[position + 16:end] == data[16:]  # magic, CRC, attributes, records: as sent
        position = end
    assert [r.value for _, r in log.records()] == ["a", "b", "c", "d", "e"]
    assert [r.key for _, r in log.records()] == ["ka", "kb", "kc", "kd", "ke"]


def test_a_fetch_refers_to_file_regions_whose_bytes_are_the_stored_batches(tmp_path):
    """The core answers a fetch with regions (broker_core.storage); what the server
    sends with sendfile is the region's bytes: whole batches, one region per segment."""
    sent = [client_batch([f"v{i}" * 20]) for i in range(6)]
    storage, log = appended(tmp_path, sent, segment_bytes=3 * len(sent[0]))
    regions = log.regions(log.read(1, 1 << 20))
    assert [r.path for r in regions] == [f"t-0/{0:020d}.log", f"t-0/{3:020d}.log"]
    data = b"".join(storage.read_region(r) for r in regions)
    offsets = [b.base_offset for b in record_batch.decode_batches(data)]
    assert offsets == [1, 2, 3, 4, 5]
    assert [b.base_offset for r in regions for b in storage.batches_in(r)] == [1, 2, 3, 4, 5]


def test_recovery_rebuilds_the_log_from_the_files_alone(tmp_path):
    """Kafka 2.7.0 Log.loadSegments / LogSegment.recover: the segments are scanned batch by
    batch, each checked by its CRC, and the log ends where they end."""
    sent = [client_batch([f"v{i}"], producer_id=9, base_sequence=i) for i in range(5)]
    _, log = appended(tmp_path, sent, segment_bytes=2 * len(sent[0]))
    recovered, effects, report = recover_log(TP, DataDir(tmp_path), 2 * len(sent[0]))
    assert report.truncated_bytes == 0 and effects == []
    assert recovered.log_end_offset == 5
    assert recovered.records() == log.records()
    assert recovered.producers.entries[9].last_sequence == 4


@pytest.mark.parametrize("damage", ["torn", "bit_flip", "garbage"])
def test_a_damaged_tail_is_truncated_and_never_served(tmp_path, damage):
    """Kafka 2.7.0 LogSegment.recover: the first batch that fails its CRC (or is cut
    short) ends the segment; the segment is truncated there."""
    sent = [client_batch([f"v{i}"]) for i in range(3)]
    appended(tmp_path, sent)
    path = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    good = len(sent[0]) + len(sent[1])
    if damage == "torn":
        del data[good + 30:]
    elif damage == "bit_flip":
        data[-3] ^= 0x10
    else:
        data += b"\x00\x01garbage" * 7
        good = len(data) - 7 * 9
    path.write_bytes(bytes(data))
    storage = DataDir(tmp_path)
    recovered, effects, report = recover_log(TP, storage, 1 << 30)
    assert report.reason is not None and report.truncated_bytes == len(data) - good
    write(storage, effects)
    assert path.stat().st_size == good
    expected = 2 if damage != "garbage" else 3
    assert recovered.log_end_offset == expected
    assert [r.value for _, r in recovered.records()] == [f"v{i}" for i in range(expected)]


def test_a_batch_the_producer_damaged_is_refused_before_it_reaches_the_log():
    """Kafka 2.7.0 DefaultRecordBatch.ensureValid (via LogValidator): a batch whose CRC
    does not match is refused (CORRUPT_MESSAGE), never stored."""
    data = bytearray(client_batch(["a"]))
    data[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        parse_records(bytes(data))


def test_regions_resolve_through_the_port_after_a_restart(tmp_path):
    storage, log = appended(tmp_path, [client_batch(["a"]), client_batch(["b"])])
    fresh = DataDir(tmp_path)
    region = FileRegion(f"t-0/{0:020d}.log", 0, fresh.size(f"t-0/{0:020d}.log"))
    assert [b.records.values for b in fresh.batches_in(region)] == [("a",), ("b",)]
    assert all(isinstance(b, WireBatch) for b in fresh.batches_in(region))
