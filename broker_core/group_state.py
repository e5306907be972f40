"""One consumer group's state, as the group coordinator keeps it (issue 24).

Kafka 2.7.0's core/src/main/scala/kafka/coordinator/group/GroupMetadata.scala and
MemberMetadata.scala, as data and pure queries: what changes a group, and whom it
answers, is broker_core/group_rebalance.py's. Members are kept in join order (a dict),
where Kafka keeps a HashMap: the leader Kafka would pick "first" after its leader
leaves, the member a rejoin elects and the members listed to the leader are then the
earliest joined, the same in every run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Hashable

from broker_core.consumer_protocol import ConsumerProtocolError, subscription_topics
from broker_core.errors import CoreError, ErrorCode
from broker_core.group_messages import (
    DescribedGroup, DescribedGroupMember, JoinGroupProtocol, JoinGroupResponseMember)
from broker_core.types import TopicPartition


CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


class GroupState(Enum):
    """The five states; their values are the names DescribeGroups and ListGroups give."""
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# GroupState.validPreviousStates: a transition from any other state is a core bug.
VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}


@dataclass(frozen=True)
class Waiter:
    """A request held for a later answer: the connection and its correlation id."""
    src: Hashable
    correlation_id: int


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset the group will read (seed 003).
    ``expire_timestamp`` is an OffsetCommit v2-4's own retention (commit time plus
    retention_time_ms), which expires the offset whatever the group does; None: the
    broker's offsets.retention.minutes rules (GroupMetadata.removeExpiredOffsets)."""
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    assignment: bytes = b""
    awaiting_join: Waiter | None = None
    awaiting_sync: Waiter | None = None
    # MemberMetadata.isNew: joined but not yet given a generation; its JoinGroup times
    # out after NEW_MEMBER_JOIN_TIMEOUT_MS and a rebalance does not excuse it.
    is_new: bool = False

    def metadata(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise CoreError(f"member {self.member_id} does not support protocol {protocol!r}")

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """MemberMetadata.hasSatisfiedHeartbeat, with heartbeatSatisfied always false
        between two schedulings (completeAndScheduleNextExpiration sets it and clears it
        again): a member waiting for a JoinGroup or SyncGroup answer needs no heartbeat,
        unless it is new."""
        return not self.is_new and (self.awaiting_join is not None or self.awaiting_sync is not None)

    def matches(self, protocols: tuple[JoinGroupProtocol, ...]) -> bool:
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates (MemberMetadata.vote)."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise CoreError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass
class JoinOp:
    """The group's DelayedJoin (``initial`` False) or InitialDelayedJoin (True), with
    the latter's configured delay and the rebalance time left after this delay."""
    initial: bool
    configured_delay_ms: int = 0
    delay_ms: int = 0
    remaining_ms: int = 0


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, None] = field(default_factory=dict)  # an ordered set
    new_member_added: bool = False  # an InitialDelayedJoin waits once more
    join_op: JoinOp | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # GroupMetadata.subscribedTopics: the topics the members of the current generation
    # subscribe to, read from their consumer protocol metadata; None when unknown (not
    # a consumer group, or metadata that does not parse), which counts as every topic.
    subscribed_topics: frozenset[str] | None = None

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise CoreError(f"group {self.group_id}: no transition from {self.state.value} to {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- members -------------------------------------------------------------------
    def add(self, member: MemberMetadata, waiter: Waiter | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = waiter

    def remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)

    @property
    def num_awaiting(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and not self.has(member_id)

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A known group.instance.id under another member id: a second instance (or the
        old one after the new took its place) is FENCED_INSTANCE_ID (KIP-345)."""
        return instance_id is not None and self.static_members.get(instance_id, member_id) != member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """GroupMetadata.maybeElectNewJoinedLeader: a leader that did not rejoin hands
        over to the first member that did; False when none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    # -- protocols -----------------------------------------------------------------
    def _support_counts(self) -> dict[str, int]:
        """How many members support each protocol. A member that lists a protocol twice
        counts once: Kafka counts it twice, and then finds no protocol every member
        supports and fails the rebalance with an exception."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in dict.fromkeys(p.name for p in member.protocols):
                counts[name] = counts.get(name, 0) + 1
        return counts

    def supports_protocols(self, protocol_type: str, protocols: tuple[JoinGroupProtocol, ...]) -> bool:
        """GroupMetadata.supportsProtocols: an Empty group takes any non-empty type and
        protocol list; otherwise the type must be the group's and one of the protocols
        supported by every member."""
        if self.is_(GroupState.EMPTY):
            return protocol_type != "" and len(protocols) > 0
        counts = self._support_counts()
        return (self.protocol_type == protocol_type
                and any(counts.get(p.name, 0) == len(self.members) for p in protocols))

    def select_protocol(self) -> str:
        """GroupMetadata.selectProtocol: every member votes for its most preferred
        protocol among those all support; most votes wins. Kafka breaks a tie by hash
        order; here the tie goes to the protocol voted first in join order."""
        if not self.members:
            raise CoreError(f"group {self.group_id}: no protocol for an empty group")
        counts = self._support_counts()
        candidates = {name for name, n in counts.items() if n == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, n in votes.items() if n == best)

    # -- generations and summaries ---------------------------------------------------
    def init_next_generation(self, now_ms: int) -> None:
        """GroupMetadata.initNextGeneration: the generation grows even when the group
        ends up Empty, so that a commit of the last generation is fenced."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """GroupMetadata.computeSubscribedTopics: for a consumer group with members and a
        protocol, every member's subscribed topics (the metadata read as version 0, the
        prefix of every version); without members none; otherwise, or if any member's
        metadata does not parse, unknown (None)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(subscription_topics(member.metadata(self.protocol_name)))
            except (ConsumerProtocolError, CoreError):
                return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """GroupMetadata.isSubscribedToTopic: unknown subscriptions count as subscribed."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[JoinGroupResponseMember, ...]:
        """The members listed to the leader in its JoinGroup response, with the chosen
        protocol's metadata."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise CoreError(f"group {self.group_id}: no member metadata in state {self.state.value}")
        protocol = self.protocol_name
        return tuple(JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                     for m in self.members.values())

    def summary(self) -> DescribedGroup:
        """GroupMetadata.summary: members' metadata and assignments only when Stable."""
        stable = self.is_(GroupState.STABLE)
        protocol = self.protocol_name if stable and self.protocol_name is not None else ""
        members = tuple(DescribedGroupMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(protocol) if stable else b"", m.assignment if stable else b"")
            for m in self.members.values())
        return DescribedGroup(ErrorCode.NONE, self.group_id, self.state.value, self.protocol_type or "",
                              protocol, members)

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits
