"""Static membership (KIP-345, group.instance.id) in the group coordinator: a member
that restarts with the same instance id takes its old place without a rebalance; the
instance's old member id is fenced. Rules from Kafka 2.7.0's
core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala and GroupMetadata.scala."""
from broker_core.errors import ErrorCode
from broker_core.group_messages import JoinGroupProtocol
from tests.broker_core.groups import REBALANCE, Driver, errors


def static_group(d: Driver) -> dict[str, str]:
    """s1 (static, instance i1, the leader) and c2 (dynamic), Stable at generation 1."""
    s1 = d.join("s1", instance="i1")  # static members skip MEMBER_ID_REQUIRED
    assert s1 == {}
    c2, _ = d.join_with_id("c2")
    joined = d.at(d.now)
    ids = {"s1": joined["s1"].member_id, "c2": c2}
    d.sync("c2", c2, 1)
    d.sync("s1", ids["s1"], 1, {ids["s1"]: b"A", c2: b"B"})
    assert d.group.state.value == "Stable"
    return ids


def test_a_static_member_that_restarts_keeps_its_place_without_a_rebalance():
    """updateStaticMemberAndRebalance in Stable with the same protocol: a new member id
    for the instance, the same generation and assignment, and the old leader named
    (so that nobody reassigns); replaceGroupInstance keeps the leadership."""
    d = Driver()
    ids = static_group(d)
    back = d.join("s1b", instance="i1")["s1b"]
    assert back.error_code.name == "NONE" and back.member_id not in (ids["s1"], "")
    assert (back.generation_id, back.leader, back.members) == (1, ids["s1"], ())
    assert d.group.state.value == "Stable" and d.group.leader_id == back.member_id
    assert d.sync("s1b", back.member_id, 1)["s1b"].assignment == b"A"
    assert errors(d.heartbeat("c2", ids["c2"], 1)) == {"c2": "NONE"}  # no rebalance for c2


def test_the_old_instance_is_fenced_everywhere():
    """isStaticMemberFenced: a known instance id under another member id ->
    FENCED_INSTANCE_ID in JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup."""
    d = Driver()
    ids = static_group(d)
    d.join("s1b", instance="i1")
    old = ids["s1"]
    assert errors(d.heartbeat("s1", old, 1, instance="i1")) == {"s1": "FENCED_INSTANCE_ID"}
    assert errors(d.sync("s1", old, 1, instance="i1")) == {"s1": "FENCED_INSTANCE_ID"}
    assert errors(d.join("s1", member_id=old, instance="i1")) == {"s1": "FENCED_INSTANCE_ID"}
    commit = d.commit("s1", {("t", 0): 1}, member_id=old, generation=1, instance="i1")["s1"]
    assert commit.topics[0].partitions[0].error_code.name == "FENCED_INSTANCE_ID"
    left = d.leave("s1", (old, "i1"))["s1"]
    assert [m.error_code.name for m in left.members] == ["FENCED_INSTANCE_ID"]
    assert len(d.group.members) == 2


def test_a_second_instance_fences_the_one_waiting_for_its_join():
    """replaceGroupInstance answers the old member's held JoinGroup
    FENCED_INSTANCE_ID: two processes configured with one instance id."""
    d = Driver()
    ids = static_group(d)
    assert d.join("s1", member_id=ids["s1"], instance="i1") == {}  # the leader rejoins: held
    assert errors(d.join("s1b", instance="i1")) == {"s1": "FENCED_INSTANCE_ID"}
    answers = d.join("c2", member_id=ids["c2"])
    assert errors(answers) == {"c2": "NONE", "s1b": "NONE"}
    assert answers["s1b"].generation_id == 2 and answers["s1b"].leader == answers["s1b"].member_id


def test_a_static_member_that_misses_a_rebalance_stays_in_the_group():
    """onCompleteJoin removes only dynamic members that did not rejoin."""
    d = Driver()
    ids = static_group(d)
    for t in range(3000, 3000 + REBALANCE + 1, 3000):
        d.heartbeat("s1", ids["s1"], d.group.generation_id, instance="i1")
        d.at(t)
        if t == 3000:  # c2 subscribes to more: a rebalance, which s1 misses
            d.join("c2", member_id=ids["c2"], protocols=(JoinGroupProtocol("range", b"sub:t,u"),))
    assert list(d.group.members) == [ids["s1"], ids["c2"]]
    assert d.group.generation_id == 2 and d.group.state.value == "CompletingRebalance"


def test_a_static_member_rejoining_during_completing_rebalance_forces_a_rebalance():
    """updateStaticMemberAndRebalance in CompletingRebalance: prepareRebalance, since
    the leader may already be assigning to the old member id."""
    d = Driver()
    ids = static_group(d)
    d.join("s1", member_id=ids["s1"], instance="i1")
    d.join("c2", member_id=ids["c2"])
    assert d.group.state.value == "CompletingRebalance"
    assert d.sync("c2", ids["c2"], 2) == {}
    answers = d.join("s1b", instance="i1")
    assert errors(answers) == {"c2": "REBALANCE_IN_PROGRESS"}
    assert d.group.state.value == "PreparingRebalance"


def test_a_static_member_back_with_another_protocol_choice_forces_a_rebalance():
    """updateStaticMemberAndRebalance in Stable: when the protocol the group would
    select changes, rebalance."""
    d = Driver()
    static_group(d)
    rr, rng = JoinGroupProtocol("roundrobin"), JoinGroupProtocol("range", b"sub:t")
    # c2 supports only range, so the choice stays range: no rebalance
    assert errors(d.join("s1b", instance="i1", protocols=(rr, rng))) == {"s1b": "NONE"}
    assert d.group.state.value == "Stable"
    # alone in group h, a static member preferring roundrobin now changes the choice
    d.join("s", group="h", instance="ih", protocols=(rng, rr))
    first = d.at(d.now)["s"]
    d.sync("s", first.member_id, 1, {first.member_id: b"A"}, group="h")
    back = d.join("s-back", group="h", instance="ih", protocols=(rr, rng))["s-back"]
    assert (back.generation_id, back.protocol_name) == (2, "roundrobin")  # it alone rejoined: at once


def test_a_static_member_leaves_by_its_instance_id():
    """handleLeaveGroup finds a static member by group.instance.id (KIP-345 batch
    leave, v3+), whatever member id the request gives."""
    d = Driver()
    static_group(d)
    left = d.leave("admin", ("", "i1"))["admin"]
    assert [m.error_code.name for m in left.members] == ["NONE"]
    assert "i1" not in d.group.static_members and len(d.group.members) == 1


def test_a_known_member_id_with_an_unknown_instance_id_is_unknown():
    """doJoinGroup: a static member joining with an instance id the group does not
    know -> UNKNOWN_MEMBER_ID, so that it resets its member id."""
    d = Driver()
    ids = static_group(d)
    assert errors(d.join("c2", member_id=ids["c2"], instance="i9")) == {"c2": "UNKNOWN_MEMBER_ID"}


def test_a_static_rejoin_whose_write_fails_gives_the_instance_back_to_its_old_member_id():
    """updateStaticMemberAndRebalance's storeGroup callback: the write failed, so the
    old member id is the instance's again and the new one is told the error."""
    d = Driver(deferred_writes=True)
    ids = static_group_deferred(d)
    assert d.join("s1b", instance="i1") == {}  # waits for the group's write
    (write,) = d.coord.take_writes()
    answers = d._by_dst(d.coord.write_completed(write.token, ErrorCode.NOT_ENOUGH_REPLICAS, d.now))
    assert errors(answers) == {"s1b": "COORDINATOR_NOT_AVAILABLE"} and answers["s1b"].member_id == ""
    assert d.group.static_members["i1"] == ids["s1"] and ids["s1"] in d.group.members
    assert errors(d.heartbeat("s1", ids["s1"], 1, instance="i1")) == {"s1": "NONE"}


def test_a_static_rejoin_write_completing_after_the_group_moved_on_changes_nothing():
    """Kafka would revert on a group that no longer matches (and throw when the new
    member id is gone); here a write that completes after a rebalance, or after the
    member left, changes nothing and answers nobody."""
    for error in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS):
        d = Driver(deferred_writes=True)
        ids = static_group_deferred(d)
        d.join("s1b", instance="i1")
        (write,) = d.coord.take_writes()
        answers = d.leave("c2", (ids["c2"], None))  # c2 leaves: the group rebalances at once
        new_id = d.group.static_members["i1"]
        assert answers["s1b"].generation_id == 2 and answers["s1b"].member_id == new_id
        d.leave("s1b", (new_id, "i1"))  # and the instance leaves too
        assert d._by_dst(d.coord.write_completed(write.token, error, d.now)) == {}
        assert d.group.members == {} and d.group.static_members == {}


def static_group_deferred(d: Driver) -> dict[str, str]:
    """static_group, its writes completed as they come."""
    d.join("s1", instance="i1")
    c2, _ = d.join_with_id("c2")
    ids = {"s1": d.at(d.now)["s1"].member_id, "c2": c2}
    d.sync("c2", c2, 1)
    d.sync("s1", ids["s1"], 1, {ids["s1"]: b"A", c2: b"B"})
    for write in d.coord.take_writes():
        d.coord.write_completed(write.token, ErrorCode.NONE, d.now)
    assert d.group.state.value == "Stable"
    return ids


def test_static_members_that_all_miss_a_rebalance_with_a_zero_timeout_do_not_spin():
    """onCompleteJoin when no member rejoined schedules another DelayedJoin of the
    rebalance timeout; a client may send 0, which would expire at once, forever. Here
    the wait is at least the shortest session timeout, after which the silent static
    members are gone and the group is Empty."""
    d = Driver()
    d.join("s1", instance="i1", rebalance=0)
    d.join("s2", instance="i2", rebalance=0)
    joined = d.at(d.now)
    s1, s2 = joined["s1"].member_id, joined["s2"].member_id
    d.sync("s2", s2, 1)
    d.sync("s1", s1, 1, {s1: b"A", s2: b"B"})
    m3, _ = d.join_with_id("c3", rebalance=0)  # a rebalance the static members miss
    assert errors(d.leave("admin", (m3, None))) == {"c3": "UNKNOWN_MEMBER_ID", "admin": "NONE"}
    assert d.at(d.now) == {}  # the DelayedJoin expired: nobody rejoined
    assert d.group.state.value == "PreparingRebalance" and d.coord.next_deadline() == d.now + 10000
    d.at(d.now + 10000)  # their sessions end: the group empties
    assert (d.group.state.value, d.group.generation_id, d.group.members) == ("Empty", 2, {})
