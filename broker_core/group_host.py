"""The group coordinator inside a broker (issue 24): BrokerNode's glue between the group
state machine (broker_core/group_coordinator.py) and the partitions of
``__consumer_offsets`` this broker leads (broker_core/group_partitions.py).

Kafka 2.7.0 joins the two in KafkaApis (handleJoinGroupRequest ... handleListGroupsRequest,
handleOffsetCommitRequest's metadata check), GroupCoordinator (onElection, onGroupLoaded,
onResignation) and GroupMetadataManager (storeGroup, storeOffsets, loadGroup). Each half
keeps what it owns and nothing twice:

- the coordinator owns the groups: members, generations and committed offsets (its
  cache); ``GroupPartitions`` owns which partitions are loading or owned, and the appends;
- a request goes to ``GroupCoordinator.handle``; its answers become ``Send`` effects, its
  timers ``SetTimer`` / ``CancelTimer`` (keys "group-join", "group-heartbeat",
  "group-pending", fired back through ``on_timer``);
- each ``GroupWrite`` becomes the records ``group_records`` encodes, appended through
  ``GroupPartitions.store``; the append's own error goes back to ``write_completed``,
  which maps it as storeGroup / storeOffsets do (once, in group_context.client_error);
- a loaded partition's ``LoadedGroups`` become the coordinator's groups, Empty or Stable
  as GroupMetadataManager.loadGroup makes them; an unloaded one's groups are unloaded.
- KafkaApis' own checks before the coordinator: unknown partitions of OffsetCommit and
  OffsetDelete, and group.instance.id below inter.broker.protocol.version 2.3; and
  GroupMetadataManager.startup's offset expiry, started with the broker.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping

from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig, GroupWrite
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_loader import LoadedGroups
from broker_core.api_version import at_least
from broker_core.group_messages import (
    NO_LEADER_EPOCH, UNKNOWN_MEMBER_ID, DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest,
    HeartbeatResponse, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    OffsetCommitTopic, OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic, OffsetDeleteTopic, OffsetFetchRequest, SyncGroupRequest, SyncGroupResponse)
from broker_core.group_partitions import GroupPartitions
from broker_core.group_records import (
    CommittedOffset, GroupRecord, MemberRecord, Record, group_metadata_record, group_tombstone, offset_commit_record,
    offset_tombstone, partition_for)
from broker_core.group_state import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from broker_core.messages import PartitionState
from broker_core.types import TopicPartition

# The requests BrokerNode hands to the coordinator.
GROUP_REQUESTS = frozenset({JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest,
                            OffsetCommitRequest, OffsetFetchRequest, DescribeGroupsRequest, ListGroupsRequest,
                            DeleteGroupsRequest, OffsetDeleteRequest})
# KafkaApis refuses group.instance.id below this inter.broker.protocol.version: an older
# coordinator loading the group would drop the field and make static members dynamic.
STATIC_MEMBERSHIP_IBP = "2.3-IV0"
TIMER_PREFIX = "group-"  # the coordinator's timer keys (group_context); "group-load" is GroupPartitions'


def group_config(config: Any) -> GroupConfig:
    """The coordinator's settings from the broker's (KafkaConfig's group.* and offset.* keys)."""
    return GroupConfig(config.group_min_session_timeout_ms, config.group_max_session_timeout_ms,
                       config.group_max_size, config.group_initial_rebalance_delay_ms,
                       config.offset_metadata_max_bytes, config.offsets_topic_num_partitions,
                       offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
                       offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms)


def member_id_seed(broker_id: int, session_id: int | None = None) -> int:
    """The coordinator's member-id seed: deterministic, and different for each session
    of each broker. A restarted broker that loads a group its previous incarnation
    coordinated must not hand a new member the id of a member loaded from the log, which
    a seed from the broker id alone would (the counter starts again)."""
    return broker_id if session_id is None else (broker_id << 64) | (session_id & (2**64 - 1))


class GroupHost:
    def __init__(self, ctx: NodeContext, partitions: GroupPartitions,
                 metadata: Callable[[], Mapping[TopicPartition, PartitionState]]):
        self.ctx = ctx
        self.partitions = partitions
        self._metadata = metadata  # the metadata cache: which partitions exist
        self.coordinator = GroupCoordinator(group_config(ctx.config), member_id_seed(ctx.broker_id),
                                            deferred_writes=True, ownership=partitions.status)
        # OffsetCommits answered partly here (unknown partitions): merged into the
        # coordinator's answer, by (connection, correlation id). That pair names one
        # commit: the real listener reads a connection's next request only once the
        # last is answered (real_io/server.py, as 2.7.0's SocketServer mutes), and a
        # simulated client numbers its requests.
        self._commit_errors: dict[tuple[Hashable, int], tuple[OffsetCommitRequest, dict[TopicPartition, ErrorCode]]] = {}
        self._delete_errors: dict[tuple[Hashable, int], tuple[OffsetDeleteRequest, dict[TopicPartition, ErrorCode]]] = {}
        partitions.on_loaded = self._loaded
        partitions.on_unloaded = self._unloaded

    def started(self) -> None:
        """GroupMetadataManager.startup: the periodic offset expiry check."""
        self.coordinator.start_offset_expiration(self.ctx.now_ms)
        self._carry_out([])

    def session_started(self, session_id: int) -> None:
        self.coordinator.ctx.member_id_seed = member_id_seed(self.ctx.broker_id, session_id)

    # -- inputs ------------------------------------------------------------------------
    def handle(self, src: Hashable, request: Any) -> None:
        refusal = self._static_membership_refusal(request)
        if refusal is not None:
            self.ctx.send(src, refusal)
            return
        if type(request) is OffsetCommitRequest:
            request = self._known_partitions_only(src, request)
            if request is None:
                return
        elif type(request) is OffsetDeleteRequest:
            request = self._known_offset_deletes_only(src, request)
        self._carry_out(self.coordinator.handle(src, request, self.ctx.now_ms))

    def _static_membership_refusal(self, request: Any) -> Any:
        """KafkaApis (2.7.0) handleJoinGroupRequest, handleSyncGroupRequest,
        handleHeartbeatRequest and handleOffsetCommitRequest: a group.instance.id while
        inter.broker.protocol.version is below 2.3 is UNSUPPORTED_VERSION (every
        partition of a commit), before the coordinator sees it. LeaveGroup is not
        checked (nor in Kafka)."""
        if getattr(request, "group_instance_id", None) is None \
                or at_least(self.ctx.config.inter_broker_protocol_version, STATIC_MEMBERSHIP_IBP):
            return None
        cid, unsupported = request.correlation_id, ErrorCode.UNSUPPORTED_VERSION
        if type(request) is JoinGroupRequest:
            return JoinGroupResponse(cid, unsupported, member_id=UNKNOWN_MEMBER_ID)
        if type(request) is SyncGroupRequest:
            return SyncGroupResponse(cid, unsupported)
        if type(request) is HeartbeatRequest:
            return HeartbeatResponse(cid, unsupported)
        if type(request) is OffsetCommitRequest:
            return _merged(request, {TopicPartition(t.name, p.partition_index): unsupported
                                     for t in request.topics for p in t.partitions}, None)
        return None

    def _known_offset_deletes_only(self, src: Hashable, request: OffsetDeleteRequest) -> OffsetDeleteRequest:
        """KafkaApis.handleOffsetDeleteRequest: partitions the metadata cache does not
        have are UNKNOWN_TOPIC_OR_PARTITION and not handed to the coordinator, which is
        asked all the same (the group's own error wins)."""
        metadata = self._metadata()
        unknown = {TopicPartition(t.name, p): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                   for t in request.topics for p in t.partitions if TopicPartition(t.name, p) not in metadata}
        if not unknown:
            return request
        self._delete_errors[(src, request.correlation_id)] = (request, unknown)
        known = tuple(OffsetDeleteTopic(t.name, parts) for t in request.topics
                      if (parts := tuple(p for p in t.partitions if TopicPartition(t.name, p) not in unknown)))
        return OffsetDeleteRequest(request.correlation_id, request.group_id, known)

    def on_timer(self, key: tuple) -> None:
        self._carry_out(self.coordinator.on_timer(key, self.ctx.now_ms))

    def _known_partitions_only(self, src: Hashable, request: OffsetCommitRequest) -> OffsetCommitRequest | None:
        """KafkaApis.handleOffsetCommitRequest (2.7.0): a partition the metadata cache
        does not have is UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the
        commit; with none left the answer goes at once (no group check at all)."""
        metadata = self._metadata()
        unknown = {TopicPartition(t.name, p.partition_index): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                   for t in request.topics for p in t.partitions
                   if TopicPartition(t.name, p.partition_index) not in metadata}
        if not unknown:
            return request
        known = tuple(OffsetCommitTopic(t.name, parts) for t in request.topics
                      if (parts := tuple(p for p in t.partitions
                                         if TopicPartition(t.name, p.partition_index) not in unknown)))
        if not known:
            self.ctx.send(src, _merged(request, unknown, None))
            return None
        self._commit_errors[(src, request.correlation_id)] = (request, unknown)
        return OffsetCommitRequest(request.correlation_id, request.group_id, known, request.generation_id,
                                   request.member_id, request.group_instance_id, request.retention_time_ms)

    # -- effects -------------------------------------------------------------------------
    def _carry_out(self, answers: list[tuple[Hashable, Any]]) -> None:
        """Send the answers, pass on the coordinator's timers, and append its writes. A
        write may complete at once (an append refused before it is made): its answers
        are carried out from within, after these."""
        for dst, response in answers:
            if type(response) is OffsetCommitResponse and self._commit_errors:
                pending = self._commit_errors.pop((dst, response.correlation_id), None)
                if pending is not None:
                    response = _merged(pending[0], pending[1], response)
            elif type(response) is OffsetDeleteResponse and self._delete_errors:
                deletes = self._delete_errors.pop((dst, response.correlation_id), None)
                if deletes is not None:
                    response = _merged_deletes(deletes[0], deletes[1], response)
            self.ctx.send(dst, response)
        for effect in self.coordinator.timer_effects():
            self.ctx.emit(effect)
        for write in self.coordinator.take_writes():
            self._store(write)

    def _store(self, write: GroupWrite) -> None:
        """storeGroup / storeOffsets: the write's records appended to the group's
        partition with offsets.commit.required.acks; its completion goes back to the
        coordinator with the append's error."""
        version = self.ctx.config.inter_broker_protocol_version
        if write.tombstones is not None:  # cleanupGroupMetadata: the group may have left the cache already
            records = [offset_tombstone(write.group_id, tp) for tp in write.tombstones]
            if write.group_tombstone:
                records.append(group_tombstone(write.group_id))
        elif write.offsets is not None:
            records = [offset_commit_record(write.group_id, tp, committed_offset(o), version)
                       for tp, o in write.offsets.items()]
        elif write.group_id in self.coordinator.groups:
            records = [group_metadata_record(write.group_id, self._group_record(write), version)]
        else:  # unloaded within the call that wrote it: as an append to a partition no longer led
            self._carry_out(self.coordinator.write_completed(write.token, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                             self.ctx.now_ms))
            return

        def done(error: ErrorCode) -> None:
            self._carry_out(self.coordinator.write_completed(write.token, error, self.ctx.now_ms))
        self.partitions.store(write.group_id, records, done)

    def _group_record(self, write: GroupWrite) -> GroupRecord:
        """GroupMetadataManager.groupMetadataValue: the group as it is when the write is
        made (within the call that made it), with the write's generation and assignment."""
        group = self.coordinator.groups[write.group_id]
        assignment = write.assignment or {}
        protocol = group.protocol_name
        members = tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout_ms, m.session_timeout_ms,
                                     m.metadata(protocol) if protocol is not None else b"",
                                     assignment.get(m.member_id, b""))
                        for m in group.members.values())
        return GroupRecord(group.protocol_type or "", write.generation_id, protocol, group.leader_id,
                           group.state_timestamp_ms if group.state_timestamp_ms >= 0 else None, members)

    # -- loading and unloading -------------------------------------------------------
    def _loaded(self, number: int, loaded: LoadedGroups) -> None:
        """GroupMetadataManager.loadGroupsAndOffsets' onGroupLoaded for each group."""
        groups = [restored_group(group_id, loaded.groups.get(group_id), loaded.offsets.get(group_id, {}))
                  for group_id in loaded.group_ids()]
        self._carry_out(self.coordinator.load(groups, self.ctx.now_ms))

    def _unloaded(self, number: int) -> int:
        """onResignation -> removeGroupsForPartition: the partition's groups leave; how
        many did."""
        count = self.ctx.config.offsets_topic_num_partitions
        ids = [g for g in self.coordinator.groups if partition_for(g, count) == number]
        self._carry_out(self.coordinator.unload(ids, self.ctx.now_ms))
        return len(ids)


def committed_offset(o: OffsetAndMetadata) -> CommittedOffset:
    """The coordinator's offset as offsetCommitValue writes it (no leader epoch: -1)."""
    return CommittedOffset(o.offset, None if o.leader_epoch < 0 else o.leader_epoch, o.metadata, o.commit_timestamp,
                           o.expire_timestamp)


def restored_group(group_id: str, record: GroupRecord | None,
                   offsets: Mapping[TopicPartition, CommittedOffset]) -> GroupMetadata:
    """GroupMetadata.loadGroup (2.7.0): Empty without members, else Stable, in the
    record's generation with its protocol and leader; each member supports the group's
    protocol alone, with the subscription it was recorded with, and keeps its
    assignment. A group with offsets only (no metadata) is a new Empty group."""
    group = GroupMetadata(group_id)
    for tp, c in offsets.items():
        group.offsets[tp] = OffsetAndMetadata(c.offset, NO_LEADER_EPOCH if c.leader_epoch is None else c.leader_epoch,
                                              c.metadata, c.commit_timestamp, c.expire_timestamp)
    if record is None:
        return group
    group.state = GroupState.STABLE if record.members else GroupState.EMPTY
    group.state_timestamp_ms = -1 if record.current_state_timestamp is None else record.current_state_timestamp
    group.protocol_type = record.protocol_type or None
    group.protocol_name = record.protocol
    group.generation_id = record.generation
    group.leader_id = record.leader
    for m in record.members:
        protocols = (JoinGroupProtocol(record.protocol, m.subscription),) if record.protocol is not None else ()
        group.members[m.member_id] = MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout, m.session_timeout,
            record.protocol_type, protocols, assignment=m.assignment)
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group


def _merged(request: OffsetCommitRequest, unknown: Mapping[TopicPartition, ErrorCode],
            answer: OffsetCommitResponse | None) -> OffsetCommitResponse:
    """The coordinator's answer with the partitions refused before it, in request order."""
    errors = dict(unknown)
    if answer is not None:
        errors.update((TopicPartition(t.name, p.partition_index), p.error_code)
                      for t in answer.topics for p in t.partitions)
    return OffsetCommitResponse(request.correlation_id, tuple(
        OffsetCommitResponseTopic(t.name, tuple(
            OffsetCommitResponsePartition(p.partition_index, errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions))
        for t in request.topics), answer.throttle_time_ms if answer is not None else 0)


def _merged_deletes(request: OffsetDeleteRequest, unknown: Mapping[TopicPartition, ErrorCode],
                    answer: OffsetDeleteResponse) -> OffsetDeleteResponse:
    """The coordinator's OffsetDelete answer with the unknown partitions, in request
    order; a group error is answered alone, as KafkaApis does (getErrorResponse)."""
    if answer.error_code is not ErrorCode.NONE:
        return answer
    errors = dict(unknown)
    errors.update((TopicPartition(t.name, p.partition_index), p.error_code)
                  for t in answer.topics for p in t.partitions)
    by_topic: dict[str, list[OffsetDeleteResponsePartition]] = {}
    for t in request.topics:
        for p in t.partitions:
            by_topic.setdefault(t.name, []).append(OffsetDeleteResponsePartition(p, errors[TopicPartition(t.name, p)]))
    return OffsetDeleteResponse(answer.correlation_id, ErrorCode.NONE, tuple(
        OffsetDeleteResponseTopic(name, tuple(parts)) for name, parts in by_topic.items()), answer.throttle_time_ms)
