"""Drawing one consumer group's timeline (analysis/timeline_groups.py has the data):
the faults, the group's coordinator, and a lane per member, on the time axis of the
partitions' figures. Matplotlib's object API on the Agg canvas, as
analysis/timeline_draw.py, whose fault strip and shading it reuses."""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.timeline_draw import (BROKER_COLORS, LEGEND, LOST, _label_rows, _lane_count, _s, _xdata_yaxes,
                                    draw_claim, draw_fault_strip, finish_axes)
from analysis.timeline_groups import GroupTimeline, MemberLane

GENERATION_COLORS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7", "#d9d9d9")
# kind -> (marker, size, colour, height in the lane, legend label)
MARKS = {
    "joined": (">", 6, "black", -0.34, "JoinGroup answered (gN: its generation)"),
    "revoked": ("|", 12, "black", 0.0, "partitions revoked (rebalance)"),
    "commit_ok": ("|", 6, "#2e7d32", 0.3, "commit ok"),
    "commit_fail": ("v", 6, "#ff7f0e", 0.3, "commit failed"),
    "commit_info": ("D", 4, "#9467bd", 0.3, "commit outcome unknown"),
    "coordinator_found": (".", 4, "0.35", -0.3, "coordinator found / lost (x)"),
    "coordinator_lost": ("x", 4, "0.35", -0.3, None),
    "fenced": ("X", 11, LOST, 0.0, "fenced (stale generation or member)"),
    "left": ("s", 7, "0.2", 0.0, "left the group"),
    "failed": ("s", 7, LOST, 0.0, "member failed"),
    "killed": ("P", 9, "0.25", 0.0, "process killed"),
}
LABELLED = ("fenced", "left", "failed")  # kinds whose mark carries its label


def _color(broker: int, brokers: list[int]) -> str:
    return BROKER_COLORS[brokers.index(broker) % len(BROKER_COLORS)]


def draw_coordinator(ax, tl: GroupTimeline) -> None:
    """Who led the group's partition of __consumer_offsets (the coordinator), and when it
    was loading the group (hatched)."""
    brokers = sorted({c.broker for c in tl.coordinator} | {b for _, _, b in tl.loading})
    for c in tl.coordinator:
        draw_claim(ax, c, _color(c.broker, brokers))
    for start, end, broker in tl.loading:
        width = max(_s(end - start), _s(tl.end_ms) * 0.003)
        ax.broken_barh([(_s(start), width)], (broker - 0.3, 0.6), facecolors="none", edgecolor="black",
                       hatch="////", lw=0.8, zorder=4)
    for start, end in tl.no_coordinator:
        ax.axvspan(_s(start), _s(end), facecolor="none", edgecolor="0.45", hatch="///", lw=0, zorder=2)
    if not brokers:
        ax.text(0.5, 0.5, "no leader of the group's partition in the trace", transform=ax.transAxes,
                ha="center", va="center", fontsize=8, color="0.5")
    ax.set_yticks(brokers, [f"b{b}" for b in brokers])
    ax.set_ylim(min(brokers, default=1) - 0.8, max(brokers, default=1) + 1.0)
    ax.set_ylabel("coordinator")
    where = tl.partition or "its __consumer_offsets partition (count unknown)"
    ax.set_title(f"Coordinator: the broker that believes it leads {where} (dashed = stale epoch), "
                 "eN = leader epoch", loc="left", fontsize=9)
    ax.legend(handles=[Line2D([], [], color="0.3", lw=6, label="coordinates"),
                       Line2D([], [], color="0.3", lw=6, ls=(0, (1.2, 0.6)), alpha=0.55, label="stale epoch"),
                       Patch(facecolor="white", edgecolor="black", hatch="////", label="loading the group"),
                       Patch(facecolor="white", edgecolor="0.45", hatch="///", label="no coordinator")],
              **LEGEND)


def _spans(ax, row: int, lane: MemberLane, span_ms: int) -> None:
    for s in lane.spans:
        color = GENERATION_COLORS[s.generation % len(GENERATION_COLORS)]
        ax.broken_barh([(_s(s.start_ms), max(_s(s.end_ms - s.start_ms), _s(span_ms) * 0.002))], (row - 0.22, 0.44),
                       facecolors=color, edgecolor="0.4", lw=0.6, zorder=2)
        text = f" g{s.generation}{' leader' if s.leader else ''}: {','.join(s.partitions) or 'nothing'}"
        ax.text(_s(s.start_ms), row, text, va="center", ha="left", fontsize=7.5, clip_on=True, zorder=3)


def _marks(ax, row: int, lane: MemberLane, span_ms: int) -> None:
    by_kind: dict[str, list[float]] = {}
    for m in lane.marks:
        by_kind.setdefault(m.kind, []).append(_s(m.t_ms))
    for kind, xs in by_kind.items():
        marker, size, color, dy, _ = MARKS[kind]
        ax.plot(xs, [row + dy] * len(xs), ls="none", marker=marker, ms=size, color=color,
                mec="black" if kind in ("fenced", "commit_fail") else color, mew=0.6, zorder=5)
    joins = lane.marks_of("joined")
    for m, line in zip(joins, _label_rows([(m.t_ms, m.label) for m in joins], span_ms)):
        if line == 0:
            ax.annotate(m.label, (_s(m.t_ms), row - 0.34), xytext=(4, 0), textcoords="offset points",
                        fontsize=7, va="center", zorder=6)
    labelled = [m for m in lane.marks if m.kind in LABELLED]
    for m, line in zip(labelled, _label_rows([(m.t_ms, m.label) for m in labelled], span_ms)):
        ax.annotate(m.label, (_s(m.t_ms), row), xytext=(6, 8 + 9 * line), textcoords="offset points", fontsize=7.5,
                    color=MARKS[m.kind][2], fontweight="bold", zorder=7,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.5))


def draw_members(ax, tl: GroupTimeline) -> None:
    """A lane per member: its generations (the partitions it believed it owned), joins,
    commits, rebalances and fencing."""
    for row, lane in enumerate(tl.members):
        _spans(ax, row, lane, tl.end_ms)
        _marks(ax, row, lane, tl.end_ms)
    labels = [(t_ms, f"g{generation}") for t_ms, generation in tl.generations]
    for (t_ms, label), line in zip(labels, _label_rows(labels, tl.end_ms)):
        ax.annotate(label, (_s(t_ms), 1.0), xycoords=_xdata_yaxes(ax), xytext=(0, 1 + 8 * line),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7, color="0.3",
                    annotation_clip=False)
    ax.set_yticks(list(range(len(tl.members))), [lane.node for lane in tl.members])
    ax.set_ylim(len(tl.members) - 0.45, -0.55)
    ax.set_title("Members: bars = the generation each believed it owned partitions in; gN above = a new generation",
                 loc="left", fontsize=9, pad=12 + 8 * max(_label_rows(labels, tl.end_ms), default=0))
    kinds = sorted({m.kind for lane in tl.members for m in lane.marks}, key=list(MARKS).index)
    handles = [Line2D([], [], ls="none", marker=MARKS[k][0], ms=MARKS[k][1], color=MARKS[k][2], label=MARKS[k][4])
               for k in kinds if MARKS[k][4] is not None]
    if "coordinator_lost" in kinds and "coordinator_found" not in kinds:
        handles.append(Line2D([], [], ls="none", marker="x", ms=4, color="0.35", label="coordinator lost"))
    ax.legend(handles=handles, **LEGEND)


def render_group(tl: GroupTimeline, title: str) -> Figure:
    """The figure: faults, the coordinator and the members, stacked."""
    brokers = {c.broker for c in tl.coordinator} | {b for _, _, b in tl.loading}
    ratios = [0.55 + 0.25 * _lane_count(tl), 0.9 + 0.35 * max(len(brokers), 1), 0.8 + 0.7 * max(len(tl.members), 1)]
    fig = Figure(figsize=(12, 2.2 + 0.9 * sum(ratios)), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": ratios})
    fig.subplots_adjust(left=0.09, right=0.76, top=0.9, bottom=0.08, hspace=0.45)
    draw_fault_strip(axes[0], tl)
    draw_coordinator(axes[1], tl)
    draw_members(axes[2], tl)
    finish_axes(axes, tl)
    fig.suptitle(title, x=0.09, y=0.985, ha="left", fontsize=12, fontweight="bold")
    return fig
