"""Committed offsets, and the groups' descriptions: OffsetCommit, OffsetFetch,
DescribeGroups and ListGroups.

Kafka 2.7.0's GroupCoordinator.handleCommitOffsets / doCommitOffsets /
handleFetchOffsets / handleDescribeGroup / handleListGroups and
GroupMetadataManager.storeOffsets / getOffsets. A commit is checked against the
group's generation (a member of an older generation is fenced with
ILLEGAL_GENERATION); a commit with generation -1 is a "simple" commit, taken only
while the group has no members. Offsets are kept in the group; the write to
``__consumer_offsets`` is the context's ``store`` seam, and an offset becomes visible
to OffsetFetch only once that write has completed (until then it is pending, and
``require_stable`` fetches see UNSTABLE_OFFSET_COMMIT).
"""
from __future__ import annotations

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupContext
from broker_core.group_messages import (
    INVALID_OFFSET, NO_GENERATION, DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse,
    ListedGroup, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetCommitResponsePartition, OffsetCommitResponseTopic, OffsetFetchRequest, OffsetFetchResponse,
    OffsetFetchResponsePartition, OffsetFetchResponseTopic)
from broker_core.group_rebalance import Rebalancer
from broker_core.group_state import GroupMetadata, GroupState, OffsetAndMetadata, Waiter
from broker_core.types import TopicPartition

S = GroupState


def _commit_response(waiter: Waiter, req: OffsetCommitRequest,
                     errors: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
    return OffsetCommitResponse(waiter.correlation_id, tuple(
        OffsetCommitResponseTopic(t.name, tuple(
            OffsetCommitResponsePartition(p.partition_index, errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions))
        for t in req.topics))


def requested_offsets(req: OffsetCommitRequest, now_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """The commit's offsets (KafkaApis.handleOffsetCommitRequest): a v1 commit's own
    timestamp is kept, others get now; a v2-4 commit's retention_time_ms (-1: none)
    makes an expire timestamp of now plus it."""
    expire = now_ms + req.retention_time_ms if req.retention_time_ms != -1 else None
    return {TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
        p.committed_offset, p.committed_leader_epoch,
        p.committed_metadata if p.committed_metadata is not None else "",
        p.commit_timestamp if p.commit_timestamp >= 0 else now_ms, expire)
        for t in req.topics for p in t.partitions}


def commit(ctx: GroupContext, groups: dict[str, GroupMetadata], rebalancer: Rebalancer, waiter: Waiter,
           req: OffsetCommitRequest, status_error: ErrorCode | None) -> None:
    """handleCommitOffsets / doCommitOffsets."""
    offsets = requested_offsets(req, ctx.now_ms)

    def answer_all(error: ErrorCode) -> None:
        ctx.reply(waiter, _commit_response(waiter, req, {tp: error for tp in offsets}))
    if status_error is not None:
        return answer_all(status_error)
    group = groups.get(req.group_id)
    if group is None:
        if req.generation_id >= 0:  # a generation of a group this coordinator does not have
            return answer_all(ErrorCode.ILLEGAL_GENERATION)
        group = groups[req.group_id] = GroupMetadata(req.group_id, state_timestamp_ms=ctx.now_ms)
    if group.is_(S.DEAD):
        return answer_all(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if group.is_static_member_fenced(req.member_id, req.group_instance_id):
        return answer_all(ErrorCode.FENCED_INSTANCE_ID)
    if req.generation_id < 0 and group.is_(S.EMPTY):
        return _store_offsets(ctx, group, waiter, req, offsets)  # the group only keeps offsets in Kafka
    if not group.has(req.member_id):
        return answer_all(ErrorCode.UNKNOWN_MEMBER_ID)
    if req.generation_id != group.generation_id:
        return answer_all(ErrorCode.ILLEGAL_GENERATION)
    if group.is_(S.COMPLETING_REBALANCE):
        # The member knows the generation but has no assignment yet: let it rejoin.
        return answer_all(ErrorCode.REBALANCE_IN_PROGRESS)
    # Stable, or PreparingRebalance: the heartbeat will tell the member to rejoin.
    rebalancer.schedule_heartbeat(group, group.members[req.member_id])
    _store_offsets(ctx, group, waiter, req, offsets)


def _store_offsets(ctx: GroupContext, group: GroupMetadata, waiter: Waiter, req: OffsetCommitRequest,
                   offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
    """GroupMetadataManager.storeOffsets: metadata longer than offset.metadata.max.bytes
    is refused per partition; the rest is written, and applied when the write is done."""
    limit = ctx.config.offset_metadata_max_bytes
    valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
    errors = {tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets if tp not in valid}
    if not valid:
        return ctx.reply(waiter, _commit_response(waiter, req, errors))
    group.pending_offset_commits.update(valid)

    def stored(error: ErrorCode) -> None:
        for tp, o in valid.items():
            # onOffsetCommitAppend: applied only while still pending (OffsetDelete or
            # DeleteGroups may have removed it meanwhile, group_admin.remove_offsets)
            if error is ErrorCode.NONE and not group.is_(S.DEAD) and tp in group.pending_offset_commits:
                group.offsets[tp] = o
            if group.pending_offset_commits.get(tp) == o:
                del group.pending_offset_commits[tp]
            errors[tp] = error
        ctx.reply(waiter, _commit_response(waiter, req, errors))
    ctx.store(group.group_id, group.generation_id if req.generation_id != NO_GENERATION else NO_GENERATION,
              stored, offsets=valid)


def fetch(ctx: GroupContext, groups: dict[str, GroupMetadata], waiter: Waiter, req: OffsetFetchRequest,
          status_error: ErrorCode | None) -> None:
    """handleFetchOffsets / getOffsets: offsets are answered whatever the group's state
    (a group may keep offsets without group management); nothing committed is -1."""
    if status_error is not None:
        return ctx.reply(waiter, OffsetFetchResponse(waiter.correlation_id, status_error))
    group = groups.get(req.group_id)
    if req.topics is None:
        wanted = sorted(group.offsets, key=lambda tp: (tp.topic, tp.partition)) if group is not None else []
    else:
        wanted = [TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes]
    by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(_fetched(group, tp, req.require_stable))
    topics = tuple(OffsetFetchResponseTopic(name, tuple(parts)) for name, parts in by_topic.items())
    ctx.reply(waiter, OffsetFetchResponse(waiter.correlation_id, ErrorCode.NONE, topics))


def _fetched(group: GroupMetadata | None, tp: TopicPartition, require_stable: bool) -> OffsetFetchResponsePartition:
    if group is None or group.is_(S.DEAD):
        return OffsetFetchResponsePartition(tp.partition, INVALID_OFFSET, "", ErrorCode.NONE)
    if require_stable and group.has_pending_commit(tp):
        return OffsetFetchResponsePartition(tp.partition, INVALID_OFFSET, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
    o = group.offsets.get(tp)
    if o is None:
        return OffsetFetchResponsePartition(tp.partition, INVALID_OFFSET, "", ErrorCode.NONE)
    return OffsetFetchResponsePartition(tp.partition, o.offset, o.metadata, ErrorCode.NONE, o.leader_epoch)


def describe(ctx: GroupContext, groups: dict[str, GroupMetadata], waiter: Waiter, req: DescribeGroupsRequest,
             status_errors: dict[str, ErrorCode]) -> None:
    """handleDescribeGroup per group: a group this coordinator does not have is Dead,
    without an error; one it cannot answer for carries the error and no state."""
    described = []
    for group_id in req.groups:
        error = status_errors.get(group_id)
        group = groups.get(group_id)
        if error is not None:
            described.append(DescribedGroup(error, group_id, "", "", ""))
        elif group is None:
            described.append(DescribedGroup(ErrorCode.NONE, group_id, S.DEAD.value, "", ""))
        else:
            described.append(group.summary())
    ctx.reply(waiter, DescribeGroupsResponse(waiter.correlation_id, tuple(described)))


def list_groups(ctx: GroupContext, groups: dict[str, GroupMetadata], waiter: Waiter, req: ListGroupsRequest,
                error: ErrorCode) -> None:
    """handleListGroups: every group, or those in the states asked for, by group id
    (Kafka's order is a hash map's)."""
    listed = tuple(ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                   for _, g in sorted(groups.items())
                   if not req.states_filter or g.state.value in req.states_filter)
    if error is ErrorCode.COORDINATOR_NOT_AVAILABLE:
        listed = ()
    ctx.reply(waiter, ListGroupsResponse(waiter.correlation_id, error, listed))

