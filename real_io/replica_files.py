"""One replica's records read from its segment files, outside the broker: what the real
cluster run's final phase digests (``replica_log``) for every replica, as the
simulation digests each broker's log (analysis/replica_digest.py).

A follower cannot be read over the wire (only a leader answers fetches), so the runner
reads each replica's files once the cluster has settled: no produce is in flight and
every replica holds what the leader holds. The files are the broker's own v2 batches
(real_io/files.py); a preallocated active segment ends in zeros (``log.preallocate``),
and the first batch whose header does not read is the end of what was written.
"""
from __future__ import annotations

from pathlib import Path

from analysis.workload import unpadded_value
from broker_core.types import TopicPartition
from real_io.protocol import record_batch
from real_io.protocol.errors import ProtocolError

SEGMENT_SUFFIX = ".log"


def segment_files(data_dir: Path, tp: TopicPartition) -> list[Path]:
    """The replica's segments in offset order (their names are their base offsets)."""
    directory = data_dir / str(tp)
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if p.name.endswith(SEGMENT_SUFFIX) and p.stem.isdigit()),
                  key=lambda p: int(p.stem))


def read_replica(data_dir: Path, tp: TopicPartition, upto: int,
                 keys: list[str | None] | None = None) -> tuple[int, list[tuple[int, str | None]]]:
    """(log start offset, [(offset, value)] below ``upto``) of the replica of ``tp`` in
    ``data_dir``; the log start is the first stored batch's base offset (``upto`` when
    none is stored). ``keys``, when given, gets each record's key, in the same order (a
    compacted replica's key -> value digest)."""
    records: list[tuple[int, str | None]] = []
    start: int | None = None
    for path in segment_files(data_dir, tp):
        data = path.read_bytes()
        position = 0
        while position + record_batch.HEADER_BYTES <= len(data):
            try:
                batch, position = record_batch.decode_batch(data, position)
            except ProtocolError:
                break  # zeros after the last write (a preallocated segment), or a torn tail
            if start is None:
                start = batch.base_offset
            batch_keys = batch.records.keys
            for delta, value in enumerate(batch.records.values):
                offset = batch.base_offset + delta
                if offset >= upto:
                    return start, records
                records.append((offset, unpadded_value(value)))  # as the readers report it
                if keys is not None:
                    keys.append(batch_keys[delta] if batch_keys is not None else None)
    return (upto if start is None else start), records
