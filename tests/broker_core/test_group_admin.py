"""DeleteGroups, OffsetDelete and offset expiry in the group coordinator, driven with
explicit time. Rules from Kafka 2.7.0's core/src/main/scala/kafka/coordinator/group/
GroupCoordinator.scala (handleDeleteGroups, handleDeleteOffsets, validateGroupStatus),
GroupMetadataManager.scala (cleanupGroupMetadata, groupNotExists, startup's
delete-expired-group-metadata task) and GroupMetadata.scala (removeOffsets,
removeExpiredOffsets, computeSubscribedTopics, isSubscribedToTopic, onOffsetCommitAppend);
each test names the one it checks."""
from __future__ import annotations

from typing import Any

import pytest

from broker_core.consumer_protocol import encode_subscription
from broker_core.errors import ErrorCode
from broker_core.group_admin import EXPIRE_TIMER
from broker_core.group_context import GroupConfig
from broker_core.group_messages import (
    DeleteGroupsRequest, JoinGroupProtocol, OffsetCommitPartition, OffsetCommitRequest, OffsetCommitTopic,
    OffsetDeleteRequest, OffsetDeleteTopic)
from broker_core.types import TopicPartition
from tests.broker_core.groups import Driver, fetched, partition_errors

CONSUMES_T = (JoinGroupProtocol("range", encode_subscription(["t"])),)


def delete_groups(d: Driver, src: str, *groups: str) -> dict[str, Any]:
    return d.send(src, DeleteGroupsRequest(d.cid(), tuple(groups)))


def results(response: Any) -> dict[str, str]:
    return {r.group_id: r.error_code.name for r in response.results}


def delete_offsets(d: Driver, src: str, partitions: list[tuple[str, int]], group: str = "g") -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return d.send(src, OffsetDeleteRequest(d.cid(), group, tuple(
        OffsetDeleteTopic(t, tuple(ps)) for t, ps in by_topic.items())))


def flush(d: Driver) -> dict[str, Any]:
    """Complete every write the coordinator waits for (deferred writes); the answers."""
    answers: dict[str, Any] = {}
    while writes := d.coord.take_writes():
        for w in writes:
            answers.update(d._by_dst(d.coord.write_completed(w.token, ErrorCode.NONE, d.now)))
    return answers


def emptied_group(d: Driver, offsets: dict[tuple[str, int], int], protocols=CONSUMES_T) -> None:
    """A consumer group whose one member committed ``offsets`` in generation 1 and left:
    Empty in generation 2, with its offsets."""
    member, _ = d.join_with_id("c", protocols=protocols)
    d.at(d.now)
    d.sync("c", member, 1, {member: b""})
    flush(d)
    committed = d.commit("c", offsets, member, 1) or flush(d)
    assert all(e == "NONE" for e in partition_errors(committed["c"]).values())
    d.leave("c", (member, None))
    flush(d)
    assert d.group.state.value == "Empty" and d.group.generation_id == 2


# -- DeleteGroups ---------------------------------------------------------------------
def test_an_empty_group_is_deleted_with_its_offsets_and_tombstones():
    """handleDeleteGroups: Empty -> Dead, removeAllOffsets; cleanupGroupMetadata writes a
    tombstone per offset and one for the group (generation 2 > 0) and drops it from the
    cache; an OffsetFetch then finds nothing and the id is free for a new group."""
    d = Driver(deferred_writes=True)
    emptied_group(d, {("t", 0): 5, ("t", 1): 6})
    assert delete_groups(d, "admin", "g") == {}  # answered once the tombstones are written
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("t", 0), TopicPartition("t", 1)), True)
    assert "g" not in d.coord.groups
    done = d._by_dst(d.coord.write_completed(write.token, ErrorCode.NONE, d.now))
    assert results(done["admin"]) == {"g": "NONE"}
    assert fetched(d.fetch("c", [("t", 0), ("t", 1)])["c"]) == {("t", 0): -1, ("t", 1): -1}
    assert delete_groups(d, "admin", "g")["admin"].results[0].error_code is ErrorCode.GROUP_ID_NOT_FOUND


def test_delete_groups_errors_per_group():
    """handleDeleteGroups: a group with members is NON_EMPTY_GROUP, one the coordinator
    lacks GROUP_ID_NOT_FOUND (groupNotExists: owned, and absent or Dead), and KafkaApis
    asks each group once (distinct), in order. The empty id is a valid group id here
    (isValidGroupId for DELETE_GROUPS)."""
    d = Driver()
    d.stable_group("c1")
    d.commit("x", {("t", 0): 1}, group="simple")
    answer = delete_groups(d, "admin", "g", "nobody", "simple", "g", "")["admin"]
    assert [(r.group_id, r.error_code.name) for r in answer.results] == [
        ("g", "NON_EMPTY_GROUP"), ("nobody", "GROUP_ID_NOT_FOUND"), ("simple", "NONE"), ("", "GROUP_ID_NOT_FOUND")]
    assert d.group.state.value == "Stable" and "simple" not in d.coord.groups


@pytest.mark.parametrize("ownership, told", [
    (ErrorCode.NOT_COORDINATOR, "NOT_COORDINATOR"),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "COORDINATOR_LOAD_IN_PROGRESS"),
])
def test_a_coordinator_that_does_not_serve_the_group_refuses_to_delete_it(ownership, told):
    """validateGroupStatus(DELETE_GROUPS) per group: a broker that lost (or is still
    loading) the group's partition deletes nothing."""
    serving = {"on": True}
    d = Driver(ownership=lambda g: ErrorCode.NONE if serving["on"] else ownership)
    d.commit("x", {("t", 0): 1})
    serving["on"] = False
    assert results(delete_groups(d, "admin", "g")["admin"]) == {"g": told}
    serving["on"] = True
    assert fetched(d.fetch("x", [("t", 0)])["x"]) == {("t", 0): 1}


def test_a_group_that_only_stored_offsets_gets_no_group_tombstone():
    """cleanupGroupMetadata: 'We avoid writing the tombstone when the generationId is
    0, since this group is only using Kafka for offset storage.'"""
    d = Driver(deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    d.coord.write_completed(d.coord.take_writes()[0].token, ErrorCode.NONE, d.now)
    delete_groups(d, "admin", "g")
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("t", 0),), False)


@pytest.mark.parametrize("append_error, told", [
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, "NOT_COORDINATOR"),
    (ErrorCode.NOT_ENOUGH_REPLICAS, "COORDINATOR_NOT_AVAILABLE"),
    (ErrorCode.REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT"),
])
def test_a_failed_tombstone_write_is_the_deletes_answer(append_error, told):
    """isrlab answers DeleteGroups once its tombstones are acknowledged (Kafka appends
    them with acks 0 and answers NONE regardless): a failed append is mapped as a
    commit's (storeOffsets' callback) so the client knows the deletion may not last."""
    d = Driver(deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    d.coord.write_completed(d.coord.take_writes()[0].token, ErrorCode.NONE, d.now)
    delete_groups(d, "admin", "g")
    (write,) = d.coord.take_writes()
    assert results(d._by_dst(d.coord.write_completed(write.token, append_error, d.now))["admin"]) == {"g": told}


def test_a_commit_in_flight_when_the_group_is_deleted_is_not_applied_and_gets_a_tombstone():
    """removeOffsets drops the pending commit, and onOffsetCommitAppend applies a commit
    only while it is still pending: the commit is answered NONE (its record was
    written) but the group stays deleted. isrlab also writes a tombstone for that
    partition, after the commit's record, so a reload does not bring it back."""
    d = Driver(deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    (commit_write,) = d.coord.take_writes()
    delete_groups(d, "admin", "g")
    (tombstones,) = d.coord.take_writes()
    assert tombstones.tombstones == (TopicPartition("t", 0),) and tombstones.token > commit_write.token
    assert partition_errors(d._by_dst(d.coord.write_completed(commit_write.token, ErrorCode.NONE, d.now))["x"]) == \
        {("t", 0): "NONE"}
    assert results(d._by_dst(d.coord.write_completed(tombstones.token, ErrorCode.NONE, d.now))["admin"]) == \
        {"g": "NONE"}
    assert fetched(d.fetch("x", [("t", 0)])["x"]) == {("t", 0): -1}


def test_a_commit_arriving_while_the_tombstones_are_written_makes_a_new_group():
    """cleanupGroupMetadata removes the group from the cache before its tombstones are
    appended: a simple commit that comes meanwhile creates a new group (handleCommitOffsets
    with generation -1), and its record goes after the tombstones, so it stays."""
    d = Driver(deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    d.coord.write_completed(d.coord.take_writes()[0].token, ErrorCode.NONE, d.now)
    delete_groups(d, "admin", "g")
    d.commit("x", {("t", 0): 2})
    tombstones, commit = d.coord.take_writes()
    assert tombstones.tombstones is not None and commit.offsets is not None and commit.token > tombstones.token
    d.coord.write_completed(commit.token, ErrorCode.NONE, d.now)
    d.coord.write_completed(tombstones.token, ErrorCode.NONE, d.now)
    assert fetched(d.fetch("x", [("t", 0)])["x"]) == {("t", 0): 2}


# -- OffsetDelete -----------------------------------------------------------------------
def test_offset_delete_of_an_empty_group_removes_the_offsets_asked_for():
    """handleDeleteOffsets: Empty -> every partition asked for is eligible (NONE, also
    one without an offset); the others stay; deleting the last offset of an Empty group
    makes it Dead with a group tombstone (cleanupGroupMetadata)."""
    d = Driver(deferred_writes=True)
    emptied_group(d, {("t", 0): 5, ("u", 0): 6})
    delete_offsets(d, "admin", [("t", 0), ("t", 9)])
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("t", 0),), False)
    answer = d._by_dst(d.coord.write_completed(write.token, ErrorCode.NONE, d.now))["admin"]
    assert answer.error_code is ErrorCode.NONE and partition_errors(answer) == {("t", 0): "NONE", ("t", 9): "NONE"}
    assert fetched(d.fetch("c", [("t", 0), ("u", 0)])["c"]) == {("t", 0): -1, ("u", 0): 6}
    delete_offsets(d, "admin", [("u", 0)])
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("u", 0),), True)
    assert "g" not in d.coord.groups


def test_offset_delete_of_a_stable_consumer_group_spares_its_subscribed_topics():
    """handleDeleteOffsets for a consumer group with members: partitions of topics a
    member subscribes to (computeSubscribedTopics, from the consumer protocol metadata)
    are GROUP_SUBSCRIBED_TO_TOPIC, the others are deleted."""
    d = Driver()
    member, _ = d.join_with_id("c", protocols=CONSUMES_T)
    d.at(d.now)
    d.sync("c", member, 1, {member: b""})
    d.commit("c", {("t", 0): 5, ("old", 0): 6}, member, 1)
    answer = delete_offsets(d, "admin", [("t", 0), ("old", 0)])["admin"]
    assert partition_errors(answer) == {("t", 0): "GROUP_SUBSCRIBED_TO_TOPIC", ("old", 0): "NONE"}
    assert fetched(d.fetch("c", [("t", 0), ("old", 0)])["c"]) == {("t", 0): 5, ("old", 0): -1}


def test_subscriptions_that_do_not_parse_count_as_every_topic():
    """isSubscribedToTopic: when computeSubscribedTopics fails (SchemaException) the
    group 'is not aware of the subscribed topics' and every topic counts as subscribed."""
    d = Driver()
    ids = d.stable_group("c1")  # metadata b"sub:t": not the consumer protocol
    d.commit("c1", {("x", 0): 5}, ids["c1"], 1)
    assert d.group.subscribed_topics is None
    assert partition_errors(delete_offsets(d, "admin", [("x", 0)])["admin"]) == {("x", 0): "GROUP_SUBSCRIBED_TO_TOPIC"}


def test_offset_delete_group_errors():
    """handleDeleteOffsets: a group with members and another protocol type is
    NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, the empty id INVALID_GROUP_ID
    (validateGroupStatus: OFFSET_DELETE needs a group id); a group error carries no
    partitions (getErrorResponse)."""
    d = Driver()
    d.join_with_id("c", protocol_type="connect")
    d.at(d.now)
    for group, told in (("g", ErrorCode.NON_EMPTY_GROUP), ("nobody", ErrorCode.GROUP_ID_NOT_FOUND),
                        ("", ErrorCode.INVALID_GROUP_ID)):
        answer = delete_offsets(d, "admin", [("t", 0)], group=group)["admin"]
        assert (answer.error_code, answer.topics) == (told, ())


# -- expiry -----------------------------------------------------------------------------
def expiring(retention_ms: int, interval_ms: int = 100, **kwargs: Any) -> Driver:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=retention_ms,
                           offsets_retention_check_interval_ms=interval_ms), **kwargs)
    d.coord.start_offset_expiration(0)
    return d


def test_the_expiry_check_runs_every_interval_and_not_without_being_started():
    """GroupMetadataManager.startup(enableMetadataExpiration): the task is rescheduled
    every offsets.retention.check.interval.ms; a coordinator never started keeps no
    such timer (the core's unit tests and hypothesis machines)."""
    d = expiring(10**9, interval_ms=250)
    assert d.coord.ctx.timers[EXPIRE_TIMER] == 250
    d.at(600)
    assert d.coord.ctx.timers[EXPIRE_TIMER] == 750
    assert EXPIRE_TIMER not in Driver().coord.ctx.timers


def test_one_expiry_check_can_be_run_at_any_time():
    """GroupMetadataManager.cleanupGroupMetadata() called directly (Kafka's tests do):
    what the timer runs, without one."""
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=1000))
    d.commit("x", {("t", 0): 1})
    d.coord.expire_offsets(999)
    assert "g" in d.coord.groups
    d.coord.expire_offsets(1000)
    assert "g" not in d.coord.groups and EXPIRE_TIMER not in d.coord.ctx.timers


def test_offsets_of_a_group_that_only_stores_offsets_expire_from_their_commit():
    """removeExpiredOffsets, protocolType None: commit timestamp + retention; then
    cleanupGroupMetadata finds the Empty group without offsets and drops it (no group
    tombstone at generation 0)."""
    d = expiring(1000, deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    d.now = 400
    d.commit("x", {("t", 1): 2})
    for w in d.coord.take_writes():
        d.coord.write_completed(w.token, ErrorCode.NONE, d.now)
    d.at(999)
    assert d.coord.take_writes() == []
    assert fetched(d.fetch("x", [("t", 0), ("t", 1)])["x"]) == {("t", 0): 1, ("t", 1): 2}
    d.at(1000)  # the check at 1000 finds t-0 1000 ms old
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("t", 0),), False)
    d.at(1400)
    (write,) = d.coord.take_writes()
    assert write.tombstones == (TopicPartition("t", 1),)
    assert "g" not in d.coord.groups


def test_an_empty_consumer_groups_offsets_expire_counted_from_when_it_became_empty():
    """removeExpiredOffsets, an Empty group with a protocol type: retention counts from
    currentStateTimestamp (when it became Empty), not from the commit; then the group is
    Dead with a tombstone (generation 2)."""
    d = expiring(3000, deferred_writes=True)
    member, _ = d.join_with_id("c", protocols=CONSUMES_T)
    d.at(0)
    d.sync("c", member, 1, {member: b""})
    flush(d)
    d.commit("c", {("t", 0): 5}, member, 1)
    flush(d)
    d.at(2000)
    d.heartbeat("c", member, 1)
    d.leave("c", (member, None))  # Empty at 2000
    flush(d)
    d.at(4900)  # 4900 ms after the commit, 2900 after Empty: kept
    assert d.coord.take_writes() == []
    d.at(5000)
    (write,) = d.coord.take_writes()
    assert (write.tombstones, write.group_tombstone) == ((TopicPartition("t", 0),), True)
    assert "g" not in d.coord.groups


def test_a_stable_consumer_groups_subscribed_offsets_do_not_expire():
    """removeExpiredOffsets, a consumer group with members and known subscriptions:
    offsets of subscribed topics never expire; others by commit timestamp."""
    d = expiring(1000)
    member, _ = d.join_with_id("c", protocols=CONSUMES_T, session=10**6)
    d.at(0)
    d.sync("c", member, 1, {member: b""})
    d.commit("c", {("t", 0): 5, ("gone", 0): 6}, member, 1)
    d.at(50_000)
    assert d.group.state.value == "Stable"
    assert fetched(d.fetch("c", [("t", 0), ("gone", 0)])["c"]) == {("t", 0): 5, ("gone", 0): -1}


def test_a_group_of_another_protocol_with_members_keeps_its_offsets():
    """removeExpiredOffsets: 'case _ => Map()' (members, not a consumer group)."""
    d = expiring(1000)
    member, _ = d.join_with_id("c", protocol_type="connect", session=10**6)
    d.at(0)
    d.sync("c", member, 1, {member: b""})
    d.commit("c", {("t", 0): 5}, member, 1)
    d.at(50_000)
    assert fetched(d.fetch("c", [("t", 0)])["c"]) == {("t", 0): 5}


def test_a_commits_own_retention_expires_it_at_its_expire_timestamp():
    """KafkaApis.handleOffsetCommitRequest: a v2-4 retention_time_ms gives the offset an
    expire timestamp (now + retention), which removeExpiredOffsets uses instead of
    offsets.retention.minutes."""
    d = expiring(10**9)
    d.send("x", OffsetCommitRequest(d.cid(), "g", (OffsetCommitTopic("t", (OffsetCommitPartition(0, 7),)),),
                                    retention_time_ms=500))
    assert d.group.offsets[TopicPartition("t", 0)].expire_timestamp == 500
    d.at(400)
    assert fetched(d.fetch("x", [("t", 0)])["x"]) == {("t", 0): 7}
    d.at(500)
    assert fetched(d.fetch("x", [("t", 0)])["x"]) == {("t", 0): -1}


def test_an_offset_being_written_does_not_expire():
    """removeExpiredOffsets: '!pendingOffsetCommits.contains(topicPartition)'."""
    d = expiring(100, deferred_writes=True)
    d.commit("x", {("t", 0): 1})
    d.coord.write_completed(d.coord.take_writes()[0].token, ErrorCode.NONE, d.now)
    d.commit("x", {("t", 0): 2})  # pending from now on
    d.at(1000)
    assert [w.tombstones for w in d.coord.take_writes()] == [None]  # the commit's write only
    assert d.group.offsets[TopicPartition("t", 0)].offset == 1


def test_an_offset_deleted_while_its_commit_is_written_stays_deleted():
    """GroupMetadata.onOffsetCommitAppend puts a written commit in the cache only if it
    is still pending; OffsetDelete's removeOffsets took it out of pendingOffsetCommits,
    so the group (still Empty, with another offset) does not get it back."""
    d = Driver(deferred_writes=True)
    d.commit("x", {("u", 0): 1})
    flush(d)
    d.commit("x", {("t", 0): 2})
    (commit,) = d.coord.take_writes()
    delete_offsets(d, "admin", [("t", 0)])
    (tombstones,) = d.coord.take_writes()
    assert tombstones.tombstones == (TopicPartition("t", 0),) and not tombstones.group_tombstone
    d.coord.write_completed(commit.token, ErrorCode.NONE, d.now)
    d.coord.write_completed(tombstones.token, ErrorCode.NONE, d.now)
    assert fetched(d.fetch("x", [("t", 0), ("u", 0)])["x"]) == {("t", 0): -1, ("u", 0): 1}


def test_a_deleted_group_takes_its_pending_member_timer_with_it():
    """A member id given with MEMBER_ID_REQUIRED (KIP-394) to an Empty group that is then
    deleted: the group's timers leave with it (isrlab; Kafka's pending member simply
    finds no group), and the member's join with that id is UNKNOWN_MEMBER_ID
    (handleJoinGroup: a known member id for a group the coordinator lacks)."""
    d = Driver()
    d.commit("x", {("t", 0): 1})
    first = d.join("c")["c"]
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert ("group-pending", "g", first.member_id) in d.coord.ctx.timers
    assert results(delete_groups(d, "admin", "g")["admin"]) == {"g": "NONE"}
    assert not [k for k in d.coord.ctx.timers if k[0] != "group-expire"]
    assert d.join("c", member_id=first.member_id)["c"].error_code is ErrorCode.UNKNOWN_MEMBER_ID
