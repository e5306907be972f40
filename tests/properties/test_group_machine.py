"""The group coordinator under random members (issue 24): consumers join, leave,
heartbeat, crash, restart and pause while time advances, against the core's
GroupCoordinator driven directly (no broker, no simpy).

Each consumer behaves as Kafka's ConsumerCoordinator does: MEMBER_ID_REQUIRED -> join
again with the id; a JoinGroup answer -> SyncGroup (the leader with a round-robin
assignment of every subscribed partition over the members it was given, sorted by
member id); REBALANCE_IN_PROGRESS -> rejoin; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
FENCED_INSTANCE_ID -> start over without a member id. One consumer is static
(group.instance.id), so that its restarts take its old place. A crashed consumer's
answers are dropped, as a closed connection's would be.

Invariants (Kafka 2.7.0 GroupCoordinator.scala's guarantees to its clients):
- within a generation no two consumers own one partition, and each is given the
  leader's assignment for it;
- generation ids only grow (the group's, and those each consumer is told);
- once the group is Stable and every member has its assignment of the current
  generation, every subscribed partition is owned;
- OffsetFetch gives, per partition, the last commit answered NONE.
DeferredWritesMachine runs the same with the writes to __consumer_offsets held until a
rule completes them, with success or an append error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_messages import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    MemberIdentity, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
    OffsetFetchRequest, SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse)
from tests.properties.depth import machine_settings

TOPICS = {"a": 3, "b": 2}
PARTITIONS = sorted(f"{t}-{p}" for t, n in TOPICS.items() for p in range(n))
SESSION, REBALANCE = 10000, 20000
NAMES = ["c0", "c1", "c2", "s3"]  # s3 is static
RESTART = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}


def round_robin(member_ids: list[str]) -> dict[str, list[str]]:
    ordered = sorted(member_ids)
    owned: dict[str, list[str]] = {m: [] for m in ordered}
    for i, partition in enumerate(PARTITIONS):
        owned[ordered[i % len(ordered)]].append(partition)
    return owned


@dataclass
class Consumer:
    name: str
    incarnation: int = 0
    member_id: str = ""
    generation: int = -1
    joining: bool = False  # a JoinGroup or SyncGroup is in flight
    paused: bool = False
    crashed: bool = False
    cid: int = 0
    expected: int = -1  # the correlation id of the JoinGroup or SyncGroup in flight
    seen_generations: list[int] = field(default_factory=list)

    @property
    def src(self) -> str:
        return f"{self.name}#{self.incarnation}"

    @property
    def instance(self) -> str | None:
        return "inst-s3" if self.name.startswith("s") else None

    @property
    def identity(self) -> str:
        """Who owns partitions: a static member's instance keeps its partitions across
        member ids; a dynamic member is its member id."""
        return self.instance or self.member_id

    def next_cid(self) -> int:
        self.cid += 1
        return self.cid


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=1000))
        self.now = 0
        self.consumers = {n: Consumer(n) for n in NAMES}
        self.leader_assignments: dict[int, dict[str, str]] = {}  # generation -> partition -> identity
        self.owned: dict[int, dict[str, str]] = {}  # generation -> partition -> identity (from SyncGroup answers)
        self.synced: set[tuple[int, str]] = set()  # (generation, member id) given its assignment
        self.last_generation = 0
        self.commits: dict[tuple[str, int], dict[str, int]] = {}  # (src, correlation id) -> partition -> offset
        self.committed: dict[str, int] = {}  # partition -> offset, from commits answered NONE

    # -- the consumers' protocol ---------------------------------------------------------
    def send(self, consumer: Consumer, request) -> None:
        queue = [(consumer.src, request)]
        steps = 0
        while queue:
            steps += 1
            assert steps < 200, "a request loop between consumers and coordinator"
            src, req = queue.pop(0)
            self.deliver(self.coord.handle(src, req, self.now), queue)

    def deliver(self, out, queue) -> None:
        live = {c.src: c for c in self.consumers.values() if not c.crashed}
        for dst, response in out:
            if isinstance(response, OffsetCommitResponse):  # applied, whether or not its consumer reads it
                self.on_commit_answer(dst, response)
            consumer = live.get(dst)
            if consumer is None or consumer.paused:
                continue  # a closed connection, or a process that will never read it
            follow_up = self.on_response(consumer, response)
            if follow_up is not None:
                queue.append((consumer.src, follow_up))

    def join_request(self, c: Consumer) -> JoinGroupRequest:
        c.joining = True
        c.expected = c.next_cid()
        protocols = (JoinGroupProtocol("roundrobin", ",".join(sorted(TOPICS)).encode()),)
        return JoinGroupRequest(c.expected, "g", SESSION, c.member_id, "consumer", protocols, REBALANCE,
                                c.instance, 7, client_id=c.name)

    def on_response(self, c: Consumer, r):
        if isinstance(r, (JoinGroupResponse, SyncGroupResponse)) and r.correlation_id != c.expected:
            return None  # the answer to a request the consumer gave up on (a pause): ignored, as by correlation id
        if isinstance(r, JoinGroupResponse):
            return self.on_join(c, r)
        if isinstance(r, SyncGroupResponse):
            return self.on_sync(c, r)
        if isinstance(r, HeartbeatResponse):
            if r.error_code is ErrorCode.REBALANCE_IN_PROGRESS and not c.joining:
                return self.join_request(c)
            if r.error_code in RESTART:
                self.reset(c)
        return None

    def on_join(self, c: Consumer, r: JoinGroupResponse):
        if r.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
            return self.join_request(c)
        if r.error_code is not ErrorCode.NONE:
            self.reset(c)
            return None
        c.member_id, c.generation = r.member_id, r.generation_id
        c.seen_generations.append(r.generation_id)
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if r.leader == r.member_id and r.members:
            by_member = round_robin([m.member_id for m in r.members])
            identities = {m.member_id: (m.group_instance_id or m.member_id) for m in r.members}
            self.leader_assignments[r.generation_id] = {
                p: identities[m] for m, ps in by_member.items() for p in ps}
            assignments = tuple(SyncGroupAssignment(m, ",".join(ps).encode()) for m, ps in by_member.items())
        elif r.leader != r.member_id and r.members == () and c.name == "c1":
            # a follower that sends assignments anyway: the coordinator must ignore them
            assignments = (SyncGroupAssignment(c.member_id, ",".join(PARTITIONS).encode()),)
        c.expected = c.next_cid()
        return SyncGroupRequest(c.expected, "g", c.generation, c.member_id, assignments, c.instance)

    def on_sync(self, c: Consumer, r: SyncGroupResponse):
        if r.error_code is ErrorCode.REBALANCE_IN_PROGRESS:
            return self.join_request(c)
        if r.error_code is not ErrorCode.NONE:
            self.reset(c)
            return None
        c.joining = False
        owned = self.owned.setdefault(c.generation, {})
        for partition in filter(None, r.assignment.decode().split(",")):
            holder = owned.setdefault(partition, c.identity)
            assert holder == c.identity, f"generation {c.generation}: {partition} owned by {holder} and {c.identity}"
            assert self.leader_assignments[c.generation].get(partition) == c.identity, \
                f"generation {c.generation}: {c.identity} given {partition}, not the leader's assignment"
        self.synced.add((c.generation, c.member_id))
        return None

    def on_commit_answer(self, dst: str, r: OffsetCommitResponse) -> None:
        offsets = self.commits.pop((dst, r.correlation_id))
        for t in r.topics:
            for p in t.partitions:
                if p.error_code is ErrorCode.NONE:
                    self.committed[f"{t.name}-{p.partition_index}"] = offsets[f"{t.name}-{p.partition_index}"]

    @staticmethod
    def reset(c: Consumer) -> None:
        c.member_id, c.generation, c.joining = "", -1, False

    # -- rules ---------------------------------------------------------------------------
    def active(self, name: str) -> Consumer | None:
        c = self.consumers[name]
        return None if c.crashed or c.paused else c

    @rule(name=st.sampled_from(NAMES))
    def join(self, name: str) -> None:
        c = self.active(name)
        if c is not None and not c.joining:
            self.send(c, self.join_request(c))

    @rule(name=st.sampled_from(NAMES))
    def heartbeat(self, name: str) -> None:
        c = self.active(name)
        if c is not None and c.member_id and c.generation >= 0:
            self.send(c, HeartbeatRequest(c.next_cid(), "g", c.generation, c.member_id, c.instance))

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        c = self.active(name)
        if c is not None and c.member_id:
            self.send(c, LeaveGroupRequest(c.next_cid(), "g", (MemberIdentity(c.member_id, c.instance),)))
            self.reset(c)

    @rule(name=st.sampled_from(NAMES), partition=st.sampled_from(PARTITIONS), offset=st.integers(0, 100))
    def commit(self, name: str, partition: str, offset: int) -> None:
        """A commit in the consumer's generation (or -1 outside the group): fenced when
        that generation is stale, taken otherwise."""
        c = self.active(name)
        if c is None:
            return
        topic, index = partition.split("-")
        request = OffsetCommitRequest(c.next_cid(), "g", (OffsetCommitTopic(topic, (
            OffsetCommitPartition(int(index), offset),)),), c.generation, c.member_id, c.instance)
        self.commits[(c.src, request.correlation_id)] = {partition: offset}
        self.send(c, request)

    @rule(name=st.sampled_from(NAMES))
    def crash(self, name: str) -> None:
        self.consumers[name].crashed = True

    @rule(name=st.sampled_from(NAMES))
    def restart(self, name: str) -> None:
        """A new process: a new connection, no member id (a static one's instance id stays)."""
        old = self.consumers[name]
        self.consumers[name] = Consumer(name, incarnation=old.incarnation + 1)

    @rule(name=st.sampled_from(NAMES), paused=st.booleans())
    def pause(self, name: str, paused: bool) -> None:
        """A long GC pause: answers sent meanwhile are lost to it; it comes back with its
        old member id and generation (the zombie case)."""
        c = self.consumers[name]
        c.paused = paused
        if not paused:
            c.joining = False

    @rule(ms=st.one_of(st.integers(1, 3000), st.integers(3000, 25000)))
    def advance(self, ms: int) -> None:
        self.now += ms
        queue: list = []
        self.deliver(self.coord.advance(self.now), queue)
        for src, request in queue:
            consumer = next(c for c in self.consumers.values() if c.src == src)
            self.send(consumer, request)

    @precondition(lambda self: "g" in self.coord.groups)
    @rule()
    def everyone_heartbeats(self) -> None:
        for name in NAMES:
            self.heartbeat(name)

    @rule(rounds=st.integers(1, 4))
    def settle(self, rounds: int) -> None:
        """Live consumers poll as they should for a while: those outside the group join,
        all heartbeat, time goes on by less than a session."""
        for _ in range(rounds):
            for name in NAMES:
                c = self.active(name)
                if c is not None and not c.member_id:
                    self.join(name)
                self.heartbeat(name)
            self.advance(1500)

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def generations_only_grow(self) -> None:
        group = self.coord.groups.get("g")
        if group is not None:
            assert group.generation_id >= self.last_generation
            self.last_generation = group.generation_id
        for c in self.consumers.values():
            assert c.seen_generations == sorted(c.seen_generations)

    @invariant()
    def the_committed_offsets_are_the_last_commits_answered(self) -> None:
        """OffsetFetch gives, per partition, the offset of the last commit answered
        NONE; a fenced or failed commit changed nothing."""
        out = self.coord.handle("checker", OffsetFetchRequest(0, "g", None), self.now)
        (_, response), = out
        fetched = {f"{t.name}-{p.partition_index}": p.committed_offset for t in response.topics for p in t.partitions}
        assert fetched == self.committed

    @invariant()
    def a_stable_synced_group_owns_every_partition(self) -> None:
        group = self.coord.groups.get("g")
        if group is None or group.state.value != "Stable" or not group.members:
            return
        if all((group.generation_id, m) in self.synced for m in group.members):
            assert sorted(self.owned.get(group.generation_id, {})) == PARTITIONS


class DeferredWritesMachine(GroupMachine):
    """The same with the seam to __consumer_offsets open: group and offset writes wait
    until a rule completes them, in order, with success or an append error, while the
    group goes on (a write completing after the group moved on must change nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=1000), deferred_writes=True)
        self.writes: list = []

    @rule(error=st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT,
                                 ErrorCode.NOT_ENOUGH_REPLICAS]))
    def complete_a_write(self, error: ErrorCode) -> None:
        self.writes.extend(self.coord.take_writes())
        if self.writes:
            queue: list = []
            self.deliver(self.coord.write_completed(self.writes.pop(0).token, error, self.now), queue)
            for src, request in queue:
                self.send(next(c for c in self.consumers.values() if c.src == src), request)


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = machine_settings(60, 60)
TestDeferredWritesMachine = DeferredWritesMachine.TestCase
TestDeferredWritesMachine.settings = machine_settings(40, 60)
