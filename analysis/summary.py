"""The short summary printed after a run: what was acknowledged and what came back."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis.history import History, build_history, load_history
from analysis.trace import Event


@dataclass(frozen=True)
class Summary:
    acknowledged: int
    read_back: int
    missing: tuple[str, ...]  # acknowledged values absent from the final read
    final_read_complete: bool
    settled: bool

    @property
    def missing_count(self) -> int:
        return len(self.missing)


def acknowledged_values(history: History) -> dict[str, str]:
    """value -> partition, for every record of a send acknowledged with a real offset."""
    out = {}
    for op in history.of("send"):
        if op.outcome == "ok" and op.done.get("offset", -1) >= 0:
            for value in op.invoke["values"]:
                out[value] = op.invoke["partition"]  # a send names its partition
    return out


def final_read(history: History) -> tuple[dict[str, list], bool]:
    """partition -> [[offset, value], ...] of the final read, and whether it finished."""
    records = {}
    complete = True
    for op in history.of("read"):
        if op.outcome == "ok":
            records[op.invoke["partition"]] = op.done["records"]  # a read names its partition
        else:
            complete = False
            records[op.invoke["partition"]] = op.completion.get("records", []) if op.completion else []
    return records, complete


def summarize(path: str | Path) -> Summary:
    return summarize_history(load_history(path))


def summarize_events(events: list[Event]) -> Summary:
    return summarize_history(build_history(e for e in events if e.type != "replica_state"))


def summarize_history(history: History) -> Summary:
    acked = acknowledged_values(history)
    reads, complete = final_read(history)
    seen = {value for recs in reads.values() for _, value in recs}
    # A tombstone (a null value) is no value to look for: the cleaner removes it.
    missing = tuple(sorted(v for v in acked if v is not None and v not in seen))
    settled = any(e.type == "cluster_settled" for e in history.events)
    return Summary(len(acked), sum(len(r) for r in reads.values()), missing, complete, settled)
