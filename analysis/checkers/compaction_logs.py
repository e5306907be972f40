"""Compaction checkers about logs and readers: replicas mean the same key -> value map
(``compacted_replicas_converge``), offsets never move (``offsets_unchanged``), and a
consumer that keeps up sees every acknowledged record (``keeping_up_consumer_sees_all``).
Compacted topics only (analysis/checkers/compaction.py)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

from analysis.checkers.compaction import CompactionView, KeyedRead, not_tested
from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.history import History


def check_replicas_converge(view: CompactionView) -> CheckResult:
    """Replicas of a compacted partition whose ``key_map_digest`` differ once the cluster
    healed (each replica compacts on its own, so their offsets may differ; their maps may
    not). Replicas that digested different ranges (``upto_offset``) are not comparable:
    unknown."""
    name = "compacted_replicas_converge"
    found = Examples()
    compared = unknown = 0
    for partition in sorted(view.replica_logs):
        logs = [e for e in view.replica_logs[partition] if "key_map_digest" in e.fields]
        if len(logs) < 2:
            continue
        if len({e["upto_offset"] for e in logs}) > 1:
            unknown += 1
            continue
        compared += 1
        groups: dict[str, list[str]] = {}
        for event in logs:
            groups.setdefault(event["key_map_digest"], []).append(event.node)
        if len(groups) > 1:
            found.add({"t_ms": max(e.t_ms for e in logs), "partition": partition,
                       "replicas": sorted(sorted(nodes) for nodes in groups.values()),
                       "keys": {e.node: e.get("key_map_keys") for e in logs},
                       "upto_offset": logs[0]["upto_offset"]})
    if compared == 0:
        return not_tested(name, view, "no compacted partition had two replicas with a key_map_digest"
                          + (f" over the same range ({unknown} not comparable)" if unknown else ""))
    return anomaly(name, found, "compacted partitions whose replicas hold different key -> value maps",
                   f"the replicas of all {compared} compacted partitions hold the same key -> value map",
                   {"tested": True, "partitions_compared": compared, "unknown": unknown})


def check_offsets_unchanged(view: CompactionView) -> CheckResult:
    """Every record read twice (by two consumers, a consumer and the final read, or read
    and acknowledged) has one offset, key and value: an offset never holds another record,
    a value (unique per send) never moves to another offset, and offsets strictly increase
    within a read. A value two offsets hold in one read is a duplicate (``duplicates``), not
    a move."""
    name = "offsets_unchanged"
    if not view.compacted:
        return not_tested(name, view, "")
    found = Examples()
    at_offset: dict[tuple[str, int], tuple[Any, Any, dict]] = {}
    offsets_of: dict[tuple[str, Any], tuple[int, dict]] = {}
    duplicated: set[tuple[str, Any]] = set()
    reported: set = set()
    twice = 0
    for source, partition, records, witness in _witnesses(view):
        values = [v for _, _, v in records if v is not None]
        if len(set(values)) < len(values):
            duplicated.update((partition, v) for v in values if values.count(v) > 1)
        previous = None
        for offset, key, value in records:
            if previous is not None and offset <= previous and ("order", partition, witness["op"]) not in reported:
                reported.add(("order", partition, witness["op"]))
                found.add({"t_ms": witness["t_ms"], "kind": "not_increasing", "partition": partition,
                           "offset": offset, "previous_offset": previous, "by": witness})
            previous = offset
            first = at_offset.setdefault((partition, offset), (key, value, witness))
            if first[2] is not witness:
                twice += 1
                if (first[0], first[1]) != (key, value) and (partition, offset) not in reported:
                    reported.add((partition, offset))
                    found.add({"t_ms": witness["t_ms"], "kind": "offset_changed", "partition": partition,
                               "offset": offset, "first": {"key": first[0], "value": first[1], "by": first[2]},
                               "then": {"key": key, "value": value, "by": witness}})
            if value is not None:
                placed = offsets_of.setdefault((partition, value), (offset, witness))
                if placed[0] != offset and (partition, value) not in reported and (partition, value) not in duplicated:
                    reported.add((partition, value))
                    found.add({"t_ms": witness["t_ms"], "kind": "value_moved", "partition": partition,
                               "value": value, "offsets": [placed[0], offset], "by": [placed[1], witness]})
    if twice == 0:
        return not_tested(name, view, "no record of a compacted topic was read twice")
    return anomaly(name, found, "records of compacted topics whose offset moved or whose offsets did not increase",
                   f"offsets never moved ({twice} records read more than once)", {"tested": True, "read_twice": twice})


def _witnesses(view: CompactionView):
    """(source, partition, [(offset, key, value)], witness) of every acknowledged send
    and every read of a compacted partition."""
    for partition in sorted(view.writes):
        by_op: dict[tuple[str, int], list] = {}
        for w in view.writes[partition]:
            if w.acknowledged:
                by_op.setdefault((w.process, w.op), []).append(w)
        for (process, op), writes in by_op.items():
            yield "send", partition, [(w.offset, w.key, w.value) for w in writes], \
                {"source": "send", "process": process, "op": op, "t_ms": writes[0].done_ms}
    for read in view.all_reads():
        yield read.source, read.partition, list(read.records), read.witness()


def check_keeping_up(view: CompactionView, history: History) -> CheckResult:
    """A consumer that keeps up sees every acknowledged record of a compacted partition
    at or after where it started: every record is required of it unless a cleaning
    (``segments_cleaned``) that may have removed it happened while the consumer's position
    was not yet past it. A consumer whose position was reset (out of range, truncation) is
    not judged there; one left behind at the end has the records past its position unknown."""
    name = "keeping_up_consumer_sees_all"
    if not view.compacted:
        return not_tested(name, view, "")
    starts, reset = _starts(view, history)
    polls: dict[tuple[str, str], list[KeyedRead]] = {}
    for read in view.polls:
        polls.setdefault((read.process, read.partition), []).append(read)
    found = Examples()
    tally = {"judged": 0, "excused": 0, "unknown": 0, "reset": len(reset)}
    for consumer, partition in sorted(starts):
        if (consumer, partition) in reset:
            continue
        got = polls.get((consumer, partition), [])
        seen = {(o, v) for read in got for o, _, v in read.records}
        timeline = [(r.t_ms, max(o for o, _, _ in r.records) + 1) for r in got]
        times = [t for t, _ in timeline]
        final_position = max((p for _, p in timeline), default=starts[(consumer, partition)])
        cleanings = [(e.t_ms, e.get("end_offset", 0)) for e in view.cleanings if e["partition"] == partition]
        for write in view.writes.get(partition, []):
            offset = write.offset
            if offset is None or offset < starts[(consumer, partition)]:
                continue
            if (offset, write.value) in seen:
                tally["judged"] += 1
                continue
            if (consumer, partition) in view.behind and offset >= final_position:
                tally["unknown"] += 1
                continue
            if any(end > offset and _position_at(timeline, times, t, starts[(consumer, partition)]) <= offset
                   for t, end in cleanings):
                tally["excused"] += 1  # cleaned before this consumer got there: it did not keep up
                continue
            tally["judged"] += 1
            found.add({"t_ms": write.done_ms, "consumer": consumer, "partition": partition, "offset": offset,
                       "key": write.key, "value": write.value, "send": write.example()})
    if tally["judged"] == 0:
        return not_tested(name, view, "no consumer read a compacted partition with acknowledged records")
    return anomaly(name, found, "acknowledged records a keeping-up consumer never saw",
                   f"keeping-up consumers saw every acknowledged record ({tally['judged']} judged)",
                   {"tested": True, **tally})


def _starts(view: CompactionView, history: History) -> tuple[dict[tuple[str, str], int], set]:
    """Where each consumer began each compacted partition (its initial reset, else its
    first fetch position), and the (consumer, partition) whose position was moved later."""
    starts: dict[tuple[str, str], int] = {}
    reset: set[tuple[str, str]] = set()
    for event in view.resets:
        place = (event.node, event["partition"])
        if event.get("reason") == "initial":
            starts.setdefault(place, event["to_offset"])
        else:
            reset.add(place)
    for op in history.operations:
        if op.f == "poll":
            for partition, position in (op.invoke.get("positions") or {}).items():
                if view.is_compacted(partition):
                    starts.setdefault((op.process, partition), position)
    return starts, reset


def _position_at(timeline: list[tuple[int, int]], times: list[int], t_ms: int, start: int) -> int:
    """A consumer's position at ``t_ms``: past the last record it got by then."""
    i = bisect_right(times, t_ms)
    return max([start, *(p for _, p in timeline[:i])])
