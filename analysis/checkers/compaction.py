"""What the compaction checkers read, gathered once: the compacted topics (and their
``delete.retention.ms``), every keyed record sent to them with its outcome, every read
of them (the consumers' polls and the final read) as ``(offset, key, value)``, and the
facts that excuse or bound a judgement (cleaning events, clock faults, consumer resets,
consumers left behind, the replicas' key -> value digests).

A history records only what a client knew, so a record whose send ended ``info`` (or
never completed) may or may not be in the log: the checkers count what such a record
explains as unknown (``info``), never as an anomaly."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analysis.checkers.result import CheckResult
from analysis.compacted_topics import compacted_in_trace, topic_of
from analysis.history import History, Operation
from analysis.trace import Event

# The trace event a cleaning writes once it swapped its segments in (the cleaner's
# binding slice): ``partition`` and ``end_offset``, the end of the range it cleaned
# (records below it may have been removed from that replica).
CLEANING_EVENT = "segments_cleaned"


@dataclass(frozen=True)
class KeyedWrite:
    """One record a producer sent to a compacted partition."""
    process: str
    op: int
    partition: str
    key: str | None  # None: a keyless record
    value: Any  # None: a tombstone
    outcome: str  # "ok", "fail" or "info" (no completion is "info")
    offset: int | None  # where it was acknowledged (ok only)
    invoke_ms: int
    done_ms: int | None

    @property
    def acknowledged(self) -> bool:
        return self.offset is not None

    def example(self) -> dict:
        return {"process": self.process, "op": self.op, "outcome": self.outcome, "offset": self.offset,
                "t_ms": self.invoke_ms if self.done_ms is None else self.done_ms}


@dataclass(frozen=True)
class KeyedRead:
    """The records one read got of one partition: a poll result, or the final read."""
    source: str  # "poll" or "read"
    process: str
    op: int
    t_ms: int
    partition: str
    records: tuple[tuple[int, str | None, Any], ...]  # (offset, key, value), in the order got
    complete: bool = True  # a final read that finished (an "info" one covers only what it got)
    end: int = 0  # a final read's end: its high watermark, or one past its last record

    def witness(self) -> dict:
        return {"source": self.source, "process": self.process, "op": self.op, "t_ms": self.t_ms}


@dataclass
class CompactionView:
    retention_ms: dict[str, int]  # compacted topic -> delete.retention.ms
    writes: dict[str, list[KeyedWrite]] = field(default_factory=dict)  # by partition, in invoke order
    keyless_writes: int = 0
    reads: dict[str, KeyedRead] = field(default_factory=dict)  # the final read of each partition
    polls: list[KeyedRead] = field(default_factory=list)  # in completion order
    cleanings: list[Event] = field(default_factory=list)
    clock_faults: bool = False
    resets: list[Event] = field(default_factory=list)  # position_reset of compacted partitions
    behind: set[tuple[str, str]] = field(default_factory=set)  # (consumer, partition) left behind
    replica_logs: dict[str, list[Event]] = field(default_factory=dict)

    @property
    def compacted(self) -> bool:
        return bool(self.retention_ms)

    def is_compacted(self, partition: str) -> bool:
        return topic_of(partition) in self.retention_ms

    def all_reads(self) -> list[KeyedRead]:
        return [*self.polls, *(self.reads[p] for p in sorted(self.reads))]


def not_tested(name: str, view: CompactionView, why: str) -> CheckResult:
    """A checker that judged nothing: valid in a run without compacted topics (there was
    nothing to judge), invalid when a compacted topic was there (a run that tested
    nothing must not pass: registry.py marks these results ``untested``)."""
    if not view.compacted:
        return CheckResult(name, 0, True, "not tested: no topic has cleanup.policy compact", (), {"tested": False})
    return CheckResult(name, 0, False, f"not tested: {why}", (), {"tested": False})


def compaction_view(history: History, events: list[Event]) -> CompactionView:
    view = CompactionView(compacted_in_trace(events))
    if not view.compacted:
        return view
    for op in history.operations:
        partition = op.invoke.get("partition")
        if op.f == "send" and view.is_compacted(partition):
            _add_writes(view, op)
        elif op.f == "read" and view.is_compacted(partition):
            _add_final_read(view, op)
        elif op.f == "poll" and op.completion is not None and op.completion.type == "ok":
            _add_polls(view, op)
    view.polls.sort(key=lambda r: r.t_ms)
    for event in events:
        _add_fact(view, event)
    return view


def _add_writes(view: CompactionView, op: Operation) -> None:
    fields = op.invoke.fields
    values = fields["values"]
    keys = fields.get("keys") or [None] * len(values)
    done = op.completion
    outcome = done.type if done is not None else "info"
    first = done.get("offset", -1) if done is not None and outcome == "ok" else -1
    writes = view.writes.setdefault(fields["partition"], [])
    for i, (key, value) in enumerate(zip(keys, values)):
        if key is None:
            view.keyless_writes += 1
        writes.append(KeyedWrite(op.process, op.op, fields["partition"], key, value, outcome,
                                 first + i if first >= 0 else None, op.invoke.t_ms,
                                 done.t_ms if done is not None else None))


def _triples(records: list, keys: list | None) -> tuple[tuple[int, str | None, Any], ...]:
    keys = keys if keys is not None else [None] * len(records)
    return tuple((offset, key, value) for (offset, value), key in zip(records, keys))


def _add_final_read(view: CompactionView, op: Operation) -> None:
    partition = op.invoke["partition"]
    done = op.completion
    previous = view.reads.get(partition)
    if previous is not None and previous.complete:
        return
    at = done if done is not None else op.invoke
    records = at.get("records") or []
    complete = done is not None and done.type == "ok"
    end = at.get("high_watermark", 0) if complete else (records[-1][0] + 1 if records else 0)
    view.reads[partition] = KeyedRead("read", op.process, op.op, at.t_ms, partition,
                                      _triples(records, at.get("keys")), complete, end)


def _add_polls(view: CompactionView, op: Operation) -> None:
    done = op.done
    keys = done.get("keys") or {}
    for partition, records in (done.get("records") or {}).items():
        if records and view.is_compacted(partition):
            view.polls.append(KeyedRead("poll", op.process, op.op, done.t_ms, partition,
                                        _triples(records, keys.get(partition))))


def _add_fact(view: CompactionView, event: Event) -> None:
    kind = event.type
    if kind == CLEANING_EVENT and view.is_compacted(event.get("partition", "")):
        view.cleanings.append(event)
    elif kind == "fault_started" and event.get("fault") == "clock":
        view.clock_faults = True
    elif kind == "position_reset" and view.is_compacted(event.get("partition", "")):
        view.resets.append(event)
    elif kind == "consumers_behind":
        view.behind.update((consumer, partition) for consumer, partition in event.get("behind") or ())
    elif kind == "replica_log" and view.is_compacted(event.get("partition", "")):
        view.replica_logs.setdefault(event["partition"], []).append(event)


def last_by_key(read: KeyedRead) -> dict[str, tuple[int, Any]]:
    """key -> (offset, value) of its last record in a read."""
    out: dict[str, tuple[int, Any]] = {}
    for offset, key, value in read.records:
        if key is not None:
            out[key] = (offset, value)
    return out
