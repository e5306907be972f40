"""The records a client read, as the trace writes them (``[[offset, value], ...]``), and
the final read's window rule, for every binding: a read of one partition keeps the
records at or after its position and below the end it aims at (the high watermark found
when it began), and is complete once its position reaches that end.

The simulation reads batches (:class:`ReadRecords`, its fast JSON text; :func:`records_from`
for the consumers), the real binding one record at a time (:class:`RecordList`).
Compiled with the simulation (isrlab/compiled.py): the final read passes every record of
the run through here.
"""
from __future__ import annotations

from typing import Any, Sequence

from analysis.trace import RawJson, dumps_compact
from broker_core.cleaned_batch import CleanedBatch
from broker_core.segment_format import is_plain_json_text


def read_complete(position: int, end: int) -> bool:
    """Whether a read at ``position`` has everything below ``end``."""
    return position >= end


# (offset of values[0], values, their keys or None, low, high): values[low:high] are got
_Window = tuple[int, tuple[str | None, ...], "tuple[str | None, ...] | None", int, int]


def _windows(batches: Sequence[Any], position: int, end: int | None) -> list[_Window]:
    """One window per batch that has records at or after ``position`` (and before
    ``end``), its records at consecutive offsets; a cleaned batch, whose records keep
    their offsets with gaps between them, gives one window per run of consecutive ones."""
    windows: list[_Window] = []
    for batch in batches:
        if type(batch) is CleanedBatch:
            windows.extend(_cleaned_windows(batch, position, end))
            continue
        base: int = batch.base_offset
        values: tuple[str | None, ...] = batch.records.values
        count = len(values)
        low = position - base if position > base else 0
        high = count if end is None or end - base > count else end - base
        if high > low:
            windows.append((base, values, batch.records.keys, low, high))
    return windows


def _cleaned_windows(batch: CleanedBatch, position: int, end: int | None) -> list[_Window]:
    """The windows of a batch the log cleaner rebuilt (broker_core/cleaned_batch.py)."""
    offsets = batch.offsets
    values = batch.records.values
    keys = batch.records.keys
    out: list[_Window] = []
    i, n = 0, len(offsets)
    while i < n:
        j = i + 1
        while j < n and offsets[j] == offsets[j - 1] + 1:
            j += 1
        first = offsets[i]
        low = position - first if position > first else 0
        high = j - i if end is None or end - first > j - i else end - first
        if high > low:
            out.append((first, values[i:j], None if keys is None else keys[i:j], low, high))
        i = j
    return out


def records_from(batches: Sequence[Any], position: int, end: int | None) -> list[tuple[int, str | None]]:
    """``(offset, value)`` for every record of ``batches`` at or after ``position`` (and
    before ``end``), in offset order; the trace writes each as ``[offset, value]``."""
    got: list[tuple[int, str | None]] = []
    for base, values, _, low, high in _windows(batches, position, end):
        # a compiled loop: a third faster than extending by zip(range, slice)
        for i in range(low, high):
            got.append((base + i, values[i]))
    return got


def keys_from(batches: Sequence[Any], position: int, end: int | None,
              windows: list[_Window] | None = None) -> list[str | None] | None:
    """The keys of the records ``records_from`` returns, in the same order, or None when
    no batch has keys (every keyless workload: nothing more is written)."""
    if all(batch.records.keys is None for batch in batches):
        return None
    got: list[str | None] = []
    for _, _, keys, low, high in (_windows(batches, position, end) if windows is None else windows):
        got.extend(keys[low:high] if keys is not None else [None] * (high - low))
    return got


# ',[%d,"%s"]' n times, by n: one %-format writes a batch's n [offset, value] pairs
_PAIRS_FORMATS: dict[int, str] = {}


class ReadRecords:
    """What the final read got of one partition: the JSON text of its ``[[offset,
    value], ...]``, written batch by batch as the fetches answer.

    The read holds every record of the run (300,000 in the speed benchmark); building an
    ``(offset, value)`` tuple per record for the trace's encoder to take apart again cost
    7 to 8% of a compiled run. A batch whose values JSON writes as they are (no
    nulls, no escapes) is written by one %-format; any other batch is encoded."""
    __slots__ = ("_chunks", "next_offset", "_count", "keys")

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self.next_offset = 0  # the offset after the last record got (0 while none was)
        self._count = 0
        # the key of every record got, once one had a key (None before: keyless reads write none)
        self.keys: list[str | None] | None = None

    def add(self, batches: Sequence[Any], position: int, end: int | None) -> bool:
        """The records of ``batches`` at or after ``position`` (and before ``end``);
        whether there were any."""
        windows = _windows(batches, position, end)
        keys = keys_from(batches, position, end, windows) if windows else None
        if keys is not None and self.keys is None:
            self.keys = [None] * self._count
        for base, values, _, low, high in windows:
            got = values if low == 0 and high == len(values) else values[low:high]
            self._chunks.append(_pairs_json(base + low, got))
            self.next_offset = base + high
            self._count += high - low
        if self.keys is not None:
            self.keys.extend(keys if keys is not None else [None] * (self._count - len(self.keys)))
        return bool(windows)

    def json(self) -> RawJson:
        """The records as a trace field: the chunks are written one by one, never joined
        (the read's text is megabytes: each copy of it costs fresh pages)."""
        if not self._chunks:
            return RawJson("[]")
        chunks = self._chunks
        return RawJson("[", chunks[0][1:], *chunks[1:], "]")  # each chunk starts with a comma


def _pairs_json(first: int, values: tuple[str | None, ...]) -> str:
    """``,[first,"v0"],[first+1,"v1"],...`` as compact JSON (each pair after a comma)."""
    try:
        plain = is_plain_json_text("".join(values))  # type: ignore[arg-type]
    except TypeError:  # a null among them
        plain = False
    if not plain:
        return "," + dumps_compact([[first + i, value] for i, value in enumerate(values)])[1:-1]
    n = len(values)
    form = _PAIRS_FORMATS.get(n)
    if form is None:
        form = _PAIRS_FORMATS[n] = ',[%d,"%s"]' * n
    args: list[object] = [None] * (2 * n)
    args[0::2] = range(first, first + n)
    args[1::2] = values
    return form % tuple(args)


class RecordList:
    """What a read got of one partition, record by record, as ``[offset, value]`` lists:
    the real binding's final read, whose client hands it one record at a time."""
    __slots__ = ("records", "log_start", "position", "end", "keys")

    def __init__(self, log_start: int, end: int) -> None:
        self.records: list[list[Any]] = []
        self.log_start = log_start
        self.position = log_start  # the next offset wanted
        self.end = end
        self.keys: list[str | None] | None = None  # as ReadRecords.keys

    def add(self, offset: int, value: str | None, key: str | None = None) -> bool:
        """Keep the record at ``offset`` if it is the window's (at or after the position,
        below the end); whether it was."""
        if not self.position <= offset < self.end:
            return False
        if key is not None and self.keys is None:
            self.keys = [None] * len(self.records)
        if self.keys is not None:
            self.keys.append(key)
        self.records.append([offset, value])
        self.position = offset + 1
        return True

    @property
    def complete(self) -> bool:
        return read_complete(self.position, self.end)
