"""Removing what a group keeps: DeleteGroups, OffsetDelete and the periodic expiry of
committed offsets, each ending in tombstones written to ``__consumer_offsets``.

Kafka 2.7.0's GroupCoordinator.handleDeleteGroups / handleDeleteOffsets,
GroupMetadataManager.cleanupGroupMetadata (both forms) and
GroupMetadata.removeOffsets / removeExpiredOffsets, rule for rule:

- the offsets go from the cache at once, then a tombstone (a record without a value)
  is written for each; an Empty group left without offsets becomes Dead, leaves the
  cache, and gets a tombstone of its own unless it never had a generation (a group
  that only stored offsets has no metadata record to remove);
- a reload reads the tombstones (broker_core/group_loader.py): what was deleted or
  expired stays gone on the next coordinator.

Where it differs from Kafka, and why:

- Tombstones go through the commits' path (the context's ``store``: acks
  offsets.commit.required.acks, -1 by default) and DeleteGroups and OffsetDelete answer
  once they are acknowledged, with the append's error mapped as for a commit. Kafka
  appends them with acks 0 and answers NONE whatever happens, so a deletion its
  client was told succeeded can come back after a failover.
- A partition whose commit is still being written when its offset is deleted gets a
  tombstone too (that commit's record is already in the log, before the tombstone).
  Kafka writes tombstones only for the offsets in its cache, and a reload then brings
  the in-flight commit back.
"""
from __future__ import annotations

from typing import Callable, Iterable

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupContext
from broker_core.group_messages import (
    DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic)
from broker_core.group_state import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState, OffsetAndMetadata, Waiter
from broker_core.types import TopicPartition

S = GroupState
EXPIRE_TIMER = ("group-expire",)  # GroupMetadataManager's "delete-expired-group-metadata" task


def _ignore(error: ErrorCode) -> None:
    """Expiry answers nobody; Kafka only logs a failed append of its tombstones."""


# -- the common part: cleanupGroupMetadata ------------------------------------------------
def remove_offsets(group: GroupMetadata, partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    """GroupMetadata.removeOffsets: the partitions' offsets leave the cache, and their
    commits in flight will not be applied when written (onOffsetCommitAppend applies
    only a commit still pending). Returns the partitions to write tombstones for."""
    removed = []
    for tp in partitions:
        pending = group.pending_offset_commits.pop(tp, None)
        if group.offsets.pop(tp, None) is not None or pending is not None:
            removed.append(tp)
    return tuple(removed)


def cleanup(ctx: GroupContext, groups: dict[str, GroupMetadata], group: GroupMetadata,
            removed: tuple[TopicPartition, ...], on_done: Callable[[ErrorCode], None]) -> None:
    """cleanupGroupMetadata for one group whose offsets ``removed`` just left the cache:
    an Empty group with no offsets left is Dead; a Dead group leaves the cache (if it
    is still the cached one) with a tombstone when its generation is above 0; the
    tombstones are stored and ``on_done`` gets the mapped append error (at once when
    there is nothing to write)."""
    if group.is_(S.EMPTY) and not group.offsets and not group.pending_offset_commits:
        group.transition_to(S.DEAD, ctx.now_ms)
    group_tombstone = False
    if group.is_(S.DEAD) and groups.get(group.group_id) is group:
        del groups[group.group_id]
        for key in [k for k in ctx.timers if len(k) > 1 and k[1] == group.group_id]:
            ctx.cancel_timer(key)  # a pending member's id, given before the group went
        group_tombstone = group.generation_id > 0
    if not removed and not group_tombstone:
        return on_done(ErrorCode.NONE)
    ctx.store(group.group_id, group.generation_id, on_done, tombstones=removed, group_tombstone=group_tombstone)


# -- DeleteGroups ---------------------------------------------------------------------
def delete_groups(ctx: GroupContext, groups: dict[str, GroupMetadata], waiter: Waiter, req: DeleteGroupsRequest,
                  status_errors: dict[str, ErrorCode]) -> None:
    """handleDeleteGroups (KafkaApis: each group once, in the request's order): an
    Empty group becomes Dead and loses all its offsets; one with members is
    NON_EMPTY_GROUP; one this coordinator does not have GROUP_ID_NOT_FOUND. Answered
    when every deleted group's tombstones are acknowledged."""
    names = list(dict.fromkeys(req.groups_names))
    results: dict[str, ErrorCode] = {}
    eligible: list[GroupMetadata] = []
    for group_id in names:
        error = status_errors.get(group_id)
        group = groups.get(group_id)
        if error is not None:
            results[group_id] = error
        elif group is None or group.is_(S.DEAD):
            results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
        elif group.is_(S.EMPTY):
            group.transition_to(S.DEAD, ctx.now_ms)
            eligible.append(group)
        else:
            results[group_id] = ErrorCode.NON_EMPTY_GROUP
    waiting = {g.group_id for g in eligible}

    def answer() -> None:
        ctx.reply(waiter, DeleteGroupsResponse(waiter.correlation_id, tuple(
            DeletableGroupResult(name, results[name]) for name in names)))

    def done_for(group_id: str) -> Callable[[ErrorCode], None]:
        def done(error: ErrorCode) -> None:
            results[group_id] = error
            waiting.discard(group_id)
            if not waiting:
                answer()
        return done
    for group in eligible:
        cleanup(ctx, groups, group, remove_offsets(group, list(group.pending_offset_commits) + list(group.offsets)),
                done_for(group.group_id))
    if not eligible:
        answer()


# -- OffsetDelete ---------------------------------------------------------------------
def delete_offsets(ctx: GroupContext, groups: dict[str, GroupMetadata], waiter: Waiter, req: OffsetDeleteRequest,
                   status_error: ErrorCode | None) -> None:
    """handleDeleteOffsets: an Empty group loses the offsets asked for; a consumer
    group with members those of topics none of them subscribes to (the others are
    GROUP_SUBSCRIBED_TO_TOPIC); any other group with members is NON_EMPTY_GROUP. Each
    partition asked for is answered (NONE also for one without an offset)."""
    cid = waiter.correlation_id
    group = groups.get(req.group_id)
    if status_error is None and (group is None or group.is_(S.DEAD)):
        status_error = ErrorCode.GROUP_ID_NOT_FOUND
    if status_error is None and group is not None and not group.is_(S.EMPTY) \
            and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        status_error = ErrorCode.NON_EMPTY_GROUP
    if status_error is not None or group is None:
        return ctx.reply(waiter, OffsetDeleteResponse(cid, status_error or ErrorCode.GROUP_ID_NOT_FOUND))
    asked = list(dict.fromkeys(TopicPartition(t.name, p) for t in req.topics for p in t.partitions))
    errors: dict[TopicPartition, ErrorCode] = {}
    eligible: list[TopicPartition] = []
    for tp in asked:
        if group.is_(S.EMPTY) or not group.is_subscribed_to_topic(tp.topic):
            eligible.append(tp)
        else:
            errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

    def answer(error: ErrorCode) -> None:
        for tp in eligible:
            errors[tp] = error
        by_topic: dict[str, list[OffsetDeleteResponsePartition]] = {}
        for tp in asked:
            by_topic.setdefault(tp.topic, []).append(OffsetDeleteResponsePartition(tp.partition, errors[tp]))
        ctx.reply(waiter, OffsetDeleteResponse(cid, ErrorCode.NONE, tuple(
            OffsetDeleteResponseTopic(name, tuple(parts)) for name, parts in by_topic.items())))
    if not eligible:
        return answer(ErrorCode.NONE)
    cleanup(ctx, groups, group, remove_offsets(group, eligible), answer)


# -- expiry -----------------------------------------------------------------------------
def expired_offsets(group: GroupMetadata, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """GroupMetadata.removeExpiredOffsets' choice. An offset with its own expire
    timestamp (an OffsetCommit v2-4's retention) expires at it. Otherwise retention runs:
    for an Empty group (with a protocol type) from when it became Empty (its commit
    time if the state timestamp is unknown, as from old metadata records); for a
    consumer group with members only for topics none of them subscribes to, from the
    commit; for a group that only stores offsets from the commit; for any other group
    never. Offsets being written do not expire."""
    subscribed: frozenset[str] = frozenset()
    since_empty = False
    if group.protocol_type is not None and group.is_(S.EMPTY):
        since_empty = group.state_timestamp_ms >= 0
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None:
        subscribed = group.subscribed_topics
    elif group.protocol_type is not None:
        return []

    def expired(tp: TopicPartition, o: OffsetAndMetadata) -> bool:
        if tp.topic in subscribed or tp in group.pending_offset_commits:
            return False
        if o.expire_timestamp is not None:
            return now_ms >= o.expire_timestamp
        base = group.state_timestamp_ms if since_empty else o.commit_timestamp
        return now_ms - base >= retention_ms
    return [tp for tp, o in group.offsets.items() if expired(tp, o)]


def expire_offsets(ctx: GroupContext, groups: dict[str, GroupMetadata], owned: Callable[[str], bool]) -> int:
    """cleanupGroupMetadata(): every group this coordinator serves loses its expired
    offsets (tombstones written); an Empty group left without any becomes Dead and is
    removed. Returns how many offsets expired."""
    count = 0
    for group_id, group in sorted(groups.items()):
        if not owned(group_id):
            continue
        expired = expired_offsets(group, ctx.now_ms, ctx.config.offsets_retention_ms)
        for tp in expired:
            del group.offsets[tp]
        count += len(expired)
        cleanup(ctx, groups, group, tuple(expired), _ignore)
    return count
