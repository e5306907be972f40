"""Bad input never crashes the group coordinator, and every request is answered once
(issue 24): random sequences of group requests with member ids, generations, instance
ids, protocol types, versions and timeouts drawn from small pools (so that they often
half-match a real member) and time advancing between them. Whatever comes, the
coordinator answers with error codes, not exceptions; each request gets at most one
answer, and after every group is unloaded (onResignation answers what is held) each
got exactly one."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_messages import (
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, ListGroupsRequest, MemberIdentity, OffsetCommitPartition, OffsetCommitRequest,
    OffsetCommitTopic, OffsetFetchRequest, OffsetFetchTopic, SyncGroupAssignment, SyncGroupRequest)
from tests.properties.depth import examples

GROUPS = st.sampled_from(["g", "g", "h", ""])
INSTANCES = st.sampled_from([None, None, "i1", "i2", ""])
GENERATIONS = st.sampled_from([-1, 0, 1, 2, 3])
PROTOCOLS = st.lists(st.sampled_from([JoinGroupProtocol("range", b"x"), JoinGroupProtocol("rr"),
                                      JoinGroupProtocol("range", b"y")]), max_size=3).map(tuple)


def member_ids(known: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(known) if known else st.just("")


@st.composite
def request(draw, known: list[str], cid: int):
    kind = draw(st.sampled_from(["join", "join", "sync", "heartbeat", "leave", "commit", "fetch", "describe", "list"]))
    group, member, instance = draw(GROUPS), draw(member_ids(known)), draw(INSTANCES)
    if kind == "join":
        return JoinGroupRequest(cid, group, draw(st.sampled_from([10000, 6000, 100])), member,
                                draw(st.sampled_from(["consumer", "consumer", "connect", ""])), draw(PROTOCOLS),
                                draw(st.sampled_from([-1, 0, 20000])), instance, draw(st.integers(0, 7)))
    if kind == "sync":
        assignments = tuple(SyncGroupAssignment(m, b"a") for m in draw(st.lists(member_ids(known), max_size=3)))
        return SyncGroupRequest(cid, group, draw(GENERATIONS), member, assignments, instance,
                                draw(st.sampled_from([None, "consumer", "connect"])),
                                draw(st.sampled_from([None, "range", "rr"])))
    if kind == "heartbeat":
        return HeartbeatRequest(cid, group, draw(GENERATIONS), member, instance)
    if kind == "leave":
        leaving = draw(st.lists(st.tuples(member_ids(known), INSTANCES), max_size=3))
        return LeaveGroupRequest(cid, group, tuple(MemberIdentity(m, i) for m, i in leaving))
    if kind == "commit":
        partitions = tuple(OffsetCommitPartition(p, draw(st.integers(-5, 50)),
                                                 committed_metadata=draw(st.sampled_from(["", None, "x" * 5000])))
                           for p in draw(st.lists(st.integers(0, 2), max_size=3)))
        return OffsetCommitRequest(cid, group, (OffsetCommitTopic("t", partitions),), draw(GENERATIONS), member,
                                   instance)
    if kind == "fetch":
        topics = draw(st.sampled_from([None, (OffsetFetchTopic("t", (0, 1, 2)),)]))
        return OffsetFetchRequest(cid, group, topics, draw(st.booleans()))
    if kind == "describe":
        return DescribeGroupsRequest(cid, tuple(draw(st.lists(GROUPS, max_size=3))))
    return ListGroupsRequest(cid, tuple(draw(st.lists(st.sampled_from(["Empty", "Stable", "Dead"]), max_size=2))))


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_any_requests_get_error_codes_and_one_answer_each(data):
    coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=500))
    answers = Answers()
    now = 0
    for cid in range(1, data.draw(st.integers(1, 40)) + 1):
        src = data.draw(st.sampled_from(["a", "b", "c"]))
        req = data.draw(request(answers.known, cid))
        answers.sent.add((src, cid))
        answers.record(coord.handle(src, req, now))
        now += data.draw(st.sampled_from([0, 0, 100, 3000, 12000, 40000]))
        answers.record(coord.advance(now))
    answers.record(coord.unload(list(coord.groups), now))
    answers.check_all_answered()


class Answers:
    """The requests sent to a coordinator and its answers: each answer is to a request
    sent, each request is answered once; the member ids it gave out, for later requests."""

    def __init__(self) -> None:
        self.known: list[str] = []  # member ids the coordinator gave out
        self.answered: dict[tuple[str, int], int] = {}
        self.sent: set[tuple[str, int]] = set()

    def record(self, out) -> list:
        """Check ``out`` (the coordinator's (destination, response) pairs); its responses."""
        for dst, response in out:
            key = (dst, response.correlation_id)
            assert key in self.sent, f"an answer to a request never sent: {key}"
            self.answered[key] = self.answered.get(key, 0) + 1
            assert self.answered[key] == 1, f"two answers to {key}"
            if isinstance(response, JoinGroupResponse) and response.member_id and response.member_id not in self.known:
                self.known.append(response.member_id)
        return [response for _, response in out]

    def check_all_answered(self) -> None:
        assert sorted(self.answered) == sorted(self.sent), f"never answered: {sorted(self.sent - set(self.answered))}"
