"""DeleteGroups, OffsetDelete and offset expiry mixed into random group requests (issue
24): the requests of tests/properties/test_group_requests.py, plus deletions of groups
and offsets drawn from the same small pools, while offsets expire (a retention of a few
seconds, checked every second) and the writes to __consumer_offsets complete or fail
at random. Whatever comes, the coordinator answers with error codes, not exceptions;
every request is answered exactly once (held ones by unload at the end); and a group
deleted with NONE has no offsets until something commits to it again."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.group_messages import (
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetDeleteTopic)
from tests.properties.depth import examples
from tests.properties.test_group_requests import GROUPS, Answers, request

APPEND_ERRORS = st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS])


@st.composite
def admin_or_group_request(draw, known: list[str], cid: int):
    kind = draw(st.sampled_from(["group", "group", "delete", "offset_delete"]))
    if kind == "delete":
        return DeleteGroupsRequest(cid, tuple(draw(st.lists(GROUPS, max_size=3))))
    if kind == "offset_delete":
        partitions = tuple(draw(st.lists(st.integers(0, 2), max_size=3)))
        return OffsetDeleteRequest(cid, draw(GROUPS), (OffsetDeleteTopic("t", partitions),))
    return draw(request(known, cid))


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_deletes_and_expiry_among_any_requests(data):
    coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=500, offsets_retention_ms=5000,
                                         offsets_retention_check_interval_ms=1000),
                             deferred_writes=data.draw(st.booleans()))
    coord.start_offset_expiration(0)
    answers = Answers()
    committed_since: dict[str, int] = {}  # group -> commits sent since its last successful delete
    now = 0

    def record(out) -> None:
        for response in answers.record(out):
            if isinstance(response, DeleteGroupsResponse):
                for result in response.results:
                    group = coord.groups.get(result.group_id)
                    if result.error_code is ErrorCode.NONE and not committed_since.get(result.group_id):
                        assert group is None or not group.offsets, f"{result.group_id} deleted, offsets remain"

    for cid in range(1, data.draw(st.integers(1, 40)) + 1):
        src = data.draw(st.sampled_from(["a", "b", "c"]))
        req = data.draw(admin_or_group_request(answers.known, cid))
        answers.sent.add((src, cid))
        if isinstance(req, DeleteGroupsRequest):
            for g in req.groups_names:
                committed_since[g] = 0
        elif isinstance(req, OffsetCommitRequest):
            committed_since[req.group_id] = committed_since.get(req.group_id, 0) + 1
        record(coord.handle(src, req, now))
        for write in coord.take_writes():  # completed now, or left pending until the end
            if data.draw(st.booleans()):
                record(coord.write_completed(write.token, data.draw(APPEND_ERRORS), now))
        now += data.draw(st.sampled_from([0, 0, 100, 3000, 12000, 40000]))
        record(coord.advance(now))
    coord.take_writes()
    while coord.ctx.pending_writes:
        record(coord.write_completed(min(coord.ctx.pending_writes), data.draw(APPEND_ERRORS), now))
        coord.take_writes()
    record(coord.unload(list(coord.groups), now))
    answers.check_all_answered()
