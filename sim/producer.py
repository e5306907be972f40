"""The simulated producer: records accumulate per partition for ``linger_ms`` and leave
as batches, one produce request per leader; the history records one ``send`` per batch
(sim/clients.py describes the history)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from analysis.client_history import (
    ACKS_0, CLIENT_TIMEOUT, CONNECTION_RESET, DELIVERY_TIMEOUT, INFO, INVOKE, OK, OUTCOME_UNKNOWN, RUN_ENDED,
    completion_of, may_have_appended, send_completion, send_invoke)
from analysis.workload import KeyedRecords, RecordCredit, keyed_records, record_values
from broker_core.errors import ErrorCode
from broker_core.messages import ProduceRequest
from broker_core.partitioner import StickyPartitioner, make_partition_for_key, make_partitioner
from broker_core.records import RecordBatch, Records
from broker_core.types import NO_LEADER, TopicPartition
from sim.broker_host import broker_name
from sim.clients import SimClient
from sim.idempotence import NO_SEQUENCE, PER_PARTITION, IdempotentSends, IdempotentSequences


# init=False and a written __init__: mypyc compiles a written __init__, while the one
# @dataclass generates stays interpreted (a Python call per batch); docs/compiled.md.
@dataclass(init=False)
class PendingBatch:
    op: int
    tp: TopicPartition
    values: list[str | None]  # None: a tombstone
    created_ms: int
    keys: list[str] | None = None  # None: unkeyed
    attempts: int = 0
    not_before: float = 0.0  # retry.backoff.ms: a retried batch waits this long
    invoked: bool = False
    unknown: bool = False  # an earlier attempt may have been appended
    _records: Records | None = None
    # idempotent producers (sim.idempotence): set when the batch is first drained
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = NO_SEQUENCE
    sequence_reset: bool = False

    def __init__(self, op: int, tp: TopicPartition, values: list[str | None], created_ms: int,
                 keys: list[str] | None = None) -> None:
        self.op = op
        self.tp = tp
        self.values = values
        self.created_ms = created_ms
        self.keys = keys
        self.attempts = 0
        self.not_before = 0.0
        self.invoked = False
        self.unknown = False
        self._records = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.sequence_reset = False

    def records(self, size_bytes: int) -> Records:
        if self._records is None:  # built once: a retry resends the same records
            self._records = Records(self.values, self.keys, size_bytes)
        return self._records

    def client_batch(self, size_bytes: int) -> RecordBatch:
        """The batch an idempotent producer sends: offsets unset, its sequence numbered."""
        return RecordBatch(0, -1, self.records(size_bytes), producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=self.base_sequence)


class SimProducer(IdempotentSends, SimClient):
    """A Kafka producer: records accumulate per partition for ``linger_ms``, then one
    request per leader carries every ready batch, at most MAX_IN_FLIGHT per broker.

    ``spec`` is the scenario's producer workload (scenarios.model.ProducerWorkload, the
    layer above: used, not imported), ``partitions`` the topic's partition count."""

    MAX_IN_FLIGHT = 5  # max.in.flight.requests.per.connection

    def __init__(self, env, network, name, brokers, trace, spec, partitions: int, partitioner: str, rng,
                 sequence_restart: str = PER_PARTITION, workload_rng=None):
        """``partitioner`` names the keyless records' partitioner (``round_robin`` or
        ``sticky``); ``rng`` is its seeded generator. ``sequence_restart`` is the
        idempotent producer's epoch bump (sim.idempotence: ``per_partition``, 3.0's,
        or ``in_flight``, 2.7's). ``workload_rng`` is the stream of a keyed workload's
        uniform keys and tombstones (analysis/workload.py workload_label)."""
        super().__init__(env, network, name, brokers, trace, spec.request_timeout_ms)
        self.spec = spec
        self.partitioner = make_partitioner(partitioner, rng)
        self._partition_for_key = make_partition_for_key(partitions)
        self.partitions = [TopicPartition(spec.topic, p) for p in range(partitions)]
        self._ready: dict[TopicPartition, deque[PendingBatch]] = {tp: deque() for tp in self.partitions}
        self._open: dict[TopicPartition, PendingBatch] = {}
        self._in_flight: dict[int, int] = {}  # broker -> requests in flight
        self._seq = 0
        self._credit = RecordCredit(spec.rate, spec.linger_ms)
        self._keyed: KeyedRecords | None = keyed_records(name, spec, workload_rng)
        self.acknowledged = 0
        # enable.idempotence: producer id, epoch and per-partition sequences
        self.sequences = (IdempotentSequences(sequence_restart) if getattr(spec, "enable_idempotence", False)
                          else None)
        self._init_in_flight = False
        self._init_not_before = 0.0
        self.produce_requests = 0  # requests sent (bench/sim_speed.py reports them)
        env.process(self._run())

    def _run(self):
        spec = self.spec
        if spec.start_ms:
            yield self.env.timeout(spec.start_ms)
        self.refresh_metadata()
        while self.running:
            if spec.stop_ms is None or self.env.now < spec.stop_ms:
                keyed = self._keyed
                count = keyed.due(self.env.now) if keyed is not None and keyed.scripted else self._credit.take()
                if count:
                    self._add_records(count)
                self._close_open_batches()
            elif self.idle:
                break  # stopped, and nothing in flight could come back to be retried
            # After stop the application sends nothing new, but the sender goes on
            # delivering and retrying what it holds, as the Java producer's thread does.
            self._expire_and_send()
            yield self.env.timeout(spec.linger_ms)

    def stop(self) -> None:
        self.running = False

    def _available(self) -> list[int]:
        """Partitions with a known leader (Cluster.availablePartitionsForTopic)."""
        leaders = self.leaders
        return [i for i, tp in enumerate(self.partitions) if leaders.get(tp, NO_LEADER) != NO_LEADER]

    def _add_records(self, count: int) -> None:
        """Create the next ``count`` records: keyed ones go to murmur2(key) mod
        partitions, keyless ones where the partitioner says (broker_core/partitioner.py)."""
        spec = self.spec
        first = self._seq + 1
        self._seq += count
        name = self.name
        partitions = self.partitions
        now = self.now()
        keyed = self._keyed
        if keyed is not None:
            for seq in range(first, first + count):
                key, value = keyed.record(seq)
                batch = self._open_batch(partitions[self._partition_for_key(key)], now)
                if batch.keys is None:
                    batch.keys = []
                batch.keys.append(key)
                batch.values.append(value)
            return
        available = self._available()
        n = len(partitions)
        partitioner = self.partitioner
        if isinstance(partitioner, StickyPartitioner):
            # Every record of a tick fits the sticky partition's open batch, so only the
            # first one can need a new batch (the sim has no batch.size limit).
            target = partitioner.partition(n, available)
            if partitions[target] not in self._open:
                target = partitioner.on_new_batch(n, available, target)
            self._open_batch(partitions[target], now).values.extend(
                record_values(name, first, first + count))
            return
        # Round-robin: record j goes to choices[(start + j) mod m], so each partition
        # takes every m-th sequence number, in order.
        choices = available or list(range(n))
        m = len(choices)
        start = partitioner.take(count)
        for j in range(min(m, count)):
            self._open_batch(partitions[choices[(start + j) % m]], now).values.extend(
                record_values(name, first + j, first + count, m))

    def _open_batch(self, tp: TopicPartition, now: int) -> PendingBatch:
        batch = self._open.get(tp)
        if batch is None:
            batch = self._open[tp] = PendingBatch(0, tp, [], now)
        return batch

    def _close_open_batches(self) -> None:
        for tp in sorted(self._open):
            batch = self._open[tp]
            batch.op = self.new_op()
            self._ready[tp].append(batch)
        self._open.clear()

    def _expire_and_send(self) -> None:
        now = self.now()
        clock = self.env.now  # read once: nothing below moves simulated time
        delivery_timeout_ms = self.spec.delivery_timeout_ms
        sequences = self.sequences
        if sequences is not None:
            self._idempotence_tick()
        by_broker: dict[int, list[PendingBatch]] = {}
        for tp in self.partitions:
            queue = self._ready[tp]
            while queue and now - queue[0].created_ms >= delivery_timeout_ms:
                batch = queue.popleft()  # delivery.timeout.ms: give up; unknown if a try may have landed
                if sequences is not None:
                    sequences.expired(batch)
                self._finish(batch, completion_of(batch.unknown), ErrorCode.REQUEST_TIMED_OUT,
                             reason=DELIVERY_TIMEOUT, expired=True)
            leader = self.leaders.get(tp, NO_LEADER)
            if queue and leader != NO_LEADER:
                by_broker.setdefault(leader, [])
        for broker in sorted(by_broker):
            if self._in_flight.get(broker, 0) >= self.MAX_IN_FLIGHT or not self.reachable(broker):
                continue
            batches = []
            for tp in self.partitions:
                queue = self._ready[tp]
                if self.leaders.get(tp) == broker and queue and queue[0].not_before <= clock and (
                        sequences is None or sequences.may_drain(queue[0])):
                    batches.append(queue.popleft())
            if batches:
                self._send(broker, batches)
        if any(self._ready[tp] and self.leaders.get(tp, NO_LEADER) == NO_LEADER for tp in self.partitions):
            self.refresh_metadata()

    def _send(self, broker: int, batches: list[PendingBatch]) -> None:
        spec = self.spec
        for batch in batches:
            self._invoke(batch)
            batch.attempts += 1
        partitions: dict[TopicPartition, Records | RecordBatch]
        if self.sequences is not None:
            for batch in batches:
                if batch.base_sequence == NO_SEQUENCE:
                    self.sequences.assign(batch)
            partitions = {b.tp: b.client_batch(spec.record_bytes) for b in batches}
        else:
            partitions = {b.tp: b.records(spec.record_bytes) for b in batches}
        self.produce_requests += 1
        if spec.acks == 0:
            self.network.send(self.name, broker_name(broker),
                              ProduceRequest(0, 0, spec.request_timeout_ms, partitions, self.client_id))
            for batch in batches:
                self._finish(batch, INFO, None, reason=ACKS_0)
            return
        self._in_flight[broker] = self._in_flight.get(broker, 0) + 1
        self.request(broker, lambda cid: ProduceRequest(cid, spec.acks, spec.request_timeout_ms, partitions,
                                                        self.client_id),
                     (broker, {b.tp: b for b in batches}))

    def on_response(self, context, message: Any) -> None:  # a ProduceResponse, or InitProducerId's answer
        if context == self.INIT_PRODUCER_ID:
            self._on_init_producer_id(message)
            return
        broker, batches = context
        self._in_flight[broker] -= 1
        refresh = False
        for tp in sorted(batches):
            batch = batches[tp]
            result = message.partitions.get(tp)
            if result is None:
                self._retry_or_finish(batch, ErrorCode.NETWORK_EXCEPTION, unknown=True)
                continue
            if result.error is ErrorCode.NONE:
                if self.sequences is not None:
                    self.sequences.completed(batch)
                self.acknowledged += len(batch.values)
                self._finish(batch, OK, None, offset=result.base_offset)
                continue
            if result.error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER and self.sequences is not None:
                self._duplicate_sequence(batch)
                continue
            refresh = refresh or result.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH)
            self._retry_or_finish(batch, result.error, unknown=may_have_appended(result.error, self.spec.acks))
        if refresh:
            self.leaders = {tp: b for tp, b in self.leaders.items() if b != broker}
            self.refresh_metadata()

    def on_timeout(self, context, reason: str = CLIENT_TIMEOUT) -> None:
        if context == self.INIT_PRODUCER_ID:
            self._init_in_flight = False
            self._init_not_before = self.env.now + self.spec.retry_backoff_ms
            return
        broker, batches = context
        self._in_flight[broker] -= 1
        error = ErrorCode.NETWORK_EXCEPTION if reason == CONNECTION_RESET else ErrorCode.REQUEST_TIMED_OUT
        for tp in sorted(batches):
            self._retry_or_finish(batches[tp], error, unknown=True, reason=reason)
        self.leaders = {tp: b for tp, b in self.leaders.items() if b != broker}
        self.refresh_metadata()

    def _retry_or_finish(self, batch: PendingBatch, error: ErrorCode, unknown: bool, reason: str | None = None) -> None:
        batch.unknown = batch.unknown or unknown
        within = self.now() - batch.created_ms < self.spec.delivery_timeout_ms
        if batch.attempts <= self.spec.retries and within and self.running and self._can_retry(batch, error):
            batch.not_before = self.env.now + self.spec.retry_backoff_ms
            self._requeue(batch)
            return
        if self.sequences is not None:
            self.sequences.failed(batch, error, adjust_sequences=batch.attempts <= self.spec.retries)
        self._finish(batch, completion_of(batch.unknown), error, reason=reason)

    def _invoke(self, batch: PendingBatch) -> None:
        if not batch.invoked:
            batch.invoked = True
            self.history(INVOKE, send_invoke(batch.op, str(batch.tp), batch.values, self.spec.acks, batch.keys))

    def on_refused(self, context) -> None:
        if context == self.INIT_PRODUCER_ID:
            self.on_timeout(context)
            return
        broker, batches = context
        self._in_flight[broker] -= 1
        for tp in sorted(batches, reverse=True):
            batch = batches[tp]
            batch.attempts -= 1  # it never left: not an attempt
            self._requeue(batch)
        self.refresh_metadata()

    def _finish(self, batch: PendingBatch, outcome: str, error: ErrorCode | None, offset: int | None = None,
                reason: str | None = None, expired: bool = False) -> None:
        if expired:
            self._invoke(batch)
        if error is None:
            self.history(outcome, send_completion(batch.op, str(batch.tp), offset, reason=reason))
            return
        if not reason and batch.unknown and outcome == INFO:
            reason = OUTCOME_UNKNOWN
        self.history(outcome, send_completion(batch.op, str(batch.tp), offset, error.name, int(error), reason))

    @property
    def idle(self) -> bool:
        """Nothing in flight: batches still queued will never be sent once it stopped."""
        return not any(self._in_flight.values()) and (not self.running or not any(self._ready.values()))

    def drain(self) -> None:
        """Give up on what was never sent (the run is over)."""
        for tp in self.partitions:
            while self._ready[tp]:
                batch = self._ready[tp].popleft()
                if not batch.invoked:
                    continue  # never sent: not part of the history
                self._finish(batch, completion_of(batch.unknown), ErrorCode.REQUEST_TIMED_OUT, reason=RUN_ENDED)
