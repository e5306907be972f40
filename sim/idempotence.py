"""The idempotent producer's sequence bookkeeping, as the Java client keeps it for a
producer without a transactional id.

Follows Kafka clients/src/main/java/org/apache/kafka/clients/producer/internals/
TransactionManager.java (sequenceNumber, addInFlightBatch, handleCompletedBatch,
handleFailedBatch, canRetry, requestEpochBumpForPartition, bumpIdempotentProducerEpoch,
startSequencesAtBeginning, markSequenceUnresolved, maybeResolveSequences),
RecordAccumulator.shouldStopDrainBatchesForPartition and insertInSequenceOrder, and
Sender.completeBatch (DUPLICATE_SEQUENCE_NUMBER is a success without an offset).

Two versions of the epoch bump's sequence restart (``sequence_restart``), which differ
by KAFKA-12152 (fixed in 2.8.0):

- ``per_partition`` (3.0.0): each partition keeps the producer id and epoch its
  sequences belong to; its first batch drained after a bump, once nothing of the older
  epoch is in flight, restarts its sequences at 0 (maybeUpdateProducerIdAndEpoch), and
  a failed batch of an older epoch still counts in handleFailedBatch.
- ``in_flight`` (2.7.0): a bump restarts only the partitions that asked for it, and a
  partition whose last batch of the older epoch completes (handleCompletedBatch). A
  partition with nothing in flight at the bump keeps its sequence: its next batch goes
  with the new epoch and a sequence above 0, the broker answers
  OUT_OF_ORDER_SEQUENCE_NUMBER, and that asks for another bump. handleFailedBatch
  ignores a batch of an older epoch, so a partition whose last stale batch failed keeps
  its sequence too.

A batch here is the producer's PendingBatch: this module reads and sets its
``producer_id``, ``producer_epoch``, ``base_sequence``, ``sequence_reset``, ``values``
and ``attempts``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from analysis.client_history import DUPLICATE_SEQUENCE_NUMBER, OK
from broker_core.errors import ErrorCode
from broker_core.messages import InitProducerIdRequest
from broker_core.types import TopicPartition

NO_SEQUENCE = -1
NO_LAST_ACKED_SEQUENCE = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE: past it the producer asks for a new id


@dataclass
class PartitionSequences:
    """TransactionManager.TopicPartitionEntry, with the producer id and epoch its
    sequences belong to (3.0's TopicPartitionEntry.producerIdAndEpoch; 2.7's entry has
    none, and ``in_flight`` restarts never read them)."""
    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    in_flight: list[Any] = field(default_factory=list)  # batches by base sequence


def last_sequence(batch: Any) -> int:
    return batch.base_sequence + len(batch.values) - 1


PER_PARTITION = "per_partition"  # 3.0.0 (KAFKA-12152, 2.8.0+)
IN_FLIGHT = "in_flight"  # 2.7.0


class IdempotentSequences:
    def __init__(self, sequence_restart: str = PER_PARTITION) -> None:
        if sequence_restart not in (PER_PARTITION, IN_FLIGHT):
            raise ValueError(f"unknown sequence_restart {sequence_restart!r}")
        self.per_partition = sequence_restart == PER_PARTITION
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: dict[TopicPartition, PartitionSequences] = {}
        self.epoch_bump_required = False
        self.partitions_to_rewrite: set[TopicPartition] = set()
        self.restarted: list[TopicPartition] = []  # the partitions the last epoch bump renumbered
        self.unresolved: dict[TopicPartition, int] = {}  # partition -> next sequence once resolved

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.partitions = {}  # a new id starts every partition's sequences at 0
        self.unresolved = {}

    def _entry(self, tp: TopicPartition) -> PartitionSequences:
        entry = self.partitions.get(tp)
        if entry is None:
            entry = self.partitions[tp] = PartitionSequences(self.producer_id, self.producer_epoch)
        return entry

    # -- draining --------------------------------------------------------------------
    def may_drain(self, batch: Any) -> bool:
        """shouldStopDrainBatchesForPartition, negated: a new batch waits while older
        epochs are in flight or sequences are unresolved; a retried batch goes only
        when it is the partition's first in flight."""
        if not self.has_producer_id:
            return False
        entry = self._entry(batch.tp)
        if batch.base_sequence == NO_SEQUENCE:
            # 3.0 asks whether the partition's own id and epoch are stale, 2.7 whether
            # its oldest batch in flight has an older one.
            stale = entry if self.per_partition else (entry.in_flight[0] if entry.in_flight else None)
            if entry.in_flight and self._is_stale(stale):
                return False
            return batch.tp not in self.unresolved
        return not entry.in_flight or entry.in_flight[0].base_sequence == batch.base_sequence

    def assign(self, batch: Any) -> None:
        """Give a batch drained for the first time its producer id, epoch and sequence."""
        entry = self._entry(batch.tp)
        if self.per_partition and self._is_stale(entry) and not entry.in_flight:
            self._start_at_beginning(batch.tp)  # 3.0.0 maybeUpdateProducerIdAndEpoch
        batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
        batch.base_sequence = entry.next_sequence
        entry.next_sequence = (entry.next_sequence + len(batch.values)) % 2**31
        entry.in_flight.append(batch)
        entry.in_flight.sort(key=lambda b: b.base_sequence)

    # -- outcomes --------------------------------------------------------------------
    def completed(self, batch: Any) -> None:
        """handleCompletedBatch. 2.7.0 restarts the sequences of a partition whose last
        batch of an older epoch completed; 3.0.0 leaves that to the next drain (assign)."""
        entry = self._entry(batch.tp)
        entry.last_acked_sequence = max(entry.last_acked_sequence, last_sequence(batch))
        self._remove_in_flight(batch)
        if not self.per_partition and self._is_stale(batch) and not entry.in_flight:
            self._start_at_beginning(batch.tp)

    def can_retry(self, batch: Any, error: ErrorCode) -> bool:
        """TransactionManager.canRetry for an idempotent producer (the caller checks
        attempts and the delivery timeout). Kafka also retries UNKNOWN_PRODUCER_ID
        without a bump when the response has no log start offset; isrlab's responses
        carry none and its brokers never send this error (Kafka's since 2.5 do not either)."""
        tp = batch.tp
        if error is ErrorCode.UNKNOWN_PRODUCER_ID:
            if not batch.sequence_reset:
                self.request_epoch_bump(tp)
            return True
        if error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if tp not in self.unresolved and (batch.sequence_reset or not self._is_next_sequence(tp, batch.base_sequence)):
                return True  # an earlier batch failed: this one follows it back
            if tp not in self.unresolved or self.unresolved[tp] == batch.base_sequence:
                self.request_epoch_bump(tp)  # a real gap: restart the partition's sequences
            return True
        return error.is_retriable

    def failed(self, batch: Any, error: ErrorCode, adjust_sequences: bool) -> None:
        """handleFailedBatch: a batch that certainly failed while retries remained
        leaves a gap, closed by an epoch bump. 2.7.0 ignores a batch of an older epoch
        ("the producerId has been reset internally"); 3.0.0 (KAFKA-12152) does not."""
        self._remove_in_flight(batch)
        if not self.per_partition and self._is_stale(batch):
            return
        if error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            self.request_epoch_bump(batch.tp)
        elif error is ErrorCode.UNKNOWN_PRODUCER_ID:
            # The broker has no state for the producer: it accepts sequence 0 again.
            self.partitions.pop(batch.tp, None)
            self.unresolved.pop(batch.tp, None)
        elif adjust_sequences:
            self.request_epoch_bump(batch.tp)

    def expired(self, batch: Any) -> None:
        """A batch given up on after being sent (Sender: markSequenceUnresolved)."""
        self._remove_in_flight(batch)
        if batch.base_sequence != NO_SEQUENCE and batch.attempts > 0:
            following = last_sequence(batch) + 1
            self.unresolved[batch.tp] = max(self.unresolved.get(batch.tp, following), following)

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self.epoch_bump_required = True
        self.partitions_to_rewrite.add(tp)

    # -- the sender loop -------------------------------------------------------------
    def maybe_resolve_and_bump(self) -> bool:
        """maybeResolveSequences, then bumpIdempotentEpochAndResetIdIfNeeded. Returns
        True when the epoch is exhausted and a new producer id is needed."""
        for tp in sorted(self.unresolved):
            entry = self._entry(tp)
            if entry.in_flight:
                continue
            if entry.next_sequence - entry.last_acked_sequence != 1:
                self.request_epoch_bump(tp)
            del self.unresolved[tp]
        if not self.epoch_bump_required:
            return False
        self.epoch_bump_required = False
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.producer_id = self.producer_epoch = -1
            self.partitions_to_rewrite.clear()
            return True
        self.producer_epoch += 1
        self.restarted = sorted(self.partitions_to_rewrite)
        for tp in self.restarted:
            self._start_at_beginning(tp)
            self.unresolved.pop(tp, None)
        self.partitions_to_rewrite.clear()
        return False

    def _start_at_beginning(self, tp: TopicPartition) -> None:
        """startSequencesAtBeginning: in-flight batches are renumbered from 0 under the
        current producer id and epoch."""
        entry = self._entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
            batch.base_sequence = sequence
            batch.sequence_reset = True
            sequence += len(batch.values)
        entry.producer_id, entry.producer_epoch = self.producer_id, self.producer_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    def _is_stale(self, holder: Any) -> bool:
        """A batch's or a partition's producer id and epoch are not the current ones
        (2.7.0 producerIdOrEpochNotMatch, 3.0.0 hasStaleProducerIdAndEpoch)."""
        return (holder.producer_id, holder.producer_epoch) != (self.producer_id, self.producer_epoch)

    def _is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        return sequence - self._entry(tp).last_acked_sequence == 1

    def _remove_in_flight(self, batch: Any) -> None:
        entry = self.partitions.get(batch.tp)
        if entry is not None:  # by identity: two batches never share a PendingBatch
            entry.in_flight = [b for b in entry.in_flight if b is not batch]


def insert_in_sequence_order(queue: deque, batch: Any) -> None:
    """RecordAccumulator.insertInSequenceOrder: a retried batch goes back ahead of every
    queued batch without a sequence or with a higher one."""
    for index, queued in enumerate(queue):
        if queued.base_sequence == NO_SEQUENCE or queued.base_sequence > batch.base_sequence:
            queue.insert(index, batch)
            return
    queue.append(batch)


class _Producer(Protocol):
    """What IdempotentSends reads and sets of the producer it is mixed into
    (sim.producer.SimProducer, with sim.clients.SimClient's metadata and requests):
    mypy checks that the producer has all of it. A Protocol on ``self``, not
    attributes declared on the mixin, so that the compiled producer's own attributes
    stay as SimProducer and SimClient declare them (isrlab/compiled.py)."""
    INIT_PRODUCER_ID: str
    sequences: IdempotentSequences | None  # None: enable.idempotence is off
    _ready: dict[TopicPartition, deque[Any]]
    _init_in_flight: bool
    _init_not_before: float
    _bootstrap_index: int
    running: bool
    env: Any
    brokers: list[int]
    spec: Any
    acknowledged: int

    def history(self, type_: str, fields: dict) -> None: ...

    def reachable(self, broker: int) -> bool: ...

    def request(self, broker: int, build: Any, context: Any) -> int: ...

    def _finish(self, batch: Any, outcome: str, error: ErrorCode | None, offset: int | None = None,
                reason: str | None = None) -> None: ...

    def _init_producer_id(self) -> None: ...


def _sequences(producer: _Producer) -> IdempotentSequences:
    """The sequences of a producer whose idempotence is on: the Sender loop's tick and
    the InitProducerId and DUPLICATE_SEQUENCE_NUMBER paths run only for one."""
    sequences = producer.sequences
    if sequences is None:
        raise RuntimeError(f"{type(producer).__name__}: idempotence is off, it has no sequences")
    return sequences


class IdempotentSends:
    """The producer's side of InitProducerId and its Sender-loop bookkeeping; mixed into
    sim.clients.SimProducer (``sequences``, ``_init_in_flight``, ``_init_not_before``)."""
    INIT_PRODUCER_ID = "init_producer_id"  # the context of an InitProducerId request

    def _can_retry(self: _Producer, batch: Any, error: ErrorCode) -> bool:
        if self.sequences is None:
            return error.is_retriable
        return self.sequences.can_retry(batch, error)

    def _requeue(self: _Producer, batch: Any) -> None:
        """A retried batch goes back first; an idempotent one in sequence order."""
        if self.sequences is not None and batch.base_sequence != NO_SEQUENCE:
            insert_in_sequence_order(self._ready[batch.tp], batch)
        else:
            self._ready[batch.tp].appendleft(batch)

    def _idempotence_tick(self: _Producer) -> None:
        """The Sender loop's bookkeeping: resolve sequences, bump the epoch if asked,
        and get a producer id when there is none."""
        sequences = _sequences(self)
        epoch = sequences.producer_epoch
        if sequences.maybe_resolve_and_bump() or not sequences.has_producer_id:
            self._init_producer_id()
        elif sequences.producer_epoch != epoch:
            self.history("producer_epoch_bumped", {
                "producer_id": sequences.producer_id, "producer_epoch": sequences.producer_epoch,
                "partitions": [str(tp) for tp in sequences.restarted]})

    def _init_producer_id(self: _Producer) -> None:
        if self._init_in_flight or not self.running or self.env.now < self._init_not_before:
            return
        candidates = [b for b in self.brokers if self.reachable(b)] or self.brokers
        broker = candidates[self._bootstrap_index % len(candidates)]
        self._bootstrap_index += 1
        self._init_in_flight = True
        self.request(broker, InitProducerIdRequest, self.INIT_PRODUCER_ID)

    def _on_init_producer_id(self: _Producer, message: Any) -> None:
        self._init_in_flight = False
        if message.error is ErrorCode.NONE:
            _sequences(self).set_producer_id(message.producer_id, message.producer_epoch)
        else:
            self._init_not_before = self.env.now + self.spec.retry_backoff_ms

    def _duplicate_sequence(self: _Producer, batch: Any) -> None:
        """Sender.completeBatch: the broker no longer knows the original's offset; the
        send succeeded, with no offset to report."""
        _sequences(self).completed(batch)
        self.acknowledged += len(batch.values)
        self._finish(batch, OK, None, offset=-1, reason=DUPLICATE_SEQUENCE_NUMBER)
