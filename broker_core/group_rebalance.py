"""The rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, the delayed
join (rebalance.timeout.ms, group.initial.rebalance.delay.ms) and member expiry
(session.timeout.ms).

Kafka 2.7.0's core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala,
rule for rule; each method names the Scala function it follows. Kafka's purgatories
become deadlines in the shared GroupContext: a group's DelayedJoin or
InitialDelayedJoin (DelayedJoin.scala) is the timer ``("group-join", group)``, a
member's DelayedHeartbeat (DelayedHeartbeat.scala) ``("group-heartbeat", group,
member)`` and a pending member's ``("group-pending", group, member)``. Kafka completes
a DelayedHeartbeat early when its member needs none, and checks again at expiry; here
scheduling one for a member that needs none cancels the timer, and expiry checks again:
the same members are removed at the same times.

Where Kafka leaves a held request unanswered until the client gives up, it is
answered here, so that every request is answered once: a member removed while its
SyncGroup waits is told UNKNOWN_MEMBER_ID; a JoinGroup or SyncGroup replaced by the
same member's next one (from another connection) REBALANCE_IN_PROGRESS. A JoinGroup
or LeaveGroup that Kafka meets with an IllegalStateException (a static member under a
pending member id) gets UNKNOWN_SERVER_ERROR, the code Kafka's request handler turns
that exception into.
"""
from __future__ import annotations

from broker_core.errors import CoreError, ErrorCode
from broker_core.group_context import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupContext
from broker_core.group_messages import (
    UNKNOWN_MEMBER_ID, HeartbeatRequest, HeartbeatResponse, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, LeaveMemberResponse, SyncGroupRequest, SyncGroupResponse)
from broker_core.group_state import GroupMetadata, GroupState, JoinOp, MemberMetadata, Waiter

S = GroupState


def join_key(group: GroupMetadata) -> tuple:
    return ("group-join", group.group_id)


def heartbeat_key(group: GroupMetadata, member_id: str) -> tuple:
    return ("group-heartbeat", group.group_id, member_id)


def pending_key(group: GroupMetadata, member_id: str) -> tuple:
    return ("group-pending", group.group_id, member_id)


class Rebalancer:
    def __init__(self, ctx: GroupContext, groups: dict[str, GroupMetadata]):
        self.ctx = ctx
        self.groups = groups

    # -- answers ---------------------------------------------------------------------
    def _join_error(self, waiter: Waiter, member_id: str, error: ErrorCode) -> None:
        self.ctx.reply(waiter, JoinGroupResponse(waiter.correlation_id, error, member_id=member_id))

    def _join_result(self, group: GroupMetadata, waiter: Waiter, member_id: str, with_members: bool,
                     leader: str | None = None, error: ErrorCode = ErrorCode.NONE) -> JoinGroupResponse:
        return JoinGroupResponse(
            waiter.correlation_id, error, group.generation_id, group.protocol_type, group.protocol_name,
            (group.leader_id if leader is None else leader) or "", member_id,
            group.current_member_metadata() if with_members else ())

    def _invoke_join(self, member: MemberMetadata, response: JoinGroupResponse) -> None:
        """GroupMetadata.maybeInvokeJoinCallback: answer the member's held JoinGroup, if any."""
        waiter, member.awaiting_join = member.awaiting_join, None
        if waiter is not None:
            self.ctx.reply(waiter, JoinGroupResponse(
                waiter.correlation_id, response.error_code, response.generation_id, response.protocol_type,
                response.protocol_name, response.leader, response.member_id, response.members))

    def _invoke_sync(self, member: MemberMetadata, error: ErrorCode, protocol_type: str | None = None,
                     protocol_name: str | None = None) -> bool:
        """GroupMetadata.maybeInvokeSyncCallback; True when a SyncGroup was waiting."""
        waiter, member.awaiting_sync = member.awaiting_sync, None
        if waiter is None:
            return False
        assignment = member.assignment if error is ErrorCode.NONE else b""
        self.ctx.reply(waiter, SyncGroupResponse(waiter.correlation_id, error, protocol_type, protocol_name,
                                                 assignment))
        return True

    # -- JoinGroup -------------------------------------------------------------------
    def join(self, waiter: Waiter, req: JoinGroupRequest) -> None:
        """handleJoinGroup, after validateGroupStatus (the coordinator's)."""
        cfg = self.ctx.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return self._join_error(waiter, req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                return self._join_error(waiter, req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[req.group_id] = GroupMetadata(req.group_id, state_timestamp_ms=self.ctx.now_ms)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            if req.group_instance_id is not None:
                group.static_members.pop(req.group_instance_id, None)
            self._join_error(waiter, UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED)
        elif unknown:
            self._unknown_join(group, waiter, req)
        else:
            self._known_join(group, waiter, req)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """acceptJoiningMember: group.max.size counts the members already rejoined while
        a rebalance is prepared, the members otherwise."""
        limit = self.ctx.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting < limit
        return group.has(member_id) or len(group.members) < limit

    def _unknown_join(self, group: GroupMetadata, waiter: Waiter, req: JoinGroupRequest) -> None:
        """doUnknownJoinGroup: a member without an id gets one; from v4 on a dynamic
        member is told MEMBER_ID_REQUIRED and joins with it next (KIP-394)."""
        if group.is_(S.DEAD):
            return self._join_error(waiter, UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return self._join_error(waiter, UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        new_id = self.ctx.new_member_id(req.group_instance_id if req.group_instance_id is not None else req.client_id)
        if group.has_static_member(req.group_instance_id):
            self._update_static_member_and_rebalance(group, waiter, new_id, req)
        elif req.version >= 4 and req.group_instance_id is None:
            group.pending_members[new_id] = None
            self.ctx.set_timer(pending_key(group, new_id), req.session_timeout_ms)
            self._join_error(waiter, new_id, ErrorCode.MEMBER_ID_REQUIRED)
        else:
            self._add_member_and_rebalance(group, waiter, new_id, req)

    def _known_join(self, group: GroupMetadata, waiter: Waiter, req: JoinGroupRequest) -> None:
        """doJoinGroup: a member that has its id."""
        member_id = req.member_id
        if group.is_(S.DEAD):
            return self._join_error(waiter, member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return self._join_error(waiter, member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:  # Kafka: IllegalStateException
                return self._join_error(waiter, member_id, ErrorCode.UNKNOWN_SERVER_ERROR)
            return self._add_member_and_rebalance(group, waiter, member_id, req)
        if group.is_static_member_fenced(member_id, req.group_instance_id):
            return self._join_error(waiter, member_id, ErrorCode.FENCED_INSTANCE_ID)
        unknown_instance = req.group_instance_id is not None and not group.has_static_member(req.group_instance_id)
        if not group.has(member_id) or unknown_instance:
            return self._join_error(waiter, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req.protocols, waiter)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):  # its JoinGroup answer was lost: the same again
                self.ctx.reply(waiter, self._join_result(group, waiter, member_id, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req.protocols, waiter)
        elif group.is_(S.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req.protocols, waiter)
            else:  # a follower with nothing new goes on to SyncGroup
                self.ctx.reply(waiter, self._join_result(group, waiter, member_id, False))
        else:
            self._join_error(waiter, member_id, ErrorCode.UNKNOWN_MEMBER_ID)

    def _add_member_and_rebalance(self, group: GroupMetadata, waiter: Waiter, member_id: str,
                                  req: JoinGroupRequest) -> None:
        """addMemberAndRebalance: a new member waits at most NewMemberJoinTimeoutMs for
        the rebalance, since it cannot heartbeat before it has a generation."""
        rebalance_timeout = req.session_timeout_ms if req.version == 0 else req.rebalance_timeout_ms
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                rebalance_timeout, req.session_timeout_ms, req.protocol_type, req.protocols,
                                is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, waiter)
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self.ctx.cancel_timer(pending_key(group, member_id))
        self.maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: tuple[JoinGroupProtocol, ...], waiter: Waiter) -> None:
        self._set_protocols(member, protocols, waiter)
        self.maybe_prepare_rebalance(group)

    def _replace_group_instance(self, group: GroupMetadata, old_id: str, new_id: str, instance_id: str) -> MemberMetadata:
        """GroupMetadata.replaceGroupInstance: the instance's new member id takes the old
        one's place (its assignment and leadership); whatever the old one waits for is
        answered FENCED_INSTANCE_ID."""
        member = group.members.pop(old_id)
        self._invoke_join(member, JoinGroupResponse(0, ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        self._invoke_sync(member, ErrorCode.FENCED_INSTANCE_ID)
        self.ctx.cancel_timer(heartbeat_key(group, old_id))
        member.member_id = new_id
        group.members[new_id] = member
        if group.is_leader(old_id):
            group.leader_id = new_id
        group.static_members[instance_id] = new_id
        return member

    def _update_static_member_and_rebalance(self, group: GroupMetadata, waiter: Waiter, new_id: str,
                                            req: JoinGroupRequest) -> None:
        """updateStaticMemberAndRebalance: a static member back with a new member id.
        A Stable group whose protocol stays keeps its assignment (no rebalance); the
        answer names the old leader, so that the leader does not reassign."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_id = group.static_members[instance_id]
        current_leader = group.leader_id or ""
        member = self._replace_group_instance(group, old_id, new_id, instance_id)
        self.schedule_heartbeat(group, member)
        old_protocols = member.protocols
        self._set_protocols(member, req.protocols, waiter)
        if group.is_(S.STABLE):
            if group.protocol_name != group.select_protocol():
                return self.maybe_prepare_rebalance(group)

            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                # Kafka reverts or answers whatever happened meanwhile, and throws when the
                # new member is gone; here a group that moved on (a rebalance, another
                # restart of the instance) has answered the member already.
                if group.is_(S.STABLE) and group.generation_id == generation \
                        and group.static_members.get(instance_id) == new_id:
                    self._static_member_stored(group, member, waiter, old_id, old_protocols, current_leader, error)
            self.ctx.store(group.group_id, generation, stored,
                           assignment={m.member_id: m.assignment for m in group.members.values()})
        elif group.is_(S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group)
        elif group.state in (S.EMPTY, S.DEAD):
            raise CoreError(f"group {group.group_id}: static member {instance_id} in state {group.state.value}")

    def _static_member_stored(self, group: GroupMetadata, member: MemberMetadata, waiter: Waiter, old_id: str,
                              old_protocols: tuple[JoinGroupProtocol, ...], current_leader: str,
                              error: ErrorCode) -> None:
        """storeGroup's callback in updateStaticMemberAndRebalance: the new member id is
        answered; if the write failed, the old member id is the instance's again."""
        new_id, instance_id = member.member_id, member.group_instance_id
        assert instance_id is not None
        if error is ErrorCode.NONE:
            return self._invoke_join(member, self._join_result(group, waiter, new_id, False, current_leader))
        self._set_protocols(member, old_protocols, None)
        old = self._replace_group_instance(group, new_id, old_id, instance_id)
        self.schedule_heartbeat(group, old)
        self.ctx.reply(waiter, self._join_result(group, waiter, UNKNOWN_MEMBER_ID, False, current_leader, error))

    def _set_protocols(self, member: MemberMetadata, protocols: tuple[JoinGroupProtocol, ...],
                       waiter: Waiter | None) -> None:
        """GroupMetadata.updateMember. A JoinGroup still held for the member (sent again
        on another connection) is answered REBALANCE_IN_PROGRESS rather than dropped."""
        member.protocols = protocols
        if waiter is not None:
            self._supersede(member.awaiting_join)
        member.awaiting_join = waiter

    def _supersede(self, old: Waiter | None) -> None:
        if old is not None:
            self.ctx.reply(old, JoinGroupResponse(old.correlation_id, ErrorCode.REBALANCE_IN_PROGRESS))

    # -- the delayed join --------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group)

    def prepare_rebalance(self, group: GroupMetadata) -> None:
        """prepareRebalance: members waiting for SyncGroup are told to rejoin; the first
        rebalance of an Empty group waits group.initial.rebalance.delay.ms for more
        members (InitialDelayedJoin), any other up to the rebalance timeout."""
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(S.EMPTY):
            delay = self.ctx.config.initial_rebalance_delay_ms
            op = JoinOp(True, delay, delay, max(group.rebalance_timeout_ms - delay, 0))
            timeout = delay
        else:
            op, timeout = JoinOp(False), group.rebalance_timeout_ms
        group.transition_to(S.PREPARING_REBALANCE, self.ctx.now_ms)
        group.join_op = op
        self.ctx.set_timer(join_key(group), timeout)
        self._try_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete (joinPurgatory.checkAndComplete): done once every
        member has rejoined and no member id is pending. An InitialDelayedJoin never
        completes early."""
        op = group.join_op
        if op is not None and not op.initial and group.has_all_members_joined:
            group.join_op = None
            self.ctx.cancel_timer(join_key(group))
            self._complete_join(group)

    def join_expired(self, group: GroupMetadata) -> None:
        """The join timer fired: InitialDelayedJoin.onComplete waits once more while new
        members keep coming (and rebalance time is left); otherwise onCompleteJoin."""
        op, group.join_op = group.join_op, None
        if op is None:
            return
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            delay = min(op.configured_delay_ms, op.remaining_ms)
            group.join_op = JoinOp(True, op.configured_delay_ms, delay, max(op.remaining_ms - op.delay_ms, 0))
            self.ctx.set_timer(join_key(group), delay)
        else:
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """onCompleteJoin: dynamic members that did not rejoin are dropped, a new
        generation begins, every waiting member learns it and the leader the members."""
        for failed in [m for m in group.not_yet_rejoined() if m.group_instance_id is None]:
            self.ctx.cancel_timer(heartbeat_key(group, failed.member_id))
            group.remove(failed.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (static members only): wait another rebalance timeout for
            # the session timeouts to remove them. Kafka waits the rebalance timeout
            # alone, which a client may send as 0 or -1: the join would expire again at
            # once, forever; here it waits at least the shortest session timeout.
            group.join_op = JoinOp(False)
            shortest_session = min(m.session_timeout_ms for m in group.members.values())
            self.ctx.set_timer(join_key(group), max(group.rebalance_timeout_ms, shortest_session))
            return self._try_complete_join(group)
        group.init_next_generation(self.ctx.now_ms)
        if group.is_(S.EMPTY):
            self.ctx.store(group.group_id, group.generation_id, lambda error: None, assignment={})
            return
        for member in list(group.members.values()):
            waiter = member.awaiting_join
            if waiter is not None:
                self._invoke_join(member, self._join_result(group, waiter, member.member_id,
                                                            group.is_leader(member.member_id)))
            self.schedule_heartbeat(group, member)
            member.is_new = False

    # -- SyncGroup -------------------------------------------------------------------
    def sync(self, waiter: Waiter, req: SyncGroupRequest) -> None:
        """handleSyncGroup / doSyncGroup."""
        group = self.groups.get(req.group_id)
        error = self._sync_error(group, req)
        if error is not None or group is None:
            return self.ctx.reply(waiter, SyncGroupResponse(waiter.correlation_id, error or ErrorCode.UNKNOWN_MEMBER_ID))
        member = group.members[req.member_id]
        if group.is_(S.STABLE):
            self.ctx.reply(waiter, SyncGroupResponse(waiter.correlation_id, ErrorCode.NONE, group.protocol_type,
                                                     group.protocol_name, member.assignment))
            return self.schedule_heartbeat(group, member)
        if member.awaiting_sync is not None:  # sent again: the older one is answered, not dropped
            old = member.awaiting_sync
            self.ctx.reply(old, SyncGroupResponse(old.correlation_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = waiter  # CompletingRebalance: wait for the leader's assignment
        if not group.is_leader(req.member_id):
            return  # a follower's assignments, if any, are ignored
        assignment = {a.member_id: a.assignment for a in req.assignments}
        full = {m: assignment.get(m, b"") for m in group.members}
        generation = group.generation_id

        def stored(store_error: ErrorCode) -> None:
            # Another member may have joined meanwhile: only the same generation completes.
            if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
                return
            if store_error is not ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, store_error)
                self.maybe_prepare_rebalance(group)
            else:
                for m in group.members.values():
                    m.assignment = full.get(m.member_id, b"")
                self._propagate_assignment(group, ErrorCode.NONE)
                group.transition_to(S.STABLE, self.ctx.now_ms)
        self.ctx.store(group.group_id, generation, stored, assignment=full)

    @staticmethod
    def _member_error(group: GroupMetadata | None, member_id: str, group_instance_id: str | None,
                      generation_id: int) -> ErrorCode | None:
        """The checks SyncGroup and Heartbeat make first, in this order (2.7.0
        GroupCoordinator.handleSyncGroup / handleHeartbeat): the group, the member and
        its generation."""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    @staticmethod
    def _sync_error(group: GroupMetadata | None, req: SyncGroupRequest) -> ErrorCode | None:
        error = Rebalancer._member_error(group, req.member_id, req.group_instance_id, req.generation_id)
        if error is not None or group is None:
            return error
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        """propagateAssignment: each waiting SyncGroup is answered, and its member's
        session timer restarts (an expiry while it waited was ignored)."""
        ok = error is ErrorCode.NONE
        for member in list(group.members.values()):
            if self._invoke_sync(member, error, group.protocol_type if ok else None,
                                 group.protocol_name if ok else None):
                self.schedule_heartbeat(group, member)

    # -- Heartbeat and expiry ----------------------------------------------------------
    def heartbeat(self, waiter: Waiter, req: HeartbeatRequest) -> None:
        """handleHeartbeat: REBALANCE_IN_PROGRESS tells a member to rejoin."""
        self.ctx.reply(waiter, HeartbeatResponse(waiter.correlation_id, self._heartbeat_error(req)))

    def _heartbeat_error(self, req: HeartbeatRequest) -> ErrorCode:
        group = self.groups.get(req.group_id)
        error = self._member_error(group, req.member_id, req.group_instance_id, req.generation_id)
        if error is not None or group is None:
            return error if error is not None else ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[req.member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else ErrorCode.NONE

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """completeAndScheduleNextExpiration: the member's session starts again."""
        key = heartbeat_key(group, member.member_id)
        if member.has_satisfied_heartbeat:
            self.ctx.cancel_timer(key)
        else:
            self.ctx.set_timer(key, member.session_timeout_ms if timeout_ms is None else timeout_ms)

    def heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        """onExpireHeartbeat: the session timed out."""
        member = group.members.get(member_id)
        if not group.is_(S.DEAD) and member is not None and not member.has_satisfied_heartbeat:
            self.remove_member_and_update_group(group, member)

    def pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        if not group.is_(S.DEAD):
            self._remove_pending_member(group, member_id)

    # -- LeaveGroup and removal ----------------------------------------------------------
    def leave(self, waiter: Waiter, req: LeaveGroupRequest) -> None:
        """handleLeaveGroup: each member of the batch answered on its own (v3+)."""
        group = self.groups.get(req.group_id)
        if group is None:
            results = tuple(LeaveMemberResponse(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                            for m in req.members)
            return self.ctx.reply(waiter, LeaveGroupResponse(waiter.correlation_id, ErrorCode.NONE, results))
        if group.is_(S.DEAD):
            return self.ctx.reply(waiter, LeaveGroupResponse(waiter.correlation_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        results = tuple(LeaveMemberResponse(m.member_id, m.group_instance_id,
                                            self._leave_one(group, m.member_id, m.group_instance_id))
                        for m in req.members)
        self.ctx.reply(waiter, LeaveGroupResponse(waiter.correlation_id, ErrorCode.NONE, results))

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if member_id != UNKNOWN_MEMBER_ID and group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.is_pending_member(member_id):
            if instance_id is not None:  # Kafka: IllegalStateException
                return ErrorCode.UNKNOWN_SERVER_ERROR
            self._remove_pending_member(group, member_id)
            return ErrorCode.NONE
        if instance_id is not None and group.has_static_member(instance_id):
            member_id = group.static_members[instance_id]
        elif not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.remove_member_and_update_group(group, group.members[member_id])
        return ErrorCode.NONE

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """removeMemberAndUpdateGroup: a member waiting in a rebalance is told
        UNKNOWN_MEMBER_ID (a live one rejoins); the rest rebalance."""
        self._invoke_join(member, JoinGroupResponse(0, ErrorCode.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID))
        self._invoke_sync(member, ErrorCode.UNKNOWN_MEMBER_ID)
        self.ctx.cancel_timer(heartbeat_key(group, member.member_id))
        group.remove(member.member_id)
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.pop(member_id, None)
        self.ctx.cancel_timer(pending_key(group, member_id))
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
