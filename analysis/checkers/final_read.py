"""The final read of one partition, the reference every write and read checker compares
against. Usually its offsets run without a gap, so the record at an offset is found by
subtraction, and whole runs of a send or a poll are compared with one list slice."""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import count, repeat
from operator import eq, itemgetter
from typing import Any

from analysis.history import Operation

ABSENT = object()
_first = itemgetter(0)
_second = itemgetter(1)


@dataclass(eq=False)
class FinalRead:
    """Offsets in [start, end) are covered: ``end`` is the high watermark of a finished
    read, or one past the last record of a read that gave up (beyond it is unknown)."""
    partition: str
    complete: bool
    start: int
    end: int
    records: list  # [[offset, value], ...] as the read returned them
    contiguous: bool  # records[i] is the record at offset start + i
    # the values in offset order, for a contiguous read (a send is confirmed by a slice)
    dense: list | None
    t_ms: int
    process: str
    op: int
    repeats: dict[Any, list[int]] = field(default_factory=dict)  # value -> offsets, if more than one
    conflicts: list[tuple[int, Any, Any]] = field(default_factory=list)  # an offset given two values
    _values: dict[int, Any] | None = None
    _offsets: list[int] | None = None

    @property
    def values(self) -> dict[int, Any]:
        """offset -> value (the first, should the read give an offset twice); built on first use."""
        if self._values is None:
            self._values = dict(reversed(self.records))
        return self._values

    def value_at(self, offset: int) -> Any:
        """The value at an offset, or ABSENT."""
        if self.contiguous:
            i = offset - self.start
            return self.records[i][1] if 0 <= i < len(self.records) else ABSENT
        return self.values.get(offset, ABSENT)

    def confirms(self, first: int, values: list) -> bool:
        """Whether the read has values[i] at offset first + i, for every i."""
        if self.dense is not None:
            i = first - self.start
            return i >= 0 and self.dense[i:i + len(values)] == values
        return list(map(self.values.get, range(first, first + len(values)), repeat(ABSENT))) == values

    def confirms_run(self, records: list) -> bool:
        """Whether the read has every [offset, value] of a poll result."""
        if self.contiguous:
            i = records[0][0] - self.start
            return i >= 0 and self.records[i:i + len(records)] == records
        return list(map(self.values.get, map(_first, records), repeat(ABSENT))) == list(map(_second, records))

    def places(self, wanted: set) -> dict[Any, list[int]]:
        """value -> the offsets it has in the read, for the wanted values only (one pass)."""
        found: dict[Any, list[int]] = {}
        if wanted:
            for offset, value in self.records:
                if value in wanted:
                    found.setdefault(value, []).append(offset)
        return found

    def count_between(self, low: int, high: int) -> int:
        """How many offsets strictly between low and high the read has."""
        if self.contiguous:
            return max(0, min(high, self.start + len(self.records)) - max(low + 1, self.start))
        offsets = self._sorted_offsets()
        return bisect_left(offsets, high) - bisect_right(offsets, low)

    def offsets_between(self, low: int, high: int, limit: int) -> list[int]:
        if self.contiguous:
            first = max(low + 1, self.start)
            return list(range(first, min(high, self.start + len(self.records), first + limit)))
        offsets = self._sorted_offsets()
        i = bisect_right(offsets, low)
        return [o for o in offsets[i:i + limit] if o < high]

    def _sorted_offsets(self) -> list[int]:
        if self._offsets is None:
            self._offsets = sorted(self.values)
        return self._offsets

    def witness(self) -> dict:
        return {"source": "read", "process": self.process, "op": self.op, "t_ms": self.t_ms}


def final_read(op: Operation) -> FinalRead:
    done = op.completion
    complete = done is not None and done.type == "ok"
    records = (done.fields.get("records") or []) if done is not None else []
    n = len(records)
    start = records[0][0] if n else 0
    contiguous = n == 0 or (records[-1][0] - start == n - 1 and all(map(eq, map(_first, records), count(start))))
    if not contiguous:
        start = min(map(_first, records))
    end = (start + n) if contiguous else (max(map(_first, records)) + 1)
    if done is not None and complete:
        end = done.fields.get("high_watermark", end)
    if not n:
        start = end
    at = done if done is not None else op.invoke
    values = list(map(_second, records))
    read = FinalRead(op.invoke["partition"], complete, start, end, records, contiguous, values if contiguous else None,
                     at.t_ms, op.process, op.op)
    distinct = set(values)
    distinct.discard(None)
    if len(distinct) != n or not contiguous:
        _find_repeats(read)
    return read


def _find_repeats(read: FinalRead) -> None:
    """The rare slow path: a value at several offsets, or an offset given twice."""
    first_value: dict[int, Any] = {}
    offsets_of: dict[Any, list[int]] = {}
    for offset, value in read.records:
        if offset in first_value:
            if first_value[offset] != value:
                read.conflicts.append((offset, first_value[offset], value))
            continue
        first_value[offset] = value
        if value is not None:
            offsets_of.setdefault(value, []).append(offset)
    read.repeats = {v: o for v, o in offsets_of.items() if len(o) > 1}
