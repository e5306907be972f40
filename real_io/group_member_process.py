"""One real consumer-group member of a scenario run, in a process of its own: a
confluent-kafka (librdkafka) Consumer with ``group.id`` that subscribes, polls,
processes and commits as the scenario's ``commit:`` and ``processing:`` say
(analysis/group_application.py, the steps the simulated member follows too), and
writes the group history (analysis/group_history.py) as JSON lines on its standard
output: ``{"t": <time.monotonic()>, "type": ..., "fields": {...}}``, and between them,
whenever it changes, the member's state for the run's triggers (faults/triggers.py):
``{"t": ..., "state": {"processing": bool, "consumed": int, "generation": int}}``
(``processing``: within a batch's ``processing`` ms; ``consumed``: records handed to
the application so far; ``generation``: -1 when in none). The run
(real_io/real_groups.py) reads them onto its clock; CLOCK_MONOTONIC is one clock for
every process of the machine.

Why a process: librdkafka heartbeats from threads of its own, so only a signal to the
whole process stops a member the way the simulation's pause does (SIGSTOP: no poll,
no heartbeat, nothing sent) and only SIGKILL ends it the way its crash does (no
LeaveGroup, no last commit, whatever was in flight lost).

Standard input takes two commands. ``go <monotonic time>``: subscribe and begin at
that time (the run starts the processes before its clients, so that their start-up is
not on the scenario's clock). ``stop`` (the final phase): the application hands over a
batch it committed but has not processed yet, then the process exits without closing
the consumer (a stop is not a leave, as in the simulation).

Run as ``python -m real_io.group_member_process '<json spec>'`` (real_io/real_groups.py
``member_spec`` writes the spec).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from analysis import group_history as gh
from analysis.client_history import CLIENT_TIMEOUT, CONNECTION_RESET, INVOKE
from analysis.group_application import (
    COMMIT_SYNC, CONSUME, WORK, batch_ends, batch_steps, in_hand_after)
from broker_core.types import TopicPartition as PartitionName  # confluent_kafka's TopicPartition is the client's

NO_GENERATION = -1
CGMD_MAGIC = b"CGMDv2:"  # librdkafka's rd_kafka_consumer_group_metadata_write
LOOKUP_TIMEOUT_S = 30.0  # how long a new assignment's positions are looked up before librdkafka is left to it


class Output:
    """The history, one JSON line per event, flushed at once: a SIGKILL loses at most the
    line being written (the run drops a line cut short)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, type_: str, fields: dict) -> None:
        self._write({"t": time.monotonic(), "type": type_, "fields": fields})

    def state(self, processing: bool, consumed: int, generation: int) -> None:
        """The member's state line (not history: the run's triggers read it)."""
        self._write({"t": time.monotonic(), "state": {"processing": processing, "consumed": consumed,
                                                      "generation": generation}})

    def _write(self, content: dict) -> None:
        line = json.dumps(content, separators=(",", ":"))
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def parse_group_metadata(raw: bytes) -> tuple[int, str] | None:
    """(generation, member id) from librdkafka's serialized consumer group metadata:
    the magic, the generation as a native int32, then NUL-terminated group and member
    ids. confluent-kafka exposes the generation nowhere else."""
    if not raw.startswith(CGMD_MAGIC) or len(raw) < len(CGMD_MAGIC) + 4:
        return None
    at = len(CGMD_MAGIC)
    generation = int.from_bytes(raw[at:at + 4], sys.byteorder, signed=True)
    parts = raw[at + 4:].split(b"\0")
    if len(parts) < 2:
        return None
    return generation, parts[1].decode(errors="replace")


def librdkafka_config(spec: dict, on_commit) -> dict[str, Any]:
    """The member's librdkafka settings from the scenario's entry. Offsets are stored by
    the application once it has processed a batch (``enable.auto.offset.store`` false),
    so that auto-commit commits what was processed, as the Java consumer's auto-commit
    does at the poll after the batch; librdkafka would store them as poll returns them."""
    config: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "client.id": spec["client_id"],
        "session.timeout.ms": spec["session_timeout_ms"], "heartbeat.interval.ms": spec["heartbeat_interval_ms"],
        "max.poll.interval.ms": max(spec["max_poll_interval_ms"], spec["session_timeout_ms"]),
        "partition.assignment.strategy": ",".join(spec["assignors"]),
        "enable.auto.commit": spec["commit"] == "auto", "enable.auto.offset.store": False,
        "auto.commit.interval.ms": spec["auto_commit_interval_ms"], "auto.offset.reset": spec["auto_offset_reset"],
        "retry.backoff.ms": spec["retry_backoff_ms"], "reconnect.backoff.max.ms": 1000,
        "on_commit": on_commit, "log_level": 0, "error_cb": lambda _error: None}
    if spec["static"]:
        config["group.instance.id"] = spec["name"]
    return config


class Member:
    def __init__(self, spec: dict, out: Output) -> None:
        self.spec, self.out = spec, out
        self.group = spec["group"]
        self.generation, self.member_id = NO_GENERATION, ""
        self.stopping = threading.Event()
        self.go = threading.Event()
        self.start_at = 0.0  # from the go command
        self._op = 0
        self._async: list[tuple[int, str, dict[str, int]]] = []  # async commits (op, mode, offsets) not yet answered
        self._retries: list[tuple[float, dict[str, int]]] = []  # failed async commits to send again
        self._in_hand: dict[str, list[int]] = {}  # committed, not yet processed
        self.processing = False  # within a batch's processing ms (the state line's)
        self.consumed = 0
        self.consumer: Consumer  # made at go: a consumer looks for its coordinator as soon as it exists

    # -- the application ---------------------------------------------------------------
    def run(self) -> None:
        while not self.go.wait(0.05):
            if self.stopping.is_set():
                return
        # librdkafka asks a failed FindCoordinator again only a second later: made before
        # the run found the coordinator ready, the consumer could start that much late
        self.consumer = Consumer(librdkafka_config(self.spec, self._on_commit))
        wait = self.start_at - time.monotonic()
        if wait > 0 and self.stopping.wait(wait):
            return
        self.consumer.subscribe(list(self.spec["topics"]), on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        poll_s = self.spec["poll_interval_ms"] / 1000.0
        while not self.stopping.is_set():
            self._send_retries()
            batch = self._batch(self.consumer.consume(self.spec["max_poll_records"], poll_s))
            if batch:
                self._process(batch)
        if self._in_hand:  # stopped between the commit and the processing: not a crash
            self._hand_over(self._in_hand)

    def _batch(self, messages) -> dict[str, list[int]]:
        batch: dict[str, list[int]] = {}
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():  # librdkafka stops the consumer, as the Java consumer throws
                    self.out(gh.GROUP_MEMBER_FAILED, gh.member_failed(self.group, self.member_id, error.name()))
                    self.stopping.set()
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is not None and partition is not None and offset is not None:
                batch.setdefault(str(PartitionName(topic, partition)), []).append(offset)
        return batch

    def _process(self, batch: dict[str, list[int]]) -> None:
        steps = batch_steps(self.spec["commit"])
        ends = batch_ends(batch)
        for index, step in enumerate(steps):
            if step == CONSUME:
                self._hand_over(batch)
            elif step == WORK:
                self._tell_state(processing=True)
                stopped = self.stopping.wait(self.spec["processing_ms"] / 1000.0)
                self._tell_state(processing=False)
                if stopped:
                    return  # the run stops its members: no commit after this
            else:
                if step == COMMIT_SYNC:
                    self._commit_sync(ends, gh.SYNC)
                else:
                    self._commit_async(ends, gh.ASYNC)
                if in_hand_after(steps, index):
                    self._in_hand = batch
        if self.spec["commit"] == "auto":  # processed: what the next auto-commit takes
            self._store(ends)

    def _hand_over(self, batch: dict[str, list[int]]) -> None:
        self._in_hand = {}
        for partition in sorted(batch):
            self.out(gh.GROUP_CONSUMED, gh.consumed(self.group, self.member_id, self.generation, partition,
                                                    batch[partition]))
        self.consumed += sum(len(offsets) for offsets in batch.values())
        self._tell_state()

    def _tell_state(self, processing: bool | None = None) -> None:
        if processing is not None:
            self.processing = processing
        self.out.state(self.processing, self.consumed, self.generation)

    def _store(self, ends: dict[str, int]) -> None:
        try:
            self.consumer.store_offsets(offsets=_partitions(ends))
        except KafkaException:
            pass  # a partition revoked meanwhile: librdkafka refuses to store it, as Java would not commit it

    # -- commits -----------------------------------------------------------------------
    def _invoke(self, mode: str, offsets: dict[str, int]) -> int:
        self._op += 1
        self.out(INVOKE, gh.commit_invoke(self._op, self.group, self.member_id, self.generation, mode, offsets))
        return self._op

    def _complete(self, op: int, committed: dict[str, int], errors: dict[str, str], reason: str | None = None) -> str:
        outcome = gh.commit_outcome(errors)
        self.out(outcome, gh.commit_completion(op, self.group, committed, errors, reason))
        return outcome

    def _commit_sync(self, ends: dict[str, int], mode: str) -> None:
        op = self._invoke(mode, ends)
        try:
            answered = self.consumer.commit(offsets=_partitions(ends), asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            self._complete(op, {}, {p: error.name() for p in ends}, _reason(error))
            return
        self._complete(op, *_split(answered or []))

    def _commit_async(self, ends: dict[str, int], mode: str) -> None:
        op = self._invoke(mode, ends)
        try:
            self.consumer.commit(offsets=_partitions(ends), asynchronous=True)
        except KafkaException as exc:  # refused before it was sent
            error = exc.args[0]
            self._failed_async(self._complete(op, {}, {p: error.name() for p in ends}, _reason(error)), mode, ends)
            return
        self._async.append((op, mode, ends))

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to a commit: an async one of ours (matched by its offsets,
        else the oldest), or an auto-commit (invoked and answered here: librdkafka
        does not say when it sent it). Sync commits are answered in ``_commit_sync``."""
        offsets = {_name(tp): tp.offset for tp in partitions}
        if self._async:
            match = next((i for i, (_, _, sent) in enumerate(self._async) if sent == offsets), 0)
            op, mode, sent = self._async.pop(match)
        elif self.spec["commit"] == "auto":
            if error is not None and error.code() == KafkaError._NO_OFFSET:
                return  # nothing stored since the last one: nothing sent
            op, sent, mode = self._invoke(gh.AUTO, offsets), offsets, gh.AUTO
        else:
            return
        if error is not None and not any(tp.error is not None for tp in partitions):
            outcome = self._complete(op, {}, {p: error.name() for p in sent}, _reason(error))
        else:
            outcome = self._complete(op, *_split(partitions))
        self._failed_async(outcome, mode, sent)

    def _failed_async(self, outcome: str, mode: str, ends: dict[str, int]) -> None:
        """seed 003's application: a failed async commit sent again, unchecked, after
        retry.backoff.ms (only the async one, not the retry)."""
        if outcome != gh.commit_outcome({}) and mode == gh.ASYNC and self.spec["retry_failed_commits"]:
            self._retries.append((time.monotonic() + self.spec["retry_backoff_ms"] / 1000.0, ends))

    def _send_retries(self) -> None:
        now = time.monotonic()
        due = [ends for at, ends in self._retries if at <= now]
        self._retries = [(at, ends) for at, ends in self._retries if at > now]
        for ends in due:
            self._commit_async(ends, gh.RETRY)

    # -- the group's callbacks (on the application's thread, inside consume) -----------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        identity = parse_group_metadata(bytes(consumer.consumer_group_metadata()))
        self.generation, self.member_id = identity if identity is not None else (NO_GENERATION, consumer.memberid())
        assignors = self.spec["assignors"]
        # librdkafka names neither the group's leader nor the protocol the group chose
        self.out(gh.GROUP_JOINED, gh.joined(self.group, self.member_id, self.generation, None,
                                            assignors[0] if len(assignors) == 1 else None))
        self.out(gh.GROUP_ASSIGNED, gh.assigned(self.group, self.member_id, self.generation,
                                                sorted(_name(tp) for tp in partitions)))
        self._tell_state()
        consumer.assign(self._positions(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.out(gh.GROUP_REVOKED, gh.revoked(self.group, self.member_id, self.generation,
                                              sorted(_name(tp) for tp in partitions), "rebalance"))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.generation = NO_GENERATION
        self.out(gh.GROUP_REVOKED, gh.revoked(self.group, self.member_id, NO_GENERATION,
                                              sorted(_name(tp) for tp in partitions), "lost"))
        self._tell_state()

    def _positions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Where each assigned partition is read from, looked up as the consumer would
        (the group's commit, else ``auto.offset.reset`` at the partition's log start or
        end) and assigned explicitly, so that the history names the position exactly."""
        deadline = time.monotonic() + LOOKUP_TIMEOUT_S
        while not self.stopping.is_set() and partitions:
            try:
                committed = self.consumer.committed(partitions, timeout=5.0)
                if all(tp.error is None for tp in committed):
                    return [self._position(tp) for tp in committed]
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return partitions  # librdkafka looks them up itself; the history names no position

    def _position(self, tp: TopicPartition) -> TopicPartition:
        if tp.offset >= 0:
            offset, reason = tp.offset, "committed"
        else:
            reason = self.spec["auto_offset_reset"]
            try:
                low, high = self.consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=5.0)
            except KafkaException:
                return TopicPartition(tp.topic, tp.partition)  # the reset is librdkafka's; no position named
            offset = low if reason == "earliest" else high
        self.out(gh.GROUP_POSITION, gh.position(self.group, self.member_id, self.generation, _name(tp), offset,
                                                reason))
        return TopicPartition(tp.topic, tp.partition, offset)


def _name(tp: TopicPartition) -> str:
    return str(PartitionName(tp.topic, tp.partition))


def _partitions(offsets: dict[str, int]) -> list[TopicPartition]:
    return [TopicPartition(*PartitionName.parse(name), offset) for name, offset in sorted(offsets.items())]


def _split(answered: list[TopicPartition]) -> tuple[dict[str, int], dict[str, str]]:
    """A commit's answer per partition: those stored (NONE) and the others' error names."""
    committed = {_name(tp): tp.offset for tp in answered if tp.error is None}
    errors = {_name(tp): tp.error.name() for tp in answered if tp.error is not None}
    return committed, errors


def _reason(error: KafkaError) -> str | None:
    """Why a commit got no answer, in the client history's words."""
    if error.code() in (KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT):
        return CLIENT_TIMEOUT
    if error.code() == KafkaError._TRANSPORT:
        return CONNECTION_RESET
    return None


def _listen(member: Member) -> None:
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["go"] and len(words) == 2:
            member.start_at = float(words[1])
            member.go.set()
        elif words == ["stop"]:
            break
    member.stopping.set()  # "stop", or the run's end of the pipe closed


def main(argv: list[str]) -> int:
    member = Member(json.loads(argv[1]), Output(sys.stdout))
    threading.Thread(target=_listen, args=(member,), daemon=True).start()
    member.run()
    sys.stdout.flush()
    os._exit(0)  # without closing the consumer: no LeaveGroup, no last commit (a stop, as simulated)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
