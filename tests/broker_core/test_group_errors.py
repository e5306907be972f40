"""Every error path of the group coordinator's membership APIs, forced (issue 24):
bad input gets Kafka's error code, never an exception. Rules from Kafka 2.7.0's
core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala unless said."""
import pytest

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_messages import JoinGroupProtocol
from tests.broker_core.groups import Driver, errors


def test_a_stale_generation_is_fenced_in_heartbeat_and_sync():
    """handleHeartbeat / doSyncGroup: generationId != group.generationId ->
    ILLEGAL_GENERATION (a zombie of an earlier generation)."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])  # generation 2
    assert errors(d.heartbeat("c2", ids["c2"], 1)) == {"c2": "ILLEGAL_GENERATION"}
    assert errors(d.sync("c2", ids["c2"], 1)) == {"c2": "ILLEGAL_GENERATION"}


def test_a_zombie_back_after_a_long_pause_is_an_unknown_member():
    """A member paused past its session is removed (onExpireHeartbeat); when it wakes
    its heartbeat, sync and rejoin by the old id are UNKNOWN_MEMBER_ID."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    for t in range(3000, 30001, 3000):
        d.at(t)
        if t == 12000:  # c2 was removed at 10000; c1 rejoins and leads generation 2
            d.join("c1", member_id=ids["c1"])
        d.heartbeat("c1", ids["c1"], d.group.generation_id)
    assert list(d.group.members) == [ids["c1"]] and d.group.generation_id == 2
    assert errors(d.heartbeat("c2", ids["c2"], 1)) == {"c2": "UNKNOWN_MEMBER_ID"}
    assert errors(d.sync("c2", ids["c2"], 1)) == {"c2": "UNKNOWN_MEMBER_ID"}
    assert errors(d.join("c2", member_id=ids["c2"])) == {"c2": "UNKNOWN_MEMBER_ID"}


def test_unknown_member_and_unknown_group():
    """handleHeartbeat / handleSyncGroup: a group the coordinator does not have, or a
    member it does not know -> UNKNOWN_MEMBER_ID; handleJoinGroup with a member id for
    a group that does not exist -> UNKNOWN_MEMBER_ID (getOrMaybeCreateGroup)."""
    d = Driver()
    assert errors(d.heartbeat("c1", "ghost", 1, group="none")) == {"c1": "UNKNOWN_MEMBER_ID"}
    assert errors(d.sync("c1", "ghost", 1, group="none")) == {"c1": "UNKNOWN_MEMBER_ID"}
    assert errors(d.join("c1", member_id="ghost", group="none")) == {"c1": "UNKNOWN_MEMBER_ID"}
    assert "none" not in d.coord.groups
    d.stable_group("c2")
    assert errors(d.heartbeat("c1", "ghost", 1)) == {"c1": "UNKNOWN_MEMBER_ID"}
    assert errors(d.join("c1", member_id="ghost")) == {"c1": "UNKNOWN_MEMBER_ID"}


def test_a_follower_sync_with_assignments_is_ignored():
    """doSyncGroup: only the leader's assignment counts. A follower that sends one
    (claiming every partition) waits like any follower, and gets the leader's."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])
    assert d.sync("c2", ids["c2"], 2, {ids["c2"]: b"everything", ids["c1"]: b""}) == {}
    assert d.group.state.value == "CompletingRebalance"
    done = d.sync("c1", ids["c1"], 2, {ids["c1"]: b"p0", ids["c2"]: b"p1"})
    assert {s: r.assignment for s, r in done.items()} == {"c1": b"p0", "c2": b"p1"}


def test_a_member_the_leader_left_out_gets_an_empty_assignment():
    """doSyncGroup fills any missing member with an empty assignment."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])
    d.sync("c2", ids["c2"], 2)
    done = d.sync("c1", ids["c1"], 2, {ids["c1"]: b"p0", "not-a-member": b"p1"})
    assert {s: r.assignment for s, r in done.items()} == {"c1": b"p0", "c2": b""}


def test_sync_before_the_join_completes_is_rebalance_in_progress():
    """doSyncGroup in PreparingRebalance -> REBALANCE_IN_PROGRESS."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])  # c2 has not rejoined: still preparing
    assert errors(d.sync("c2", ids["c2"], 1)) == {"c2": "REBALANCE_IN_PROGRESS"}


def test_an_unknown_protocol_type_or_no_common_protocol_is_inconsistent():
    """supportsProtocols: the group's protocol type, and a protocol every member
    supports; an Empty group refuses an empty type or protocol list."""
    d = Driver()
    ids = d.stable_group("c1")
    assert errors(d.join("x", protocol_type="connect")) == {"x": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.join("x", protocols=(JoinGroupProtocol("sticky"),))) == {"x": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.join("c1", member_id=ids["c1"], protocol_type="connect")) == {"c1": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.join("x", group="other", protocol_type="")) == {"x": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.join("x", group="other2", protocols=())) == {"x": "INCONSISTENT_GROUP_PROTOCOL"}


def test_sync_with_another_protocol_type_or_name_is_inconsistent():
    """doSyncGroup (v5+ carries the protocol type and name)."""
    d = Driver()
    ids = d.stable_group("c1")
    assert errors(d.sync("c1", ids["c1"], 1, protocol_type="connect")) == {"c1": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.sync("c1", ids["c1"], 1, protocol_name="sticky")) == {"c1": "INCONSISTENT_GROUP_PROTOCOL"}
    assert errors(d.sync("c1", ids["c1"], 1, protocol_type="consumer", protocol_name="range")) == {"c1": "NONE"}


@pytest.mark.parametrize("session", [5999, 1800001])
def test_a_session_timeout_outside_the_brokers_bounds_is_refused(session):
    """handleJoinGroup: group.min/max.session.timeout.ms -> INVALID_SESSION_TIMEOUT."""
    assert errors(Driver().join("c1", session=session)) == {"c1": "INVALID_SESSION_TIMEOUT"}


def test_an_empty_group_id_is_refused_by_the_membership_apis():
    """validateGroupStatus / isValidGroupId: only OffsetCommit, OffsetFetch,
    DescribeGroups and DeleteGroups take the empty group id."""
    d = Driver()
    assert errors(d.join("c1", group="")) == {"c1": "INVALID_GROUP_ID"}
    assert errors(d.heartbeat("c1", "m", 1, group="")) == {"c1": "INVALID_GROUP_ID"}
    assert errors(d.sync("c1", "m", 1, group="")) == {"c1": "INVALID_GROUP_ID"}
    assert errors(d.leave("c1", ("m", None), group="")) == {"c1": "INVALID_GROUP_ID"}
    assert d.commit("c1", {("t", 0): 5}, group="")["c1"].topics[0].partitions[0].error_code is ErrorCode.NONE


def test_the_group_max_size_refuses_one_more_member():
    """acceptJoiningMember: group.max.size -> GROUP_MAX_SIZE_REACHED, before a member
    id is even given (KIP-389)."""
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, max_size=2))
    d.stable_group("c1", "c2")
    answer = d.join("c3")["c3"]
    assert (answer.error_code.name, answer.member_id) == ("GROUP_MAX_SIZE_REACHED", "")


def test_a_pending_member_holds_the_rebalance_until_it_joins_or_expires():
    """hasAllMembersJoined counts pending member ids (MEMBER_ID_REQUIRED given, not
    yet back); a pending id expires after its session timeout (DelayedHeartbeat with
    isPending) and is then unknown."""
    d = Driver()
    ids = d.stable_group("c1")
    pending = d.join("c2")["c2"].member_id
    assert d.join("c1", member_id=ids["c1"]) == {}  # c1 rejoined, c2's id is pending
    answers = d.at(10000)  # the pending id expires: the rebalance completes without c2
    assert set(answers) == {"c1"} and answers["c1"].generation_id == 2
    assert errors(d.join("c2", member_id=pending)) == {"c2": "UNKNOWN_MEMBER_ID"}


def test_a_join_v3_needs_no_member_id_round_trip():
    """KafkaApis.handleJoinGroupRequest: requireKnownMemberId only from v4."""
    d = Driver()
    assert d.join("c1", version=3) == {}
    assert set(d.group.members) and not d.group.pending_members


def test_a_static_member_id_under_a_pending_id_is_an_error_code_not_a_crash():
    """doJoinGroup / handleLeaveGroup throw IllegalStateException for a pending member
    id with a group.instance.id; the handler answers UNKNOWN_SERVER_ERROR."""
    d = Driver()
    pending = d.join("c1")["c1"].member_id
    assert errors(d.join("c1", member_id=pending, instance="i1")) == {"c1": "UNKNOWN_SERVER_ERROR"}
    answer = d.leave("c1", (pending, "i1"))["c1"]
    assert [m.error_code.name for m in answer.members] == ["UNKNOWN_SERVER_ERROR"]


def test_a_dead_group_refers_the_member_to_another_coordinator():
    """onGroupUnloaded (onResignation): members waiting in a rebalance are told
    NOT_COORDINATOR; the group is gone from this coordinator."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    assert errors(d._by_dst(d.coord.unload(["g"], d.now))) == {"c1": "NOT_COORDINATOR"}
    assert "g" not in d.coord.groups and d.coord.next_deadline() is None


@pytest.mark.parametrize("status", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])
def test_a_group_this_coordinator_does_not_own_or_still_loads(status):
    """validateGroupStatus; while loading, handleHeartbeat answers NONE blindly and
    handleSyncGroup REBALANCE_IN_PROGRESS (older clients do not know the loading code)."""
    d = Driver(ownership=lambda group_id: status)
    loading = status is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert errors(d.join("c1")) == {"c1": status.name}
    assert errors(d.heartbeat("c1", "m", 1)) == {"c1": "NONE" if loading else status.name}
    assert errors(d.sync("c1", "m", 1)) == {"c1": "REBALANCE_IN_PROGRESS" if loading else status.name}
    assert errors(d.leave("c1", ("m", None))) == {"c1": status.name}
    assert d.fetch("c1", [("t", 0)])["c1"].error_code is status


def test_a_join_or_sync_sent_again_answers_the_older_one():
    """GroupMetadata.updateMember and doSyncGroup replace the held callback, leaving
    the older request unanswered; here it is answered REBALANCE_IN_PROGRESS (the
    client rejoins) and the newer one waits, so every request gets one answer."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    assert d.join("c1", member_id=ids["c1"]) == {}
    assert errors(d.join("c1-again", member_id=ids["c1"])) == {"c1": "REBALANCE_IN_PROGRESS"}
    answers = d.join("c2", member_id=ids["c2"])
    assert set(answers) == {"c1-again", "c2"}
    assert d.sync("c2", ids["c2"], 2) == {}
    assert errors(d.sync("c2-again", ids["c2"], 2)) == {"c2": "REBALANCE_IN_PROGRESS"}
    assert set(d.sync("c1-again", ids["c1"], 2, {})) == {"c1-again", "c2-again"}


def test_a_member_removed_while_its_sync_waits_is_answered():
    """removeMemberAndUpdateGroup: a LeaveGroup (from another connection) of a member
    whose SyncGroup waits answers that SyncGroup UNKNOWN_MEMBER_ID; the rest rebalance."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])
    assert d.sync("c2", ids["c2"], 2) == {}
    answers = d.leave("admin", (ids["c2"], None))
    assert errors(answers) == {"c2": "UNKNOWN_MEMBER_ID", "admin": "NONE"}
    assert d.group.state.value == "PreparingRebalance"
