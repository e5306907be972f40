"""The group coordinator wired into BrokerNode (broker_core/group_host.py): group requests
served by the broker that leads the group's partition of __consumer_offsets, rebalances
and commits persisted there, and a new leader of that partition taking the groups over.
The core is driven in the in-test router (tests/harness.py), three brokers."""
from __future__ import annotations

from typing import Any

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_host import member_id_seed, restored_group
from broker_core.group_loader import load_groups
from broker_core.group_messages import (
    HeartbeatRequest, JoinGroupProtocol, JoinGroupRequest, LeaveGroupRequest, MemberIdentity, OffsetCommitPartition,
    OffsetCommitRequest, OffsetCommitTopic, OffsetFetchRequest, OffsetFetchTopic, SyncGroupAssignment,
    SyncGroupRequest)
from broker_core.group_partitions import LOAD_TIMER, stored_group_records
from broker_core.group_records import CommittedOffset, GroupRecord, MemberRecord, partition_for
from broker_core.group_state import GroupState, OffsetAndMetadata
from broker_core.inputs import TimerFired
from broker_core.types import TopicPartition
from tests.broker_core.test_group_partitions import (
    PARTITIONS, find, hold_load_timers, move_leadership, offsets_leader, offsets_partition, with_offsets_topic)
from tests.harness import Cluster

T0 = TopicPartition("t", 0)  # the harness's topic: in every broker's metadata
SESSION_MS = 6000  # group.min.session.timeout.ms, the shortest a member may ask for
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": 200, "replica.socket.timeout.ms": 1000}
PROTOCOLS = (JoinGroupProtocol("range", b"subscription:t"),)


class Member:
    """One consumer's group requests, sent to ``broker`` (its coordinator, as it knows it)."""

    def __init__(self, cluster: Cluster, broker: int, group: str, client_id: str):
        self.cluster, self.broker, self.group, self.client_id = cluster, broker, group, client_id
        self.member_id = ""
        self.generation = -1

    def send(self, build) -> int:
        return self.cluster.send(self.broker, build(self.cluster.next_correlation_id()))

    def answer(self, cid: int, wait_ms: int = 2000) -> Any:
        self.cluster.wait_for(lambda: cid in self.cluster.responses, wait_ms, step_ms=1)
        return self.cluster.responses.get(cid)

    def join(self) -> int:
        """A JoinGroup v7; the answer may be held (the caller waits for it)."""
        return self.send(lambda cid: JoinGroupRequest(cid, self.group, SESSION_MS, self.member_id, "consumer",
                                                      PROTOCOLS, 30000, None, 7, self.client_id, "127.0.0.1"))

    def joined(self, cid: int, wait_ms: int = 2000) -> Any:
        answer = self.answer(cid, wait_ms)
        if answer is not None and answer.error_code is ErrorCode.NONE:
            self.member_id, self.generation = answer.member_id, answer.generation_id
        return answer

    def join_with_id(self) -> int:
        """KIP-394: the first JoinGroup is told MEMBER_ID_REQUIRED with the id to use."""
        first = self.answer(self.join())
        assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED, first
        self.member_id = first.member_id
        return self.join()

    def sync(self, assignments: dict[str, bytes] | None = None) -> int:
        pairs = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
        return self.send(lambda cid: SyncGroupRequest(cid, self.group, self.generation, self.member_id, pairs))

    def heartbeat(self) -> ErrorCode:
        return self.answer(self.send(lambda cid: HeartbeatRequest(
            cid, self.group, self.generation, self.member_id))).error_code

    def commit(self, offsets: dict[TopicPartition, int], metadata: str = "") -> int:
        topics: dict[str, list[OffsetCommitPartition]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(OffsetCommitPartition(tp.partition, offset, 3, -1, metadata))
        request = tuple(OffsetCommitTopic(name, tuple(parts)) for name, parts in topics.items())
        return self.send(lambda cid: OffsetCommitRequest(cid, self.group, request, self.generation, self.member_id))

    def fetch(self, tps: list[TopicPartition]) -> Any:
        topics = tuple(OffsetFetchTopic(tp.topic, (tp.partition,)) for tp in tps)
        return self.answer(self.send(lambda cid: OffsetFetchRequest(cid, self.group, topics)))


def commit_errors(answer: Any) -> dict[TopicPartition, ErrorCode]:
    return {TopicPartition(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def fetched_offsets(answer: Any) -> dict[TopicPartition, int]:
    assert answer.error_code is ErrorCode.NONE, answer
    return {TopicPartition(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions}


def stable_group(cluster: Cluster, group: str) -> tuple[int, Member, Member]:
    """Two members joined, synced and Stable at the group's coordinator: (coordinator,
    leader, follower)."""
    coordinator = find(cluster, 1, group).node_id
    a, b = Member(cluster, coordinator, group, "a"), Member(cluster, coordinator, group, "b")
    join_a, join_b = a.join_with_id(), b.join_with_id()
    answer_a, answer_b = a.joined(join_a), b.joined(join_b)  # the initial delay, then both
    assert answer_a.error_code is ErrorCode.NONE and answer_b.error_code is ErrorCode.NONE
    assert answer_a.generation_id == answer_b.generation_id == 1
    assert answer_a.leader == answer_b.leader == a.member_id  # the first to join leads
    assert [m.member_id for m in answer_a.members] == [a.member_id, b.member_id] and answer_b.members == ()
    sync_b = b.sync()  # a follower's SyncGroup waits for the leader's
    sync_a = a.sync({a.member_id: b"t-0", b.member_id: b""})
    assert (a.answer(sync_a).assignment, b.answer(sync_b).assignment) == (b"t-0", b"")
    return coordinator, a, b


def block_followers(cluster: Cluster, leader: int) -> None:
    for follower in (b for b in (1, 2, 3) if b != leader):
        cluster.block(leader, follower)


def test_two_members_rebalance_through_the_broker_and_the_group_is_stored_in_its_partition():
    """2.7.0 KafkaApis.handleJoinGroupRequest / handleSyncGroupRequest ->
    GroupCoordinator.handleJoinGroup (InitialDelayedJoin), handleSyncGroup ->
    GroupMetadataManager.storeGroup: the group's metadata record (generation, protocol,
    leader, members with their subscriptions and assignments) is in the group's
    __consumer_offsets partition on every replica once the members have their assignments."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "two-members"
    coordinator, a, b = stable_group(cluster, group)
    assert coordinator == offsets_leader(cluster, partition_for(group, PARTITIONS))
    assert a.heartbeat() is ErrorCode.NONE and b.heartbeat() is ErrorCode.NONE
    number = partition_for(group, PARTITIONS)
    for broker in (1, 2, 3):
        log = offsets_partition(cluster, broker, number).log
        assert cluster.wait_for(lambda: log.high_watermark == log.log_end_offset == 1, 1000)
        stored = load_groups(stored_group_records(log.load(log.log_start_offset))).groups[group]
        assert (stored.generation, stored.protocol, stored.leader, stored.protocol_type) == (1, "range", a.member_id,
                                                                                               "consumer")
        assert [(m.member_id, m.client_id, m.subscription, m.assignment) for m in stored.members] == [
            (a.member_id, "a", b"subscription:t", b"t-0"), (b.member_id, "b", b"subscription:t", b"")]


def test_a_commit_is_acknowledged_only_once_the_followers_of_the_groups_partition_have_it():
    """2.7.0 KafkaApis.handleOffsetCommitRequest -> GroupCoordinator.handleCommitOffsets
    -> GroupMetadataManager.storeOffsets -> appendForGroup with
    offsets.commit.required.acks -1: the DelayedProduce completes when the high watermark
    passes the commit, and only then is the member answered and the offset visible to
    OffsetFetch (putCacheCallback)."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "acked-commits"
    coordinator, a, _ = stable_group(cluster, group)
    number = partition_for(group, PARTITIONS)
    block_followers(cluster, coordinator)
    cid = a.commit({T0: 42})
    cluster.run_for(1000)
    assert cid not in cluster.responses
    assert fetched_offsets(a.fetch([T0])) == {T0: -1}
    cluster.heal()
    assert commit_errors(a.answer(cid, 3000)) == {T0: ErrorCode.NONE}
    assert fetched_offsets(a.fetch([T0])) == {T0: 42}
    end = offsets_partition(cluster, coordinator, number).log.log_end_offset
    for broker in (1, 2, 3):
        log = offsets_partition(cluster, broker, number).log
        assert log.log_end_offset == end
        assert load_groups(stored_group_records(log.load(0))).offsets[group][T0].offset == 42


def test_a_new_coordinator_loads_the_group_and_its_offsets_after_the_old_one_crashes():
    """2.7.0 KafkaApis.onLeadershipChange -> GroupCoordinator.onElection ->
    GroupMetadataManager.scheduleLoadGroupAndOffsets / loadGroup (a group with members is
    loaded Stable, in its generation) -> GroupCoordinator.onGroupLoaded (every member's
    heartbeat expiration scheduled from the load). While the load is pending
    validateGroupStatus answers COORDINATOR_LOAD_IN_PROGRESS (handleHeartbeat answers it
    NONE, handleSyncGroup REBALANCE_IN_PROGRESS). After it: OffsetFetch gives the commit,
    a member's Heartbeat in its generation is NONE; the member that never comes back
    expires after session.timeout.ms (onExpireHeartbeat), the other's Heartbeat is then
    REBALANCE_IN_PROGRESS and its rejoin makes generation 2; the expired one is
    UNKNOWN_MEMBER_ID and joins again as a new member."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "failover"
    old, a, b = stable_group(cluster, group)
    assert commit_errors(a.answer(a.commit({T0: 17}))) == {T0: ErrorCode.NONE}
    number = partition_for(group, PARTITIONS)
    survivors = [x for x in (1, 2, 3) if x != old]
    held = hold_load_timers(cluster, survivors)
    cluster.crash(old)
    assert cluster.wait_for(lambda: offsets_leader(cluster, number) in survivors, 30000)
    new = offsets_leader(cluster, number)
    assert cluster.wait_for(lambda: find(cluster, survivors[0], group).node_id == new, 5000)
    a.broker = b.broker = new
    assert a.fetch([T0]).error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert a.heartbeat() is ErrorCode.NONE
    assert a.answer(a.sync()).error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert a.answer(a.join()).error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (new, (LOAD_TIMER, number)) in held
    cluster._apply(new, cluster.nodes[new].handle(TimerFired((LOAD_TIMER, number)), cluster.now))
    loaded_at = cluster.now
    assert fetched_offsets(a.fetch([T0])) == {T0: 17}
    assert cluster.traced("group_partition_loaded", partition=number, groups=1, offsets=1)
    assert a.heartbeat() is ErrorCode.NONE  # loaded Stable, generation 1, with both members
    cluster.run_until(loaded_at + SESSION_MS - 1000)
    assert a.heartbeat() is ErrorCode.NONE
    cluster.run_until(loaded_at + SESSION_MS + 100)  # b never heartbeat the new coordinator
    assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
    answer = a.joined(a.join())
    assert (answer.error_code, answer.generation_id, answer.leader) == (ErrorCode.NONE, 2, a.member_id)
    assert [m.member_id for m in answer.members] == [a.member_id]
    assert a.answer(a.sync({a.member_id: b"t-0"})).assignment == b"t-0"
    assert b.heartbeat() is ErrorCode.UNKNOWN_MEMBER_ID
    b.member_id = ""
    rejoin = b.join_with_id()  # a new member: the group rebalances, a rejoins
    assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
    answers = a.joined(a.join()), b.joined(rejoin)
    assert [x.generation_id for x in answers] == [3, 3] and b.member_id not in ("", answer.member_id)


def test_a_deposed_coordinator_answers_not_coordinator_and_tells_its_waiting_members():
    """2.7.0 KafkaApis.onLeadershipChange -> GroupCoordinator.onResignation ->
    GroupMetadataManager.removeGroupsForPartition -> onGroupUnloaded: the group is Dead
    here, a member waiting in JoinGroup is answered NOT_COORDINATOR, a commit waiting for
    its followers is completed by makeFollowers with NOT_LEADER_OR_FOLLOWER, which
    storeOffsets answers NOT_COORDINATOR; afterwards validateGroupStatus answers every
    group request NOT_COORDINATOR (isCoordinatorForGroup)."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "deposed"
    leader, a, b = stable_group(cluster, group)
    number = partition_for(group, PARTITIONS)
    other = next(x for x in (1, 2, 3) if x != leader)
    block_followers(cluster, leader)
    commit = b.commit({T0: 5})
    rejoin = a.join()  # the leader rejoins: a rebalance starts, its JoinGroup is held
    cluster.run_for(100)
    assert commit not in cluster.responses and rejoin not in cluster.responses
    move_leadership(cluster, leader, number, other)
    cluster.run_for(10)
    assert a.answer(rejoin).error_code is ErrorCode.NOT_COORDINATOR
    assert commit_errors(b.answer(commit)) == {T0: ErrorCode.NOT_COORDINATOR}
    assert a.heartbeat() is ErrorCode.NOT_COORDINATOR
    assert a.answer(a.join()).error_code is ErrorCode.NOT_COORDINATOR
    assert a.fetch([T0]).error_code is ErrorCode.NOT_COORDINATOR
    assert commit_errors(a.answer(a.commit({T0: 6}))) == {T0: ErrorCode.NOT_COORDINATOR}
    leave = a.send(lambda cid: LeaveGroupRequest(cid, group, (MemberIdentity(a.member_id),)))
    assert a.answer(leave).error_code is ErrorCode.NOT_COORDINATOR
    assert cluster.traced("group_partition_unloaded", partition=number, groups=1)


def test_a_commit_below_min_insync_replicas_fails_with_coordinator_not_available():
    """2.7.0 GroupMetadataManager.storeOffsets' putCacheCallback: the append's
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below min.insync.replicas while the
    commit waited) and NOT_ENOUGH_REPLICAS (below already, nothing appended) are answered
    COORDINATOR_NOT_AVAILABLE, and the offset is not taken (OffsetFetch still -1)."""
    cluster = with_offsets_topic({**GROUP_CONFIG, "min.insync.replicas": 2, "replica.lag.time.max.ms": 1000,
                                  "isr_change_protocol": "zookeeper"})
    group = "under-replicated"
    coordinator, a, _ = stable_group(cluster, group)
    number = partition_for(group, PARTITIONS)
    block_followers(cluster, coordinator)
    first = a.commit({T0: 8})
    assert cluster.wait_for(lambda: offsets_partition(cluster, coordinator, number).isr == (coordinator,), 10000)
    assert commit_errors(a.answer(first)) == {T0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert commit_errors(a.answer(a.commit({T0: 9}))) == {T0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert fetched_offsets(a.fetch([T0])) == {T0: -1}


def test_commits_of_unknown_partitions_and_too_long_metadata_are_refused_per_partition():
    """2.7.0 KafkaApis.handleOffsetCommitRequest: a partition the metadata cache does not
    have is UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the commit, the rest is
    committed; a commit of unknown partitions only is answered at once, by any broker (no
    coordinator check). GroupMetadataManager.storeOffsets (validateOffsetMetadataLength):
    metadata over offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE."""
    cluster = with_offsets_topic({**GROUP_CONFIG, "offset.metadata.max.bytes": 8})
    group = "refusals"
    coordinator, a, _ = stable_group(cluster, group)
    missing, beyond = TopicPartition("missing", 0), TopicPartition("t", 1)
    answer = a.answer(a.commit({T0: 4, missing: 4, beyond: 4}))
    assert commit_errors(answer) == {T0: ErrorCode.NONE, missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     beyond: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert [t.name for t in answer.topics] == ["t", "missing"]  # the request's order
    assert fetched_offsets(a.fetch([T0, missing])) == {T0: 4, missing: -1}
    elsewhere = Member(cluster, next(x for x in (1, 2, 3) if x != coordinator), group, "c")
    assert commit_errors(elsewhere.answer(elsewhere.commit({missing: 1}))) == {
        missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit_errors(elsewhere.answer(elsewhere.commit({T0: 1}))) == {T0: ErrorCode.NOT_COORDINATOR}
    assert commit_errors(a.answer(a.commit({T0: 5}, metadata="x" * 9))) == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert fetched_offsets(a.fetch([T0])) == {T0: 4}


def test_a_group_write_that_times_out_sends_the_members_back_to_rejoin():
    """2.7.0 GroupMetadataManager.storeGroup: the append timing out at
    offsets.commit.timeout.ms is REBALANCE_IN_PROGRESS to the SyncGroups
    (GroupCoordinator.doSyncGroup's callback resets the assignments and prepares a
    rebalance)."""
    cluster = with_offsets_topic({**GROUP_CONFIG, "offsets.commit.timeout.ms": 500})
    group = "slow-sync"
    coordinator = find(cluster, 1, group).node_id
    a = Member(cluster, coordinator, group, "a")
    assert a.joined(a.join_with_id()).error_code is ErrorCode.NONE
    block_followers(cluster, coordinator)
    sync = a.sync({a.member_id: b"t-0"})
    cluster.run_for(400)
    assert sync not in cluster.responses
    assert a.answer(sync, 200).error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS


def test_each_session_of_a_broker_gives_its_coordinator_another_member_id_seed():
    """Member ids are GroupMetadata.generateMemberId's client id and a UUID, here drawn from
    a seed and a counter (deterministic runs): a restarted broker that loads a group its
    previous incarnation coordinated must not give a new member a loaded member's id, so
    the seed changes with each coordination session."""
    cluster = with_offsets_topic()
    node = cluster.nodes[1]
    assert node.group_host.coordinator.ctx.member_id_seed == member_id_seed(1, node.session_id)
    seeds = {member_id_seed(1, None), member_id_seed(1, 5), member_id_seed(1, 6), member_id_seed(2, 5)}
    assert len(seeds) == 4
    cluster.crash(1)
    cluster.run_for(cluster.config.zookeeper_session_timeout_ms + 500)  # 2.7.0 exits on its old node
    cluster.start(1)
    assert cluster.wait_for(lambda: 1 in cluster.nodes and cluster.nodes[1].session_id is not None, 10000)
    assert cluster.nodes[1].group_host.coordinator.ctx.member_id_seed != node.group_host.coordinator.ctx.member_id_seed


def test_a_loaded_group_keeps_its_members_and_one_over_group_max_size_rebalances():
    """2.7.0 GroupMetadata.loadGroup (members, static members, generation, protocol and
    leader as recorded) and GroupCoordinator.onGroupLoaded: a group loaded with more
    members than group.max.size prepares a rebalance ("Freshly-loaded group is over
    capacity"); within the limit it stays Stable and its members heartbeat in their
    generation. The coordinator alone, with groups as restored_group builds them from
    their records."""
    members = tuple(MemberRecord(f"m-{i}", "static-0" if i == 0 else None, f"c{i}", "h", 30000, SESSION_MS,
                                 b"sub", f"t-{i}".encode()) for i in range(2))
    record = GroupRecord("consumer", 4, "range", "m-0", 100, members)
    offsets = {T0: CommittedOffset(12, None, "meta", 99)}
    for max_size, expected in ((2, ErrorCode.NONE), (1, ErrorCode.REBALANCE_IN_PROGRESS)):
        coordinator = GroupCoordinator(GroupConfig(max_size=max_size), deferred_writes=True)
        coordinator.load([restored_group("g", record, offsets)], 1000)
        group = coordinator.groups["g"]
        assert (group.generation_id, group.protocol_name, group.leader_id) == (4, "range", "m-0")
        assert group.static_members == {"static-0": "m-0"}
        assert group.members["m-1"].assignment == b"t-1"
        assert group.offsets[T0] == OffsetAndMetadata(12, -1, "meta", 99)
        answers = coordinator.handle("c1", HeartbeatRequest(1, "g", 4, "m-1"), 1001)
        assert [response.error_code for _, response in answers] == [expected]
    empty = restored_group("g", GroupRecord("consumer", 5, None, None, None, ()), offsets)
    assert (empty.state, empty.generation_id, empty.protocol_type) == (GroupState.EMPTY, 5, "consumer")
    assert restored_group("g", None, offsets).state is GroupState.EMPTY
