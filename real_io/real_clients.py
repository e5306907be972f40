"""Real Kafka clients (confluent-kafka, librdkafka) as a scenario's workload, recording
the simulation's Jepsen-style history (docs/trace-schema.md, Client history).

One ``send`` operation is one record (librdkafka reports delivery per record, not per
batch): ``invoke`` when the record is handed to the client, then ``ok`` with its offset
from the delivery report, ``fail`` only when Kafka certainly did not append it, or
``info``. Values, keys, partitions and the rate come from the shared workload
(analysis/workload.py, broker_core/partitioner.py), so a real run writes what a
simulated one would; the events and their fields are analysis/client_history.py's, the
final read's window rule analysis/read_records.py's, as in the simulation.

How librdkafka's outcomes map (the fail / info line is the simulation's):

| delivery report | history |
| --- | --- |
| no error | ``ok``, ``offset`` |
| a broker error that appends nothing (``is_definite_produce_failure``), no retries configured | ``fail`` |
| any other broker error, or one after retries | ``info``, ``outcome_unknown`` |
| ``_TRANSPORT`` (the connection broke with the request in flight) | ``info``, ``connection_reset`` |
| ``_MSG_TIMED_OUT`` (``message.timeout.ms``: queued or in flight, librdkafka does not say which) | ``info``, ``client_timeout`` |
| ``_PURGE_QUEUE`` at the end of the run, no retries configured (never sent) | ``fail``, ``run_ended`` |
| ``_PURGE_INFLIGHT``, or ``_PURGE_QUEUE`` with retries (it may be a retry) | ``info``, ``run_ended`` |
| acks=0 | ``info``, ``acks=0`` |
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Message, Producer, TopicPartition

from analysis.client_history import (
    ACKS_0, CLIENT_TIMEOUT, CONNECTION_RESET, INFO, INVOKE, OK, OUTCOME_UNKNOWN, READER, RUN_ENDED, completion_of,
    poll_invoke, poll_ok, read_gave_up, read_invoke, read_ok, send_completion, send_error_outcome, send_invoke)
from analysis.read_records import RecordList
from analysis.workload import RecordCredit, keyed_records, padded_value, record_value, unpadded_value
from broker_core.errors import ErrorCode
from broker_core.partitioner import make_partition_for_key, make_partitioner
from broker_core.types import TopicPartition as PartitionName  # confluent_kafka's TopicPartition is the client's

TraceFn = Callable[[str, str, dict], None]
# A down broker is expected, not news. Any: librdkafka's configuration takes callbacks
# (error_cb), which confluent_kafka's AdminClient stub leaves out of its value types.
QUIET: dict[str, Any] = {"log_level": 0, "error_cb": lambda _error: None}
UNUSED_GROUP = "isrlab-unused"  # librdkafka wants a group id; assign() never joins it


class RealProducer:
    """``spec`` is the scenario's ProducerWorkload (the layer above: used, not imported)."""

    def __init__(self, name: str, spec, partitions: int, bootstrap: str, trace: TraceFn, partitioner: str, rng,
                 workload_rng=None, client_id: str = "rdkafka"):
        """``workload_rng``: the stream of a keyed workload's uniform keys and tombstones,
        the simulation's (analysis/workload.py workload_label); ``client_id`` its
        client.id (analysis/workload.py client_id), what client quotas name."""
        self.name = name
        self.spec = spec
        self.partitions = partitions
        self.trace = trace
        self._partitioner = make_partitioner(partitioner, rng)
        self._partition_for_key = make_partition_for_key(partitions)
        self._keyed = keyed_records(name, spec, workload_rng)
        self._seq = 0
        self._op = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": str(spec.acks), "linger.ms": spec.linger_ms,
            "message.send.max.retries": spec.retries, "retry.backoff.ms": spec.retry_backoff_ms,
            "request.timeout.ms": spec.request_timeout_ms, "message.timeout.ms": spec.delivery_timeout_ms,
            "enable.idempotence": spec.enable_idempotence, "max.in.flight.requests.per.connection": 5,
            "reconnect.backoff.max.ms": 1000, "partitioner": "murmur2_random", "client.id": client_id, **QUIET})
        self.running = True

    def run(self, started: float, until: Callable[[], bool]) -> None:
        """Create records at the workload's rate from ``started`` (monotonic seconds),
        one tick per ``linger_ms``, until ``until()``; late ticks catch up."""
        spec = self.spec
        credit = RecordCredit(spec.rate, spec.linger_ms)
        begin = started + spec.start_ms / 1000.0
        ticks = 0
        while self.running and not until():
            now = time.monotonic()
            elapsed_ms = (now - begin) * 1000.0
            if elapsed_ms >= 0 and (spec.stop_ms is None or spec.start_ms + elapsed_ms < spec.stop_ms):
                due = int(elapsed_ms // spec.linger_ms) + 1
                count = 0
                while ticks < due:
                    count += credit.take()
                    ticks += 1
                if self._keyed is not None and self._keyed.scripted:
                    count = self._keyed.due(spec.start_ms + elapsed_ms)
                if count:
                    self._produce(count)
            self.producer.poll(0)
            time.sleep(spec.linger_ms / 1000.0)

    def _produce(self, count: int) -> None:
        spec = self.spec
        n = self.partitions
        every = list(range(n))
        sticky = None
        if self._keyed is None and self._partitioner.name == "sticky":  # one batch per tick, as simulated
            sticky = self._partitioner.on_new_batch(n, every, self._partitioner.partition(n, every))
        for _ in range(count):
            self._seq += 1
            seq = self._seq
            if self._keyed is not None:
                key, value = self._keyed.record(seq)
                self._send(self._partition_for_key(key), key, value)
                continue
            partition = sticky if sticky is not None else self._partitioner.partition(n, every)
            self._send(partition, None, record_value(self.name, seq))

    def _send(self, partition: int, key: str | None, value: str | None) -> None:
        """One record; ``value`` None is a tombstone (librdkafka sends a null value). The
        value sent is padded to ``record_bytes``; the history names it unpadded."""
        self._op += 1
        op = self._op
        where = str(PartitionName(self.spec.topic, partition))
        sent = padded_value(value, self.spec.record_bytes)
        try:
            self.producer.produce(self.spec.topic, None if sent is None else sent.encode(),
                                  None if key is None else key.encode(), partition,
                                  on_delivery=lambda error, message: self._delivered(op, where, error, message))
        except BufferError:
            return  # the client's queue is full: the record never existed for Kafka
        self.trace(self.name, INVOKE, send_invoke(op, where, [value], self.spec.acks, None if key is None else [key]))

    def _delivered(self, op: int, partition: str, error: KafkaError | None, message) -> None:
        if self.spec.acks == 0:
            self.trace(self.name, INFO, send_completion(op, partition, reason=ACKS_0))
            return
        if error is None:
            self.trace(self.name, OK, send_completion(op, partition, message.offset()))
            return
        outcome, extra = classify_send_error(error.code(), error.name(), self.spec.acks, self.spec.retries)
        self.trace(self.name, outcome, send_completion(op, partition, **extra))

    def finish(self, flush_s: float) -> None:
        """The end of the workload: wait up to ``flush_s`` for what is in flight, then give
        up on the rest (each record still gets its outcome)."""
        self.running = False
        self.producer.flush(flush_s)
        self.producer.purge(in_queue=True, in_flight=True, blocking=True)
        self.producer.flush(5.0)


def _error(code: ErrorCode, reason: str, client_error: str) -> dict:
    return {"error": code.name, "error_code": int(code), "reason": reason, "client_error": client_error}


def classify_send_error(code: int, name: str, acks: int, retries: int) -> tuple[str, dict]:
    """``(outcome, fields)`` of a failed delivery report (the keyword arguments of
    analysis.client_history.send_completion): ``fail`` only when Kafka certainly did not
    append the record. With retries librdkafka may have retried after an attempt whose
    outcome is unknown, as the simulated producer's batch.unknown records."""
    if code == KafkaError._TRANSPORT:
        return INFO, _error(ErrorCode.NETWORK_EXCEPTION, CONNECTION_RESET, name)
    if code in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT):
        return INFO, _error(ErrorCode.REQUEST_TIMED_OUT, CLIENT_TIMEOUT, name)
    if code in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
        never_sent = code == KafkaError._PURGE_QUEUE and retries == 0
        return completion_of(not never_sent), _error(ErrorCode.REQUEST_TIMED_OUT, RUN_ENDED, name)
    try:
        broker_error = ErrorCode(code)
    except ValueError:
        return INFO, {"error": name, "error_code": code, "reason": OUTCOME_UNKNOWN}
    outcome = send_error_outcome(broker_error, acks, unknown_before=retries > 0)
    fields: dict = {"error": broker_error.name, "error_code": code}
    if outcome == INFO:
        fields["reason"] = OUTCOME_UNKNOWN
    return outcome, fields


class RealConsumer:
    """Reads every partition of its topic with ``assign`` (no group, no commits), from
    where ``auto_offset_reset`` or ``start_offset`` puts it; one ``poll`` operation per
    ``consume`` call that returned anything or failed."""

    def __init__(self, name: str, spec, partitions: int, bootstrap: str, trace: TraceFn,
                 client_id: str = "rdkafka"):
        self.name = name
        self.spec = spec
        self.trace = trace
        start = spec.start_offset if spec.start_offset is not None else (
            OFFSET_BEGINNING if spec.auto_offset_reset == "earliest" else OFFSET_END)
        self.topic_partitions = [TopicPartition(spec.topic, p, start) for p in range(partitions)]
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP,
                                  "enable.auto.commit": False, "auto.offset.reset": spec.auto_offset_reset,
                                  "reconnect.backoff.max.ms": 1000, "client.id": client_id, **QUIET})
        self.consumer.assign(self.topic_partitions)
        self.positions: dict[str, int] = {}  # the next offset per partition, from what was read
        self._op = 0
        self.running = True

    def run(self, started: float) -> None:
        wait = started + self.spec.start_ms / 1000.0 - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        while self.running:
            self.poll_once()
            time.sleep(self.spec.poll_interval_ms / 1000.0)

    def poll_once(self) -> None:
        positions = dict(self.positions)
        messages = self.consumer.consume(500, 0.2)
        records: dict[str, list] = {}
        keys: dict[str, list] = {}
        errors: dict[str, str] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue  # librdkafka looks up the unused group's coordinator once
                topic, index = message.topic(), message.partition()
                if topic is not None and index is not None and index >= 0:
                    errors[str(PartitionName(topic, index))] = error.name()
                continue
            where = _record_position(message)
            if where is None:
                continue
            partition, offset = where
            value, key = message.value(), message.key()
            got = records.setdefault(partition, [])
            if key is not None or partition in keys:
                keys.setdefault(partition, [None] * len(got)).append(key.decode() if key is not None else None)
            got.append([offset, None if value is None else unpadded_value(value.decode())])
            self.positions[partition] = offset + 1
        if not records and not errors:
            return
        self._op += 1
        self.trace(self.name, INVOKE, poll_invoke(self._op, positions))
        self.trace(self.name, OK, poll_ok(self._op, records, self._high_watermarks(records), errors, keys))

    def _high_watermarks(self, records: dict[str, list]) -> dict[str, int]:
        """For the partitions that returned records: the high watermark of the latest fetch
        response librdkafka cached (it keeps the one each fetch response carries)."""
        out = {}
        for partition in sorted(records):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(*PartitionName.parse(partition)), cached=True)
            if high >= 0:
                out[partition] = high
        return out

    def is_behind(self, partition: str, end: int) -> bool:
        return self.positions.get(partition, 0) < end

    def close(self) -> None:
        self.running = False
        self.consumer.close()


def _record_position(message: Message) -> tuple[str, int] | None:
    """A record's partition (by name) and offset. librdkafka's Message types them as
    Optional, for its error events; a message without an error (a record) has both."""
    topic, index, offset = message.topic(), message.partition(), message.offset()
    if topic is None or index is None or offset is None:
        return None
    return str(PartitionName(topic, index)), offset


def final_read(bootstrap: str, partitions: list[str], trace: TraceFn, deadline: float) -> dict[str, tuple]:
    """Every partition from its log start up to the high watermark found at the start of
    the read (``reader`` operations); returns partition -> (log start, high watermark,
    records) for the partitions read completely."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP, "enable.auto.commit": False,
                         "reconnect.backoff.max.ms": 1000, **QUIET})
    ops = {}
    for op, name in enumerate(partitions, 1):
        trace(READER, INVOKE, read_invoke(op, name))
        ops[name] = op
    reads: dict[str, RecordList] = {}  # the partitions whose watermarks were found
    try:
        for name in partitions:
            ends = _watermarks(consumer, TopicPartition(*PartitionName.parse(name)), deadline)
            if ends is not None:
                reads[name] = RecordList(*ends)
        wanted = [name for name in partitions if name in reads and not reads[name].complete]
        consumer.assign([TopicPartition(*PartitionName.parse(name), OFFSET_BEGINNING) for name in wanted])
        while time.monotonic() < deadline and not all(reads[name].complete for name in wanted):
            for message in consumer.consume(500, 0.2):
                where = _record_position(message) if message.error() is None else None
                read = reads.get(where[0]) if where is not None else None
                if where is not None and read is not None:
                    value, key = message.value(), message.key()
                    read.add(where[1], None if value is None else unpadded_value(value.decode()),
                             None if key is None else key.decode())
    finally:
        consumer.close()
    return _read_outcomes(partitions, ops, reads, trace)


def _read_outcomes(partitions: list[str], ops: dict[str, int], reads: dict[str, RecordList],
                   trace: TraceFn) -> dict[str, tuple]:
    """Each partition's ``ok`` or ``info``; the complete ones' (log start, high watermark, records)."""
    done = {}
    for name in partitions:
        read = reads.get(name)
        if read is not None and read.complete:
            done[name] = (read.log_start, read.end, read.records)
            trace(READER, OK, read_ok(ops[name], name, read.records, read.end, read.keys))
        else:
            trace(READER, INFO, read_gave_up(ops[name], name, read.records if read is not None else [],
                                             read.keys if read is not None else None))
    return done


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int] | None:
    while time.monotonic() < deadline:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=5.0)
            if low >= 0 and high >= 0:
                return low, high
        except Exception:  # KafkaException: the broker is not answering yet
            pass
        time.sleep(0.2)
    return None


class Worker(threading.Thread):
    """A thread of the run whose exception is kept, so that a bug in a client or in the
    schedule fails the run (exit 3) instead of quietly stopping that part of it."""

    def __init__(self, target, args):
        super().__init__(daemon=True)
        self._call = (target, args)
        self.error: BaseException | None = None

    def run(self) -> None:
        target, args = self._call
        try:
            target(*args)
        except BaseException as error:  # kept for join_all to raise in the run's thread
            self.error = error


def start_thread(target, *args) -> Worker:
    worker = Worker(target, args)
    worker.start()
    return worker


def join_all(workers: list[Worker]) -> None:
    """Wait for every worker; raise the first one's exception."""
    for worker in workers:
        worker.join()
    for worker in workers:
        if worker.error is not None:
            raise RuntimeError(f"{worker.name} failed: {type(worker.error).__name__}: {worker.error}") \
                from worker.error
