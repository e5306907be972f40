"""Simulated Kafka clients that record a Jepsen-style history into the trace.

Every operation is an ``invoke`` followed by ``ok`` (it happened; with offsets),
``fail`` (it certainly did not happen; with the error) or ``info`` (unknown: a timeout
or an error after a possible append). The checkers judge from these events alone.

The unit of a produce operation is one batch for one partition, as the broker
acknowledges it: ``values`` lists the records, ``offset`` the first one's offset.
"""
from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import simpy

from broker_core.errors import DEFINITE_PRODUCE_FAILURES, ErrorCode
from broker_core.messages import (
    CONSUMER_REPLICA_ID, LATEST_TIMESTAMP, FetchPartition, FetchRequest,
    FetchResponse, ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse)
from broker_core.records import RecordBatch, Records
from broker_core.types import NO_LEADER, TopicPartition
from sim.broker_host import broker_name
from sim.idempotence import NO_SEQUENCE, IdempotentSends, IdempotentSequences
from sim.network import ConnectionReset, Network

TraceFn = Callable[[str, str, dict], None]
RECONNECT_BACKOFF_MS = 1000


class SimClient:
    """Metadata, request timeouts and the history writer shared by all clients."""

    def __init__(self, env: simpy.Environment, network: Network, name: str, brokers: list[int],
                 trace: TraceFn, request_timeout_ms: int = 30000):
        self.env = env
        self.network = network
        self.name = name
        self.brokers = brokers
        self._trace = trace
        self.request_timeout_ms = request_timeout_ms
        self.leaders: dict[TopicPartition, int] = {}
        self.running = True
        self._correlation = 0
        self._pending: dict[int, Any] = {}  # correlation id -> context
        self._destination: dict[int, int] = {}  # correlation id -> broker
        self._backoff_until: dict[int, float] = {}
        self._metadata_in_flight: int | None = None
        self._bootstrap_index = 0
        self._next_op = 0
        network.add_node(name, self._receive)

    def now(self) -> int:
        return int(self.env.now)

    def history(self, type_: str, fields: dict) -> None:
        self._trace(self.name, type_, fields)

    def new_op(self) -> int:
        self._next_op += 1
        return self._next_op

    def request(self, broker: int, build, context: Any) -> int:
        self._correlation += 1
        cid = self._correlation
        self._pending[cid] = context
        self._destination[cid] = broker
        self.network.send(self.name, broker_name(broker), build(cid))
        event = self.env.timeout(self.request_timeout_ms)
        event.callbacks.append(lambda _e: self._timed_out(cid))
        return cid

    def _timed_out(self, cid: int) -> None:
        context = self._pending.pop(cid, None)
        self._destination.pop(cid, None)
        if context is None:
            return
        if cid == self._metadata_in_flight:
            self._metadata_in_flight = None
            self.refresh_metadata()
            return
        self.on_timeout(context)

    def _receive(self, src: str, message: Any) -> None:
        if isinstance(message, ConnectionReset):
            if message.correlation_id is None:
                self._connection_reset(message.broker)
            else:
                self._connection_refused(message.broker, message.correlation_id)
            return
        self._destination.pop(message.correlation_id, None)
        context = self._pending.pop(message.correlation_id, None)
        if context is None:
            return  # an answer after its timeout: the history already says "unknown"
        if isinstance(message, MetadataResponse):
            self._metadata_in_flight = None
            for tp, meta in message.partitions.items():
                self.leaders[tp] = meta.leader
            self.on_metadata()
        else:
            self.on_response(context, message)

    def _connection_reset(self, broker: int) -> None:
        """The broker's process died and its OS reset our connection: every request in
        flight to it ends now, its outcome unknown."""
        for cid in sorted(c for c, b in self._destination.items() if b == broker):
            del self._destination[cid]
            context = self._pending.pop(cid, None)
            if cid == self._metadata_in_flight:
                self._metadata_in_flight = None
                self.refresh_metadata()
            elif context is not None:
                self.on_timeout(context, reason="connection_reset")

    def _connection_refused(self, broker: int, cid: int) -> None:
        """Nothing listens on the broker's port: the request never reached a broker."""
        self._backoff_until[broker] = self.env.now + RECONNECT_BACKOFF_MS
        self._destination.pop(cid, None)
        context = self._pending.pop(cid, None)
        if context is None:
            return
        if cid == self._metadata_in_flight:
            self._metadata_in_flight = None
            self.refresh_metadata()
        else:
            self.on_refused(context)

    def on_refused(self, context: Any) -> None:
        self.on_timeout(context, reason="connection_refused")

    def reachable(self, broker: int) -> bool:
        return self._backoff_until.get(broker, 0) <= self.env.now

    def refresh_metadata(self) -> None:
        if self._metadata_in_flight is not None or not self.running:
            return
        candidates = [b for b in self.brokers if self.reachable(b)] or self.brokers
        broker = candidates[self._bootstrap_index % len(candidates)]
        self._bootstrap_index += 1
        self._metadata_in_flight = self.request(broker, lambda cid: MetadataRequest(cid), "metadata")

    def on_metadata(self) -> None:
        pass

    def on_response(self, context: Any, message: Any) -> None:
        raise NotImplementedError

    def on_timeout(self, context: Any, reason: str = "client_timeout") -> None:
        raise NotImplementedError


@dataclass
class PendingBatch:
    op: int
    tp: TopicPartition
    values: list[str]
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

    def __init__(self, env, network, name, brokers, trace, spec, partitions: int):
        super().__init__(env, network, name, brokers, trace, spec.request_timeout_ms)
        self.spec = spec
        self.partitions = [TopicPartition(spec.topic, p) for p in range(partitions)]
        self._ready: dict[TopicPartition, deque[PendingBatch]] = {tp: deque() for tp in self.partitions}
        self._open: dict[TopicPartition, PendingBatch] = {}
        self._in_flight: dict[int, int] = {}  # broker -> requests in flight
        self._seq = 0
        self._credit = 0.0
        self._round_robin = 0
        self.acknowledged = 0
        # enable.idempotence: producer id, epoch and per-partition sequences
        self.sequences = IdempotentSequences() if getattr(spec, "enable_idempotence", False) else None
        self._init_in_flight = False
        self._init_not_before = 0.0
        env.process(self._run())

    def _run(self):
        spec = self.spec
        if spec.start_ms:
            yield self.env.timeout(spec.start_ms)
        self.refresh_metadata()
        per_tick = spec.rate * spec.linger_ms / 1000.0
        while self.running and (spec.stop_ms is None or self.env.now < spec.stop_ms):
            self._credit += per_tick
            count = int(self._credit)
            self._credit -= count
            if count:
                self._add_records(count)
            self._close_open_batches()
            self._expire_and_send()
            yield self.env.timeout(spec.linger_ms)

    def stop(self) -> None:
        self.running = False

    def _add_records(self, count: int) -> None:
        """Create the next ``count`` records: keyed ones go to crc32(key) mod partitions,
        unkeyed ones round-robin."""
        spec = self.spec
        first = self._seq + 1
        self._seq += count
        name = self.name
        partitions = self.partitions
        n = len(partitions)
        now = self.now()
        if spec.keys:
            for seq in range(first, first + count):
                key = f"k{seq % spec.keys}"
                batch = self._open_batch(partitions[zlib.crc32(key.encode()) % n], now)
                if batch.keys is None:
                    batch.keys = []
                batch.keys.append(key)
                batch.values.append(f"{name}:{seq}")
            return
        # Round-robin: record j of this tick goes to partition (start + j) mod n, so each
        # partition takes every n-th sequence number, in order.
        start = self._round_robin
        self._round_robin += count
        for j in range(min(n, count)):
            self._open_batch(partitions[(start + j) % n], now).values.extend(
                [f"{name}:{seq}" for seq in range(first + j, first + count, n)])

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
        sequences = self.sequences
        if sequences is not None:
            self._idempotence_tick()
        by_broker: dict[int, list[PendingBatch]] = {}
        for tp in self.partitions:
            queue = self._ready[tp]
            while queue and now - queue[0].created_ms >= self.spec.delivery_timeout_ms:
                batch = queue.popleft()  # delivery.timeout.ms: give up; unknown if a try may have landed
                if sequences is not None:
                    sequences.expired(batch)
                self._finish(batch, "info" if batch.unknown else "fail", ErrorCode.REQUEST_TIMED_OUT,
                             reason="delivery_timeout", expired=True)
            leader = self.leaders.get(tp, NO_LEADER)
            if queue and leader != NO_LEADER:
                by_broker.setdefault(leader, [])
        for broker in sorted(by_broker):
            if self._in_flight.get(broker, 0) >= self.MAX_IN_FLIGHT or not self.reachable(broker):
                continue
            batches = []
            for tp in self.partitions:
                queue = self._ready[tp]
                if self.leaders.get(tp) == broker and queue and queue[0].not_before <= self.env.now and (
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
        if self.sequences is not None:
            for batch in batches:
                if batch.base_sequence == NO_SEQUENCE:
                    self.sequences.assign(batch)
            partitions = {b.tp: b.client_batch(spec.record_bytes) for b in batches}
        else:
            partitions = {b.tp: b.records(spec.record_bytes) for b in batches}
        if spec.acks == 0:
            self.network.send(self.name, broker_name(broker),
                              ProduceRequest(0, 0, spec.request_timeout_ms, partitions))
            for batch in batches:
                self._finish(batch, "info", None, reason="acks=0")
            return
        self._in_flight[broker] = self._in_flight.get(broker, 0) + 1
        self.request(broker, lambda cid: ProduceRequest(cid, spec.acks, spec.request_timeout_ms, partitions),
                     (broker, {b.tp: b for b in batches}))

    def on_response(self, context, message: ProduceResponse) -> None:
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
                self._finish(batch, "ok", None, offset=result.base_offset)
                continue
            if result.error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER and self.sequences is not None:
                self._duplicate_sequence(batch)
                continue
            refresh = refresh or result.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH)
            self._retry_or_finish(batch, result.error, unknown=result.error not in DEFINITE_PRODUCE_FAILURES)
        if refresh:
            self.leaders = {tp: b for tp, b in self.leaders.items() if b != broker}
            self.refresh_metadata()

    def on_timeout(self, context, reason: str = "client_timeout") -> None:
        if context == self.INIT_PRODUCER_ID:
            self._init_in_flight = False
            self._init_not_before = self.env.now + self.spec.retry_backoff_ms
            return
        broker, batches = context
        self._in_flight[broker] -= 1
        error = ErrorCode.NETWORK_EXCEPTION if reason == "connection_reset" else ErrorCode.REQUEST_TIMED_OUT
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
        self._finish(batch, "info" if batch.unknown else "fail", error, reason=reason)

    def _invoke(self, batch: PendingBatch) -> None:
        if not batch.invoked:
            batch.invoked = True
            self.history("invoke", {"f": "send", "op": batch.op, "partition": str(batch.tp),
                                    "values": batch.values, "acks": self.spec.acks})

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
        fields: dict[str, Any] = {"f": "send", "op": batch.op, "partition": str(batch.tp)}
        if offset is not None:
            fields["offset"] = offset
        if error is not None:
            fields["error"] = error.name
            fields["error_code"] = int(error)
        if reason:
            fields["reason"] = reason
        if batch.unknown and outcome == "info" and error is not None and "reason" not in fields:
            fields["reason"] = "outcome_unknown"
        self.history(outcome, fields)

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
                self._finish(batch, "info" if batch.unknown else "fail", ErrorCode.REQUEST_TIMED_OUT,
                             reason="run_ended")


class SimConsumer(SimClient):
    """Reads assigned partitions from the earliest offset, one fetch per leader at a time,
    recording each fetch as a ``poll`` operation."""

    def __init__(self, env, network, name, brokers, trace, partitions: list[TopicPartition],
                 max_wait_ms: int = 500, poll_interval_ms: int = 100, start_ms: int = 0,
                 request_timeout_ms: int = 30000, record_history: bool = True):
        super().__init__(env, network, name, brokers, trace, request_timeout_ms)
        self.partitions = sorted(partitions)
        self.positions = {tp: 0 for tp in self.partitions}
        self.max_wait_ms = max_wait_ms
        self.poll_interval_ms = poll_interval_ms
        self.record_history = record_history
        self._fetching: set[int] = set()
        self.consumed: dict[TopicPartition, list[tuple[int, str | None]]] = {tp: [] for tp in self.partitions}
        env.process(self._run(start_ms))

    def _run(self, start_ms: int):
        if start_ms:
            yield self.env.timeout(start_ms)
        self.refresh_metadata()
        while self.running:
            self._poll()
            yield self.env.timeout(self.poll_interval_ms)

    def stop(self) -> None:
        self.running = False

    def on_metadata(self) -> None:
        self._poll()

    def _poll(self) -> None:
        if not self.running:
            return
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in self.partitions:
            leader = self.leaders.get(tp, NO_LEADER)
            if leader == NO_LEADER:
                self.refresh_metadata()
                continue
            by_broker.setdefault(leader, []).append(tp)
        for broker in sorted(by_broker):
            if broker in self._fetching or not self.reachable(broker):
                continue
            tps = by_broker[broker]
            wanted = {tp: FetchPartition(self.positions[tp]) for tp in tps}
            op = self.new_op()
            if self.record_history:
                self.history("invoke", {"f": "poll", "op": op, "positions": {str(tp): self.positions[tp] for tp in tps}})
            self._fetching.add(broker)
            self.request(broker, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, self.max_wait_ms, 1, wanted),
                         (broker, op))

    def on_response(self, context, message: FetchResponse) -> None:
        broker, op = context
        self._fetching.discard(broker)
        records: dict[str, list] = {}
        errors: dict[str, str] = {}
        high_watermarks: dict[str, int] = {}
        for tp in sorted(message.partitions):
            result = message.partitions[tp]
            if result.error is ErrorCode.NONE:
                high_watermarks[str(tp)] = result.high_watermark
            if result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                errors[str(tp)] = result.error.name
                self.positions[tp] = max(result.log_start_offset, 0) if self.positions[tp] < result.log_start_offset else result.high_watermark
                continue
            if result.error is not ErrorCode.NONE:
                errors[str(tp)] = result.error.name
                self.leaders.pop(tp, None)
                continue
            got = _records_from(result.batches, self.positions[tp], None)
            if got:
                self.positions[tp] = got[-1][0] + 1
                records[str(tp)] = got
                self.consumed[tp].extend((o, v) for o, v in got)
        if self.record_history:
            fields: dict[str, Any] = {"f": "poll", "op": op, "records": records, "high_watermarks": high_watermarks}
            if errors:
                fields["errors"] = errors
            self.history("ok", fields)
        if errors:
            self.refresh_metadata()
        if records:
            self._poll()

    def on_timeout(self, context, reason: str = "client_timeout") -> None:
        broker, op = context
        self._fetching.discard(broker)
        if self.record_history:
            self.history("info", {"f": "poll", "op": op, "reason": reason})
        self.leaders = {tp: b for tp, b in self.leaders.items() if b != broker}
        self.refresh_metadata()


class SimReader(SimClient):
    """The final read: every partition from its log start up to its high watermark."""

    def __init__(self, env, network, name, brokers, trace, partitions: list[TopicPartition],
                 request_timeout_ms: int = 5000, retry_ms: int = 200):
        super().__init__(env, network, name, brokers, trace, request_timeout_ms)
        self.partitions = sorted(partitions)
        self.retry_ms = retry_ms
        self.results: dict[TopicPartition, list] = {}
        self._state: dict[TopicPartition, dict] = {}

    def run(self, deadline_ms: float):
        """A simpy process: read everything, or give up at ``deadline_ms``."""
        for tp in self.partitions:
            op = self.new_op()
            self.history("invoke", {"f": "read", "op": op, "partition": str(tp)})
            self._state[tp] = {"op": op, "end": None, "position": 0, "records": [], "busy": False, "done": False}
        self.refresh_metadata()
        while self.env.now < deadline_ms and not all(s["done"] for s in self._state.values()):
            for tp in self.partitions:
                self._step(tp)
            yield self.env.timeout(self.retry_ms)
        for tp in self.partitions:
            state = self._state[tp]
            if not state["done"]:
                self.history("info", {"f": "read", "op": state["op"], "partition": str(tp),
                                      "reason": "final_read_timed_out", "records": state["records"]})
        self.running = False

    def _step(self, tp: TopicPartition) -> None:
        state = self._state[tp]
        if state["done"] or state["busy"]:
            return
        leader = self.leaders.get(tp, NO_LEADER)
        if leader == NO_LEADER:
            self.refresh_metadata()
            return
        state["busy"] = True
        if state["end"] is None:
            self.request(leader, lambda cid: ListOffsetsRequest(cid, {tp: LATEST_TIMESTAMP}), ("end", tp))
        else:
            wanted = {tp: FetchPartition(state["position"])}
            self.request(leader, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, wanted), ("fetch", tp))

    def on_response(self, context, message) -> None:
        kind, tp = context
        state = self._state[tp]
        state["busy"] = False
        if kind == "end":
            error, offset = message.partitions[tp]
            if error is not ErrorCode.NONE:
                self.leaders.pop(tp, None)
                return
            state["end"] = offset
        else:
            result = message.partitions[tp]
            if result.error is ErrorCode.OFFSET_OUT_OF_RANGE and state["position"] < result.log_start_offset:
                state["position"] = result.log_start_offset
                return
            if result.error is not ErrorCode.NONE:
                self.leaders.pop(tp, None)
                return
            got = _records_from(result.batches, state["position"], state["end"])
            if got:
                state["records"].extend(got)
                state["position"] = got[-1][0] + 1
            if result.batches and state["position"] < result.batches[-1].next_offset:
                state["position"] = min(result.batches[-1].next_offset, state["end"])
        if state["position"] >= state["end"]:
            state["done"] = True
            self.results[tp] = state["records"]
            self.history("ok", {"f": "read", "op": state["op"], "partition": str(tp),
                                "records": state["records"], "high_watermark": state["end"]})
        else:
            self._step(tp)

    def on_timeout(self, context, reason: str = "client_timeout") -> None:
        _, tp = context
        self._state[tp]["busy"] = False
        self.leaders.pop(tp, None)
        self.refresh_metadata()


def _records_from(batches, position: int, end: int | None) -> list[tuple[int, str | None]]:
    """``(offset, value)`` for every record of ``batches`` at or after ``position`` (and
    before ``end``), in offset order; the trace writes each as ``[offset, value]``."""
    got: list[tuple[int, str | None]] = []
    for batch in batches:
        base = batch.base_offset
        low = max(position - base, 0)
        high = len(batch.records) if end is None else min(end - base, len(batch.records))
        if low < high:
            got.extend(zip(range(base + low, base + high), batch.records.values[low:high]))
    return got
