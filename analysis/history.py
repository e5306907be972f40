"""The client history of a trace: operations joined from their invoke and completion."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from analysis.trace import Event, read_events

HISTORY_TYPES = ("invoke", "ok", "fail", "info")


@dataclass
class Operation:
    process: str
    op: int
    f: str
    invoke: Event
    completion: Event | None = None
    seq: int = -1  # the invoke's place among the events built from, to order it against other events
    done_seq: int = -1  # the completion's place (-1: none), to order completions of one time

    @property
    def outcome(self) -> str:
        return self.completion.type if self.completion is not None else "info"

    @property
    def done(self) -> Event:
        """The completion of an operation a checker knows completed (its outcome is ``ok``
        or ``fail``, or it was kept for having one)."""
        if self.completion is None:
            raise ValueError(f"operation {self.op} of {self.process} has no completion")
        return self.completion

    @property
    def partition(self) -> str | None:
        """A send's or a read's partition; a poll names none."""
        return self.invoke.get("partition")


@dataclass
class History:
    operations: list[Operation] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # the internal facts, in order
    # (place among the events, event) of every position_reset: a consumer moved its position
    # on purpose, so its order against the poll invokes matters
    resets: list[tuple[int, Event]] = field(default_factory=list)

    def of(self, f: str) -> list[Operation]:
        return [o for o in self.operations if o.f == f]


def build_history(events: Iterable[Event], keep_internal: bool = True) -> History:
    history = History()
    open_ops: dict[tuple[str, int], Operation] = {}
    operations, internal, resets = history.operations, history.events, history.resets
    for seq, event in enumerate(events):
        kind = event.type
        if kind == "invoke":
            op = Operation(event.node, event.fields["op"], event.fields["f"], event, None, seq)
            open_ops[(event.node, op.op)] = op
            operations.append(op)
        elif kind == "ok" or kind == "fail" or kind == "info":
            opened = open_ops.pop((event.node, event.fields["op"]), None)
            if opened is not None:
                opened.completion = event
                opened.done_seq = seq
        elif kind != "replica_state":
            if kind == "position_reset":
                resets.append((seq, event))
            if keep_internal:
                internal.append(event)
    return history


def load_history(path: str | Path, keep_internal: bool = True) -> History:
    return build_history(read_events(path), keep_internal)
