"""The group coordinator, sans I/O (issue 24): consumer groups' membership, rebalances
and committed offsets, driven by explicit time.

Interface (docs/groups.md, "The group coordinator"):

- ``handle(src, request, now_ms) -> [(dst, response)]``: one group request from the
  connection ``src``; the answers to send now. A JoinGroup or SyncGroup may be held and
  answered by a later call (another member's request, a timer, a write completed),
  always to the ``src`` and correlation id it came with.
- ``on_timer(key, now_ms)``: a timer set through ``timer_effects()`` (SetTimer and
  CancelTimer, keys beginning "group-") fired; ``advance(now_ms)`` fires every timer
  due by ``now_ms`` in deadline order, for runtimes and tests that keep no timers.
- ``take_writes()`` and ``write_completed(token, error, now_ms)``: the seam to
  ``__consumer_offsets`` (broker_core/group_context.py), used with ``deferred_writes``.
- ``ownership``: which groups this coordinator answers for, a callable
  ``group_id -> ErrorCode`` (NONE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS;
  BrokerNode's is ``GroupPartitions.status``); ``load`` takes groups read back from
  ``__consumer_offsets`` (onGroupLoaded), ``unload`` drops groups whose partition this
  broker no longer leads (onResignation). broker_core/group_host.py wires it.
- DeleteGroups and OffsetDelete are requests like the others (broker_core/group_admin.py);
  ``start_offset_expiration(now_ms)`` starts the periodic expiry of committed offsets
  (offsets.retention.*), whose tombstones go out through ``take_writes`` like commits.

It does not know about the broker or the internal topic: which partition a group maps
to is ``group_records.partition_for``, and BrokerNode, not this module, decides whether it leads it.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

from broker_core.effects import CancelTimer, SetTimer
from broker_core.errors import CoreError, ErrorCode, InvariantViolation
from broker_core import group_admin, group_offsets
from broker_core.group_context import GroupConfig, GroupContext, GroupWrite, client_error
from broker_core.group_messages import (
    DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, SyncGroupRequest, SyncGroupResponse)
from broker_core.group_rebalance import Rebalancer
from broker_core.group_state import GroupMetadata, GroupState, Waiter

Ownership = Callable[[str], ErrorCode]


def _always_ours(group_id: str) -> ErrorCode:
    return ErrorCode.NONE


class GroupCoordinator:
    def __init__(self, config: GroupConfig | None = None, member_id_seed: int = 0,
                 deferred_writes: bool = False, ownership: Ownership | None = None):
        self.ctx = GroupContext(config or GroupConfig(), member_id_seed, deferred_writes)
        self.groups: dict[str, GroupMetadata] = {}
        self.rebalancer = Rebalancer(self.ctx, self.groups)
        self.ownership: Ownership = ownership or _always_ours

    # -- requests ----------------------------------------------------------------------
    def handle(self, src: Hashable, request: Any, now_ms: int) -> list[tuple[Hashable, Any]]:
        self.ctx.now_ms = now_ms
        waiter = Waiter(src, request.correlation_id)
        if isinstance(request, (OffsetCommitRequest, OffsetFetchRequest, DescribeGroupsRequest, ListGroupsRequest)):
            self._handle_offsets_and_views(waiter, request)
        elif isinstance(request, DeleteGroupsRequest):
            errors = {}
            for group_id in request.groups_names:
                error = self._status(group_id, allow_empty_id=True)
                if error is not None:
                    errors[group_id] = error
            group_admin.delete_groups(self.ctx, self.groups, waiter, request, errors)
        elif isinstance(request, OffsetDeleteRequest):
            group_admin.delete_offsets(self.ctx, self.groups, waiter, request,
                                       self._status(request.group_id, allow_empty_id=False))
        else:
            self._handle_membership(waiter, request)
        return self.ctx.take_out()

    def _handle_membership(self, waiter: Waiter, request: Any) -> None:
        reb, cid = self.rebalancer, waiter.correlation_id
        if isinstance(request, JoinGroupRequest):
            error = self._status(request.group_id, allow_empty_id=False)
            if error is None:
                return reb.join(waiter, request)
            return self.ctx.reply(waiter, JoinGroupResponse(cid, error, member_id=request.member_id))
        if isinstance(request, SyncGroupRequest):
            error = self._status(request.group_id, allow_empty_id=False)
            if error is None:
                return reb.sync(waiter, request)
            # handleSyncGroup: a loading coordinator lost the rebalance; older clients
            # know REBALANCE_IN_PROGRESS (rejoin), not COORDINATOR_LOAD_IN_PROGRESS.
            if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                error = ErrorCode.REBALANCE_IN_PROGRESS
            return self.ctx.reply(waiter, SyncGroupResponse(cid, error))
        if isinstance(request, HeartbeatRequest):
            error = self._status(request.group_id, allow_empty_id=False)
            if error is None:
                return reb.heartbeat(waiter, request)
            # handleHeartbeat: while loading, answered blindly.
            ok = error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return self.ctx.reply(waiter, HeartbeatResponse(cid, ErrorCode.NONE if ok else error))
        if isinstance(request, LeaveGroupRequest):
            error = self._status(request.group_id, allow_empty_id=False)
            if error is None:
                return reb.leave(waiter, request)
            return self.ctx.reply(waiter, LeaveGroupResponse(cid, error))
        raise CoreError(f"not a group request: {type(request).__name__}")

    def _handle_offsets_and_views(self, waiter: Waiter, request: Any) -> None:
        if isinstance(request, OffsetCommitRequest):
            error = self._status(request.group_id, allow_empty_id=True)
            group_offsets.commit(self.ctx, self.groups, self.rebalancer, waiter, request, error)
        elif isinstance(request, OffsetFetchRequest):
            error = self._status(request.group_id, allow_empty_id=True)
            group_offsets.fetch(self.ctx, self.groups, waiter, request, error)
        elif isinstance(request, DescribeGroupsRequest):
            errors = {}
            for group_id in request.groups:
                error = self._status(group_id, allow_empty_id=True)
                if error is not None:
                    errors[group_id] = error
            group_offsets.describe(self.ctx, self.groups, waiter, request, errors)
        else:
            group_offsets.list_groups(self.ctx, self.groups, waiter, request, self._list_status())

    def _status(self, group_id: str, allow_empty_id: bool) -> ErrorCode | None:
        """validateGroupStatus: OffsetCommit, OffsetFetch and DescribeGroups accept the
        empty group id (older clients commit under it); the membership APIs do not."""
        if group_id == "" and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.ownership(group_id)
        return None if error is ErrorCode.NONE else error

    def _list_status(self) -> ErrorCode:
        """handleListGroups lists what it has; while any partition loads it says so."""
        loading = any(self.ownership(g) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for g in self.groups)
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE

    # -- time ----------------------------------------------------------------------------
    def timer_effects(self) -> list[SetTimer | CancelTimer]:
        """The timers set and cancelled since the last call, for a runtime that keeps them."""
        effects, self.ctx.timer_effects = self.ctx.timer_effects, []
        return effects

    def next_deadline(self) -> int | None:
        return min(self.ctx.timers.values(), default=None)

    def on_timer(self, key: tuple, now_ms: int) -> list[tuple[Hashable, Any]]:
        """A timer fired. One cancelled, replaced by a later one, or not yet due is
        ignored: a runtime may deliver a stale timer."""
        self.ctx.now_ms = now_ms
        at_ms = self.ctx.timers.get(key)
        if at_ms is not None and at_ms <= now_ms:
            self._fire(key)
        return self.ctx.take_out()

    def advance(self, now_ms: int) -> list[tuple[Hashable, Any]]:
        """Fire every timer due by ``now_ms``, earliest first, each at its own deadline
        (a timer one sets that is already due fires too)."""
        out: list[tuple[Hashable, Any]] = []
        fired: dict[tuple, int] = {}  # (key, deadline) -> times fired
        while (key := self.ctx.due(now_ms)) is not None:
            at_ms = self.ctx.now_ms = self.ctx.timers[key]
            fired[(key, at_ms)] = fired.get((key, at_ms), 0) + 1
            if fired[(key, at_ms)] > 3:  # an InitialDelayedJoin of delay 0 may re-arm once
                raise InvariantViolation(f"group timer {key!r} keeps firing at {at_ms} ms")
            self._fire(key)
            out.extend(self.ctx.take_out())
        self.ctx.now_ms = now_ms
        return out

    def start_offset_expiration(self, now_ms: int) -> None:
        """GroupMetadataManager.startup(enableMetadataExpiration = true): offsets expire
        at a check every offsets.retention.check.interval.ms from now (Kafka's first
        check runs at startup, when nothing is loaded yet). A coordinator not started
        so keeps offsets for ever."""
        self.ctx.now_ms = now_ms
        self.ctx.set_timer(group_admin.EXPIRE_TIMER, self.ctx.config.offsets_retention_check_interval_ms)

    def expire_offsets(self, now_ms: int) -> list[tuple[Hashable, Any]]:
        """One expiry check now (what the timer runs); tombstones go out as writes."""
        self.ctx.now_ms = now_ms
        group_admin.expire_offsets(self.ctx, self.groups, lambda g: self.ownership(g) is ErrorCode.NONE)
        return self.ctx.take_out()

    def _fire(self, key: tuple) -> None:
        self.ctx.pop_timer(key)
        if key == group_admin.EXPIRE_TIMER:
            group_admin.expire_offsets(self.ctx, self.groups, lambda g: self.ownership(g) is ErrorCode.NONE)
            self.ctx.set_timer(key, self.ctx.config.offsets_retention_check_interval_ms)
            return
        kind, group_id = key[0], key[1]
        group = self.groups.get(group_id)
        if group is None:
            return
        if kind == "group-join":
            self.rebalancer.join_expired(group)
        elif kind == "group-heartbeat":
            self.rebalancer.heartbeat_expired(group, key[2])
        elif kind == "group-pending":
            self.rebalancer.pending_expired(group, key[2])
        else:
            raise CoreError(f"unknown group timer {key!r}")

    # -- the __consumer_offsets seam -----------------------------------------------------
    def take_writes(self) -> list[GroupWrite]:
        """Writes to make durable in ``__consumer_offsets`` (deferred_writes only)."""
        writes, self.ctx.new_writes = self.ctx.new_writes, []
        return writes

    def write_completed(self, token: int, append_error: ErrorCode, now_ms: int) -> list[tuple[Hashable, Any]]:
        """The write ``token`` was replicated (NONE) or failed with the log append's
        error, which the coordinator maps to what its client is told."""
        self.ctx.now_ms = now_ms
        entry = self.ctx.pending_writes.pop(token, None)
        if entry is None:
            raise CoreError(f"no pending group write {token}")
        write, on_done = entry
        on_done(client_error(append_error, group_write=write.is_group_metadata))
        return self.ctx.take_out()

    def load(self, groups: Iterable[GroupMetadata], now_ms: int) -> list[tuple[Hashable, Any]]:
        """onGroupLoaded (2.7.0 GroupCoordinator): groups read back from
        ``__consumer_offsets`` (Empty or Stable) are served from now on, and each
        member's session starts now (completeAndScheduleNextHeartbeatExpiration): a
        member that does not come back within its session timeout is removed. A group
        already here is kept (GroupMetadataManager.addGroup keeps the cached one). One
        with more members than group.max.size (lowered since it was written) rebalances,
        so that the members rejoin and the extra ones are refused."""
        self.ctx.now_ms = now_ms
        for group in groups:
            if group.group_id in self.groups:
                continue
            self.groups[group.group_id] = group
            if len(group.members) > self.ctx.config.max_size:
                self.rebalancer.prepare_rebalance(group)
            for member in group.members.values():
                self.rebalancer.schedule_heartbeat(group, member)
        return self.ctx.take_out()

    def unload(self, group_ids: Iterable[str], now_ms: int) -> list[tuple[Hashable, Any]]:
        """onGroupUnloaded: this broker no longer coordinates these groups; members
        waiting in a rebalance are told NOT_COORDINATOR and look the coordinator up."""
        self.ctx.now_ms = now_ms
        for group_id in sorted(set(group_ids)):
            group = self.groups.pop(group_id, None)
            if group is not None:
                self._unload(group)
        return self.ctx.take_out()

    def _unload(self, group: GroupMetadata) -> None:
        group.transition_to(GroupState.DEAD, self.ctx.now_ms)
        for member in group.members.values():
            if member.awaiting_join is not None:
                self.ctx.reply(member.awaiting_join, JoinGroupResponse(
                    member.awaiting_join.correlation_id, ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                self.ctx.reply(member.awaiting_sync, SyncGroupResponse(
                    member.awaiting_sync.correlation_id, ErrorCode.NOT_COORDINATOR))
                member.awaiting_sync = None
        for key in [k for k in self.ctx.timers if len(k) > 1 and k[1] == group.group_id]:
            self.ctx.cancel_timer(key)
        group.join_op = None
