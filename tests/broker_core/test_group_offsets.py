"""Committed offsets, DescribeGroups and ListGroups in the group coordinator, and the
seam to __consumer_offsets (deferred writes). Rules from Kafka 2.7.0's
core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala (handleCommitOffsets,
doCommitOffsets, handleFetchOffsets, handleDescribeGroup, handleListGroups) and
GroupMetadataManager.scala (storeOffsets, storeGroup, getOffsets, partitionFor)."""
import pytest

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_messages import DescribeGroupsRequest, ListGroupsRequest
from tests.broker_core.groups import Driver, errors, fetched, partition_errors


def test_a_simple_commit_needs_no_group_and_is_fetched_back():
    """handleCommitOffsets: generation -1 for a group the coordinator does not have
    creates it Empty and stores (a consumer using assign(), not subscribe()); getOffsets
    answers -1 for a partition without a commit."""
    d = Driver()
    assert partition_errors(d.commit("c", {("t", 0): 42, ("t", 1): 7})["c"]) == {("t", 0): "NONE", ("t", 1): "NONE"}
    assert d.group.state.value == "Empty"
    assert fetched(d.fetch("c", [("t", 0), ("t", 2)])["c"]) == {("t", 0): 42, ("t", 2): -1}
    assert fetched(d.fetch("c", None)["c"]) == {("t", 0): 42, ("t", 1): 7}  # topics null: all (v2+)
    assert fetched(d.fetch("c", [("t", 0)], group="nobody")["c"]) == {("t", 0): -1}


def test_a_commit_with_a_generation_for_a_group_the_coordinator_lacks_is_illegal():
    d = Driver()
    answer = d.commit("c", {("t", 0): 1}, member_id="m", generation=3)["c"]
    assert partition_errors(answer) == {("t", 0): "ILLEGAL_GENERATION"}
    assert "g" not in d.coord.groups


def test_a_member_commits_in_its_generation_and_a_stale_one_is_fenced():
    """doCommitOffsets: the member's generation must be the group's; the commit of a
    zombie of generation 1 after generation 2 began is ILLEGAL_GENERATION, and the
    committed offset stays what generation 2 committed."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    assert partition_errors(d.commit("c1", {("t", 0): 5}, ids["c1"], 1)["c1"]) == {("t", 0): "NONE"}
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])
    d.sync("c2", ids["c2"], 2)
    d.sync("c1", ids["c1"], 2, {})
    assert partition_errors(d.commit("c2", {("t", 0): 9}, ids["c2"], 2)["c2"]) == {("t", 0): "NONE"}
    assert partition_errors(d.commit("c1", {("t", 0): 6}, ids["c1"], 1)["c1"]) == {("t", 0): "ILLEGAL_GENERATION"}
    assert fetched(d.fetch("c1", [("t", 0)])["c1"]) == {("t", 0): 9}


def test_a_commit_from_outside_the_group_while_it_has_members_is_refused():
    """doCommitOffsets: generation -1 is taken only while the group is Empty; otherwise
    the empty member id is unknown."""
    d = Driver()
    d.stable_group("c1")
    assert partition_errors(d.commit("x", {("t", 0): 1})["x"]) == {("t", 0): "UNKNOWN_MEMBER_ID"}
    assert partition_errors(d.commit("x", {("t", 0): 1}, "ghost", 1)["x"]) == {("t", 0): "UNKNOWN_MEMBER_ID"}


def test_commits_during_a_rebalance():
    """doCommitOffsets: PreparingRebalance still takes the commit (the heartbeat will
    say rebalance); CompletingRebalance answers REBALANCE_IN_PROGRESS."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    assert d.group.state.value == "PreparingRebalance"
    assert partition_errors(d.commit("c2", {("t", 0): 3}, ids["c2"], 1)["c2"]) == {("t", 0): "NONE"}
    d.join("c2", member_id=ids["c2"])
    assert d.group.state.value == "CompletingRebalance"
    assert partition_errors(d.commit("c2", {("t", 0): 4}, ids["c2"], 2)["c2"]) == {("t", 0): "REBALANCE_IN_PROGRESS"}
    assert fetched(d.fetch("c2", [("t", 0)])["c2"]) == {("t", 0): 3}


def test_metadata_longer_than_the_limit_is_refused_per_partition():
    """storeOffsets / validateOffsetMetadataLength: offset.metadata.max.bytes."""
    d = Driver(GroupConfig(offset_metadata_max_bytes=4))
    assert partition_errors(d.commit("c", {("t", 0): 1}, metadata="12345")["c"]) == \
        {("t", 0): "OFFSET_METADATA_TOO_LARGE"}
    assert partition_errors(d.commit("c", {("t", 0): 1}, metadata="1234")["c"]) == {("t", 0): "NONE"}


def test_a_deferred_commit_is_answered_and_visible_only_once_written():
    """storeOffsets: the answer waits for the append to __consumer_offsets; until then
    the offset is pending, and a fetch with require_stable (KIP-447) says
    UNSTABLE_OFFSET_COMMIT."""
    d = Driver(deferred_writes=True)
    assert d.commit("c", {("t", 0): 10}) == {}
    (write,) = d.coord.take_writes()
    assert write.offsets is not None and write.offsets[next(iter(write.offsets))].offset == 10
    assert fetched(d.fetch("c", [("t", 0)])["c"]) == {("t", 0): -1}
    stable = d.fetch("c", [("t", 0)], require_stable=True)["c"]
    assert partition_errors(stable) == {("t", 0): "UNSTABLE_OFFSET_COMMIT"}
    done = d._by_dst(d.coord.write_completed(write.token, ErrorCode.NONE, d.now))
    assert partition_errors(done["c"]) == {("t", 0): "NONE"}
    assert fetched(d.fetch("c", [("t", 0)], require_stable=True)["c"]) == {("t", 0): 10}


@pytest.mark.parametrize("append_error, told", [
    (ErrorCode.NOT_ENOUGH_REPLICAS, "COORDINATOR_NOT_AVAILABLE"),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, "NOT_COORDINATOR"),
    (ErrorCode.REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT"),
])
def test_a_failed_commit_write_is_mapped_and_not_applied(append_error, told):
    """storeOffsets' callback: the log append's error as the client is told it."""
    d = Driver(deferred_writes=True)
    d.commit("c", {("t", 0): 10})
    (write,) = d.coord.take_writes()
    done = d._by_dst(d.coord.write_completed(write.token, append_error, d.now))
    assert partition_errors(done["c"]) == {("t", 0): told}
    assert fetched(d.fetch("c", [("t", 0)], require_stable=True)["c"]) == {("t", 0): -1}


def test_the_leaders_assignment_waits_for_its_write_and_a_failure_makes_the_group_rejoin():
    """doSyncGroup -> storeGroup: members are answered when the group's record is
    written; a timed-out write (REBALANCE_IN_PROGRESS to the client) resets the
    assignment and prepares a rebalance (resetAndPropagateAssignmentError)."""
    d = Driver(deferred_writes=True)
    m1, _ = d.join_with_id("c1")
    m2, _ = d.join_with_id("c2")
    d.at(d.now)
    assert d.sync("c2", m2, 1) == {} and d.sync("c1", m1, 1, {m1: b"A", m2: b"B"}) == {}
    writes = d.coord.take_writes()
    assert [w.assignment for w in writes] == [{m1: b"A", m2: b"B"}]
    answers = d._by_dst(d.coord.write_completed(writes[0].token, ErrorCode.REQUEST_TIMED_OUT, d.now))
    assert errors(answers) == {"c1": "REBALANCE_IN_PROGRESS", "c2": "REBALANCE_IN_PROGRESS"}
    assert d.group.state.value == "PreparingRebalance"


def test_a_group_write_completing_after_the_group_moved_on_changes_nothing():
    """storeGroup's callback checks the group is still CompletingRebalance in the same
    generation: a member that joined meanwhile started another rebalance."""
    d = Driver(deferred_writes=True)
    m1, _ = d.join_with_id("c1")
    d.at(d.now)
    d.sync("c1", m1, 1, {m1: b"A"})
    (write,) = d.coord.take_writes()
    _, answers = d.join_with_id("c2")
    assert errors(answers) == {"c1": "REBALANCE_IN_PROGRESS"}  # c1's SyncGroup, sent back
    assert d.group.state.value == "PreparingRebalance"
    assert d._by_dst(d.coord.write_completed(write.token, ErrorCode.NONE, d.now)) == {}
    assert d.group.state.value == "PreparingRebalance"


def test_describe_gives_assignments_only_when_stable_and_dead_for_an_unknown_group():
    """handleDescribeGroup / GroupMetadata.summary."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    response = d.send("admin", DescribeGroupsRequest(d.cid(), ("g", "nobody")))["admin"]
    g, nobody = response.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment, m.member_metadata) for m in g.members] == \
        [(ids["c1"], b"c1", b"sub:t"), (ids["c2"], b"c2", b"sub:t")]
    assert (nobody.error_code.name, nobody.group_state, nobody.members) == ("NONE", "Dead", ())
    d.join("c1", member_id=ids["c1"])
    g = d.send("admin", DescribeGroupsRequest(d.cid(), ("g",)))["admin"].groups[0]
    assert (g.group_state, g.protocol_data) == ("PreparingRebalance", "")
    assert {m.member_assignment for m in g.members} == {b""}


def test_list_groups_with_and_without_a_state_filter():
    """handleListGroups; the states filter is ListGroups v4 (KIP-518)."""
    d = Driver()
    d.stable_group("c1")
    d.commit("c", {("t", 0): 1}, group="offsets-only")
    listed = d.send("admin", ListGroupsRequest(d.cid()))["admin"]
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == \
        [("g", "consumer", "Stable"), ("offsets-only", "", "Empty")]
    only_empty = d.send("admin", ListGroupsRequest(d.cid(), ("Empty",)))["admin"]
    assert [g.group_id for g in only_empty.groups] == ["offsets-only"]


