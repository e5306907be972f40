"""What a new coordinator restores from one partition of __consumer_offsets: every
group's committed offsets and its last metadata, as 2.7.0's
GroupMetadataManager.doLoadGroupsAndOffsets reads the partition from its log start to
its end when this broker becomes its leader.

Records are read in offset order and later ones win: an offset commit replaces the
group's previous offset of that partition and a tombstone removes it; a group metadata
record replaces the group's previous one and a tombstone removes the group. A group's
tombstone leaves its offsets alone (Kafka deletes a group by writing a tombstone for
each offset as well). A group with offsets and no metadata is still loaded, Empty
(groups that only store offsets, "simple" consumers).

Only plain offset commits are modelled: transactional offset commits (TxnOffsetCommit,
held per producer until the transaction's COMMIT or ABORT marker) are out of scope, so a
caller must not hand this loader the records of transactional or control batches.

The result is plain data, independent of the group state machine's classes; the
coordinator converts it.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker_core.group_records import (
    CommittedOffset, GroupMetadataKey, GroupRecord, OffsetCommitKey, decode_group_metadata_value, decode_key,
    decode_offset_commit_value)
from broker_core.types import TopicPartition


@dataclass
class LoadedGroups:
    """``offsets``: group id -> partition -> its committed offset; ``groups``: group id ->
    its last metadata; ``removed``: groups whose last metadata record was a tombstone
    (Kafka checks that no cached group is among them unless it still has offsets)."""
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def group_ids(self) -> list[str]:
        """Every group the coordinator loads: those with metadata, then those with
        offsets only, which it creates Empty."""
        return sorted(self.groups) + sorted(g for g in self.offsets if g not in self.groups)


def load_groups(records: Iterable[tuple[bytes | None, bytes | None]]) -> LoadedGroups:
    """Replay the (key, value) records of one __consumer_offsets partition, in offset
    order. Malformed records raise GroupRecordError (Kafka's load fails the same way)."""
    return replay(LoadedGroups(), records)


def replay(loaded: LoadedGroups, records: Iterable[tuple[bytes | None, bytes | None]]) -> LoadedGroups:
    """``load_groups`` continued over ``loaded``: what a coordinator's cache becomes when
    records it appended are acknowledged (the putCacheCallback of storeOffsets and
    storeGroup), by the same rules as a load."""
    for key_bytes, value_bytes in records:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            _apply_offset(loaded, key, decode_offset_commit_value(value_bytes))
        else:
            _apply_group(loaded, key, decode_group_metadata_value(value_bytes))
    return loaded


def _apply_offset(loaded: LoadedGroups, key: OffsetCommitKey, committed: CommittedOffset | None) -> None:
    if committed is None:
        offsets = loaded.offsets.get(key.group)
        if offsets is not None:
            offsets.pop(key.topic_partition, None)
            if not offsets:
                del loaded.offsets[key.group]
    else:
        loaded.offsets.setdefault(key.group, {})[key.topic_partition] = committed


def _apply_group(loaded: LoadedGroups, key: GroupMetadataKey, group: GroupRecord | None) -> None:
    if group is None:
        loaded.groups.pop(key.group, None)
        loaded.removed.add(key.group)
    else:
        loaded.removed.discard(key.group)
        loaded.groups[key.group] = group
