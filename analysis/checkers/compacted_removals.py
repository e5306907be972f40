"""Which acknowledged records of a compacted partition the log cleaner may have removed,
for the checkers written before compaction (lost_writes, unseen, consumer_skips,
consumer_truncated_reads): a record cleaning legitimately removed is not lost, a
consumer's jump over it is not a skip, and a consumer that read it before it went did
not read a truncated record.

Kafka 2.7.0's rule (LogCleaner.scala Cleaner.shouldRetainRecord, over the offset map
buildOffsetMap makes of the dirty range ``[first dirty, end)``): a record at offset
``o`` goes when the map holds a later offset of its key, that is a write of the same key
at ``o' > o`` below a cleaning's ``end_offset``; a tombstone goes once its segment is
past the delete horizon (``compacted_final_values`` judges when). A cleaning is a
``segments_cleaned`` trace event; any replica's counts, since the replica a client read
from may have changed.

A removal is an excuse only if what made it legitimate survived: the later write of the
key is itself in the final read, or was removed legitimately in turn; a removed
tombstone is one only if the final read holds no older value of its key (the delete
took effect). So when an unclean election loses a leader's log, the records its cleaner
removed because of records that are lost too are lost, not excused.

What a history cannot tell is unknown, never an excuse for nothing: a record whose only
later write of its key has an unknown outcome (it may or may not have superseded it)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Mapping

from analysis.checkers.compaction import CompactionView
from analysis.checkers.final_read import ABSENT, FinalRead
from analysis.compacted_topics import topic_of

SUPERSEDED = "superseded"  # a later acknowledged write of its key was in a cleaned range
TOMBSTONE = "tombstone"  # a tombstone in a cleaned range: removed once past the delete horizon
UNKNOWN = "unknown"  # only a write of unknown outcome may have superseded it

_NEVER = 1 << 62
_ANY = object()  # no value given: the acknowledged record at the offset is meant


class CompactedRemovals:
    """Built once from the compaction view; ``removed`` answers per record."""

    def __init__(self, view: CompactionView, compacted_only: set[str] = frozenset(),  # type: ignore[assignment]
                 reads: Mapping[str, FinalRead] | None = None):
        # compacted topics retention never deletes from (cleanup.policy compact alone)
        self.compacted_only = {t for t in compacted_only if t in view.retention_ms}
        # partition -> [(t_ms, highest end_offset of any cleaning up to then)]
        self._ends: dict[str, tuple[list[int], list[int]]] = {}
        for event in sorted(view.cleanings, key=lambda e: e.t_ms):
            times, ends = self._ends.setdefault(event["partition"], ([], []))
            times.append(event.t_ms)
            ends.append(max(event["end_offset"], ends[-1] if ends else 0))
        self._at: dict[str, dict[int, tuple[Any, Any]]] = {}  # partition -> offset -> (key, value)
        # partition -> key -> its acknowledged offsets, and the value at each: an unclean
        # election can give one offset to two acknowledged writes (of two log histories)
        self._offsets: dict[str, dict[Any, list[int]]] = {}
        self._values: dict[str, dict[Any, list[Any]]] = {}
        self._unknown: dict[str, set] = {}  # partition -> keys written with an unknown outcome
        self._key_of: dict[str, dict[Any, Any]] = {}  # partition -> value -> key (values are unique)
        for partition, writes in view.writes.items():
            if partition not in self._ends and topic_of(partition) not in self.compacted_only:
                continue
            at = self._at.setdefault(partition, {})
            offsets = self._offsets.setdefault(partition, {})
            key_of = self._key_of.setdefault(partition, {})
            for write in writes:
                if write.value is not None:
                    key_of[write.value] = write.key
                if write.offset is not None:
                    at[write.offset] = (write.key, write.value)
                    offsets.setdefault(write.key, []).append(write.offset)
                    self._values.setdefault(partition, {}).setdefault(write.key, []).append(write.value)
                elif write.outcome == "info":
                    self._unknown.setdefault(partition, set()).add(write.key)
        for partition, by_key in self._offsets.items():
            for key, offsets_of_key in by_key.items():
                pairs = sorted(zip(offsets_of_key, self._values[partition][key]), key=lambda p: p[0])
                by_key[key] = [o for o, _ in pairs]
                self._values[partition][key] = [v for _, v in pairs]
        self._reads = reads or {}
        self._survives: dict[str, dict[tuple[Any, int], bool]] = {}  # partition -> (key, offset) -> accounted
        self._first_in_read: dict[str, dict[Any, int]] = {}  # partition -> key -> its first offset read

    def _first_read(self, partition: str) -> dict[Any, int]:
        """key -> the lowest offset where the final read holds a value of it (tombstones
        carry no value to know their key by, and are not older values)."""
        known = self._first_in_read.get(partition)
        if known is None:
            known = self._first_in_read[partition] = {}
            read = self._reads.get(partition)
            key_of = self._key_of.get(partition, {})
            for offset, value in (read.records if read is not None else ()):
                key = key_of.get(value) if value is not None else None
                if key is not None and offset < known.get(key, offset + 1):
                    known[key] = offset
        return known

    def _in_read(self, partition: str, offset: int, value: Any) -> bool:
        read = self._reads.get(partition)
        return read is not None and read.value_at(offset) == value

    def _replaced(self, partition: str, offset: int, value: Any) -> bool:
        """The final read holds another record at the offset: the log was truncated and
        written again there (offsets never move, so no cleaning did that)."""
        read = self._reads.get(partition)
        if read is None:
            return False
        there = read.value_at(offset)
        return there is not ABSENT and there != value

    def _accounted(self, partition: str) -> dict[tuple[Any, int], bool]:
        """(key, offset) -> whether the acknowledged record there is in the final read or
        was removed legitimately by the last cleaning (each key's writes, newest first)."""
        cached = self._survives.get(partition)
        if cached is not None:
            return cached
        known: dict[tuple[Any, int], bool] = {}
        self._survives[partition] = known
        end = self.cleaned_end(partition)
        first_read = self._first_read(partition)
        unknown = self._unknown.get(partition, ())
        values = self._values.get(partition, {})
        for key, offsets in self._offsets.get(partition, {}).items():
            later = False  # a later write of the key, below the end, accounted for
            for offset, value in zip(reversed(offsets), reversed(values[key])):
                ok = self._in_read(partition, offset, value) or offset < end and not self._replaced(
                    partition, offset, value) and (
                    later or key in unknown or (value is None and first_read.get(key, offset) >= offset))
                known[(key, offset)] = ok or known.get((key, offset), False)
                later = later or (ok and offset < end)
        return known

    def __bool__(self) -> bool:
        return bool(self._ends) or bool(self.compacted_only)

    def deletes(self, partition: str) -> bool:
        """Whether retention may delete from the partition's log (moving its start)."""
        return topic_of(partition) not in self.compacted_only

    def cleaned_end(self, partition: str, at_ms: int = _NEVER) -> int:
        """The highest end of a range any replica cleaned by ``at_ms`` (0 if none)."""
        known = self._ends.get(partition)
        if known is None:
            return 0
        i = bisect_right(known[0], at_ms)
        return known[1][i - 1] if i else 0

    def removed(self, partition: str, offset: int, at_ms: int = _NEVER, value: Any = _ANY) -> str | None:
        """Why cleaning may have removed the record at ``offset`` by ``at_ms``
        (SUPERSEDED, TOMBSTONE or UNKNOWN), or None when it may not have. Without
        ``value`` the record is the acknowledged write there; with it, the record read
        there (a write of unknown outcome is known by its value, values being unique)."""
        end = self.cleaned_end(partition, at_ms)
        if offset >= end:
            return None
        written = self._at.get(partition, {}).get(offset)
        if value is not _ANY and (written is None or written[1] != value):
            key = self._key_of.get(partition, {}).get(value) if value is not None else None
            written = None if key is None else (key, value)
        if written is None:
            return None
        key, value = written
        if self._replaced(partition, offset, value):
            return None
        accounted = self._accounted(partition)
        later = self._offsets[partition].get(key, ())
        for o in later[bisect_right(later, offset):]:
            if o >= end:
                break
            if accounted.get((key, o)):
                return SUPERSEDED
        if value is None and self._first_read(partition).get(key, offset) >= offset:
            return TOMBSTONE
        if key in self._unknown.get(partition, ()):
            return UNKNOWN
        return None
