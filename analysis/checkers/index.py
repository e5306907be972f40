"""One pass over a history that every checker shares: operations by kind, the final
reads, and which sends and poll results the final read confirms.

Confirming is the hot path of the write and read checkers, so it is done once, here,
with one comparison per operation decided in C (a list slice and an equality, no
Python loop per value). What is confirmed is kept as a flag per offset; the checkers
then look value by value only at what was not confirmed, which is small in a sound run
and proportional to the anomalies otherwise."""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from analysis.checkers.final_read import ABSENT, FinalRead, final_read
from analysis.history import History, Operation
from analysis.trace import Event

__all__ = ["ABSENT", "FinalRead", "RunIndex", "build_index", "send_parts", "send_witness", "poll_witness"]

_second = itemgetter(1)
_ONE = b"\x01"


@dataclass
class RunIndex:
    sends: list[Operation] = field(default_factory=list)
    acknowledged: list[Operation] = field(default_factory=list)  # ok with a real offset
    acknowledged_records: int = 0
    # outcomes of sends with acks 1 or all ("ok", "fail", "info"; no completion is "info")
    send_outcomes: dict[str, int] = field(default_factory=lambda: {"ok": 0, "fail": 0, "info": 0})
    acks_0_sends: int = 0
    failed_sends: list[Operation] = field(default_factory=list)  # completed "fail"
    polls: list[Operation] = field(default_factory=list)  # completed ok, in completion order
    poll_count: int = 0  # every poll operation, whatever its outcome
    reads: dict[str, FinalRead] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    # acknowledged sends the final read does not confirm value for value
    unconfirmed_sends: list[Operation] = field(default_factory=list)
    # acknowledged sends not flagged in acked_offsets (the unconfirmed ones and any whose
    # partition's read has gaps)
    loose_sends: list[Operation] = field(default_factory=list)
    # (operation, partition, records) of poll results the final read does not confirm
    unconfirmed_polls: list[tuple[Operation, str, list]] = field(default_factory=list)
    # (process, op, partition) of poll results not confirmed as one run of a gapless read
    irregular_polls: set[tuple[str, int, str]] = field(default_factory=set)
    # for gapless reads, a flag per offset from the read's start: where a confirmed send
    # put its value, and where a confirmed poll result returned the read's value
    acked_offsets: dict[str, bytearray] = field(default_factory=dict)
    polled_offsets: dict[str, bytearray] = field(default_factory=dict)
    polled_elsewhere: set = field(default_factory=set)  # values of irregular poll results
    resets: list = field(default_factory=list)  # (place, position_reset event), in trace order


def send_parts(op: Operation) -> tuple[str, int, list]:
    """(partition, offset of values[0], values) of an acknowledged send."""
    fields = op.invoke.fields
    return fields["partition"], op.done.fields["offset"], fields["values"]


def build_index(history: History) -> RunIndex:
    index = RunIndex(events=history.events, resets=history.resets)
    reads: dict[str, Operation] = {}
    polls = index.polls
    for op in history.operations:
        f = op.f
        if f == "send":
            _add_send(index, op)
        elif f == "poll":
            index.poll_count += 1
            if op.completion is not None and op.completion.type == "ok":
                polls.append(op)
        elif f == "read":
            partition = op.invoke["partition"]  # a read names its partition (docs/trace-schema.md)
            previous = reads.get(partition)
            if previous is None or op.outcome == "ok" or previous.outcome != "ok":
                reads[partition] = op
    # Completion order is the order a consumer saw its answers in; Python's sort is
    # linear on this nearly sorted input.
    polls.sort(key=lambda o: o.done.t_ms)
    for partition in sorted(reads):
        read = index.reads[partition] = final_read(reads[partition])
        if read.contiguous:
            index.acked_offsets[partition] = bytearray(len(read.records))
            index.polled_offsets[partition] = bytearray(len(read.records))
    _confirm_sends(index)
    _confirm_polls(index)
    return index


def _add_send(index: RunIndex, op: Operation) -> None:
    index.sends.append(op)
    done = op.completion
    fields = op.invoke.fields
    if fields.get("acks") == 0:
        index.acks_0_sends += 1
    else:
        outcome = done.type if done is not None else "info"
        index.send_outcomes[outcome] = index.send_outcomes.get(outcome, 0) + 1
        if outcome == "fail":
            index.failed_sends.append(op)
    if done is not None and done.type == "ok" and done.fields.get("offset", -1) >= 0:
        index.acknowledged.append(op)
        index.acknowledged_records += len(fields["values"])


def _confirm_sends(index: RunIndex) -> None:
    reads = index.reads
    dense = {p: (r.dense, r.start, index.acked_offsets[p]) for p, r in reads.items() if r.dense is not None}
    for op in index.acknowledged:
        fields = op.invoke.fields
        partition, values = fields["partition"], fields["values"]
        first = op.done.fields["offset"]
        known = dense.get(partition)
        if known is not None:  # FinalRead.confirms, inlined: this runs once per send
            i = first - known[1]
            n = len(values)
            if i >= 0 and known[0][i:i + n] == values:
                known[2][i:i + n] = _ONE * n
                continue
            index.unconfirmed_sends.append(op)
        else:
            read = reads.get(partition)
            if read is None or not read.confirms(first, values):
                index.unconfirmed_sends.append(op)
        index.loose_sends.append(op)


def _confirm_polls(index: RunIndex) -> None:
    reads = index.reads
    flags_of = index.polled_offsets
    elsewhere = index.polled_elsewhere
    for op in index.polls:
        for partition, records in (op.done.fields.get("records") or {}).items():
            if not records:
                continue
            read = reads.get(partition)
            if read is not None and read.contiguous:
                i = records[0][0] - read.start
                n = len(records)
                if i >= 0 and read.records[i:i + n] == records:
                    flags_of[partition][i:i + n] = _ONE * n
                    continue
            index.irregular_polls.add((op.process, op.op, partition))
            elsewhere.update(map(_second, records))
            if read is None or not read.confirms_run(records):
                index.unconfirmed_polls.append((op, partition, records))


def send_witness(op: Operation) -> dict:
    done = op.completion if op.completion is not None else op.invoke
    return {"source": "send", "process": op.process, "op": op.op, "t_ms": done.t_ms}


def poll_witness(op: Operation) -> dict:
    return {"source": "poll", "process": op.process, "op": op.op, "t_ms": op.done.t_ms}
