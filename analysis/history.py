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

    @property
    def outcome(self) -> str:
        return self.completion.type if self.completion is not None else "info"

    @property
    def partition(self) -> str | None:
        return self.invoke.get("partition")


@dataclass
class History:
    operations: list[Operation] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # the internal facts, in order

    def of(self, f: str) -> list[Operation]:
        return [o for o in self.operations if o.f == f]


def build_history(events: Iterable[Event], keep_internal: bool = True) -> History:
    history = History()
    open_ops: dict[tuple[str, int], Operation] = {}
    for event in events:
        if event.type == "invoke":
            op = Operation(event.node, event["op"], event["f"], event)
            open_ops[(event.node, op.op)] = op
            history.operations.append(op)
        elif event.type in ("ok", "fail", "info"):
            op = open_ops.pop((event.node, event["op"]), None)
            if op is not None:
                op.completion = event
        elif keep_internal and event.type != "replica_state":
            history.events.append(event)
    return history


def load_history(path: str | Path, keep_internal: bool = True) -> History:
    return build_history(read_events(path), keep_internal)
