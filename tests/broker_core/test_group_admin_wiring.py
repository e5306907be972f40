"""DeleteGroups, OffsetDelete, offset expiry and static membership's version check
through BrokerNode (broker_core/group_host.py), three brokers in the in-test router
(tests/harness.py): the tombstones reach every replica of the group's partition of
__consumer_offsets, and a new coordinator that loads it finds nothing of what was
deleted. Rules from Kafka 2.7.0's KafkaApis (handleDeleteGroupsRequest,
handleOffsetDeleteRequest, the KAFKA_2_3_IV0 checks of handleJoinGroupRequest,
handleSyncGroupRequest, handleHeartbeatRequest and handleOffsetCommitRequest),
GroupCoordinator (handleDeleteGroups, handleDeleteOffsets) and GroupMetadataManager
(cleanupGroupMetadata, doLoadGroupsAndOffsets' tombstones)."""
from __future__ import annotations

from typing import Any

from broker_core.errors import ErrorCode
from broker_core.group_loader import load_groups
from broker_core.group_messages import (
    DeleteGroupsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, MemberIdentity,
    OffsetCommitPartition, OffsetCommitRequest,
    OffsetCommitTopic, OffsetDeleteRequest, OffsetDeleteTopic, SyncGroupRequest)
from broker_core.group_partitions import stored_group_records
from broker_core.group_records import partition_for
from broker_core.types import TopicPartition
from tests.broker_core.test_group_partitions import (
    PARTITIONS, find, move_leadership, offsets_leader, offsets_partition, with_offsets_topic)
from tests.broker_core.test_group_wiring import (
    GROUP_CONFIG, PROTOCOLS, SESSION_MS, T0, Member, block_followers, commit_errors, fetched_offsets, stable_group)
from tests.harness import Cluster


def delete_group(member: Member, group: str | None = None, wait_ms: int = 3000) -> ErrorCode | None:
    cid = member.send(lambda c: DeleteGroupsRequest(c, (group or member.group,)))
    answer = member.answer(cid, wait_ms)
    return None if answer is None else answer.results[0].error_code


def stored(cluster: Cluster, broker: int, group: str):
    """What a load of the group's partition at ``broker`` restores (its replica's log)."""
    log = offsets_partition(cluster, broker, partition_for(group, PARTITIONS)).log
    return load_groups(stored_group_records(log.load(log.log_start_offset)))


def test_a_deleted_group_stays_deleted_at_the_next_coordinator():
    """Commit, leave, DeleteGroups, then the coordinator crashes: the new leader of the
    partition loads the tombstones (every replica has them, acks -1) and has neither the
    group nor its offset: OffsetFetch -1, DeleteGroups GROUP_ID_NOT_FOUND."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "deleted"
    old, a, b = stable_group(cluster, group)
    assert commit_errors(a.answer(a.commit({T0: 17}))) == {T0: ErrorCode.NONE}
    assert delete_group(a) is ErrorCode.NON_EMPTY_GROUP
    for m in (a, b):
        m.answer(m.send(lambda c, m=m: _leave(c, group, m.member_id)))
    assert delete_group(a) is ErrorCode.NONE
    for broker in (1, 2, 3):
        loaded = stored(cluster, broker, group)
        assert group not in loaded.offsets and group not in loaded.groups and group in loaded.removed
    survivors = [x for x in (1, 2, 3) if x != old]
    cluster.crash(old)
    number = partition_for(group, PARTITIONS)
    assert cluster.wait_for(lambda: offsets_leader(cluster, number) in survivors, 30000)
    new = offsets_leader(cluster, number)
    assert cluster.wait_for(lambda: number in cluster.nodes[new].groups.owned, 5000)
    a.broker = new
    assert fetched_offsets(a.fetch([T0])) == {T0: -1}
    assert delete_group(a) is ErrorCode.GROUP_ID_NOT_FOUND


def _leave(cid: int, group: str, member_id: str) -> LeaveGroupRequest:
    return LeaveGroupRequest(cid, group, (MemberIdentity(member_id),))


def test_a_delete_waits_for_the_followers_and_a_deposed_coordinator_answers_not_coordinator():
    """The tombstones are appended with offsets.commit.required.acks -1: while the
    followers do not fetch, the DeleteGroups is not answered; the broker then loses the
    partition (makeFollowers completes the append with NOT_LEADER_OR_FOLLOWER): the
    delete is answered NOT_COORDINATOR, and a second delete there too
    (validateGroupStatus)."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "deposed-delete"
    coordinator = find(cluster, 1, group).node_id
    x = Member(cluster, coordinator, group, "x")
    assert commit_errors(x.answer(x.commit({T0: 3}))) == {T0: ErrorCode.NONE}
    block_followers(cluster, coordinator)
    cid = x.send(lambda c: DeleteGroupsRequest(c, (group,)))
    cluster.run_for(500)
    assert cid not in cluster.responses
    other = next(b for b in (1, 2, 3) if b != coordinator)
    move_leadership(cluster, coordinator, partition_for(group, PARTITIONS), other)
    assert x.answer(cid).results[0].error_code is ErrorCode.NOT_COORDINATOR
    assert delete_group(x) is ErrorCode.NOT_COORDINATOR


def test_offset_delete_through_the_broker_answers_unknown_partitions_itself():
    """KafkaApis.handleOffsetDeleteRequest: a partition the metadata cache lacks is
    UNKNOWN_TOPIC_OR_PARTITION and not given to the coordinator; the deleted offset's
    tombstone is on every replica."""
    cluster = with_offsets_topic(GROUP_CONFIG)
    group = "offset-delete"
    coordinator = find(cluster, 1, group).node_id
    x = Member(cluster, coordinator, group, "x")
    assert commit_errors(x.answer(x.commit({T0: 3}))) == {T0: ErrorCode.NONE}
    cid = x.send(lambda c: OffsetDeleteRequest(c, group, (OffsetDeleteTopic("t", (0,)),
                                                          OffsetDeleteTopic("nope", (0,)))))
    answer = x.answer(cid, 3000)
    assert answer.error_code is ErrorCode.NONE
    assert commit_errors(answer) == {T0: ErrorCode.NONE, TopicPartition("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetched_offsets(x.fetch([T0])) == {T0: -1}
    for broker in (1, 2, 3):
        assert group not in stored(cluster, broker, group).offsets


def test_offsets_expire_at_the_brokers_periodic_check():
    """GroupMetadataManager.startup schedules cleanupGroupMetadata every
    offsets.retention.check.interval.ms: a simple consumer's offset older than
    offsets.retention.minutes is tombstoned (on every replica) and the group, Empty
    without offsets, is gone."""
    cluster = with_offsets_topic({**GROUP_CONFIG, "offsets.retention.minutes": 1,
                                  "offsets.retention.check.interval.ms": 1000})
    group = "expiring"
    coordinator = find(cluster, 1, group).node_id
    x = Member(cluster, coordinator, group, "x")
    assert commit_errors(x.answer(x.commit({T0: 3}))) == {T0: ErrorCode.NONE}
    cluster.run_for(50_000)
    assert fetched_offsets(x.fetch([T0])) == {T0: 3}
    cluster.run_for(12_000)
    assert fetched_offsets(x.fetch([T0])) == {T0: -1}
    assert group not in cluster.nodes[coordinator].group_host.coordinator.groups
    for broker in (1, 2, 3):
        assert group not in stored(cluster, broker, group).offsets


def _requests_with_an_instance_id(group: str) -> list[Any]:
    commit = OffsetCommitTopic("t", (OffsetCommitPartition(0, 1),))
    return [
        lambda c: JoinGroupRequest(c, group, SESSION_MS, "", "consumer", PROTOCOLS, 30000, "static-1", 7, "s"),
        lambda c: SyncGroupRequest(c, group, 1, "m", (), "static-1"),
        lambda c: HeartbeatRequest(c, group, 1, "m", "static-1"),
        lambda c: OffsetCommitRequest(c, group, (commit,), 1, "m", "static-1"),
    ]


def error_of(answer: Any) -> ErrorCode:
    if hasattr(answer, "error_code"):
        return answer.error_code
    (error,) = set(commit_errors(answer).values())
    return error


def test_static_membership_is_unsupported_below_ibp_2_3():
    """KafkaApis (KAFKA_2_3_IV0): JoinGroup, SyncGroup, Heartbeat and OffsetCommit with
    a group.instance.id are UNSUPPORTED_VERSION while inter.broker.protocol.version is
    below 2.3, before the coordinator sees them; a dynamic member joins as usual."""
    cluster = with_offsets_topic({**GROUP_CONFIG, "inter.broker.protocol.version": "2.2"})
    group = "old-ibp"
    coordinator = find(cluster, 1, group).node_id
    x = Member(cluster, coordinator, group, "x")
    for build in _requests_with_an_instance_id(group):
        assert error_of(x.answer(x.send(build))) is ErrorCode.UNSUPPORTED_VERSION
    assert group not in cluster.nodes[coordinator].group_host.coordinator.groups
    assert x.answer(x.join()).error_code is ErrorCode.MEMBER_ID_REQUIRED


def test_static_membership_is_served_from_ibp_2_3():
    cluster = with_offsets_topic({**GROUP_CONFIG, "inter.broker.protocol.version": "2.3"})
    group = "new-ibp"
    coordinator = find(cluster, 1, group).node_id
    x = Member(cluster, coordinator, group, "x")
    join = _requests_with_an_instance_id(group)[0]
    assert x.answer(x.send(join), 3000).error_code is ErrorCode.NONE  # no MEMBER_ID_REQUIRED for a static member
