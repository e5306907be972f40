"""Checkers about what consumers saw, per consumer process and partition, in the order
their polls completed: offsets going backwards, committed records skipped, records read
and later truncated, high watermarks going backwards."""
from __future__ import annotations

from analysis.checkers.index import ABSENT, FinalRead, RunIndex
from analysis.checkers.result import CheckResult, Examples, anomaly

MAX_MISSED_LISTED = 5


def is_reset(error: str) -> bool:
    """A fetch error after which a consumer moves its position on purpose. Only
    OFFSET_OUT_OF_RANGE does: after other errors (NOT_LEADER_OR_FOLLOWER, ...) the
    consumer keeps its position, so excusing them would hide skips."""
    return "OFFSETOUTOFRANGE" in error.upper().replace("_", "").replace(" ", "")


class _OrderFindings:
    def __init__(self) -> None:
        self.backwards = Examples()
        self.skips = Examples()
        self.missed_total = 0

    def judge(self, op, partition: str, records: list, previous: int | None, read: FinalRead | None) -> None:
        """Record by record: the slow path, for polls that are not one contiguous run."""
        for offset, value in records:
            if previous is not None:
                if offset <= previous:
                    self.backwards.add({"t_ms": op.completion.t_ms, "process": op.process, "op": op.op,
                                        "partition": partition, "offset": offset,
                                        "previous_offset": previous, "value": value})
                elif offset > previous + 1:
                    self.gap(op, partition, previous, offset, read)
            previous = offset

    def gap(self, op, partition: str, low: int, high: int, read: FinalRead | None) -> None:
        missed = read.count_between(low, high) if read is not None else 0
        if missed:
            self.missed_total += missed
            self.skips.add(_skip_example(op, partition, low, high, missed, read))


def check_consumer_order(index: RunIndex) -> list[CheckResult]:
    """consumer_non_monotonic and consumer_skips, from one pass over the polls."""
    found = _OrderFindings()
    last: dict[tuple[str, str], int | None] = {}
    reads = index.reads
    irregular = index.irregular_polls
    for op in index.polls:
        fields = op.completion.fields
        process = op.process
        for partition, error in (fields.get("errors") or {}).items():
            if is_reset(error):
                last[(process, partition)] = None
        for partition, records in (fields.get("records") or {}).items():
            if not records:
                continue
            key = (process, partition)
            previous = last.get(key)
            low = records[0][0]
            # a result confirmed as one run of a gapless read has gapless offsets itself
            if (process, op.op, partition) not in irregular and (previous is None or low > previous):
                if previous is not None and low > previous + 1:
                    found.gap(op, partition, previous, low, reads.get(partition))
            else:
                found.judge(op, partition, records, previous, reads.get(partition))
            last[key] = records[-1][0]
    return [
        anomaly("consumer_non_monotonic", found.backwards, "times a consumer got an offset at or below one it had",
                "every consumer's offsets only went up (between resets)"),
        anomaly("consumer_skips", found.skips, "jumps over records the final read has",
                "no consumer jumped over a record the final read has", {"missed_records": found.missed_total}),
    ]


def _skip_example(op, partition: str, low: int, high: int, missed: int, read: FinalRead) -> dict:
    listed = read.offsets_between(low, high, MAX_MISSED_LISTED)
    return {"t_ms": op.completion.t_ms, "process": op.process, "op": op.op, "partition": partition,
            "from_offset": low, "to_offset": high, "missed_count": missed,
            "missed": [[o, read.value_at(o)] for o in listed]}


def check_truncated_reads(index: RunIndex) -> CheckResult:
    """Records a consumer got that the final read does not have at that offset. Offsets
    below the read's first one (retention) or past what an unfinished read covered are
    unknown, not judged."""
    found = Examples()
    counted: set[tuple[str, int, object]] = set()
    unknown = 0
    reads = index.reads
    for op, partition, records in index.unconfirmed_polls:
        done = op.completion
        read = reads.get(partition)
        if read is None:
            unknown += len(records)
            continue
        for offset, value in records:
            final_value = read.value_at(offset)
            if final_value is not ABSENT:
                if final_value == value:
                    continue
            elif offset < read.start or (offset >= read.end and not read.complete):
                unknown += 1
                continue
            key = (partition, offset, value)
            if key in counted:
                continue
            counted.add(key)
            found.add({"t_ms": done.t_ms, "process": op.process, "op": op.op, "partition": partition,
                       "offset": offset, "value": value,
                       "final_value": None if final_value is ABSENT else final_value})
    return anomaly("consumer_truncated_reads", found, "records consumers read that the final read lacks",
                   "every record consumers read is in the final read at the same offset",
                   {"unknown": unknown})


def check_hw_regressions(index: RunIndex) -> CheckResult:
    """Polls whose high watermark for a partition is below one the same consumer saw earlier."""
    found = Examples()
    highest: dict[tuple[str, str], tuple[int, int]] = {}  # -> (high watermark, op)
    for op in index.polls:
        done = op.completion
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
