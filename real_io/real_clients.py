"""Real Kafka clients (confluent-kafka, librdkafka) as a scenario's workload, recording
the simulation's Jepsen-style history (docs/trace-schema.md, Client history).

One ``send`` operation is one record (librdkafka reports delivery per record, not per
batch): ``invoke`` when the record is handed to the client, then ``ok`` with its offset
from the delivery report, ``fail`` only when Kafka certainly did not append it, or
``info``. Values, keys, partitions and the rate come from the shared workload
(analysis/workload.py, broker_core/partitioner.py), so a real run writes what a
simulated one would.

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
from typing import Callable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Producer, TopicPartition

from analysis.workload import RecordCredit, record_key, record_value
from broker_core.errors import ErrorCode, is_definite_produce_failure
from broker_core.partitioner import make_partition_for_key, make_partitioner
from broker_core.types import TopicPartition as PartitionName  # confluent_kafka's TopicPartition is the client's

TraceFn = Callable[[str, str, dict], None]
QUIET = {"log_level": 0, "error_cb": lambda _error: None}  # a down broker is expected, not news
UNUSED_GROUP = "isrlab-unused"  # librdkafka wants a group id; assign() never joins it


def _error_fields(code: int, name: str) -> dict:
    return {"error": name, "error_code": code}


class RealProducer:
    """``spec`` is the scenario's ProducerWorkload (the layer above: used, not imported)."""

    def __init__(self, name: str, spec, partitions: int, bootstrap: str, trace: TraceFn, partitioner: str, rng):
        self.name = name
        self.spec = spec
        self.partitions = partitions
        self.trace = trace
        self._partitioner = make_partitioner(partitioner, rng)
        self._partition_for_key = make_partition_for_key(partitions)
        self._seq = 0
        self._op = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": str(spec.acks), "linger.ms": spec.linger_ms,
            "message.send.max.retries": spec.retries, "retry.backoff.ms": spec.retry_backoff_ms,
            "request.timeout.ms": spec.request_timeout_ms, "message.timeout.ms": spec.delivery_timeout_ms,
            "enable.idempotence": spec.enable_idempotence, "max.in.flight.requests.per.connection": 5,
            "reconnect.backoff.max.ms": 1000, "partitioner": "murmur2_random", **QUIET})
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
                if count:
                    self._produce(count)
            self.producer.poll(0)
            time.sleep(spec.linger_ms / 1000.0)

    def _produce(self, count: int) -> None:
        spec = self.spec
        n = self.partitions
        every = list(range(n))
        sticky = None
        if not spec.keys and self._partitioner.name == "sticky":  # one batch per tick, as simulated
            sticky = self._partitioner.on_new_batch(n, every, self._partitioner.partition(n, every))
        for _ in range(count):
            self._seq += 1
            seq = self._seq
            key = record_key(seq, spec.keys) if spec.keys else None
            if key is not None:
                partition = self._partition_for_key(key)
            else:
                partition = sticky if sticky is not None else self._partitioner.partition(n, every)
            value = record_value(self.name, seq)
            self._send(partition, key, value)

    def _send(self, partition: int, key: str | None, value: str) -> None:
        self._op += 1
        op = self._op
        where = str(PartitionName(self.spec.topic, partition))
        try:
            self.producer.produce(self.spec.topic, value.encode(), key.encode() if key else None, partition,
                                  on_delivery=lambda error, message: self._delivered(op, where, error, message))
        except BufferError:
            return  # the client's queue is full: the record never existed for Kafka
        self.trace(self.name, "invoke", {"f": "send", "op": op, "partition": where, "values": [value],
                                         "acks": self.spec.acks})

    def _delivered(self, op: int, partition: str, error: KafkaError | None, message) -> None:
        fields = {"f": "send", "op": op, "partition": partition}
        if self.spec.acks == 0:
            self.trace(self.name, "info", {**fields, "reason": "acks=0"})
            return
        if error is None:
            self.trace(self.name, "ok", {**fields, "offset": message.offset()})
            return
        outcome, extra = classify_send_error(error.code(), error.name(), self.spec.acks, self.spec.retries)
        self.trace(self.name, outcome, {**fields, **extra})

    def finish(self, flush_s: float) -> None:
        """The end of the workload: wait up to ``flush_s`` for what is in flight, then give
        up on the rest (each record still gets its outcome)."""
        self.running = False
        self.producer.flush(flush_s)
        self.producer.purge(in_queue=True, in_flight=True, blocking=True)
        self.producer.flush(5.0)


def classify_send_error(code: int, name: str, acks: int, retries: int) -> tuple[str, dict]:
    """``(outcome, fields)`` of a failed delivery report: ``fail`` only when Kafka
    certainly did not append the record."""
    if code == KafkaError._TRANSPORT:
        return "info", {**_error_fields(int(ErrorCode.NETWORK_EXCEPTION), "NETWORK_EXCEPTION"),
                        "reason": "connection_reset", "client_error": name}
    if code in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT):
        return "info", {**_error_fields(int(ErrorCode.REQUEST_TIMED_OUT), "REQUEST_TIMED_OUT"),
                        "reason": "client_timeout", "client_error": name}
    if code in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
        never_sent = code == KafkaError._PURGE_QUEUE and retries == 0
        return ("fail" if never_sent else "info"), {
            **_error_fields(int(ErrorCode.REQUEST_TIMED_OUT), "REQUEST_TIMED_OUT"), "reason": "run_ended",
            "client_error": name}
    try:
        broker_error = ErrorCode(code)
    except ValueError:
        return "info", {**_error_fields(code, name), "reason": "outcome_unknown"}
    if retries == 0 and is_definite_produce_failure(broker_error, acks):
        return "fail", _error_fields(code, broker_error.name)
    return "info", {**_error_fields(code, broker_error.name), "reason": "outcome_unknown"}


class RealConsumer:
    """Reads every partition of its topic with ``assign`` (no group, no commits), from
    where ``auto_offset_reset`` or ``start_offset`` puts it; one ``poll`` operation per
    ``consume`` call that returned anything or failed."""

    def __init__(self, name: str, spec, partitions: int, bootstrap: str, trace: TraceFn):
        self.name = name
        self.spec = spec
        self.trace = trace
        start = spec.start_offset if spec.start_offset is not None else (
            OFFSET_BEGINNING if spec.auto_offset_reset == "earliest" else OFFSET_END)
        self.topic_partitions = [TopicPartition(spec.topic, p, start) for p in range(partitions)]
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP,
                                  "enable.auto.commit": False, "auto.offset.reset": spec.auto_offset_reset,
                                  "reconnect.backoff.max.ms": 1000, **QUIET})
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
        errors: dict[str, str] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue  # librdkafka looks up the unused group's coordinator once
                if message.partition() is not None and message.partition() >= 0:
                    errors[str(PartitionName(message.topic(), message.partition()))] = error.name()
                continue
            partition = str(PartitionName(message.topic(), message.partition()))
            value = message.value()
            records.setdefault(partition, []).append([message.offset(), None if value is None else value.decode()])
            self.positions[partition] = message.offset() + 1
        if not records and not errors:
            return
        self._op += 1
        self.trace(self.name, "invoke", {"f": "poll", "op": self._op, "positions": positions})
        fields = {"f": "poll", "op": self._op, "records": records, "high_watermarks": self._high_watermarks(records)}
        if errors:
            fields["errors"] = errors
        self.trace(self.name, "ok", fields)

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


def final_read(bootstrap: str, partitions: list[str], trace: TraceFn, deadline: float) -> dict[str, tuple]:
    """Every partition from its log start up to the high watermark found at the start of
    the read (``reader`` operations); returns partition -> (log start, high watermark,
    records) for the partitions read completely."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP, "enable.auto.commit": False,
                         "reconnect.backoff.max.ms": 1000, **QUIET})
    state = {}
    for op, name in enumerate(partitions, 1):
        trace("reader", "invoke", {"f": "read", "op": op, "partition": name})
        state[name] = {"op": op, "records": [], "ends": None}
    try:
        for name in partitions:
            state[name]["ends"] = _watermarks(consumer, TopicPartition(*PartitionName.parse(name)), deadline)
        wanted = [name for name in partitions if state[name]["ends"] and state[name]["ends"][1] > state[name]["ends"][0]]
        consumer.assign([TopicPartition(*PartitionName.parse(name), OFFSET_BEGINNING) for name in wanted])
        while time.monotonic() < deadline and any(_position(state[n]) < state[n]["ends"][1] for n in wanted):
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    continue
                name = str(PartitionName(message.topic(), message.partition()))
                entry = state[name]
                if entry["ends"] and _position(entry) <= message.offset() < entry["ends"][1]:
                    value = message.value()
                    entry["records"].append([message.offset(), None if value is None else value.decode()])
    finally:
        consumer.close()
    done = {}
    for name in partitions:
        entry = state[name]
        if entry["ends"] is not None and _position(entry) >= entry["ends"][1]:
            done[name] = (entry["ends"][0], entry["ends"][1], entry["records"])
            trace("reader", "ok", {"f": "read", "op": entry["op"], "partition": name, "records": entry["records"],
                                   "high_watermark": entry["ends"][1]})
        else:
            trace("reader", "info", {"f": "read", "op": entry["op"], "partition": name,
                                     "reason": "final_read_timed_out", "records": entry["records"]})
    return done


def _position(entry: dict) -> int:
    records = entry["records"]
    return records[-1][0] + 1 if records else entry["ends"][0]


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
