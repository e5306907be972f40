"""Checkers about what consumers saw, per consumer process and partition, in the order
their polls completed: offsets going backwards, committed records skipped (jumped over,
or replaced under the consumer's position), records read and later truncated, high
watermarks going backwards."""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from analysis.checkers.compacted_removals import CompactedRemovals
from analysis.checkers.index import ABSENT, FinalRead, RunIndex
from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.trace import Event

MAX_MISSED_LISTED = 5


def is_reset(error: str) -> bool:
    """A fetch error after which a consumer moves its position on purpose. Only
    OFFSET_OUT_OF_RANGE does: after other errors (NOT_LEADER_OR_FOLLOWER, ...) the
    consumer keeps its position, so excusing them would hide skips."""
    return "OFFSETOUTOFRANGE" in error.upper().replace("_", "").replace(" ", "")


class _OrderFindings:
    def __init__(self, removals: CompactedRemovals | None = None) -> None:
        self.backwards = Examples()
        self.skips = Examples()
        self.missed_total = 0
        self.replaced_total = 0
        self.removals = removals if removals else None
        self.removed_total = 0  # records a jump passed that a cleaning had removed by then

    def judge(self, op, partition: str, records: list, previous: int | None, read: FinalRead | None) -> None:
        """Record by record: the slow path, for polls that are not one contiguous run."""
        for offset, value in records:
            if previous is not None:
                if offset <= previous:
                    self.backwards.add({"t_ms": op.done.t_ms, "process": op.process, "op": op.op,
                                        "partition": partition, "offset": offset,
                                        "previous_offset": previous, "value": value})
                elif offset > previous + 1:
                    self.gap(op, partition, previous, offset, read)
            previous = offset

    def gap(self, op, partition: str, low: int, high: int, read: FinalRead | None) -> None:
        if read is None:
            return  # no final read of the partition: nothing is known to be missed
        missed = read.count_between(low, high)
        if missed and self.removals is not None:
            missed = self._not_removed(op, partition, low, high, missed, read)
        if missed:
            self.missed_total += missed
            self.skips.add(_skip_example(op, partition, low, high, missed, read))

    def _not_removed(self, op, partition: str, low: int, high: int, missed: int, read: FinalRead) -> int:
        """How many of the records the final read has between low and high a cleaning
        had not removed by the poll (the final read may come from a replica that cleaned
        less than the one the consumer read)."""
        removals = self.removals
        assert removals is not None
        removed = sum(1 for offset in read.offsets_between(low, high, missed)
                      if removals.removed(partition, offset, op.done.t_ms, read.value_at(offset)))
        self.removed_total += removed
        return missed - removed


class _Stretches:
    """Where each consumer's position last restarted, and the records it got since then
    at an offset where the final read holds another value (the log under it was
    replaced). A ``position_reset`` line restarts the position at its ``to_offset``;
    in traces without such lines, an OFFSET_OUT_OF_RANGE error restarts it unknown."""

    def __init__(self, index: RunIndex):
        self.resets: dict[str, list[tuple[int, Event]]] = {}
        for seq, event in index.resets:
            self.resets.setdefault(event.node, []).append((seq, event))
        self.applied: dict[str, int] = {}  # process -> how many of its resets were applied
        self.start: dict[tuple[str, str], int] = {}  # (process, partition) -> first poll of its stretch
        self.wrong: dict[tuple[str, str], dict[int, object]] = {}  # -> offset -> the value it got instead

    def apply_resets(self, op, i: int, last: dict) -> None:
        """The resets of op's consumer written before op was invoked."""
        mine = self.resets.get(op.process)
        if not mine:
            return
        done = self.applied.get(op.process, 0)
        while done < len(mine) and mine[done][0] < op.seq:
            event = mine[done][1]
            key = (op.process, event["partition"])
            last[key] = event["to_offset"] - 1  # a first record above to_offset is a jump
            self.restart(key, i)
            done += 1
        self.applied[op.process] = done

    def restart(self, key: tuple[str, str], i: int) -> None:
        self.start[key] = i
        self.wrong.pop(key, None)

    def note(self, key: tuple[str, str], records: list, read: FinalRead | None) -> None:
        """Records of a poll the final read did not confirm as a run."""
        if read is None:
            return
        for offset, value in records:
            final_value = read.value_at(offset)
            if final_value is not ABSENT and final_value != value:
                self.wrong.setdefault(key, {}).setdefault(offset, value)


def check_consumer_order(index: RunIndex, removals: CompactedRemovals | None = None) -> list[CheckResult]:
    """consumer_non_monotonic and consumer_skips, from one pass over the polls (and a
    second over the polls of consumers that got replaced records, if any did). A jump
    over records a cleaning had removed is no skip (``compacted_removals``)."""
    found = _OrderFindings(removals)
    stretches = _Stretches(index)
    last: dict[tuple[str, str], int | None] = {}
    reads = index.reads
    irregular = index.irregular_polls
    resets = stretches.resets
    for i, op in enumerate(index.polls):
        if resets:
            stretches.apply_resets(op, i, last)
        fields = op.done.fields
        process = op.process
        for partition, error in (fields.get("errors") or {}).items():
            if is_reset(error):
                last[(process, partition)] = None
                stretches.restart((process, partition), i + 1)
        for partition, records in (fields.get("records") or {}).items():
            if not records:
                continue
            key = (process, partition)
            previous = last.get(key)
            low = records[0][0]
            # a result confirmed as one run of a gapless read has gapless offsets itself
            regular = (process, op.op, partition) not in irregular
            if regular and (previous is None or low > previous):
                if previous is not None and low > previous + 1:
                    found.gap(op, partition, previous, low, reads.get(partition))
            else:
                found.judge(op, partition, records, previous, reads.get(partition))
            if not regular:
                stretches.note(key, records, reads.get(partition))
            last[key] = records[-1][0]
    if stretches.wrong:
        _replaced_skips(index, stretches, found)
    skip_details = {"missed_records": found.missed_total, "replaced_records": found.replaced_total}
    if removals:
        skip_details["removed_by_compaction"] = found.removed_total
    return [
        anomaly("consumer_non_monotonic", found.backwards, "times a consumer got an offset at or below one it had",
                "every consumer's offsets only went up (between resets)"),
        anomaly("consumer_skips", found.skips, "skips over records the final read has",
                "no consumer skipped a record the final read has", skip_details),
    ]


def _replaced_skips(index: RunIndex, stretches: _Stretches, found: _OrderFindings) -> None:
    """Offsets below a consumer's position where it got a record, since its last reset,
    but never the one the final read holds there: the log under its position was
    replaced and its offsets never jumped, so only the values tell."""
    wanted = {key: sorted(offsets) for key, offsets in stretches.wrong.items()}
    got_final: dict[tuple[str, str], set[int]] = {key: set() for key in wanted}
    last_op: dict[tuple[str, str], object] = {}
    irregular = index.irregular_polls
    for i, op in enumerate(index.polls):
        for partition, records in (op.done.fields.get("records") or {}).items():
            key = (op.process, partition)
            offsets = wanted.get(key)
            if not records or offsets is None or i < stretches.start.get(key, 0):
                continue
            last_op[key] = op
            lo = bisect_left(offsets, records[0][0])
            hi = bisect_right(offsets, records[-1][0])
            if lo == hi:
                continue
            if (op.process, op.op, partition) not in irregular:  # a confirmed run: the final values
                got_final[key].update(offsets[lo:hi])
            else:
                read = index.reads[partition]
                got_final[key].update(o for o, v in records if read.value_at(o) == v)
    for key in sorted(wanted):
        missed = [o for o in wanted[key] if o not in got_final[key]]
        if missed:
            found.replaced_total += len(missed)
            found.missed_total += len(missed)
            found.skips.add(_replaced_example(last_op[key], key[1], missed, stretches.wrong[key],
                                              index.reads[key[1]]))


def _replaced_example(op, partition: str, missed: list[int], got: dict, read: FinalRead) -> dict:
    shown = missed[:MAX_MISSED_LISTED]
    return {"t_ms": op.done.t_ms, "process": op.process, "op": op.op, "partition": partition,
            "kind": "replaced", "from_offset": missed[0], "to_offset": missed[-1] + 1,
            "missed_count": len(missed), "missed": [[o, read.value_at(o)] for o in shown],
            "read_instead": [[o, got[o]] for o in shown]}


def _skip_example(op, partition: str, low: int, high: int, missed: int, read: FinalRead) -> dict:
    listed = read.offsets_between(low, high, MAX_MISSED_LISTED)
    return {"t_ms": op.done.t_ms, "process": op.process, "op": op.op, "partition": partition,
            "kind": "jump", "from_offset": low, "to_offset": high, "missed_count": missed,
            "missed": [[o, read.value_at(o)] for o in listed]}


def check_truncated_reads(index: RunIndex, removals: CompactedRemovals | None = None) -> CheckResult:
    """Records a consumer got that the final read does not have at that offset. Offsets
    below the read's first one (retention) or past what an unfinished read covered are
    unknown, not judged; a record of a compacted partition that a cleaning removed
    later (``compacted_removals``) was read, not truncated."""
    found = Examples()
    counted: set[tuple[str, int, object]] = set()
    unknown = 0
    removed = 0
    reads = index.reads
    for op, partition, records in index.unconfirmed_polls:
        done = op.done
        read = reads.get(partition)
        if read is None:
            unknown += len(records)
            continue
        for offset, value in records:
            final_value = read.value_at(offset)
            if final_value is not ABSENT:
                if final_value == value:
                    continue
            elif removals and removals.removed(partition, offset, read.t_ms, value):
                removed += 1
                continue
            elif (offset < read.start and (not removals or removals.deletes(partition))) or (
                    offset >= read.end and not read.complete):
                unknown += 1
                continue
            key = (partition, offset, value)
            if key in counted:
                continue
            counted.add(key)
            found.add({"t_ms": done.t_ms, "process": op.process, "op": op.op, "partition": partition,
                       "offset": offset, "value": value,
                       "final_value": None if final_value is ABSENT else final_value})
    details = {"unknown": unknown}
    if removals:
        details["removed_by_compaction"] = removed
    return anomaly("consumer_truncated_reads", found, "records consumers read that the final read lacks",
                   "every record consumers read is in the final read at the same offset", details)


def check_hw_regressions(index: RunIndex) -> CheckResult:
    """Polls whose high watermark for a partition is below one the same consumer saw earlier."""
    found = Examples()
    highest: dict[tuple[str, str], tuple[int, int]] = {}  # -> (high watermark, op)
    for op in index.polls:
        done = op.done
        for partition, high_watermark in (done.fields.get("high_watermarks") or {}).items():
            key = (op.process, partition)
            best = highest.get(key)
            if best is None or high_watermark > best[0]:
                highest[key] = (high_watermark, op.op)
            elif high_watermark < best[0]:
                found.add({"t_ms": done.t_ms, "process": op.process, "op": op.op, "partition": partition,
                           "high_watermark": high_watermark, "earlier_high_watermark": best[0],
                           "earlier_op": best[1]})
    return anomaly("hw_regressions", found, "polls saw a high watermark below an earlier one",
                   "no consumer saw a high watermark go down")
