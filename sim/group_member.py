"""A consumer-group member, sans I/O: the client half of the group protocol, as Kafka
2.7.0's AbstractCoordinator and ConsumerCoordinator
(clients/src/main/java/org/apache/kafka/clients/consumer/internals/) do it.

It reads no clock and owns no socket, so that the simulation, the real binding and a
test can all drive it (docs/groups.md, "The group member"). A runtime hands it time
and answers; it hands back ``Outgoing`` requests and ``HistoryEvent``s:

- ``start(now)``, then ``poll(now)`` whenever the application polls (this resets the
  max.poll.interval.ms timer, starts a rejoin and runs auto-commit, as
  KafkaConsumer.poll does) and ``tick(now)`` whenever time passes (the heartbeat
  thread: heartbeats, the session and poll timeouts, coordinator lookup);
- ``on_response(correlation_id, response, now)``, or ``on_no_answer(correlation_id,
  now, reason)`` for a request the runtime gave up on (timeout, connection lost);
- ``consumed(tp, offsets, now)`` when the application processed fetched records,
  ``commit_sync`` / ``commit_async`` for its commits, ``close(now)``;
- ``fetch_positions()``: where to fetch each owned partition from;
  ``next_deadline()``: when ``tick`` or ``poll`` next has something to do (None:
  nothing until an answer comes), so that an event-driven runtime need not tick.

Offsets (OffsetFetch, auto.offset.reset, commits) are sim/group_commits.py's.
"""
from __future__ import annotations

from typing import Any

from analysis import group_history as gh
from broker_core.assignors import UnknownAssignor, assign
from broker_core.consumer_protocol import (
    ConsumerProtocolError, decode_assignment, encode_assignment, encode_subscription, encode_sticky_user_data,
    member_subscription)
from broker_core.errors import ErrorCode
from broker_core.group_messages import (
    NO_GENERATION, UNKNOWN_MEMBER_ID, HeartbeatRequest, HeartbeatResponse, JoinGroupProtocol, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, MemberIdentity, SyncGroupAssignment, SyncGroupRequest,
    SyncGroupResponse)
from broker_core.messages import FindCoordinatorRequest, FindCoordinatorResponse
from broker_core.types import TopicPartition
from sim.group_commits import Committer
from sim.group_member_types import ANY_BROKER, HistoryEvent, MemberConfig, Outgoing

_DONE = -1  # prejoin_commit: the auto-commit onJoinPrepare made was answered


# AbstractCoordinator.MemberState, with the lookup and the local end states
UNJOINED, JOINING, SYNCING, STABLE, FAILED, CLOSED = "unjoined", "joining", "syncing", "stable", "failed", "closed"
# JoinGroup errors after which the Java consumer rejoins at once (joinGroupIfNeeded);
# other retriable ones wait retry.backoff.ms
_REJOIN_NOW = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
               ErrorCode.MEMBER_ID_REQUIRED)
_COORDINATOR_GONE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)


class GroupMember:
    def __init__(self, config: MemberConfig, name: str = "consumer-0", partitions_per_topic: dict | None = None):
        self.config, self.name = config, name
        self.partitions_per_topic: dict[str, int] = dict(partitions_per_topic or {})  # the leader's metadata
        self.state = UNJOINED
        self.member_id, self.generation = UNKNOWN_MEMBER_ID, NO_GENERATION
        self.protocol: str | None = None
        self.rejoin_needed = True
        self.coordinator: int | None = None
        self.assignment: list[TopicPartition] = []
        # StickyAssignor.onAssignment keeps the last assignment and its generation
        self.last_assignment: list[TopicPartition] = []
        self.last_generation = NO_GENERATION
        self.inflight: dict[int, tuple] = {}  # correlation id -> what it was for
        self.retry_at: dict[str, int] = {}  # "find", "join": not before
        self.last_poll_ms = self.heartbeat_sent_ms = self.heartbeat_ok_ms = 0
        # the auto-commit onJoinPrepare waits for: None (not made), its token, or _DONE
        self.prejoin_commit: int | None = None
        self.prejoin_done = False
        self._cid = 0
        self._op = 0  # history operations (commits), counted from 1 as every client's
        self._out: list[Outgoing | HistoryEvent] = []
        self.offsets = Committer(self)

    # -- the runtime's calls ------------------------------------------------------------
    def start(self, now: int) -> list:
        self.last_poll_ms = now
        return self.poll(now)

    def poll(self, now: int) -> list:
        """KafkaConsumer.poll: the application is alive; the group is joined here."""
        if self.state in (FAILED, CLOSED):
            return self._flush()
        self.last_poll_ms = now
        self._background(now)
        if self.rejoin_needed and self.coordinator is not None:
            self._maybe_join(now)
        self.offsets.on_poll(now)
        return self._flush()

    def tick(self, now: int) -> list:
        """The heartbeat thread, and every retry that waited for its time."""
        if self.state not in (FAILED, CLOSED):
            self._background(now)
            self.offsets.on_tick(now)
        return self._flush()

    def on_response(self, correlation_id: int, response: Any, now: int) -> list:
        context = self.inflight.pop(correlation_id, None)
        if context is None or self.state in (FAILED, CLOSED) and context[0] != "commit":
            return self._flush()  # stale: given up on, or sent before the coordinator changed
        kind = context[0]
        if kind == "find":
            self._on_find(response, now)
        elif kind == "join":
            self._on_join(context, response, now)
        elif kind == "sync":
            self._on_sync(context, response, now)
        elif kind == "heartbeat":
            self._on_heartbeat(context, response, now)
        elif kind == "leave":
            pass  # LeaveGroup's answer changes nothing: the member already reset itself
        else:
            self.offsets.on_response(context, response, now)
        return self._flush()

    def on_no_answer(self, correlation_id: int, now: int, reason: str = "client_timeout") -> list:
        """A request the runtime gave up on: for the coordinator's requests Kafka's
        client disconnects and marks the coordinator unknown."""
        context = self.inflight.pop(correlation_id, None)
        if context is None:
            return self._flush()
        if context[0] in ("find", "list_offsets"):
            if context[0] == "find":
                self.retry_at["find"] = now + self.config.retry_backoff_ms
            else:
                self.offsets.on_no_answer(context, now, reason)
            return self._flush()
        self.inflight[correlation_id] = context  # coordinator_lost fails it with the others
        self.coordinator_lost(now, reason)
        return self._flush()

    def consumed(self, tp: TopicPartition, offsets: list[int], now: int) -> list:
        """The application processed the records at ``offsets`` of ``tp``, fetched from
        ``fetch_positions()``: whatever this member believes it owns, a zombie too."""
        self.offsets.consumed(tp, offsets, now)
        return self._flush()

    def commit_sync(self, now: int, offsets: dict[TopicPartition, int] | None = None) -> list:
        self.offsets.commit(now, gh.SYNC, offsets)
        return self._flush()

    def commit_async(self, now: int, offsets: dict[TopicPartition, int] | None = None) -> list:
        self.offsets.commit(now, gh.ASYNC, offsets)
        return self._flush()

    def close(self, now: int) -> list:
        """KafkaConsumer.close: a last auto-commit, the partitions revoked, LeaveGroup."""
        if self.state in (FAILED, CLOSED):
            return self._flush()
        if self.config.auto_commit and self.state == STABLE:
            self.offsets.commit(now, gh.AUTO, None)
        self._revoke("close")
        self._leave(now, "close")
        self.state = CLOSED
        return self._flush()

    def fetch_positions(self) -> dict[TopicPartition, int]:
        return self.offsets.fetch_positions()

    def next_deadline(self) -> int | None:
        """The earliest time ``tick`` or ``poll`` has something to do (a time already
        past means now): a lookup, a join, a heartbeat, the session or poll timeout, a
        retry, an auto-commit."""
        if self.state in (FAILED, CLOSED):
            return None
        times = []
        if self.coordinator is None and not self.has_inflight("find"):
            times.append(self.retry_at.get("find", 0))
        elif self.coordinator is not None and self.rejoin_needed and self.state == UNJOINED:
            times.append(self.retry_at.get("join", 0))
        if self.state in (SYNCING, STABLE) and self.coordinator is not None:
            if not self.has_inflight("heartbeat"):
                times.append(self._next_heartbeat_ms())
            times.append(self.heartbeat_ok_ms + self.config.session_timeout_ms + 1)
        if self.generation != NO_GENERATION and self.state in (SYNCING, STABLE):
            times.append(self.last_poll_ms + self.config.max_poll_interval_ms + 1)
        times += self.offsets.deadlines()
        return min(times, default=None)

    # -- plumbing -----------------------------------------------------------------------
    def next_op(self) -> int:
        self._op += 1
        return self._op

    def next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, to: Any, request: Any, context: tuple) -> None:
        self.inflight[request.correlation_id] = context
        self._out.append(Outgoing(to, request))

    def record(self, event_type: str, fields: dict) -> None:
        self._out.append(HistoryEvent(event_type, fields))

    def _flush(self) -> list:
        out, self._out = self._out, []
        return out

    @property
    def in_group(self) -> bool:
        return self.state == STABLE and self.generation != NO_GENERATION

    # -- the coordinator ----------------------------------------------------------------
    def _background(self, now: int) -> None:
        """AbstractCoordinator.HeartbeatThread.run's order: look up a coordinator, else
        the session timeout, else the poll timeout, else a heartbeat if due."""
        if self.coordinator is None:
            self._find_coordinator(now)
            return
        if self.state not in (SYNCING, STABLE):
            return
        if now - self.heartbeat_ok_ms > self.config.session_timeout_ms:
            self.coordinator_lost(now, "session_timed_out")
        elif now - self.last_poll_ms > self.config.max_poll_interval_ms:
            self._leave(now, "max_poll_interval")
        elif now >= self._next_heartbeat_ms() and not self.has_inflight("heartbeat"):
            self.heartbeat_sent_ms = now
            self.retry_at.pop("heartbeat", None)
            cid = self.next_cid()
            self.send(self.coordinator, HeartbeatRequest(cid, self.config.group_id, self.generation, self.member_id,
                                                         self.config.group_instance_id),
                      ("heartbeat", self.generation, self.member_id))

    def _next_heartbeat_ms(self) -> int:
        return max(self.heartbeat_sent_ms + self.config.heartbeat_interval_ms, self.retry_at.get("heartbeat", 0))

    def has_inflight(self, kind: str) -> bool:
        return any(c[0] == kind for c in self.inflight.values())

    def _find_coordinator(self, now: int) -> None:
        if self.has_inflight("find") or now < self.retry_at.get("find", 0):
            return
        self.retry_at.pop("find", None)
        self.send(ANY_BROKER, FindCoordinatorRequest(self.next_cid(), self.config.group_id), ("find",))

    def _on_find(self, response: FindCoordinatorResponse, now: int) -> None:
        if response.error is not ErrorCode.NONE or response.node_id < 0:
            self.retry_at["find"] = now + self.config.retry_backoff_ms
            return
        self.coordinator = response.node_id
        self.heartbeat_ok_ms = now  # Heartbeat.resetSessionTimeout: a new coordinator, a new session
        self.record(gh.GROUP_COORDINATOR_FOUND, gh.coordinator_found(self.config.group_id, response.node_id))
        self.offsets.on_coordinator(now)
        self._background(now)

    def coordinator_lost(self, now: int, reason: str) -> None:
        """markCoordinatorUnknown: the connection is dropped, so every request in
        flight to it fails; a join or sync in progress is started again later."""
        if self.coordinator is None:
            return
        self.record(gh.GROUP_COORDINATOR_LOST, gh.coordinator_lost(self.config.group_id, self.coordinator, reason))
        self.coordinator = None
        for cid in sorted(self.inflight):
            context = self.inflight[cid]
            if context[0] in ("join", "sync", "heartbeat", "leave", "offset_fetch", "commit"):
                del self.inflight[cid]
                if context[0] in ("join", "sync"):
                    self.state, self.rejoin_needed = UNJOINED, True
                else:
                    self.offsets.on_no_answer(context, now, "disconnected")
        self.retry_at["find"] = now + self.config.retry_backoff_ms

    # -- joining --------------------------------------------------------------------------
    def _maybe_join(self, now: int) -> None:
        """joinGroupIfNeeded: onJoinPrepare (an auto-commit first, then the partitions
        revoked, or lost if the generation was reset), then JoinGroup."""
        if self.state in (JOINING, SYNCING) or now < self.retry_at.get("join", 0):
            return
        if not self.prejoin_done:
            if self.prejoin_commit is not None and self.prejoin_commit > 0:
                return  # waiting for the auto-commit onJoinPrepare made
            if self.config.auto_commit and self.assignment and self.prejoin_commit is None:
                self.prejoin_commit = self.offsets.commit(now, gh.AUTO, None, before_join=True) or _DONE
                if self.prejoin_commit > 0:
                    return
            lost = self.generation == NO_GENERATION and self.member_id == UNKNOWN_MEMBER_ID
            self._revoke("lost" if lost else "rebalance")
            self.prejoin_done = True
        self.retry_at.pop("join", None)
        self._send_join()

    def prejoin_commit_done(self, now: int) -> None:
        self.prejoin_commit = _DONE
        if self.rejoin_needed and self.coordinator is not None and self.state not in (FAILED, CLOSED):
            self._maybe_join(now)

    def _send_join(self) -> None:
        config = self.config
        protocols = tuple(JoinGroupProtocol(name, self._subscription(name)) for name in config.assignors)
        rebalance = config.rebalance_timeout_ms if config.rebalance_timeout_ms is not None \
            else config.max_poll_interval_ms
        cid = self.next_cid()
        self.state = JOINING
        self.send(self.coordinator, JoinGroupRequest(
            cid, config.group_id, config.session_timeout_ms, self.member_id, "consumer", protocols, rebalance,
            config.group_instance_id, config.join_version, client_id=config.client_id),
            ("join", self.generation, self.member_id))

    def _subscription(self, protocol: str) -> bytes:
        """ConsumerProtocol's Subscription; the sticky assignor adds its user data (the
        prior assignment and its generation, StickyAssignor.subscriptionUserData)."""
        user_data = None
        if protocol == "sticky" and self.last_generation != NO_GENERATION:
            user_data = encode_sticky_user_data(self.last_assignment, self.last_generation)
        # eager rebalancing: the partitions were revoked in onJoinPrepare, none is owned
        return encode_subscription(sorted(self.config.topics), user_data, ())

    def _on_join(self, context: tuple, response: JoinGroupResponse, now: int) -> None:
        error = response.error_code
        if error is ErrorCode.NONE:
            self.generation, self.member_id = response.generation_id, response.member_id
            self.protocol = response.protocol_name
            self.record(gh.GROUP_JOINED, gh.joined(self.config.group_id, self.member_id, self.generation,
                                                   response.leader, response.protocol_name))
            assignments = self._assign(response) if response.leader == self.member_id else {}
            if assignments is None:
                return
            self.state = SYNCING
            pairs = tuple(SyncGroupAssignment(m, a) for m, a in assignments.items())
            self.send(self.coordinator, SyncGroupRequest(
                self.next_cid(), self.config.group_id, self.generation, self.member_id, pairs,
                self.config.group_instance_id, "consumer", self.protocol), ("sync", self.generation))
            return
        self.state = UNJOINED
        if error is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id  # KIP-394: join again with the id given
        elif error is ErrorCode.UNKNOWN_MEMBER_ID and context[1:] == (self.generation, self.member_id):
            self._reset_generation()
        elif error in _COORDINATOR_GONE:
            self.coordinator_lost(now, error.name)
            return
        elif error not in _REJOIN_NOW and error is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return self._fail(error.name)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self.retry_at["join"] = now + self.config.retry_backoff_ms
        else:
            self._maybe_join(now)

    def _assign(self, response: JoinGroupResponse) -> dict[str, bytes] | None:
        """onJoinLeader: the leader runs the protocol's assignor over every member's
        subscription and its own metadata of the topics."""
        try:
            protocol = response.protocol_name or ""
            subscriptions = {}
            for joined in response.members:
                metadata = joined.metadata  # a JoinGroup member's subscription bytes, not a node's
                subscriptions[joined.member_id] = member_subscription(metadata, protocol, joined.group_instance_id)
            result = assign(protocol, subscriptions, self.partitions_per_topic)
        except (ConsumerProtocolError, UnknownAssignor) as exc:
            self._fail(type(exc).__name__)
            return None
        return {member: encode_assignment(partitions) for member, partitions in result.items()}

    def _on_sync(self, context: tuple, response: SyncGroupResponse, now: int) -> None:
        error = response.error_code
        if error is ErrorCode.NONE:
            try:
                partitions = sorted(decode_assignment(response.assignment).partitions) if response.assignment else []
            except ConsumerProtocolError as exc:
                return self._fail(type(exc).__name__)
            self.state, self.rejoin_needed, self.prejoin_done, self.prejoin_commit = STABLE, False, False, None
            self.assignment = self.last_assignment = partitions
            self.last_generation = self.generation
            self.heartbeat_ok_ms = self.heartbeat_sent_ms = now
            self.record(gh.GROUP_ASSIGNED, gh.assigned(self.config.group_id, self.member_id, self.generation,
                                                       [str(tp) for tp in partitions]))
            self.offsets.on_assigned(now)
            return
        self.state = UNJOINED
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._reset_generation()
        elif error in _COORDINATOR_GONE:
            return self.coordinator_lost(now, error.name)
        elif error is not ErrorCode.REBALANCE_IN_PROGRESS:
            return self._fail(error.name)
        self.rejoin_needed = True
        self._maybe_join(now)

    # -- staying in the group -------------------------------------------------------------
    def _on_heartbeat(self, context: tuple, response: HeartbeatResponse, now: int) -> None:
        error = response.error_code
        unchanged = context[1:] == (self.generation, self.member_id)
        if error is ErrorCode.NONE or error is ErrorCode.REBALANCE_IN_PROGRESS:
            self.heartbeat_ok_ms = now  # a rebalance keeps the session alive (HeartbeatThread)
            if error is ErrorCode.REBALANCE_IN_PROGRESS and self.state == STABLE:
                self.rejoin_needed = True
            return
        self.retry_at["heartbeat"] = now + self.config.retry_backoff_ms
        if error in _COORDINATOR_GONE:
            self.coordinator_lost(now, error.name)
        elif error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            if error is ErrorCode.FENCED_INSTANCE_ID and unchanged:
                return self._fail(error.name)
            if unchanged:
                self._reset_generation()

    def _reset_generation(self) -> None:
        """resetStateAndRejoin: no generation and no member id; the partitions are lost
        at the next onJoinPrepare."""
        self.state, self.rejoin_needed = UNJOINED, True
        self.generation, self.member_id = NO_GENERATION, UNKNOWN_MEMBER_ID

    def request_rejoin(self) -> None:
        self.rejoin_needed = True

    def reset_generation(self) -> None:
        self._reset_generation()

    def _revoke(self, reason: str) -> None:
        if self.assignment:
            self.record(gh.GROUP_REVOKED, gh.revoked(self.config.group_id, self.member_id, self.generation,
                                                     [str(tp) for tp in self.assignment], reason))
        self.offsets.on_revoked(self.assignment)
        self.assignment = []

    def _leave(self, now: int, reason: str) -> None:
        """maybeLeaveGroup: a dynamic member with a generation tells the coordinator;
        either way it forgets its generation and must rejoin."""
        if self.generation != NO_GENERATION or self.member_id != UNKNOWN_MEMBER_ID:
            self.record(gh.GROUP_LEFT, gh.left(self.config.group_id, self.member_id, self.generation, reason))
            if self.coordinator is not None and self.config.group_instance_id is None:
                self.send(self.coordinator, LeaveGroupRequest(
                    self.next_cid(), self.config.group_id, (MemberIdentity(self.member_id),)), ("leave",))
        self._reset_generation()

    def _fail(self, error: str) -> None:
        """A fatal error: the Java consumer throws it to the application, which stops."""
        self.state = FAILED
        self.record(gh.GROUP_MEMBER_FAILED, gh.member_failed(self.config.group_id, self.member_id, error))


__all__ = ["GroupMember"]
