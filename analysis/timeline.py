"""Timelines: one PNG per partition showing what happened during a run, and one per
consumer group when the run had group consumers.

Each figure stacks, on one time axis in seconds: the faults, who led (and who only
believed it led), the ISR, every replica's log end offset and high watermark with the
truncations, its log start offset and cleaning passes (compacted or retention-bound
logs), and the produce outcomes with the acknowledged records that were lost.
The data comes from timeline_data (pure functions over events), the drawing from
timeline_draw (matplotlib's Agg canvas, no pyplot). A group's figure
(``timeline-group-<group>.png``: its coordinator and a lane per member) comes from
timeline_groups and timeline_groups_draw; a run without groups draws none.

    plot_trace("out/trace.jsonl", "out/", lost_values={"producer-0:17"})
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from analysis import timeline_data as data
from analysis.history import HISTORY_TYPES, History, Operation, build_history
from analysis.timeline_draw import PartitionTimeline, render, save
from analysis.timeline_groups import group_names, group_timeline, offsets_partitions
from analysis.timeline_groups_draw import render_group
from analysis.trace import COMMON_FIELDS, SCHEMA_VERSION, Event, TraceError, read_header

__all__ = ["plot_trace", "plot_history", "partition_timeline", "figure_name", "group_figure_name"]


# Polls and reads carry every record they return: most of a trace's bytes and decoding
# time, and never drawn. Their lines are recognised without decoding them (a JSON string
# cannot hold an unescaped quote, so these substrings only match keys and values).
SKIPPED_LINES = ('"f":"poll"', '"f":"read"', '"type":"replica_log"')
GLOBAL_TYPES = ("fault_started", "fault_ended", "broker_started", "run_started", "workload_stopped",
                "final_phase_started", "run_finished")


def read_drawn_events(path: str | Path) -> Iterator[Event]:
    """The events of a trace that a timeline can draw (read_events without polls and reads)."""
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip() or any(skip in line for skip in SKIPPED_LINES):
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if raw.get("schema_version") != SCHEMA_VERSION or "t_ms" not in raw or "type" not in raw:
                raise TraceError(f"{path}:{number}: not a trace event of schema_version {SCHEMA_VERSION}")
            fields = {k: v for k, v in raw.items() if k not in COMMON_FIELDS}
            yield Event(raw["t_ms"], raw.get("node", ""), raw["type"], fields)


def events_by_partition(internal: Iterable[Event], partitions: Iterable[str]) -> dict[str, list[Event]]:
    """partition -> the internal events that can matter to it, in trace order."""
    out: dict[str, list[Event]] = {p: [] for p in partitions}
    for e in internal:
        if e.type == "replica_state":
            targets = [p for p in e.get("partitions") or () if p in out]
        elif e.type in GLOBAL_TYPES:
            targets = list(out)
        else:
            targets = [e.get("partition")] if e.get("partition") in out else []
        for p in targets:
            out[p].append(e)
    return out


def figure_name(partition: str) -> str:
    """``timeline-<topic>-<partition>.png`` for a partition name such as ``t-0``."""
    return f"timeline-{partition}.png"


def group_figure_name(group: str) -> str:
    """``timeline-group-<group>.png``: a group's figure (a scenario's group names hold no /)."""
    return f"timeline-group-{group}.png"


def partition_timeline(internal: Sequence[Event], operations: Iterable[Operation], partition: str,
                       replicas: tuple[int, ...], end_ms: int,
                       lost_values: set[str] | None = None) -> PartitionTimeline:
    """Everything one partition's figure shows, from the internal events and the operations."""
    claims = data.leader_claims(internal, partition, end_ms)
    series = data.replica_series(internal, partition) or data.high_watermark_events(internal, partition)
    start_ms = min((c.start_ms for c in claims), default=0)
    return PartitionTimeline(
        partition=partition,
        replicas=replicas,
        end_ms=end_ms,
        elections=data.elections(internal, partition),
        claims=claims,
        no_leader=data.no_leader_intervals([c for c in claims if not c.stale], start_ms, end_ms),
        zombies=data.zombie_intervals(claims),
        isr=data.isr_intervals(data.isr_changes(internal, partition), replicas, end_ms),
        series=series,
        truncations=data.truncations(internal, partition),
        produce=data.produce_outcomes(operations, partition, lost_values),
        cleanings=data.cleanings(internal, partition),
        log_starts=data.log_starts(internal, partition),
    )


def _title(run: data.RunInfo, seed: int | None, partition: str, replicas: tuple[int, ...]) -> str:
    parts = [run.scenario or "run"]
    if seed is not None:
        parts.append(f"seed {seed}")
    parts.append(f"partition {partition}")
    if replicas:
        parts.append("replicas " + ",".join(f"b{b}" for b in replicas))
    return "   ".join(parts)


def _verdict(tl: PartitionTimeline, lost_values: set[str] | None) -> tuple[str, str] | None:
    if lost_values is None:
        return None
    acked, lost = len(tl.produce.acked_offset), len(tl.produce.lost)
    unclean = sum(1 for e in tl.elections if e.unclean)
    removed = sum(t.removed_count for t in tl.truncations)
    context = []
    if unclean:
        context.append(f"{unclean} unclean election{'s' if unclean != 1 else ''}")
    if removed:
        context.append(f"{removed} records truncated")
    tail = f"  ({'; '.join(context)})" if context else ""
    if lost:
        return f"LOST: {lost} of {acked} acknowledged records on {tl.partition}{tail}", "#d62728"
    return f"no acknowledged record lost on {tl.partition} ({acked} acknowledged){tail}", "#2e7d32"


def _plot(internal: Sequence[Event], operations: Sequence[Operation], out_dir: str | Path,
          lost_values: set[str] | None, seed: int | None, run: data.RunInfo) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    faults = data.fault_intervals(internal, run.end_ms)
    relevant = events_by_partition(internal, run.partitions)
    sends: dict[str, list[Operation]] = {p: [] for p in run.partitions}
    for op in operations:
        if op.f == "send" and op.partition in sends:
            sends[op.partition].append(op)
    paths = []
    for partition, replicas in run.partitions.items():
        tl = partition_timeline(relevant[partition], sends[partition], partition, replicas, run.end_ms, lost_values)
        tl.faults, tl.markers = faults, run.markers
        fig = render(tl, _title(run, seed, partition, replicas), _verdict(tl, lost_values), lost_values is not None)
        path = out / figure_name(partition)
        save(fig, path)
        paths.append(path)
    return paths + _plot_groups(internal, operations, out, seed, run)


def _plot_groups(internal: Sequence[Event], operations: Sequence[Operation], out: Path, seed: int | None,
                 run: data.RunInfo) -> list[Path]:
    """One figure per consumer group of the run (none without groups)."""
    groups = group_names(internal)
    if not groups:
        return []
    faults = data.fault_intervals(internal, run.end_ms)
    partitions = offsets_partitions(internal)
    paths = []
    for group in groups:
        tl = group_timeline(internal, operations, group, run.end_ms, partitions)
        tl.faults, tl.markers = faults, run.markers
        title = "   ".join([run.scenario or "run"] + ([f"seed {seed}"] if seed is not None else []) + [f"group {group}"])
        path = out / group_figure_name(group)
        save(render_group(tl, title), path)
        paths.append(path)
    return paths


def plot_trace(trace_path: str | Path, out_dir: str | Path, lost_values: set[str] | None = None) -> list[Path]:
    """Write timeline-<topic>-<partition>.png for every partition of the run; return the paths.

    lost_values: values the checkers found lost; their acknowledgements are drawn in red
    and counted in each figure's title.
    """
    events = list(read_drawn_events(trace_path))
    history = build_history(events, keep_internal=False)
    internal = [e for e in events if e.type not in HISTORY_TYPES]
    seed = read_header(trace_path)["seed"] if events else None
    return _plot(internal, history.operations, out_dir, lost_values, seed, data.run_info(events))


def plot_history(history: History, out_dir: str | Path, lost_values: set[str] | None = None,
                 seed: int | None = None) -> list[Path]:
    """plot_trace for an already built History. build_history drops replica_state samples,
    so the replica panel falls back to high_watermark_advanced events when they are absent."""
    internal = history.events
    invokes = [op.invoke for op in history.operations]
    run = data.run_info(sorted(internal + invokes, key=lambda e: e.t_ms))
    if history.operations:
        last = max(op.completion.t_ms if op.completion else op.invoke.t_ms for op in history.operations)
        run.end_ms = max(run.end_ms, last)
    return _plot(internal, history.operations, out_dir, lost_values, seed, run)
