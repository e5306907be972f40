"""Group members (sim/group_member.py) under random events, against the core's
GroupCoordinator in tests/sim/group_world.py: members join, close, crash, freeze
(paused), stop polling (stalled), commit, and the coordinator refuses for a while
(loading, not the coordinator) while time advances.

Invariants:
- no call raises, whatever the order of events;
- within one generation, no two members are assigned one partition (what each member
  was told in SyncGroup: ``group_assigned``);
- generation ids a member is assigned in only grow;
- once every member runs normally again and the group had time to settle (a session
  timeout, a rebalance, heartbeats), every partition is owned by exactly one member,
  all in one generation.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker_core.errors import ErrorCode
from broker_core.types import TopicPartition
from tests.properties.depth import machine_settings
from tests.sim.group_world import GroupWorld

NAMES = ["c0", "c1", "c2"]
SESSION = 6000
STEP = 250  # the world's tick: coarser than a poll interval, to keep the machine quick
PARTITIONS = [TopicPartition("t", p) for p in range(5)]
POLICIES = ["after_processing", "before_processing", "auto", "none"]
REFUSALS = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE]


class MemberMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = GroupWorld(partitions={"t": 5}, log_end=200)

    @initialize(commits=st.lists(st.sampled_from(POLICIES), min_size=2, max_size=2))
    def two_members(self, commits):
        """Every run starts with two members: a lone member tests little."""
        for name, commit in zip(NAMES, commits):
            self.start(name, commit, ["range", "roundrobin", "sticky"])

    @rule(name=st.sampled_from(NAMES), commit=st.sampled_from(POLICIES),
          assignors=st.permutations(["range", "roundrobin", "sticky"]))
    def start(self, name, commit, assignors):
        """Every member supports every assignor, in its own order of preference: a
        member without one in common with the group is refused, fatally, by design."""
        if name not in self.world.apps:
            self.world.add(name, commit=commit, session_timeout_ms=SESSION, heartbeat_interval_ms=2000,
                           max_poll_interval_ms=8000, auto_commit_interval_ms=1500, auto_offset_reset="earliest",
                           assignors=tuple(assignors), retry_async_commits=True)

    @precondition(lambda self: self.world.apps)
    @rule(data=st.data())
    def crash(self, data):
        self.world.crash(data.draw(st.sampled_from(sorted(self.world.apps))))

    @precondition(lambda self: self.world.apps)
    @rule(data=st.data())
    def close(self, data):
        name = data.draw(st.sampled_from(sorted(self.world.apps)))
        self.world._route(name, self.world.member(name).close(self.world.now))
        self.world.crash(name)

    @precondition(lambda self: self.world.apps)
    @rule(data=st.data(), frozen=st.booleans())
    def freeze(self, data, frozen):
        name = data.draw(st.sampled_from(sorted(self.world.apps)))
        (self.world.paused if frozen else self.world.stalled).add(name)

    @rule()
    def thaw(self):
        self.world.paused.clear()
        self.world.stalled.clear()

    @precondition(lambda self: self.world.apps)
    @rule(data=st.data(), offset=st.integers(0, 200))
    def commit_async(self, data, offset):
        name = data.draw(st.sampled_from(sorted(self.world.apps)))
        if name not in self.world.paused:
            member = self.world.member(name)
            self.world._route(name, member.commit_async(self.world.now, {PARTITIONS[0]: offset}))

    @rule(error=st.sampled_from(REFUSALS))
    def refuse(self, error):
        self.world.coord.ownership = lambda group: error

    @rule()
    def serve(self):
        self.world.coord.ownership = lambda group: ErrorCode.NONE

    @rule(ms=st.sampled_from([100, 700, 2500, 7000]))
    def wait(self, ms):
        self.world.run(self.world.now + ms, STEP)

    @invariant()
    def one_owner_per_partition_and_generation(self):
        owners: dict[tuple[int, str], str] = {}
        last: dict[str, int] = {}
        for event in self.world.of("group_assigned"):
            generation = event["generation"]
            assert generation >= last.get(event["member_id"], 0), event
            last[event["member_id"]] = generation
            for partition in event["partitions"]:
                other = owners.setdefault((generation, partition), event["member_id"])
                assert other == event["member_id"], (generation, partition, other, event)

    def teardown(self):
        """Everything heals: the group settles with every partition owned once."""
        world = self.world
        world.coord.ownership = lambda group: ErrorCode.NONE
        world.paused.clear()
        world.stalled.clear()
        if not world.apps:
            return
        world.run(world.now + 2 * SESSION + 8000, STEP)
        owners = world.owners()
        assert sorted(owners) == PARTITIONS and all(len(n) == 1 for n in owners.values()), owners
        assert len({world.member(n).generation for n in world.apps}) == 1


TestMemberMachine = MemberMachine.TestCase
TestMemberMachine.settings = machine_settings(100, 30)
