"""Checkers about what producers wrote: lost writes, duplicates, offsets with two
values, and how often sends failed."""
from __future__ import annotations

from operator import itemgetter
from typing import Any

from analysis.checkers.compacted_removals import UNKNOWN, CompactedRemovals
from analysis.checkers.index import ABSENT, FinalRead, RunIndex, poll_witness, send_parts, send_witness
from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.history import Operation

ACKS_NAMES: dict[int | None, str] = {-1: "all", 1: "1", 0: "0"}  # by a send's acks; others are "other"
_second = itemgetter(1)


def check_lost_writes(index: RunIndex, removals: CompactedRemovals | None = None) -> list[CheckResult]:
    """Acknowledged values missing from the final read of their partition. Where that
    read did not finish (or never happened), a missing value is unknown, not lost; one
    acknowledged below where the read started (the log start then) was deleted by
    retention (Kafka's Log.deleteOldSegments), not lost, and is counted apart; so is one
    of a compacted partition that a cleaning removed (superseded by a later write of its
    key, or a tombstone: ``compacted_removals``), and one only a write of unknown
    outcome may have superseded is unknown."""
    lost = {"all": Examples(), "1": Examples(), "any": Examples()}
    unknown = {"all": 0, "1": 0, "any": 0}
    deleted = {"all": 0, "1": 0, "any": 0}
    compacted = {"all": 0, "1": 0, "any": 0}
    reads = index.reads
    wanted: dict[str, set] = {}
    for op in index.unconfirmed_sends:
        partition, _, values = send_parts(op)
        wanted.setdefault(partition, set()).update(values)
    present = {p: reads[p].places(v) if p in reads else {} for p, v in wanted.items()}
    for op in index.unconfirmed_sends:
        partition, first, values = send_parts(op)
        read = reads.get(partition)
        for i, value in enumerate(values):
            if value in present[partition]:
                continue
            acks = ACKS_NAMES.get(op.invoke.fields.get("acks"), "other")
            if read is None or not read.complete:
                unknown["any"] += 1
                unknown[acks] = unknown.get(acks, 0) + 1
                continue
            why = removals.removed(partition, first + i, read.t_ms, value) if removals else None
            if why is not None:
                counts = unknown if why == UNKNOWN else compacted
                counts["any"] += 1
                counts[acks] = counts.get(acks, 0) + 1
                continue
            if first + i < read.start and (not removals or removals.deletes(partition)):
                deleted["any"] += 1
                deleted[acks] = deleted.get(acks, 0) + 1
                continue
            example = {"t_ms": op.done.t_ms, "process": op.process, "op": op.op,
                       "partition": partition, "offset": first + i, "value": value, "acks": acks}
            lost["any"].add(example)
            if acks in lost:
                lost[acks].add(example)
    names = {"any": "lost_writes", "all": "lost_writes_acks_all", "1": "lost_writes_acks_1"}
    results = []
    for key, name in names.items():
        what = "acknowledged records" + ("" if key == "any" else f" (acks={key})")
        note = f"; {unknown[key]} unknown (final read unfinished)" if unknown[key] else ""
        details = {"unknown": unknown[key]}
        if deleted[key]:
            note += f"; {deleted[key]} deleted by retention (below the log start)"
            details["deleted_by_retention"] = deleted[key]
        if compacted[key]:
            note += f"; {compacted[key]} removed by compaction (superseded, or a tombstone)"
            details["removed_by_compaction"] = compacted[key]
        if key == "any":
            details["acknowledged_records"] = index.acknowledged_records
        results.append(anomaly(name, lost[key], f"{what} missing from the final read{note}",
                               f"no {what} missing from the final read{note}", details))
    return results


def check_duplicates(index: RunIndex) -> CheckResult:
    """Values the final read of a partition holds at more than one offset (a retried
    send appended twice)."""
    found = Examples()
    extra = 0
    for partition, read in index.reads.items():
        for value, offsets in read.repeats.items():
            extra += len(offsets) - 1
            found.add({"value": value, "partition": partition, "offsets": offsets,
                       "t_ms": read.t_ms, "process": read.process})
    _name_the_sends(index, found.items)
    return anomaly("duplicates", found, "values at more than one offset in the final read",
                   "no value at more than one offset in the final read", {"extra_copies": extra})


def _name_the_sends(index: RunIndex, examples: list[dict]) -> None:
    """Add the send operation(s) that wrote each example's value (one pass, only if needed)."""
    if not examples:
        return
    wanted = {e["value"]: e for e in examples}
    partitions = {e["partition"] for e in examples}
    for op in index.sends:
        fields = op.invoke.fields
        if fields.get("partition") not in partitions or wanted.keys().isdisjoint(fields["values"]):
            continue
        for value in fields["values"]:
            example = wanted.get(value)
            if example is not None:
                example.setdefault("sends", []).append(
                    {"process": op.process, "op": op.op, "outcome": op.outcome, "t_ms": op.invoke.t_ms})


class _OffsetValues:
    """The value each (partition, offset) was given, the final read first, and every
    offset that was given two. Witnesses are built only for conflicts."""

    def __init__(self, reads: dict[str, FinalRead]):
        self.reads = reads
        self.conflicts: dict[tuple[str, int], dict[Any, dict]] = {}
        self.elsewhere: dict[str, dict[int, tuple]] = {}  # offsets the read lacks
        for partition, read in reads.items():
            for offset, first, other in read.conflicts:
                self.conflicts[(partition, offset)] = {first: read.witness(), other: read.witness()}

    def observe(self, partition: str, offset: int, value: Any, op: Operation, witness_of) -> None:
        read = self.reads.get(partition)
        expected = read.value_at(offset) if read is not None else ABSENT
        if read is not None and expected is not ABSENT:
            if expected == value:
                return
            first_witness = read.witness()
        else:
            seen = self.elsewhere.setdefault(partition, {})
            if offset not in seen:
                seen[offset] = (value, op, witness_of)
                return
            expected, first_op, first_witness_of = seen[offset]
            if expected == value:
                return
            first_witness = first_witness_of(first_op)
        found = self.conflicts.setdefault((partition, offset), {expected: first_witness})
        found.setdefault(value, witness_of(op))


def check_inconsistent_offsets(index: RunIndex) -> CheckResult:
    """Two different values for one (partition, offset) across acknowledgements, polls
    and the final read. The final read is the reference; offsets it lacks are compared
    among the other sources. Only what the final read did not confirm is looked at."""
    table = _OffsetValues(index.reads)
    for op in index.unconfirmed_sends:
        partition, first, values = send_parts(op)
        for i, value in enumerate(values):
            table.observe(partition, first + i, value, op, send_witness)
    for op, partition, records in index.unconfirmed_polls:
        for offset, value in records:
            table.observe(partition, offset, value, op, poll_witness)
    found = Examples()
    for (partition, offset), by_value in table.conflicts.items():
        found.add({"partition": partition, "offset": offset,
                   "values": [{"value": v, **w} for v, w in by_value.items()]})
    return anomaly("inconsistent_offsets", found, "offsets with more than one value",
                   "every offset has one value across acknowledgements, polls and the final read")


def check_produce_rates(index: RunIndex) -> list[CheckResult]:
    """Fractions of sends (acks 1 or all) that failed for certain, and that ended unknown."""
    outcomes = index.send_outcomes
    judged = sum(outcomes.values())
    failed, unknown = outcomes["fail"], outcomes["info"]
    details = {"sends": judged, "failed": failed, "unknown": unknown, "acks_0_sends": index.acks_0_sends}
    error_rate = failed / judged if judged else 0.0
    timeout_rate = unknown / judged if judged else 0.0
    return [
        CheckResult("produce_error_rate", error_rate, True,
                    f"{failed} of {judged} sends failed" if judged else "no sends with acks 1 or all",
                    (), details),
        CheckResult("produce_timeout_rate", timeout_rate, True,
                    f"{unknown} of {judged} sends ended unknown" if judged else "no sends with acks 1 or all",
                    (), dict(details)),
    ]


def check_failed_but_present(index: RunIndex) -> CheckResult:
    """Sends that completed ``fail`` (certainly not appended) of which a value is in the
    final read of their partition. Values are unique in a run, so the value found is
    the one the send carried: the client called a write failed that happened, which is
    a bug in the client's classification or in the model, never a broker anomaly to
    expect."""
    found = Examples()
    reads = index.reads
    wanted: dict[str, set] = {}
    for op in index.failed_sends:
        wanted.setdefault(op.invoke.fields["partition"], set()).update(op.invoke.fields["values"])
    # isdisjoint walks the read's values in C: a sound run never builds the places
    present = {p: reads[p].places(v) for p, v in wanted.items()
               if p in reads and not v.isdisjoint(_unconfirmed_values(index, p, reads[p]))}
    records = 0
    for op in index.failed_sends:
        fields = op.invoke.fields
        places = present.get(fields["partition"], {})
        there = [[places[v][0], v] for v in fields["values"] if v in places]
        if not there:
            continue
        records += len(there)
        found.add({"t_ms": op.done.t_ms, "process": op.process, "op": op.op,
                   "partition": fields.get("partition"), "acks": ACKS_NAMES.get(fields.get("acks"), "other"),
                   "error": op.done.fields.get("error"), "reason": op.done.fields.get("reason"),
                   "present": there[:5], "values": len(fields["values"])})
    return anomaly("failed_but_present", found, "sends completed fail whose records are in the final read",
                   "no send completed fail has a record in the final read",
                   {"records": records, "failed_sends": len(index.failed_sends)})



def _unconfirmed_values(index: RunIndex, partition: str, read: FinalRead):
    """The values of a read that no confirmed send put where they are: only there can a
    failed send's value be (values are unique). In a run with acks 1 or all these are
    few, and finding them by the flag bytes spares touching every record."""
    flags = index.acked_offsets.get(partition)
    if read.dense is None or flags is None:
        return map(_second, read.records)
    if 4 * (len(flags) - flags.count(1)) > len(flags):
        return read.dense
    dense = read.dense
    out = []
    i = flags.find(0)
    while i >= 0:
        out.append(dense[i])
        i = flags.find(0, i + 1)
    return out
