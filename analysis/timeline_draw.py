"""Drawing one partition's timeline: stacked panels on one time axis in seconds.

Uses matplotlib's object API with the Agg canvas (never pyplot), so drawing touches no
global state and the same data always gives the same pixels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from analysis.timeline_data import (Cleaned, Election, FaultInterval, LeaderClaim, ProduceOutcomes,
                                    ReplicaSeries, Truncation)

BROKER_COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f")
FAULT_COLORS = {"crash": "#8d8d8d", "power_loss": "#a0522d", "isolate": "#ff7f0e",
                "partition": "#9467bd", "cut": "#e377c2", "pause": "#17becf"}
LABEL_CHAR_FRACTION = 0.0078  # width of one 8-point character as a fraction of the time axis
LOST = "#d62728"
CLEANED = "#006d2c"  # cleaning passes: dark green, apart from the brokers' colours
IN_ISR, OUT_OF_ISR = "#4caf50", "#f6c9c4"
MAX_LINE_POINTS = 4000
MAX_DOTS = 30000
NAN = float("nan")
LEGEND = dict(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False, borderaxespad=0.0)


class FaultSpans(Protocol):
    """What the fault strip and the shading read: a partition's timeline or a group's
    (analysis/timeline_groups.py)."""

    @property
    def faults(self) -> list[FaultInterval]: ...

    @property
    def markers(self) -> list[tuple[int, str]]: ...

    @property
    def end_ms(self) -> int: ...


@dataclass
class PartitionTimeline:
    """Everything one partition's figure shows (times in trace milliseconds)."""
    partition: str
    replicas: tuple[int, ...]
    end_ms: int
    elections: list[Election]
    claims: list[LeaderClaim]
    no_leader: list[tuple[int, int]]
    zombies: list[tuple[int, int, int]]
    isr: dict[int, list[tuple[int, int]]]
    series: dict[int, ReplicaSeries]
    truncations: list[Truncation]
    produce: ProduceOutcomes
    faults: list[FaultInterval] = field(default_factory=list)
    markers: list[tuple[int, str]] = field(default_factory=list)
    cleanings: list[Cleaned] = field(default_factory=list)
    log_starts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


def _s(ms) -> float:
    return ms / 1000.0


def _color(broker: int, brokers: tuple[int, ...]) -> str:
    index = brokers.index(broker) if broker in brokers else broker
    return BROKER_COLORS[index % len(BROKER_COLORS)]


def _brokers(tl: PartitionTimeline) -> tuple[int, ...]:
    seen = set(tl.replicas) | {c.broker for c in tl.claims} | set(tl.series)
    seen |= {e.leader for e in tl.elections if e.leader >= 0}
    return tuple(sorted(seen))


def _fault_lanes(faults: list[FaultInterval], span_ms: int) -> list[int]:
    """A lane per fault so that overlapping faults (and their labels) sit on separate rows."""
    lane_ends: list[float] = []
    lanes = []
    for f in faults:
        lane = next((i for i, end in enumerate(lane_ends) if end <= f.start_ms), len(lane_ends))
        if lane == len(lane_ends):
            lane_ends.append(0)
        label_ms = (len(f.label) + 2) * LABEL_CHAR_FRACTION * span_ms
        lane_ends[lane] = max(f.end_ms, f.start_ms + label_ms)
        lanes.append(lane)
    return lanes


def draw_fault_strip(ax, tl: FaultSpans) -> None:
    lanes = _fault_lanes(tl.faults, tl.end_ms)
    for f, lane in zip(tl.faults, lanes):
        color = FAULT_COLORS.get(f.fault, "#bdbdbd")
        width = max(_s(f.end_ms - f.start_ms), _s(tl.end_ms) * 0.002)
        ax.broken_barh([(_s(f.start_ms), width)], (lane - 0.4, 0.8), facecolors=color, alpha=0.45,
                       edgecolor=color)
        ax.text(_s(f.start_ms), lane, " " + f.label, va="center", ha="left", fontsize=8, clip_on=True)
    ax.set_ylim(max(lanes, default=0) + 0.6, -0.6)
    ax.set_yticks([])
    ax.set_ylabel("faults", rotation=0, ha="right", va="center")
    if not tl.faults:
        ax.text(0.5, 0.5, "no faults", transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.5")
    rows = _label_rows([(t_ms - len(label) * LABEL_CHAR_FRACTION * tl.end_ms / 2, label) for t_ms, label in tl.markers],
                       tl.end_ms)
    for (t_ms, label), row in zip(tl.markers, rows):
        ax.annotate(label, (_s(t_ms), 1.0), xycoords=_xdata_yaxes(ax), xytext=(0, 2 + 10 * row),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8, annotation_clip=False)


def _label_rows(labels: Sequence[tuple[float, str]], span_ms: int) -> list[int]:
    """A row per label (starting at x = t_ms) so that labels close in time do not overlap."""
    row_ends: list[float] = []
    rows = []
    for start, label in labels:
        row = next((i for i, end in enumerate(row_ends) if end <= start), len(row_ends))
        if row == len(row_ends):
            row_ends.append(0)
        row_ends[row] = start + (len(label) + 1) * LABEL_CHAR_FRACTION * span_ms
        rows.append(row)
    return rows


def shade_faults_and_markers(ax, tl: FaultSpans) -> None:
    for f in tl.faults:
        ax.axvspan(_s(f.start_ms), _s(f.end_ms), color=FAULT_COLORS.get(f.fault, "#bdbdbd"), alpha=0.08, lw=0)
    for t_ms, _ in tl.markers:
        ax.axvline(_s(t_ms), color="black", lw=1.0, ls=(0, (4, 3)), zorder=2.5)


def _controller_steps(ax, tl: PartitionTimeline) -> None:
    if not tl.elections:
        return
    xs = [_s(e.t_ms) for e in tl.elections] + [_s(tl.end_ms)]
    ys = [e.leader if e.leader >= 0 else NAN for e in tl.elections]
    ax.step(xs, ys + ys[-1:], where="post", color="black", lw=1.0, ls=":", zorder=4)
    lowest = min(_brokers(tl), default=1)
    for e in tl.elections:
        y = e.leader if e.leader >= 0 else lowest - 0.5
        if e.unclean:
            ax.plot([_s(e.t_ms)], [y], marker="*", ms=16, color=LOST, mec="black", zorder=6)
            ax.annotate("unclean", (_s(e.t_ms), y), xytext=(6, -12), textcoords="offset points",
                        color=LOST, fontsize=9, fontweight="bold", zorder=6)
        else:
            ax.plot([_s(e.t_ms)], [y], marker="o", ms=5, color="black", zorder=6)
        if e.leader < 0:
            ax.annotate("elected: none", (_s(e.t_ms), y), xytext=(4, 2), textcoords="offset points", fontsize=8)


def draw_claim(ax, c: LeaderClaim, color: str) -> None:
    """One broker's belief that it leads, at its epoch: a thick bar on the broker's row,
    dashed and faded when a newer epoch exists (a zombie's), labelled eN otherwise. A
    partition's leaders and a group's coordinator (analysis/timeline_groups_draw.py)."""
    ax.hlines(c.broker, _s(c.start_ms), _s(c.end_ms), colors=color, lw=7,
              linestyles=(0, (1.2, 0.6)) if c.stale else "-", alpha=0.55 if c.stale else 0.9, zorder=3)
    if not c.stale:
        ax.annotate(f"e{c.leader_epoch}", (_s(c.start_ms), c.broker), xytext=(2, 7),
                    textcoords="offset points", fontsize=9, fontweight="bold", zorder=7)


def _claims(ax, tl: PartitionTimeline, brokers: tuple[int, ...]) -> None:
    for c in tl.claims:
        draw_claim(ax, c, _color(c.broker, brokers))
    labels = [(start, f" two leaders: b{broker} is a zombie") for start, _, broker in tl.zombies]
    for (start, end, broker), row in zip(tl.zombies, _label_rows(labels, tl.end_ms)):
        ax.axvspan(_s(start), _s(end), color=LOST, alpha=0.12, lw=0)
        if row == 0:
            ax.text(_s(start), 0.97, f" two leaders: b{broker} is a zombie",
                    transform=_xdata_yaxes(ax), ha="left", va="top", color=LOST, fontsize=8, fontweight="bold",
                    zorder=8, clip_on=True, bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))


def draw_leader(ax, tl: PartitionTimeline) -> None:
    brokers = _brokers(tl)
    span = max(_s(tl.end_ms), 1e-3)
    for start, end in tl.no_leader:
        if end - start < tl.end_ms * 0.002:  # an epoch bump's handover: not visible, only noise
            continue
        ax.axvspan(_s(start), _s(end), facecolor="none", edgecolor="0.45", hatch="///", lw=0, zorder=2)
        if (end - start) / 1000.0 > span * 0.02:
            ax.text(_s((start + end) / 2), 0.07, "no leader", transform=_xdata_yaxes(ax), ha="center",
                    va="center", fontsize=9, fontweight="bold", color="0.2",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1), zorder=8)
    _claims(ax, tl, brokers)
    _controller_steps(ax, tl)
    ax.set_yticks(list(brokers), [f"b{b}" for b in brokers])
    ax.set_ylim(min(brokers, default=1) - 0.9, max(brokers, default=1) + 1.3)
    ax.set_ylabel("leader")
    ax.set_title("Leader: thick bar = broker believes it leads (dashed = stale epoch), "
                 "dotted = controller's choice, eN = leader epoch", loc="left", fontsize=9)
    handles = [Line2D([], [], color="0.3", lw=6, label="leads"),
               Line2D([], [], color="0.3", lw=6, ls=(0, (1.2, 0.6)), alpha=0.55, label="stale leader (zombie)"),
               Line2D([], [], color="black", lw=1, ls=":", marker="o", ms=4, label="controller's choice"),
               Line2D([], [], ls="none", marker="*", ms=12, color=LOST, mec="black", label="unclean election"),
               Patch(facecolor="white", edgecolor="0.45", hatch="///", label="no leader")]
    ax.legend(handles=handles, **LEGEND)


def _xdata_yaxes(ax):
    return blended_transform_factory(ax.transData, ax.transAxes)


def draw_isr(ax, tl: PartitionTimeline) -> None:
    brokers = tuple(sorted(set(tl.replicas) | set(tl.isr)))
    first = min((iv[0][0] for iv in tl.isr.values() if iv), default=0)
    for b in brokers:
        ax.broken_barh([(_s(first), _s(tl.end_ms - first))], (b - 0.32, 0.64), facecolors=OUT_OF_ISR)
        spans = [(_s(a), _s(z - a)) for a, z in tl.isr.get(b, [])]
        if spans:
            ax.broken_barh(spans, (b - 0.32, 0.64), facecolors=IN_ISR)
        down = [(_s(f.start_ms), _s(f.end_ms - f.start_ms)) for f in tl.faults if b in f.brokers]
        if down:
            ax.broken_barh(down, (b - 0.32, 0.64), facecolors="none", edgecolor="0.15", hatch="xxx", lw=0)
    ax.set_yticks(list(brokers), [f"b{b}" for b in brokers])
    ax.set_ylim(min(brokers, default=1) - 0.7, max(brokers, default=1) + 0.7)
    ax.set_ylabel("ISR")
    ax.set_title("In-sync replicas (from the leader and the ISR changes it wrote)", loc="left", fontsize=9)
    ax.legend(handles=[Patch(facecolor=IN_ISR, label="in ISR"), Patch(facecolor=OUT_OF_ISR, label="not in ISR"),
                       Patch(facecolor="white", edgecolor="0.15", hatch="xxx", label="broker down / paused")], **LEGEND)


def _line_arrays(t_ms: list[int], values: list) -> tuple[list[float], list[float]]:
    """Seconds and values, thinned to about MAX_LINE_POINTS, with a NaN break wherever the
    samples stop for a while (the broker was down), so that no line bridges the gap."""
    points = [(t, NAN if v is None else float(v)) for t, v in zip(t_ms, values)]
    if len(points) > MAX_LINE_POINTS:
        points = points[::len(points) // MAX_LINE_POINTS + 1] + points[-1:]
    steps = sorted(b[0] - a[0] for a, b in zip(points, points[1:]))
    gap_ms = max(3 * steps[len(steps) // 2], 300) if steps else 0
    xs, ys = [], []
    for i, (t, v) in enumerate(points):
        if i and t - points[i - 1][0] > gap_ms:
            xs.append(NAN)
            ys.append(NAN)
        xs.append(t / 1000.0)
        ys.append(v)
    return xs, ys


def _truncation_marks(ax, tl: PartitionTimeline, brokers: tuple[int, ...]) -> None:
    biggest = sorted(tl.truncations, key=lambda tr: (-tr.removed_count, tr.t_ms))[:6]
    labelled = [tr for tr in tl.truncations if tr in biggest]
    texts = [f"b{tr.broker} truncated {tr.removed_count}" for tr in labelled]
    rows = _label_rows([(tr.t_ms, text) for tr, text in zip(labelled, texts)], tl.end_ms)
    for tr in tl.truncations:
        x = _s(tr.t_ms)
        ax.vlines(x, tr.to_offset, tr.from_offset, colors=LOST, lw=2, zorder=5)
        ax.plot([x], [tr.from_offset], marker="X", ms=11, color=_color(tr.broker, brokers), mec=LOST, mew=1.5,
                zorder=6)
    for tr, text, row in zip(labelled, texts, rows):
        left = tr.t_ms > 0.8 * tl.end_ms  # near the right edge the label goes left of the mark
        ax.annotate(f"{text}\n({tr.from_offset}\u2192{tr.to_offset})", (_s(tr.t_ms), tr.from_offset),
                    xytext=(-7 if left else 7, -4 - 24 * row), textcoords="offset points", fontsize=8,
                    color=LOST, fontweight="bold", va="top", ha="right" if left else "left", zorder=7,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.75, pad=1))


def _compaction_marks(ax, tl: PartitionTimeline, brokers: tuple[int, ...]) -> list:
    """Each broker's log start offset as a dotted step line (it moves only when retention
    deletes segments or a cleaning removes the first ones), and each cleaning pass as a
    bar over the offsets it covered, ended by a square at the checkpoint's new value.
    Runs without either draw nothing and add nothing to the legend."""
    handles = []
    for broker, points in tl.log_starts.items():
        xs = [_s(t) for t, _ in points] + [_s(max(tl.end_ms, points[-1][0]))]
        ys = [offset for _, offset in points] + [points[-1][1]]
        ax.step(xs, ys, where="post", color=_color(broker, brokers), lw=1.2, ls=":", zorder=4)
    if tl.log_starts:
        handles.append(Line2D([], [], color="black", lw=1.2, ls=":", label="log start offset"))
    for c in tl.cleanings:
        x = _s(c.t_ms)
        ax.vlines(x, c.start_offset, c.end_offset, colors=CLEANED, lw=1.5, alpha=0.7, zorder=4.5)
        ax.plot([x], [c.end_offset], marker="s", ms=5, color=_color(c.broker, brokers), mec=CLEANED, mew=1,
                zorder=4.6)
    if tl.cleanings:
        removed = sum(c.records_removed for c in tl.cleanings)
        handles.append(Line2D([], [], ls="none", marker="s", ms=6, color="white", mec=CLEANED, mew=1.2,
                              label=f"cleaned ({len(tl.cleanings)}): -{removed} records"))
    return handles


def draw_offsets(ax, tl: PartitionTimeline) -> None:
    brokers = _brokers(tl)
    handles = []
    count = len(tl.series)
    for i, (broker, series) in enumerate(tl.series.items()):
        color = _color(broker, brokers)
        widen = 1.3 * (count - 1 - i)  # equal lines stay visible as nested stripes
        x, leo = _line_arrays(series.t_ms, series.log_end_offset)
        _, hw = _line_arrays(series.t_ms, series.high_watermark)
        if not all(math.isnan(v) for v in leo):
            ax.plot(x, leo, color=color, lw=1.5 + widen, zorder=3, solid_capstyle="butt")
        ax.plot(x, hw, color=color, lw=1.1 + widen * 0.6, ls=(0, (3, 2)), zorder=3.5)
        handles.append(Line2D([], [], color=color, lw=2, label=f"b{broker}"))
    _truncation_marks(ax, tl, brokers)
    handles += _compaction_marks(ax, tl, brokers)
    handles += [Line2D([], [], color="black", lw=1.6, label="log end offset"),
                Line2D([], [], color="black", lw=1.2, ls=(0, (3, 2)), label="high watermark"),
                Line2D([], [], ls="none", marker="X", ms=9, color="white", mec=LOST, mew=1.5,
                       label=f"log truncated ({len(tl.truncations)})")]
    ax.legend(handles=handles, **LEGEND)
    ax.set_ylabel("offset")
    ax.set_ylim(bottom=0)
    ax.set_title("Replica logs: log end offset (solid), high watermark (dashed) and log start (dotted) per "
                 "broker; gaps = broker down", loc="left", fontsize=9)


def _thin(xs: list, ys: list, limit: int) -> tuple[list, list]:
    if len(xs) <= limit:
        return xs, ys
    stride = len(xs) // limit + 1
    return xs[::stride], ys[::stride]


def draw_produce(ax, tl: PartitionTimeline, lost_given: bool) -> None:
    p = tl.produce
    xs, ys = _thin([_s(t) for t in p.acked_t_ms], p.acked_offset, MAX_DOTS)
    ax.plot(xs, ys, ls="none", marker=".", ms=2.5, color="#1f77b4", alpha=0.6, zorder=3)
    bottom = _xdata_yaxes(ax)
    if p.failed:
        ax.plot([_s(t) for t, _ in p.failed], [0.05] * len(p.failed), ls="none", marker="v", ms=7,
                color="#ff7f0e", mec="black", mew=0.5, transform=bottom, clip_on=False, zorder=5)
    if p.unknown:
        ax.plot([_s(t) for t, _ in p.unknown], [0.14] * len(p.unknown), ls="none", marker="D", ms=6,
                color="#9467bd", mec="black", mew=0.5, transform=bottom, clip_on=False, zorder=5)
    if p.lost:
        big = len(p.lost) <= 50
        ax.plot([_s(t) for t, _, _ in p.lost], [o for _, o, _ in p.lost], ls="none", marker="o",
                ms=9 if big else 6, color=LOST, mec="#7f0000" if big else LOST, mew=0.8 if big else 0, zorder=6)
    handles = [Line2D([], [], ls="none", marker="o", ms=4, color="#1f77b4", label=f"acknowledged ({len(p.acked_offset)})"),
               Line2D([], [], ls="none", marker="v", ms=7, color="#ff7f0e", mec="black", mew=0.5,
                      label=f"failed ({len(p.failed)})"),
               Line2D([], [], ls="none", marker="D", ms=6, color="#9467bd", mec="black", mew=0.5,
                      label=f"unknown outcome ({len(p.unknown)})")]
    if lost_given:
        handles.append(Line2D([], [], ls="none", marker="o", ms=8, color=LOST, mec="black",
                              label=f"acknowledged, LOST ({len(p.lost)})"))
    ax.legend(handles=handles, **LEGEND)
    ax.set_ylabel("offset")
    ax.set_ylim(bottom=-max(max(p.acked_offset, default=10), 10) * 0.2)
    ax.set_title("Produce: acknowledged records at (ack time, offset); failed / unknown sends along the bottom",
                 loc="left", fontsize=9)


def render(tl: PartitionTimeline, title: str, verdict: tuple[str, str] | None, lost_given: bool) -> Figure:
    """The figure: faults, leader, ISR, replica logs and produce outcomes, stacked."""
    fig = Figure(figsize=(12, 10), dpi=100)
    FigureCanvasAgg(fig)
    ratios = [0.55 + 0.25 * _lane_count(tl), 2, 1.4, 3, 3]
    axes = fig.subplots(5, 1, sharex=True, gridspec_kw={"height_ratios": ratios})
    fig.subplots_adjust(left=0.07, right=0.82, top=0.91 if verdict else 0.94, bottom=0.05, hspace=0.32)
    draw_fault_strip(axes[0], tl)
    draw_leader(axes[1], tl)
    draw_isr(axes[2], tl)
    draw_offsets(axes[3], tl)
    draw_produce(axes[4], tl, lost_given)
    finish_axes(axes, tl)
    fig.suptitle(title, x=0.07, y=0.985, ha="left", fontsize=12, fontweight="bold")
    if verdict:
        fig.text(0.07, 0.947, verdict[0], ha="left", fontsize=11, fontweight="bold", color=verdict[1])
    return fig


def finish_axes(axes, tl: FaultSpans) -> None:
    """Below the fault strip (the first axes): the faults shaded through every panel, a
    light grid, and the shared time axis in seconds."""
    for i, ax in enumerate(axes):
        shade_faults_and_markers(ax, tl)
        if i:
            ax.grid(axis="x", color="0.9", lw=0.6)
    axes[-1].set_xlabel("time (s)")
    axes[-1].set_xlim(0, max(_s(tl.end_ms), 0.001))


def _lane_count(tl: FaultSpans) -> int:
    return max(_fault_lanes(tl.faults, tl.end_ms), default=0) + 1


def save(fig: Figure, path) -> None:
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
