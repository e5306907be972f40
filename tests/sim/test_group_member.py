"""sim/group_member.py against broker_core's GroupCoordinator, both driven in one loop
(tests/sim/group_world.py): joining, rebalancing, leaving, a crash, a zombie fenced by
its generation, the poll timeout, coordinator rediscovery, commits and resets."""
from __future__ import annotations

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.types import TopicPartition
from sim.group_member import GroupMember
from sim.group_member_types import MemberConfig
from tests.sim.group_world import GroupWorld

ALL = [TopicPartition("t", p) for p in range(4)]


def assert_each_owned_once(world: GroupWorld, partitions=ALL) -> None:
    owners = world.owners()
    assert sorted(owners) == sorted(partitions), owners
    assert all(len(names) == 1 for names in owners.values()), owners


def generations(world: GroupWorld, name: str) -> list[int]:
    return [e["generation"] for e in world.of("group_assigned", name)]


def test_two_members_join_one_generation_and_split_the_partitions():
    world = GroupWorld()
    world.add("c0")
    world.add("c1")
    world.run(1000)
    assert_each_owned_once(world)
    assert generations(world, "c0") == generations(world, "c1") == [1]
    leaders = {e["leader"] for e in world.of("group_joined")}
    assert leaders == {world.member("c0").member_id}  # the first to join leads
    # v7 JoinGroup: the first answer is MEMBER_ID_REQUIRED, the member id is the coordinator's
    assert world.member("c1").member_id.startswith("c1-")


def test_a_third_member_joining_revokes_and_reassigns_in_a_new_generation():
    world = GroupWorld(partitions={"t": 6})
    world.add("c0", auto_offset_reset="earliest")
    world.add("c1", auto_offset_reset="earliest")
    world.run(1000)
    world.add("c2", auto_offset_reset="earliest")
    world.run(5000)  # the others learn of the rebalance at their next heartbeat (3 s)
    assert_each_owned_once(world, [TopicPartition("t", p) for p in range(6)])
    assert {len(world.member(n).assignment) for n in ("c0", "c1", "c2")} == {2}
    revoked = world.of("group_revoked")
    assert {(e.node, e["generation"], e["reason"]) for e in revoked} == {("c0", 1, "rebalance"), ("c1", 1, "rebalance")}
    assert generations(world, "c2") == [2] and generations(world, "c0") == [1, 2]
    # the new owners start where the old ones committed (after_processing): nothing twice
    consumed = [(e["partition"], o) for e in world.of("group_consumed") for o in e["offsets"]]
    assert len(consumed) == len(set(consumed)) == 6 * 20


def test_a_member_that_leaves_hands_its_partitions_over_at_once():
    world = GroupWorld()
    world.add("c0")
    world.add("c1")
    world.run(1000)
    world._route("c1", world.member("c1").close(world.now))
    world.crash("c1")  # gone after its LeaveGroup
    world.run(4500)  # c0's next heartbeat (3 s interval) learns of the rebalance
    assert sorted(world.member("c0").assignment) == ALL
    assert world.of("group_left", "c1")[0]["reason"] == "close"
    assert generations(world, "c0") == [1, 2]


def test_a_crashed_member_is_dropped_after_its_session_timeout():
    world = GroupWorld()
    world.add("c0", session_timeout_ms=6000)
    world.add("c1", session_timeout_ms=6000)
    world.run(1000)
    world.crash("c1")
    world.run(6100)
    assert generations(world, "c0") == [1]  # its session (from its sync at 0.2 s) has not expired
    world.run(7000)  # expired at 6.2 s, when c0's heartbeat learns of the rebalance
    assert sorted(world.member("c0").assignment) == ALL
    assert generations(world, "c0") == [1, 2]


def test_a_paused_member_wakes_as_a_zombie_and_its_commit_is_fenced():
    """The member froze past its session; the group moved on without it. Awake, it still
    believes it owns its partitions: it processes a batch again (duplicates) and its
    commit of generation 1 is refused, after which it rejoins having lost them."""
    world = GroupWorld(log_end=1000)
    world.add("c0", auto_offset_reset="earliest", batch=5)
    world.add("c1", auto_offset_reset="earliest", batch=5)
    world.run(1000)
    zombie_owned = list(world.member("c1").assignment)
    world.paused.add("c1")
    world.run(16000)
    assert sorted(world.member("c0").assignment) == ALL and generations(world, "c0") == [1, 2]
    world.paused.discard("c1")
    world.run(16300)  # awake at 16.1 s: its session is over, it looks the coordinator up again
    fenced = [e for e in world.events if e.node == "c1" and e.type == "fail" and e["f"] == "commit"]
    assert fenced and fenced[0]["errors"] == {str(zombie_owned[0]): "UNKNOWN_MEMBER_ID"}
    zombie_batch = [e for e in world.of("group_consumed", "c1") if e.t_ms == 16100]
    assert zombie_batch and all(e["generation"] == 1 for e in zombie_batch)
    world.run(25000)
    lost = world.of("group_revoked", "c1")
    assert lost[-1]["reason"] == "lost" and lost[-1]["generation"] == -1
    assert_each_owned_once(world)
    assert generations(world, "c1")[-1] == generations(world, "c0")[-1] == 3


def test_an_application_that_stops_polling_leaves_the_group_after_max_poll_interval():
    world = GroupWorld()
    world.add("c0", max_poll_interval_ms=5000)
    world.add("c1", max_poll_interval_ms=5000)
    world.run(1000)
    world.stalled.add("c1")  # its heartbeat thread still runs: the session stays alive
    world.run(6500)
    assert [e["reason"] for e in world.of("group_left", "c1")] == ["max_poll_interval"]
    world.run(10000)
    assert sorted(world.member("c0").assignment) == ALL
    world.stalled.discard("c1")
    world.run(16000)  # polling again, it rejoins; its old partitions were lost, not revoked
    assert world.of("group_revoked", "c1")[-1]["reason"] == "lost"
    assert_each_owned_once(world)


def test_members_rediscover_the_coordinator_after_not_coordinator():
    world = GroupWorld()
    world.add("c0")
    world.add("c1")
    world.run(1000)
    world.coord.ownership = lambda group: ErrorCode.NOT_COORDINATOR
    world.coords[2] = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), member_id_seed=2)
    world.coordinator_node = 2
    world.run(8000)
    assert {e["reason"] for e in world.of("group_coordinator_lost")} <= {"NOT_COORDINATOR", "UNKNOWN_MEMBER_ID"}
    assert {e["coordinator"] for e in world.of("group_coordinator_found")} == {1, 2}
    # the new coordinator knows nothing of generation 1: both joined it afresh
    assert generations(world, "c0")[-1] == generations(world, "c1")[-1] == 1
    assert len(generations(world, "c0")) == 2
    assert_each_owned_once(world)


def test_positions_come_from_the_commits_then_from_auto_offset_reset():
    world = GroupWorld(log_end=20)
    world.add("c0", auto_offset_reset="latest", commit="none")
    world.run(500)
    assert {e["reason"] for e in world.of("group_position")} == {"latest"}
    assert world.member("c0").fetch_positions() == {tp: 20 for tp in ALL}
    world._route("c0", world.member("c0").commit_sync(world.now, {ALL[0]: 7}))
    world._route("c0", world.member("c0").close(world.now))
    world.crash("c0")
    world.add("c1", auto_offset_reset="earliest", commit="none")
    world.run(1500)
    positions = {e["partition"]: (e["offset"], e["reason"]) for e in world.of("group_position", "c1")}
    assert positions == {"t-0": (7, "committed"), "t-1": (0, "earliest"), "t-2": (0, "earliest"),
                         "t-3": (0, "earliest")}


def test_auto_commit_commits_positions_every_interval_and_before_a_rebalance():
    world = GroupWorld(log_end=1000)
    world.add("c0", commit="auto", auto_commit_interval_ms=1000, auto_offset_reset="earliest", batch=1)
    world.run(3050)
    autos = [e for e in world.events if e.type == "invoke" and e["f"] == "commit"]
    assert [e.t_ms for e in autos] == [1000, 2000, 3000]  # the first poll at 100 set the timer
    assert all(e["mode"] == "auto" for e in autos)
    world.add("c1", commit="auto", auto_commit_interval_ms=1000, auto_offset_reset="earliest")
    world.run(6000)
    # onJoinPrepare committed c0's positions before it gave its partitions up
    revoke = world.of("group_revoked", "c0")[0]
    before = [e for e in world.events if e.node == "c0" and e.type == "ok" and e.t_ms == revoke.t_ms]
    assert before and set(before[0]["committed"]) == {str(tp) for tp in ALL}
    consumed = [(e["partition"], o) for e in world.of("group_consumed") for o in e["offsets"]]
    assert len(consumed) == len(set(consumed))


def test_a_commit_outside_a_generation_fails_without_being_sent():
    world = GroupWorld()
    member = world.add("c0", commit="none")
    out = member.commit_sync(0, {ALL[0]: 3})
    world._route("c0", out)
    completions = [e for e in world.events if e.type in ("ok", "fail", "info")]
    assert [(e.type, e["reason"]) for e in completions] == [("fail", "not_in_group")]


def test_a_retried_async_commit_lands_after_a_newer_one_and_goes_backwards():
    """Seed 003: commitAsync(X) fails with a retriable error, the application commits
    X+y, then its retry of X succeeds: the committed offset is back at X."""
    world = GroupWorld(log_end=100)
    member = world.add("c0", commit="none", retry_async_commits=True, auto_offset_reset="earliest")
    world.run(500)
    tp = ALL[0]
    world.coord.ownership = lambda group: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    world._route("c0", member.commit_async(world.now, {tp: 5}))
    world.coord.ownership = lambda group: ErrorCode.NONE
    world._route("c0", member.commit_async(world.now, {tp: 8}))
    world.run(700)
    commits = [(e.type, e.get("mode"), e.get("offsets"), e.get("committed")) for e in world.events
               if e.get("f") == "commit"]
    assert commits == [("invoke", "async", {"t-0": 5}, None), ("fail", None, None, {}),
                       ("invoke", "async", {"t-0": 8}, None), ("ok", None, None, {"t-0": 8}),
                       ("invoke", "retry", {"t-0": 5}, None), ("ok", None, None, {"t-0": 5})]
    assert world.coord.groups["g"].offsets[tp].offset == 5


def test_without_the_application_retry_an_async_commit_is_not_sent_again():
    world = GroupWorld(log_end=100)
    member = world.add("c0", commit="none", auto_offset_reset="earliest")
    world.run(500)
    world.coord.ownership = lambda group: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    world._route("c0", member.commit_async(world.now, {ALL[0]: 5}))
    world.coord.ownership = lambda group: ErrorCode.NONE
    world.run(2000)
    assert [e.type for e in world.events if e.get("f") == "commit"] == ["invoke", "fail"]


def test_a_commit_whose_write_times_out_is_unknown_and_a_sync_commit_retries_it():
    world = GroupWorld(deferred_writes=True)
    member = world.add("c0", commit="none")
    world.run(300)
    world.complete_writes()  # the group's metadata after the rebalance
    world.run(600)
    assert member.in_group
    world._route("c0", member.commit_sync(world.now, {ALL[0]: 4}))
    world.complete_writes(ErrorCode.REQUEST_TIMED_OUT)
    world.run(1000)
    world.complete_writes()
    completions = [(e.type, e.get("errors")) for e in world.events if e.get("f") == "commit" and e.type != "invoke"]
    assert completions == [("info", {"t-0": "REQUEST_TIMED_OUT"}), ("ok", None)]
    assert world.of("group_coordinator_lost")[0]["reason"] == "REQUEST_TIMED_OUT"


def test_an_unknown_assignor_name_is_refused_by_the_config():
    try:
        MemberConfig("g", ("t",), assignors=("nonesuch",))
    except ValueError as exc:
        assert "nonesuch" in str(exc)
    else:
        raise AssertionError("accepted an unknown assignor")


def test_a_restarted_static_member_takes_its_place_without_a_rebalance():
    world = GroupWorld()
    world.add("c0", group_instance_id="i0")
    world.add("c1", group_instance_id="i1")
    world.run(1000)
    before = list(world.member("c1").assignment)
    world._route("c1", world.member("c1").close(world.now))
    assert not [e for e in world.events if e.node == "c1" and e.type == "invoke"]  # nothing to commit
    world.crash("c1")  # a static member sends no LeaveGroup: its session holds its place
    world.add("c1", group_instance_id="i1")
    world.run(5000)
    assert world.member("c1").assignment == before
    assert generations(world, "c0") == [1] and generations(world, "c1") == [1, 1]


def test_the_sticky_assignor_keeps_the_survivors_partitions_through_the_member_protocol():
    world = GroupWorld(partitions={"t": 6})
    for name in ("c0", "c1", "c2"):
        world.add(name, assignors=("sticky",))
    world.run(1000)
    kept = {n: set(world.member(n).assignment) for n in ("c0", "c1")}
    world.crash("c2")
    world.run(20000)
    assert_each_owned_once(world, [TopicPartition("t", p) for p in range(6)])
    for name, partitions in kept.items():
        assert partitions <= set(world.member(name).assignment)
    assert {e["protocol"] for e in world.of("group_joined")} == {"sticky"}


def test_a_join_that_gets_no_answer_is_sent_again_after_the_lookup():
    world = GroupWorld()
    member = world.add("c0")
    world.paused.add("c0")  # hold the answers: the runtime gives up on the JoinGroup
    world.run(200)
    world._route("c0", member.poll(world.now))
    joins = [cid for cid, ctx in member.inflight.items() if ctx[0] == "join"]
    world.apps["c0"].inbox.clear()
    world._route("c0", member.on_no_answer(joins[0], world.now))
    world.paused.discard("c0")
    world.run(2000)
    assert world.of("group_coordinator_lost", "c0")[0]["reason"] == "client_timeout"
    assert sorted(member.assignment) == ALL


def _joined_member(leader: str, members=()):
    """A member driven by hand up to its JoinGroup answer (leader ``leader``)."""
    from broker_core.group_messages import JoinGroupResponse
    from broker_core.messages import FindCoordinatorResponse
    member = GroupMember(MemberConfig("g", ("t",)), "c0", {"t": 4})
    find = member.start(0)[0].request
    join = member.on_response(find.correlation_id, FindCoordinatorResponse(find.correlation_id, ErrorCode.NONE, 1),
                              0)
    join = member.poll(1)[0].request
    out = member.on_response(join.correlation_id, JoinGroupResponse(
        join.correlation_id, ErrorCode.NONE, 1, "consumer", "range", leader, "m-0", tuple(members)), 2)
    return member, out


def test_assignment_bytes_a_broker_garbles_fail_the_member_not_the_runtime():
    from broker_core.group_messages import SyncGroupResponse
    member, out = _joined_member("m-1")
    sync = [o.request for o in out if hasattr(o, "request")][0]
    events = member.on_response(sync.correlation_id, SyncGroupResponse(sync.correlation_id, ErrorCode.NONE,
                                                                      assignment=b"\x00\x01\xff"), 3)
    assert [(e.type, e.fields["error"]) for e in events] == [("group_member_failed", "ConsumerProtocolError")]
    assert member.fetch_positions() == {} and member.poll(4) == [] and member.tick(5) == []


def test_a_leader_given_garbled_member_metadata_fails_instead_of_assigning():
    from broker_core.consumer_protocol import encode_subscription
    from broker_core.group_messages import JoinGroupResponseMember
    members = (JoinGroupResponseMember("m-0", None, encode_subscription(["t"])),
               JoinGroupResponseMember("m-1", None, b"\xff\xff"))
    member, out = _joined_member("m-0", members)
    assert [o.type for o in out] == ["group_joined", "group_member_failed"]
    assert out[-1].fields["error"] == "ConsumerProtocolError"
    assert not [o for o in out if hasattr(o, "request")]  # no SyncGroup with a half-made assignment


def test_a_runtime_woken_only_at_next_deadline_keeps_the_group_alive():
    """next_deadline covers heartbeats and the session: woken only then, members stay
    in generation 1 for a minute (session 10 s), and a crash is noticed on time."""
    world = GroupWorld()
    world.add("c0", commit="none")
    world.add("c1", commit="none")
    wakeups = world.run_by_deadlines(60000)
    assert generations(world, "c0") == generations(world, "c1") == [1]
    assert wakeups < 100  # about one per heartbeat of each member, not one per tick
    world.crash("c1")
    world.run_by_deadlines(75000)
    assert sorted(world.member("c0").assignment) == ALL and generations(world, "c0") == [1, 2]


def test_a_paused_static_member_is_fenced_by_its_generation_not_removed():
    """A static member that misses a rebalance keeps its place (and its member id) until
    its session expires, so the group goes on to generation 2 without it. Woken within
    its session, it still works in generation 1: its commit is ILLEGAL_GENERATION, not
    UNKNOWN_MEMBER_ID, and it rejoins in its old place. (Had its heartbeat gone first,
    the heartbeat would have been fenced the same way.)"""
    world = GroupWorld(log_end=1000)
    settings = dict(auto_offset_reset="earliest", session_timeout_ms=30000, max_poll_interval_ms=60000,
                    rebalance_timeout_ms=3000)
    world.add("c0", group_instance_id="i0", **settings)
    world.add("c1", group_instance_id="i1", **settings)
    world.run(1000)
    world.paused.add("c1")
    world.add("c2", group_instance_id="i2", **settings)
    world.run(12000)
    assert world.coord.groups["g"].generation_id == 2 and generations(world, "c1") == [1]
    world.paused.discard("c1")
    world._process("c1")  # awake, its application thread processes and commits before a heartbeat goes
    fenced = [e for e in world.events if e.node == "c1" and e.type == "fail" and e["f"] == "commit"]
    assert list(fenced[0]["errors"].values()) == ["ILLEGAL_GENERATION"]
    # the refusal reset its generation: its next batch's commit is not even sent
    assert fenced[1]["reason"] == "not_in_group"
    assert [e["generation"] for e in world.of("group_consumed", "c1") if e.t_ms == world.now] == [1, -1]
    world.run(20000)
    assert world.of("group_revoked", "c1")[-1]["reason"] == "lost"
    assert_each_owned_once(world)
