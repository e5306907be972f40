"""A driver for the group coordinator in tests: builds requests with fresh correlation
ids, hands them over at an explicit time, and picks the answers out by connection."""
from __future__ import annotations

from typing import Any

from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_messages import (
    HeartbeatRequest, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, MemberIdentity,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic, OffsetFetchRequest, OffsetFetchTopic,
    SyncGroupAssignment, SyncGroupRequest)

RANGE = (JoinGroupProtocol("range", b"sub:t"),)
SESSION, REBALANCE = 10000, 30000


class Driver:
    def __init__(self, config: GroupConfig | None = None, **kwargs: Any):
        self.coord = GroupCoordinator(config or GroupConfig(initial_rebalance_delay_ms=0), **kwargs)
        self.now = 0
        self._cid = 0

    def cid(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, src: str, request: Any) -> dict[str, Any]:
        """Hand over ``request``; the answers sent now, by destination (one each)."""
        return self._by_dst(self.coord.handle(src, request, self.now))

    def at(self, t: int) -> dict[str, Any]:
        """Advance time to ``t``; the answers its timers sent."""
        self.now = t
        return self._by_dst(self.coord.advance(t))

    @staticmethod
    def _by_dst(out: list[tuple[Any, Any]]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for dst, response in out:
            assert dst not in answers, f"two answers to {dst}: {answers[dst]} and {response}"
            answers[dst] = response
        return answers

    @property
    def group(self):
        return self.coord.groups["g"]

    # -- requests ----------------------------------------------------------------------
    def join(self, src: str, member_id: str = "", group: str = "g", protocols=RANGE, protocol_type: str = "consumer",
             instance: str | None = None, version: int = 7, session: int = SESSION,
             rebalance: int = REBALANCE) -> dict[str, Any]:
        return self.send(src, JoinGroupRequest(self.cid(), group, session, member_id, protocol_type, protocols,
                                               rebalance, instance, version, client_id=src))

    def join_with_id(self, src: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """A v4+ dynamic member's two JoinGroups: the first is told MEMBER_ID_REQUIRED."""
        first = self.join(src, **kwargs)[src]
        assert isinstance(first, JoinGroupResponse) and first.error_code.name == "MEMBER_ID_REQUIRED", first
        return first.member_id, self.join(src, member_id=first.member_id, **kwargs)

    def sync(self, src: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g", instance: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> dict[str, Any]:
        pairs = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
        return self.send(src, SyncGroupRequest(self.cid(), group, generation, member_id, pairs, instance,
                                               protocol_type, protocol_name))

    def heartbeat(self, src: str, member_id: str, generation: int, group: str = "g",
                  instance: str | None = None) -> dict[str, Any]:
        return self.send(src, HeartbeatRequest(self.cid(), group, generation, member_id, instance))

    def leave(self, src: str, *members: tuple[str, str | None], group: str = "g") -> dict[str, Any]:
        return self.send(src, LeaveGroupRequest(self.cid(), group, tuple(MemberIdentity(m, i) for m, i in members)))

    def commit(self, src: str, offsets: dict[tuple[str, int], int], member_id: str = "", generation: int = -1,
               group: str = "g", instance: str | None = None, metadata: str = "") -> dict[str, Any]:
        topics: dict[str, list[OffsetCommitPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(OffsetCommitPartition(partition, offset, committed_metadata=metadata))
        return self.send(src, OffsetCommitRequest(
            self.cid(), group, tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()),
            generation, member_id, instance))

    def fetch(self, src: str, partitions: list[tuple[str, int]] | None, group: str = "g",
              require_stable: bool = False) -> dict[str, Any]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in by_topic.items())
        return self.send(src, OffsetFetchRequest(self.cid(), group, topics, require_stable))

    # -- whole flows ---------------------------------------------------------------------
    def stable_group(self, *srcs: str) -> dict[str, str]:
        """Members ``srcs`` joined (the first leads) and synced: their member ids."""
        ids = {}
        for src in srcs:
            ids[src], _ = self.join_with_id(src)  # held: the initial delay runs
        joined = self.at(self.now)
        assert all(joined[s].error_code.name == "NONE" for s in srcs), joined
        generation = joined[srcs[0]].generation_id
        assignment = {ids[s]: s.encode() for s in srcs}
        for src in srcs[1:]:
            self.sync(src, ids[src], generation)
        answers = self.sync(srcs[0], ids[srcs[0]], generation, assignment)
        assert all(answers[s].error_code.name == "NONE" for s in srcs), answers
        assert self.group.state.value == "Stable"
        return ids


def errors(answers: dict[str, Any]) -> dict[str, str]:
    return {dst: r.error_code.name for dst, r in answers.items()}


def partition_errors(response: Any) -> dict[tuple[str, int], str]:
    return {(t.name, p.partition_index): p.error_code.name for t in response.topics for p in t.partitions}


def fetched(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}
