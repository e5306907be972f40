"""The real run's final phase reads each replica from its segment files
(real_io/replica_files.py): the batches as the broker stores them, up to the preallocated
zeros after the last write."""
from __future__ import annotations

from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io.protocol.record_batch import encode_batch
from real_io.replica_files import read_replica


def _batch(base: int, values: list[str | None]) -> bytes:
    return encode_batch(RecordBatch(base, 1, Records(values)))


def test_records_across_segments_up_to_the_limit_and_the_preallocated_zeros(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / "00000000000000000005.log").write_bytes(_batch(5, ["a", "b"]) + _batch(7, ["c", None]))
    # the active segment: preallocated, zeros after its one batch
    (directory / "00000000000000000009.log").write_bytes(_batch(9, ["d", "e", "f"]) + bytes(4096))
    (directory / "00000000000000000009.index").write_bytes(bytes(16))  # not a segment
    tp = TopicPartition("t", 0)
    assert read_replica(tmp_path, tp, 100) == (5, [(5, "a"), (6, "b"), (7, "c"), (8, None), (9, "d"), (10, "e"),
                                                   (11, "f")])
    assert read_replica(tmp_path, tp, 10) == (5, [(5, "a"), (6, "b"), (7, "c"), (8, None), (9, "d")])
    assert read_replica(tmp_path, TopicPartition("t", 1), 3) == (3, [])  # not hosted: nothing below 3
