"""Compaction checkers about values: the final value of every key
(``compacted_final_values``) and keys that come back after their tombstone
(``resurrected_keys``). Both judge only compacted topics (analysis/checkers/compaction.py)."""
from __future__ import annotations

from typing import Any

from analysis.checkers.compaction import CompactionView, KeyedRead, KeyedWrite, last_by_key, not_tested
from analysis.checkers.result import CheckResult, Examples, anomaly
from analysis.compacted_topics import topic_of

PASS, INFO, FAIL = "pass", "info", "fail"


def _by_key(writes: list[KeyedWrite]) -> dict[str, list[KeyedWrite]]:
    out: dict[str, list[KeyedWrite]] = {}
    for write in writes:
        if write.key is not None:
            out.setdefault(write.key, []).append(write)
    return out


def _explained_by(writes: list[KeyedWrite], offset: int, value: Any) -> str:
    """How a record (offset, value) of a key that no acknowledged write put there is
    explained: by a send whose outcome is unknown (Kafka may have applied it: info), or by
    nothing the client could have caused (fail: a failed send, or no send at all)."""
    maybe = [w for w in writes if w.value == value and not w.acknowledged and w.outcome != "fail"]
    return INFO if maybe else FAIL


def check_final_values(view: CompactionView) -> CheckResult:
    """A reader from the start after the run sees, for every key, the value of the last
    acknowledged write of it (by offset); a later record that an unacknowledged write may
    have appended is unknown; a tombstoned key shows nothing or the tombstone, nothing only
    once ``delete.retention.ms`` passed since the tombstone was sent."""
    name = "compacted_final_values"
    if not view.compacted:
        return not_tested(name, view, "")
    found = Examples()
    tally = {"keys_judged": 0, "unknown": 0, "tombstones_removed": 0, "tombstones_kept": 0}
    unknown_examples: list[dict] = []
    for partition in sorted(view.writes):
        read = view.reads.get(partition)
        retention = view.retention_ms[topic_of(partition)]
        final = last_by_key(read) if read is not None else {}
        for key, writes in sorted(_by_key(view.writes[partition]).items()):
            acked = [w for w in writes if w.acknowledged]
            if not acked:
                continue
            last = max(acked, key=lambda w: w.offset or 0)
            if read is None or (not read.complete and (last.offset or 0) >= read.end):
                tally["unknown"] += 1
                continue
            tally["keys_judged"] += 1
            outcome, kind = _judge_key(view, writes, last, final.get(key), read, retention, tally)
            if outcome == PASS:
                continue
            got = final.get(key)
            example = {"t_ms": read.t_ms, "partition": partition, "key": key, "kind": kind,
                       "expected": {"value": last.value, **last.example()},
                       "read": None if got is None else {"offset": got[0], "value": got[1]}}
            if outcome == INFO:
                tally["unknown"] += 1
                if len(unknown_examples) < 10:
                    unknown_examples.append(example)
            else:
                found.add(example)
    if tally["keys_judged"] == 0:
        return not_tested(name, view, "no acknowledged keyed write to a compacted topic has a final read")
    details = {"tested": True, **tally, "unknown_examples": unknown_examples}
    note = f"; {tally['unknown']} unknown (writes Kafka may have applied, or reads unfinished)" \
        if tally["unknown"] else ""
    return anomaly(name, found, f"keys whose final value is not their last acknowledged write's{note}",
                   f"all {tally['keys_judged']} keys read back with their last acknowledged value{note}", details)


def _judge_key(view: CompactionView, writes: list[KeyedWrite], last: KeyedWrite, got: tuple[int, Any] | None,
               read: KeyedRead, retention_ms: int, tally: dict) -> tuple[str, str]:
    """(pass/info/fail, what kind of case) for one key of a final read."""
    last_offset = last.offset or 0
    if got is None:
        if last.value is not None:
            deleted_maybe = any(w.value is None and not w.acknowledged and w.outcome != "fail" for w in writes)
            return (INFO, "deleted_by_unacknowledged_tombstone") if deleted_maybe else (FAIL, "missing")
        tally["tombstones_removed"] += 1
        if read.t_ms < last.invoke_ms + retention_ms:
            # Kafka removes a tombstone only from a segment last modified before the
            # delete horizon (now - delete.retention.ms), so never sooner after its append;
            # a clock fault moves the broker's now, so then it is unknown.
            return (INFO, "tombstone_removed_early_clock_moved") if view.clock_faults else \
                (FAIL, "tombstone_removed_early")
        return PASS, ""
    offset, value = got
    if offset == last_offset:
        if value != last.value:
            return FAIL, "offset_holds_another_value"
        if value is None:
            tally["tombstones_kept"] += 1
        return PASS, ""
    if offset > last_offset:
        return _explained_by(writes, offset, value), "later_unacknowledged_write"
    return FAIL, "stale_value"


def check_resurrected_keys(view: CompactionView) -> CheckResult:
    """No key comes back with an older value after its tombstone was acknowledged and
    read: a read after that (a poll, or the final read) holding, as the key's latest record
    past the tombstone's offset or as its last one when the tombstone is gone, the value of
    a write acknowledged below the tombstone. An older send whose outcome is unknown may
    have landed late (a retry): info."""
    name = "resurrected_keys"
    if not view.compacted:
        return not_tested(name, view, "")
    found = Examples()
    tally = {"tombstones_judged": 0, "tombstones_not_read": 0, "unknown": 0}
    reads = view.all_reads()
    for partition in sorted(view.writes):
        by_key = _by_key(view.writes[partition])
        for key in sorted(by_key):
            for tombstone in (w for w in by_key[key] if w.value is None and w.acknowledged):
                seen_ms = _tombstone_read_at(reads, partition, key, tombstone.offset or 0)
                if seen_ms is None:
                    tally["tombstones_not_read"] += 1
                    continue
                tally["tombstones_judged"] += 1
                case = _resurrection(reads, by_key[key], tombstone, seen_ms)
                if case is None:
                    continue
                outcome, example = case
                if outcome == INFO:
                    tally["unknown"] += 1
                else:
                    found.add(example)
                    break  # one case per key
    if tally["tombstones_judged"] == 0:
        return not_tested(name, view, "no acknowledged tombstone was read back")
    return anomaly(name, found, "keys that came back with an older value after their tombstone was read",
                   f"no key came back after its tombstone ({tally['tombstones_judged']} tombstones judged)",
                   {"tested": True, **tally})


def _tombstone_read_at(reads: list[KeyedRead], partition: str, key: str, offset: int) -> int | None:
    """When a read first showed the tombstone: it returned it, or a finished final read
    past its offset held no record of the key at all (the tombstone was cleaned away)."""
    times = []
    for read in reads:
        if read.partition != partition:
            continue
        if any(o == offset and k == key and v is None for o, k, v in read.records):
            times.append(read.t_ms)
        elif read.source == "read" and read.complete and read.end > offset and \
                not any(k == key for _, k, _ in read.records):
            times.append(read.t_ms)
    return min(times) if times else None


def _resurrection(reads: list[KeyedRead], writes: list[KeyedWrite], tombstone: KeyedWrite,
                  seen_ms: int) -> tuple[str, dict] | None:
    t = tombstone.offset or 0
    for read in reads:
        if read.partition != tombstone.partition or read.t_ms < seen_ms:
            continue
        candidates = [(o, v) for o, k, v in read.records if k == tombstone.key and o > t and v is not None]
        if read.source == "read" and read.end > t:
            last = last_by_key(read).get(tombstone.key or "")
            candidates = [last] if last is not None and last[1] is not None else []
        for offset, value in candidates:
            older = [w for w in writes if w.value == value]
            acked_below = [w for w in older if w.acknowledged and (w.offset or 0) < t]
            late = [w for w in older if not w.acknowledged and w.outcome != "fail" and
                    w.invoke_ms <= (tombstone.done_ms or tombstone.invoke_ms)]
            if not acked_below and not late and offset > t:
                continue  # a newer write's value: the key was written again
            example = {"t_ms": read.t_ms, "partition": tombstone.partition, "key": tombstone.key,
                       "tombstone": tombstone.example(), "tombstone_read_ms": seen_ms,
                       "offset": offset, "value": value, "reader": read.witness(),
                       "written_by": [w.example() for w in (acked_below or late)][:3]}
            if acked_below or offset < t:
                return FAIL, example
            return INFO, example
    return None
