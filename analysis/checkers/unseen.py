"""Acknowledged records that no consumer ever saw.

For a gapless final read the index holds two flags per offset: a confirmed send put
its value there, and a confirmed poll returned that value there. Offsets with the first
flag and not the second are found with whole-number arithmetic over the flag bytes;
only they, and the sends the read did not confirm, are then judged value by value
(a value may also have been polled at another copy or at another offset)."""
from __future__ import annotations

from typing import Any

from analysis.checkers.compacted_removals import CompactedRemovals
from analysis.checkers.index import RunIndex, send_parts
from analysis.checkers.result import CheckResult, Examples, anomaly


def check_unseen(index: RunIndex, removals: CompactedRemovals | None = None) -> CheckResult:
    """A record of a compacted partition that a cleaning removed (``compacted_removals``)
    is not required of any consumer: ``keeping_up_consumer_sees_all`` judges whether
    the consumers that kept up saw it before it went."""
    if index.poll_count == 0:
        return CheckResult("unseen", 0, True, "no consumers", (), {"no_consumers": True})
    unseen: list[tuple[str, int, Any]] = []  # (partition, offset, value)
    for partition, acked in index.acked_offsets.items():
        unseen.extend(_unpolled(index, partition, acked))
    loose = _loose_unpolled(index)
    found = Examples()
    removed = 0
    for partition, offset, value in unseen:
        if removals and removals.removed(partition, offset, value=value):
            removed += 1
            continue
        found.add({"partition": partition, "offset": offset, "value": value})
    for example in loose:
        if removals and removals.removed(example["partition"], example["offset"], value=example["value"]):
            removed += 1
            continue
        found.add(example)
    _name_the_sends(index, found.items)
    details: dict = {"no_consumers": False}
    if removals:
        details["removed_by_compaction"] = removed
    return anomaly("unseen", found, "acknowledged records no consumer saw",
                   "every acknowledged record was seen by a consumer", details)


def _unpolled(index: RunIndex, partition: str, acked: bytearray) -> list[tuple[str, int, Any]]:
    polled = index.polled_offsets[partition]
    size = len(acked)
    flags = (int.from_bytes(acked, "little") & ~int.from_bytes(polled, "little")).to_bytes(size, "little")
    read = index.reads[partition]
    out = []
    i = flags.find(1)
    while i >= 0:
        value = read.records[i][1]
        if not _polled_elsewhere(index, partition, value):
            out.append((partition, read.start + i, value))
        i = flags.find(1, i + 1)
    return out


def _polled_elsewhere(index: RunIndex, partition: str, value: Any, places: dict | None = None) -> bool:
    """Whether a poll returned the value other than at the offset in question: from a
    result the read did not confirm, or at an offset where the read also has it."""
    if value in index.polled_elsewhere:
        return True
    read = index.reads.get(partition)
    polled = index.polled_offsets.get(partition)
    if read is None or polled is None:
        return False
    offsets = places.get(value, ()) if places is not None else read.repeats.get(value, ())
    return any(polled[o - read.start] for o in offsets)


def _loose_unpolled(index: RunIndex) -> list[dict]:
    """Value by value, for sends whose offsets are not flagged."""
    wanted: dict[str, set] = {}
    for op in index.loose_sends:
        partition, _, values = send_parts(op)
        wanted.setdefault(partition, set()).update(values)
    places = {p: index.reads[p].places(v) if p in index.reads else {} for p, v in wanted.items()}
    out = []
    for op in index.loose_sends:
        partition, first, values = send_parts(op)
        for i, value in enumerate(values):
            if not _polled_elsewhere(index, partition, value, places[partition]):
                out.append({"t_ms": op.done.t_ms, "process": op.process, "op": op.op,
                            "partition": partition, "offset": first + i, "value": value})
    return out


def _name_the_sends(index: RunIndex, examples: list[dict]) -> None:
    """Give the examples found by offset the time, process and op of their send (one
    pass over the acknowledged sends of their partitions, only when there are some)."""
    wanted = {(e["partition"], e["offset"]): e for e in examples if "op" not in e}
    if not wanted:
        return
    offsets: dict[str, set[int]] = {}
    for partition, offset in wanted:
        offsets.setdefault(partition, set()).add(offset)
    for op in index.acknowledged:
        partition, first, values = send_parts(op)
        if partition not in offsets or offsets[partition].isdisjoint(range(first, first + len(values))):
            continue
        for i in range(len(values)):
            example = wanted.get((partition, first + i))
            if example is not None and "op" not in example:
                example.update({"t_ms": op.done.t_ms, "process": op.process, "op": op.op})
