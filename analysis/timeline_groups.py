"""The data of a consumer group's timeline: pure functions over a run's events.

A run with group consumers gets one more figure per group (analysis/timeline.py,
drawn by analysis/timeline_groups_draw.py) beside its partitions' figures, which stay
as they were: runs without groups draw exactly what they drew before.

The figure's lanes, on the partitions' time axis:

- **coordinator**: who coordinated the group, i.e. who believed it led the group's
  partition of ``__consumer_offsets`` (``partition_for`` of the group over the run's
  ``offsets.topic.num.partitions``), with the spans in which it was loading the
  partition (answering COORDINATOR_LOAD_IN_PROGRESS). This is the broker's own account,
  the same rule as a partition figure's leader lane, not what the members believed; the
  members' FindCoordinator answers are marks on their own lanes.
- **one lane per member** (its process's node, ``group-<n>-<m>``): each generation it
  believed it owned partitions in, from SyncGroup's answer (``group_assigned``) until it
  gave them up (revoked, left, failed) or its process was killed; its joins, its commits
  by outcome, and fencing: a commit refused for its generation or member id, or the
  member learning it was out of the group (``group_revoked`` reason ``lost``).

Every time is a trace millisecond; the member events' vocabulary is
analysis/group_history.py's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from analysis import group_history as gh
from analysis.history import Operation
from analysis.timeline_data import FaultInterval, LeaderClaim, leader_claims, no_leader_intervals
from analysis.trace import Event
from broker_core.config import broker_config
from broker_core.errors import ConfigError
from broker_core.group_records import OFFSETS_TOPIC, partition_for
from faults.nodes import broker_id_of

# Errors that say the member is no longer in the generation it committed for
FENCING_ERRORS = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"})
PROCESS_ENDS = ("crash", "power_loss")  # faults that kill a member's process (and its beliefs)


@dataclass(frozen=True)
class GenerationSpan:
    """A span in which the member believed it owned ``partitions`` in ``generation``."""
    start_ms: int
    end_ms: int
    generation: int
    partitions: tuple[str, ...]
    leader: bool = False  # it was the group's leader (ran the assignor) in that generation


@dataclass(frozen=True)
class GroupMark:
    """One instant on a member's lane. ``kind``: ``joined``, ``coordinator_found``,
    ``coordinator_lost``, ``commit_ok``, ``commit_fail``, ``commit_info``, ``fenced``
    (a commit refused with a fencing error, or ``group_revoked`` reason ``lost``),
    ``revoked``, ``left``, ``failed``, ``killed`` (its process crashed)."""
    t_ms: int
    kind: str
    label: str = ""


@dataclass
class MemberLane:
    node: str
    spans: list[GenerationSpan] = field(default_factory=list)
    marks: list[GroupMark] = field(default_factory=list)

    def marks_of(self, kind: str) -> list[GroupMark]:
        return [m for m in self.marks if m.kind == kind]


@dataclass
class GroupTimeline:
    """Everything one group's figure shows (``faults``, ``markers`` and ``end_ms`` as a
    partition figure has them, so the fault strip is drawn the same way)."""
    group: str
    partition: str | None  # the group's partition of __consumer_offsets (None: unknown count)
    end_ms: int
    coordinator: list[LeaderClaim]
    loading: list[tuple[int, int, int]]  # (start_ms, end_ms, broker)
    no_coordinator: list[tuple[int, int]]  # spans after the first coordinator in which none led the partition
    members: list[MemberLane]
    generations: list[tuple[int, int]]  # (t_ms, generation): when each newer generation first appeared
    faults: list[FaultInterval] = field(default_factory=list)
    markers: list[tuple[int, str]] = field(default_factory=list)


def group_names(events: Iterable[Event]) -> list[str]:
    """The groups whose members wrote events, sorted (none: a run without groups)."""
    return sorted({e["group"] for e in events
                   if e.type in gh.GROUP_EVENTS and isinstance(e.get("group"), str)})


def offsets_partitions(events: Iterable[Event]) -> int | None:
    """offsets.topic.num.partitions of the run, from ``run_started`` (its profile and
    config, read as the brokers read them); None without one or with a config the
    brokers would refuse."""
    started = next((e for e in events if e.type == "run_started"), None)
    if started is None:
        return None
    try:
        return broker_config(started.get("profile") or "kafka-2.7",
                             dict(started.get("config") or {})).offsets_topic_num_partitions
    except (ConfigError, KeyError, ValueError, TypeError):
        return None


def group_timeline(internal: Sequence[Event], operations: Iterable[Operation], group: str, end_ms: int,
                   partitions: int | None) -> GroupTimeline:
    """One group's lanes from the run's internal events and its operations."""
    partition = None if partitions is None else f"{OFFSETS_TOPIC}-{partition_for(group, partitions)}"
    coordinator = [] if partition is None else leader_claims(internal, partition, end_ms)
    commits = [op for op in operations if op.f == gh.COMMIT and op.invoke.get("group") == group]
    lanes: dict[str, MemberLane] = {}
    for e in internal:
        if e.type in gh.GROUP_EVENTS and e.get("group") == group:
            lanes.setdefault(e.node, MemberLane(e.node))
    for op in commits:
        lanes.setdefault(op.process, MemberLane(op.process))
    for node, lane in lanes.items():
        _member_lane(lane, [e for e in internal if e.node == node or e.type == "fault_started"], group, end_ms)
        lane.marks.extend(_commit_marks([op for op in commits if op.process == node], end_ms))
        lane.marks.sort(key=lambda m: m.t_ms)
    current = [c for c in coordinator if not c.stale]
    gaps = no_leader_intervals(current, min(c.start_ms for c in current), end_ms) if current else []
    return GroupTimeline(group, partition, end_ms, coordinator,
                         [] if partition is None else loading_spans(internal, partition, end_ms), gaps,
                         [lanes[n] for n in sorted(lanes)], _generations(internal, group))


def _member_lane(lane: MemberLane, events: Iterable[Event], group: str, end_ms: int) -> None:
    """The member's generation spans and its group facts, in trace order."""
    open_span: tuple[int, int, tuple[str, ...], bool] | None = None  # (start, generation, partitions, leader)
    leader_of: set[int] = set()  # generations the member led

    def close(t_ms: int) -> None:
        nonlocal open_span
        if open_span is not None:
            start, generation, owned, led = open_span
            lane.spans.append(GenerationSpan(start, max(t_ms, start), generation, owned, led))
            open_span = None

    for e in events:
        if e.type == "fault_started":
            if e.get("fault") in PROCESS_ENDS and lane.node in (e.get("targets") or ()):
                close(e.t_ms)
                lane.marks.append(GroupMark(e.t_ms, "killed", str(e.get("fault"))))
            continue
        if e.get("group") != group:
            continue
        mark = _fact_mark(e)
        if mark is not None:
            lane.marks.append(mark)
        if e.type == gh.GROUP_JOINED and e.get("leader") == e.get("member_id"):
            leader_of.add(e["generation"])
        elif e.type == gh.GROUP_ASSIGNED:
            close(e.t_ms)
            generation = e.get("generation", -1)
            open_span = (e.t_ms, generation, tuple(e.get("partitions") or ()), generation in leader_of)
        elif e.type in (gh.GROUP_REVOKED, gh.GROUP_LEFT, gh.GROUP_MEMBER_FAILED):
            close(e.t_ms)
    close(end_ms)


def _fact_mark(e: Event) -> GroupMark | None:
    if e.type == gh.GROUP_JOINED:
        return GroupMark(e.t_ms, "joined", f"g{e.get('generation')}")
    if e.type == gh.GROUP_COORDINATOR_FOUND:
        return GroupMark(e.t_ms, "coordinator_found", f"b{e.get('coordinator')}")
    if e.type == gh.GROUP_COORDINATOR_LOST:
        return GroupMark(e.t_ms, "coordinator_lost", str(e.get("reason", "")))
    if e.type == gh.GROUP_REVOKED:
        reason = str(e.get("reason", ""))
        return GroupMark(e.t_ms, "fenced" if reason == "lost" else "revoked", reason)
    if e.type == gh.GROUP_LEFT:
        return GroupMark(e.t_ms, "left", str(e.get("reason", "")))
    if e.type == gh.GROUP_MEMBER_FAILED:
        return GroupMark(e.t_ms, "failed", str(e.get("error", "")))
    return None


def _commit_marks(commits: Iterable[Operation], end_ms: int) -> list[GroupMark]:
    """A commit at its answer (unanswered: at its invoke); a refusal for the member's
    generation or id is a fencing mark labelled with its error."""
    out = []
    for op in commits:
        done = op.completion
        t_ms = done.t_ms if done is not None else op.invoke.t_ms
        errors = set((done.get("errors") or {}).values()) if done is not None else set()
        fencing = sorted(errors & FENCING_ERRORS)
        if op.outcome == "fail" and fencing:
            out.append(GroupMark(t_ms, "fenced", fencing[0]))
        else:
            reason = done.get("reason") if done is not None else "no answer"
            out.append(GroupMark(t_ms, f"commit_{op.outcome}", str(reason or ",".join(sorted(errors)))))
    return out


def loading_spans(events: Iterable[Event], partition: str, end_ms: int) -> list[tuple[int, int, int]]:
    """(start, end, broker): a broker loading the partition's groups, from
    ``group_partition_loading`` to its ``group_partition_loaded``, ``group_load_failed`` or
    ``group_partition_unloaded``, or to the broker's end (killed, or started again)."""
    number = int(partition.rsplit("-", 1)[1])
    started: dict[int, int] = {}
    out = []

    def close(broker: int, t_ms: int) -> None:
        out.append((started.pop(broker), t_ms, broker))

    for e in events:
        if e.type == "fault_started" and e.get("fault") in PROCESS_ENDS + ("shutdown",):
            for broker in [b for b in e.get("targets") or () if b in started]:
                close(broker, e.t_ms)
            continue
        broker = broker_id_of(e.node)
        if broker is None:
            continue
        if e.type == "broker_started" and broker in started:
            close(broker, e.t_ms)
        elif e.get("partition") != number:
            continue
        elif e.type == "group_partition_loading":
            started[broker] = e.t_ms
        elif e.type in ("group_partition_loaded", "group_load_failed", "group_partition_unloaded") and broker in started:
            close(broker, e.t_ms)
    for broker in sorted(started):
        close(broker, max(end_ms, started.get(broker, end_ms)))
    return sorted(out)


def _generations(events: Iterable[Event], group: str) -> list[tuple[int, int]]:
    """(t_ms, generation) each time a newer generation of the group first appears in a join."""
    out: list[tuple[int, int]] = []
    for e in events:
        if e.type == gh.GROUP_JOINED and e.get("group") == group:
            generation = e.get("generation")
            if isinstance(generation, int) and (not out or generation > out[-1][1]):
                out.append((e.t_ms, generation))
    return out
