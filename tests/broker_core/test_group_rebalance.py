"""The group coordinator's rebalance flow, driven with explicit time (issue 24).

Each test names the Kafka 2.7.0 rule it checks, in
core/src/main/scala/kafka/coordinator/group/ (GroupCoordinator.scala unless said).
"""
from broker_core.effects import CancelTimer, SetTimer
from broker_core.group_context import GroupConfig
from broker_core.group_messages import JoinGroupProtocol
from tests.broker_core.groups import REBALANCE, SESSION, Driver, errors


def test_one_member_joins_syncs_and_heartbeats():
    """handleJoinGroup -> doUnknownJoinGroup (v4+: MEMBER_ID_REQUIRED, KIP-394), then
    addMemberAndRebalance, prepareRebalance's InitialDelayedJoin, onCompleteJoin; the
    leader's SyncGroup makes the group Stable (doSyncGroup, setAndPropagateAssignment)."""
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    first = d.join("c1")["c1"]
    assert first.error_code.name == "MEMBER_ID_REQUIRED" and first.member_id.startswith("c1-")
    assert d.join("c1", member_id=first.member_id) == {}  # held for the initial delay
    assert d.group.state.value == "PreparingRebalance"
    assert d.at(2999) == {}
    joined = d.at(3000)["c1"]
    assert (joined.error_code.name, joined.generation_id, joined.leader, joined.member_id) == \
        ("NONE", 1, first.member_id, first.member_id)
    assert joined.protocol_name == "range" and [m.member_id for m in joined.members] == [first.member_id]
    assert d.group.state.value == "CompletingRebalance"
    synced = d.sync("c1", first.member_id, 1, {first.member_id: b"t-0,t-1"})["c1"]
    assert (synced.error_code.name, synced.assignment, synced.protocol_name) == ("NONE", b"t-0,t-1", "range")
    assert d.group.state.value == "Stable"
    assert errors(d.heartbeat("c1", first.member_id, 1)) == {"c1": "NONE"}


def test_a_second_member_makes_the_group_rebalance_and_only_the_leader_gets_the_members():
    """A join in Stable prepares a rebalance; a member's heartbeat then says
    REBALANCE_IN_PROGRESS (handleHeartbeat); once every member has rejoined the
    DelayedJoin completes at once (tryCompleteJoin: hasAllMembersJoined); only the
    leader's JoinGroup response lists the members; a follower's SyncGroup waits for
    the leader's (doSyncGroup, CompletingRebalance)."""
    d = Driver()
    ids = d.stable_group("c1")
    m2, held = d.join_with_id("c2")
    assert held == {} and d.group.state.value == "PreparingRebalance"
    assert errors(d.heartbeat("c1", ids["c1"], 1)) == {"c1": "REBALANCE_IN_PROGRESS"}
    answers = d.join("c1", member_id=ids["c1"])
    assert set(answers) == {"c1", "c2"}
    assert {r.generation_id for r in answers.values()} == {2}
    assert {r.leader for r in answers.values()} == {ids["c1"]}
    assert [m.member_id for m in answers["c1"].members] == [ids["c1"], m2]  # join order
    assert answers["c2"].members == ()
    assert d.sync("c2", m2, 2) == {}  # waits for the leader
    done = d.sync("c1", ids["c1"], 2, {ids["c1"]: b"A", m2: b"B"})
    assert {s: r.assignment for s, r in done.items()} == {"c1": b"A", "c2": b"B"}
    assert d.group.state.value == "Stable" and d.group.generation_id == 2


def test_the_initial_delay_waits_again_while_members_keep_joining():
    """InitialDelayedJoin.onComplete (DelayedJoin.scala): while new members joined
    during the delay and rebalance time remains, wait min(delay, remaining) more, with
    remaining - delay left; here 3000 + 3000 ms before the group's first generation."""
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    d.join_with_id("c1", rebalance=10000)
    d.now = 1000
    d.join_with_id("c2", rebalance=10000)
    assert d.at(3000) == {}  # c2 came during the delay: wait another 3000
    assert d.at(5999) == {}
    answers = d.at(6000)
    assert {s: r.generation_id for s, r in answers.items()} == {"c1": 1, "c2": 1}


def test_the_initial_delay_ends_when_no_member_came_during_it():
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    d.join_with_id("c1")
    assert set(d.at(3000)) == {"c1"}


def test_protocols_all_members_support_are_voted_on():
    """GroupMetadata.selectProtocol: candidates are the protocols every member
    supports; each member votes for the first of its own list among them."""
    d = Driver()
    a, b, c = (JoinGroupProtocol(n) for n in ("range", "roundrobin", "sticky"))
    d.join_with_id("c1", protocols=(a, b, c))
    d.join_with_id("c2", protocols=(b, a))
    d.join_with_id("c3", protocols=(b, a))
    answers = d.at(d.now)
    assert {r.protocol_name for r in answers.values()} == {"roundrobin"}  # 2 votes to 1


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped():
    """onCompleteJoin after the DelayedJoin's rebalance timeout: dynamic members that
    did not rejoin are removed, and the rest form the next generation. c2 is a consumer
    whose heartbeat thread lives while its poll loop is stuck (max.poll.interval.ms is
    the rebalance timeout it sends)."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.now = 100
    assert d.join("c1", member_id=ids["c1"]) == {}  # the leader forces a rebalance
    for t in range(3000, REBALANCE, 3000):  # c2's background heartbeats go on; it does not rejoin
        assert d.at(t) == {}
        assert errors(d.heartbeat("c2", ids["c2"], 1)) == {"c2": "REBALANCE_IN_PROGRESS"}
    assert d.at(100 + REBALANCE - 1) == {}
    answers = d.at(100 + REBALANCE)
    assert set(answers) == {"c1"} and answers["c1"].generation_id == 2
    assert list(d.group.members) == [ids["c1"]]
    assert errors(d.heartbeat("c2", ids["c2"], 1)) == {"c2": "UNKNOWN_MEMBER_ID"}


def test_a_member_without_heartbeats_expires_and_the_rest_rebalance():
    """onExpireHeartbeat -> removeMemberAndUpdateGroup -> maybePrepareRebalance."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    for t in range(3000, SESSION + 1, 3000):
        d.now = t
        d.heartbeat("c1", ids["c1"], 1)
    d.at(SESSION)  # c2's session, started when its SyncGroup was answered at 0
    assert list(d.group.members) == [ids["c1"]] and d.group.state.value == "PreparingRebalance"
    assert errors(d.heartbeat("c1", ids["c1"], 1)) == {"c1": "REBALANCE_IN_PROGRESS"}
    assert d.join("c1", member_id=ids["c1"])["c1"].generation_id == 2


def test_session_expiry_during_completing_rebalance_sends_the_waiting_member_back():
    """A leader that dies after its JoinGroup answer, before its SyncGroup: its session
    expires in CompletingRebalance; prepareRebalance answers the follower's waiting
    SyncGroup REBALANCE_IN_PROGRESS (resetAndPropagateAssignmentError), and the follower
    rejoins to lead generation 3."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])
    d.join("c2", member_id=ids["c2"])
    assert d.group.state.value == "CompletingRebalance" and d.group.generation_id == 2
    assert d.sync("c2", ids["c2"], 2) == {}  # waits; c1 (the leader) is gone
    answers = d.at(SESSION)
    assert errors(answers) == {"c2": "REBALANCE_IN_PROGRESS"}
    assert d.group.state.value == "PreparingRebalance" and list(d.group.members) == [ids["c2"]]
    rejoined = d.join("c2", member_id=ids["c2"])["c2"]
    assert (rejoined.generation_id, rejoined.leader) == (3, ids["c2"])


def test_a_member_waiting_in_a_rebalance_needs_no_heartbeat():
    """MemberMetadata.hasSatisfiedHeartbeat: a member whose JoinGroup is held is not
    expired by its session timeout (only by the rebalance timeout)."""
    d = Driver()
    ids = d.stable_group("c1", "c2")
    d.join("c1", member_id=ids["c1"])  # held: c2 has not rejoined
    d.heartbeat("c2", ids["c2"], 1)
    d.at(SESSION + 1)
    assert ids["c1"] in d.group.members


def test_a_new_member_that_never_completes_its_join_is_dropped_after_five_minutes():
    """addMemberAndRebalance schedules NewMemberJoinTimeoutMs (5 min) for a new member:
    a new member is not excused by waiting (isNew), unlike a known one."""
    d = Driver()
    ids = d.stable_group("c1")
    m2, _ = d.join_with_id("c2", rebalance=10 * 60 * 1000)
    for t in range(3000, 300001, 3000):  # c1 heartbeats, never rejoins
        d.now = t
        d.heartbeat("c1", ids["c1"], 1)
    answers = d.at(300000)
    assert errors(answers) == {"c2": "UNKNOWN_MEMBER_ID"} and answers["c2"].member_id == ""
    assert m2 not in d.group.members


def test_leave_group_v3_takes_a_batch_and_answers_each_member():
    """handleLeaveGroup: each member of the batch has its own error; the leavers are
    removed and the rest rebalance."""
    d = Driver()
    ids = d.stable_group("c1", "c2", "c3")
    answer = d.leave("c2", (ids["c2"], None), (ids["c3"], None), ("nobody", None))["c2"]
    assert answer.error_code.name == "NONE"
    assert [(m.member_id, m.error_code.name) for m in answer.members] == \
        [(ids["c2"], "NONE"), (ids["c3"], "NONE"), ("nobody", "UNKNOWN_MEMBER_ID")]
    assert list(d.group.members) == [ids["c1"]] and d.group.state.value == "PreparingRebalance"


def test_the_last_member_leaving_empties_the_group_with_a_new_generation():
    """initNextGeneration with no members: Empty, and the generation still grows. The
    DelayedJoin prepareRebalance makes completes at once (tryCompleteElseWatch): no
    member is left to wait for."""
    d = Driver()
    ids = d.stable_group("c1")
    d.leave("c1", (ids["c1"], None))
    assert (d.group.state.value, d.group.generation_id, d.group.protocol_name) == ("Empty", 2, None)


def test_a_leader_that_leaves_hands_over_to_the_next_member_in_join_order():
    d = Driver()
    ids = d.stable_group("c1", "c2", "c3")
    d.leave("c1", (ids["c1"], None))
    d.join("c3", member_id=ids["c3"])
    answers = d.join("c2", member_id=ids["c2"])
    assert {r.leader for r in answers.values()} == {ids["c2"]}


def test_timers_are_set_and_cancelled_as_effects_and_a_stale_one_is_ignored():
    d = Driver()
    ids = d.stable_group("c1")
    effects = d.coord.timer_effects()
    key = ("group-heartbeat", "g", ids["c1"])
    assert SetTimer(key, SESSION) in effects
    d.now = 5000
    d.heartbeat("c1", ids["c1"], 1)
    assert d.coord.timer_effects() == [SetTimer(key, 5000 + SESSION)]
    assert d.coord.on_timer(key, SESSION) == [] and ids["c1"] in d.group.members  # the old deadline
    d.leave("c1", (ids["c1"], None))
    assert CancelTimer(key) in d.coord.timer_effects()


def test_member_ids_are_deterministic_from_the_seed():
    def first_id(seed: int) -> str:
        return Driver(member_id_seed=seed).join("c1")["c1"].member_id
    assert first_id(7) == first_id(7) != first_id(8)
