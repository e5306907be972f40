"""Idempotent producers at one partition replica: the last batches of each producer id,
checked on a leader's client appends and rebuilt from the log.

Follows Kafka 2.7.0 core/src/main/scala/kafka/log/ProducerStateManager.scala
(ProducerStateEntry, ProducerAppendInfo.checkProducerEpoch / checkSequence) and
Log.analyzeAndValidateProducerState: a client batch whose sequence range equals one of
the producer's last five batches (same epoch) is a duplicate, answered with the
original offsets and not appended; otherwise its first sequence must follow the
producer's last one (or be 0 with a new epoch), else OUT_OF_ORDER_SEQUENCE_NUMBER; an
older epoch is INVALID_PRODUCER_EPOCH. Replicated batches are never checked, only
recorded (AppendOrigin.Replication), so a follower that becomes leader knows what its
log holds. Kafka also snapshots this state to disk; isrlab rebuilds it from the log on
recovery and after a truncation instead (Log.rebuildProducerState reading every segment).
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, NamedTuple

from broker_core import mutants
from broker_core.errors import ErrorCode
from broker_core.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NumBatchesToRetain
_MAX_SEQUENCE = 2**31 - 1


class BatchMetadata(NamedTuple):
    """What a producer's appended batch is remembered by (Kafka's BatchMetadata)."""
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


class DuplicateAppend(NamedTuple):
    """How a leader answers a duplicate: the original's offsets from the producer
    state's batch metadata, never from the log, which the cleaner may have emptied of
    that batch since (2.7.0 Log.append returns early with ``duplicate.firstOffset`` and
    ``duplicate.lastOffset``). ``size_bytes`` is the retried batch's, as the request
    is what quotas count."""
    base_offset: int
    next_offset: int
    size_bytes: int


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "batches")

    def __init__(self, producer_id: int):
        self.producer_id = producer_id
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def add_batch(self, producer_epoch: int, metadata: BatchMetadata) -> None:
        """A new epoch forgets the old epoch's batches (maybeUpdateProducerEpoch); the
        queue keeps the last five (the oldest leaves first)."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch
        self.batches.append(metadata)

    def find_duplicate(self, batch: BatchHeader) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        for metadata in self.batches:
            if metadata.first_sequence == first and metadata.last_sequence == last:
                return metadata
        return None


class ProducerStateManager:
    """The producer ids of one partition replica and their last batches."""
    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[int, ProducerStateEntry] = {}

    def __bool__(self) -> bool:
        return bool(self.entries)

    def check_client_batch(self, batch: BatchHeader) -> tuple[ErrorCode, BatchMetadata | None]:
        """A leader's check of a client's batch before it is appended: NONE and the
        cached batch for a duplicate, NONE and None for a batch to append, or the error."""
        entry = self.entries.get(batch.producer_id)
        if entry is None:
            # No state for this producer (new, or its batches are gone from the log):
            # Kafka accepts any sequence (checkSequence with NO_PRODUCER_EPOCH).
            return ErrorCode.NONE, None
        duplicate = entry.find_duplicate(batch)
        if duplicate is not None:
            # (the mutant appends the duplicate again, as if its sequence were new)
            return ErrorCode.NONE, None if mutants.DUPLICATE_SEQUENCE_ACCEPTED else duplicate
        if batch.producer_epoch < entry.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if batch.producer_epoch != entry.producer_epoch:
            return (ErrorCode.NONE if batch.base_sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), None
        if not _in_sequence(entry.last_sequence, batch.base_sequence):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return ErrorCode.NONE, None

    def record(self, batch: BatchHeader) -> None:
        """Remember an appended batch, whether a client's or a replicated one."""
        entry = self.entries.get(batch.producer_id)
        if entry is None:
            entry = self.entries[batch.producer_id] = ProducerStateEntry(batch.producer_id)
        entry.add_batch(batch.producer_epoch, BatchMetadata(
            batch.base_sequence, batch.last_sequence, batch.base_offset, batch.next_offset - 1))

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch lies below the log start (2.7.0
        ProducerStateManager.truncateHead, after retention deleted their batches)."""
        self.entries = {pid: entry for pid, entry in self.entries.items()
                        if entry.batches and entry.batches[-1].last_offset >= log_start_offset}

    def rebuild(self, batches: Iterable[BatchHeader]) -> None:
        """Forget everything and replay the log's batches (recovery, truncation)."""
        self.entries = {}
        for batch in batches:
            if batch.producer_id >= 0:
                self.record(batch)


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _MAX_SEQUENCE)
