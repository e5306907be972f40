"""analysis/checkers/groups.py: on histories built event by event with
analysis/group_history.py's builders, and on what sim/group_member.py writes when it
runs against broker_core's GroupCoordinator (tests/sim/group_world.py)."""
from __future__ import annotations

from analysis import group_history as gh
from analysis.checkers.groups import GROUP_CONSUMED, GROUP_RESULT_NAMES, check_group_consumption
from analysis.checkers.index import build_index
from analysis.history import build_history
from broker_core.types import TopicPartition
from tests.analysis.builders import HistoryBuilder
from tests.sim.group_world import GroupWorld


def results(events) -> dict:
    history = build_history(events)
    answered = check_group_consumption(build_index(history), history)
    assert tuple(r.name for r in answered) == (*GROUP_RESULT_NAMES, GROUP_CONSUMED)
    return {r.name: r for r in answered}


class Group(HistoryBuilder):
    """A history of one group's members, consuming and committing partition t-0."""

    def position(self, t: int, node: str, offset: int, generation: int = 1, reason: str = "committed",
                 partition: str = "t-0") -> "Group":
        return self.add(t, node, gh.GROUP_POSITION, **gh.position("g", node + "-id", generation, partition, offset,
                                                                    reason))

    def consumed(self, t: int, node: str, offsets: list[int], generation: int = 1, partition: str = "t-0") -> "Group":
        return self.add(t, node, gh.GROUP_CONSUMED, **gh.consumed("g", node + "-id", generation, partition, offsets))

    def commit(self, t: int, node: str, offset: int, outcome: str = "ok", error: str | None = None,
               generation: int = 1, mode: str = "sync", done: int | None = None, partition: str = "t-0") -> int:
        op = self._op(node)
        self.add(t, node, "invoke", **gh.commit_invoke(op, "g", node + "-id", generation, mode, {partition: offset}))
        if outcome is not None:
            committed = {partition: offset} if outcome == "ok" else {}
            errors = {partition: error} if error else None
            self.add(done if done is not None else t, node, outcome,
                     **gh.commit_completion(op, "g", committed, errors))
        return op


def test_no_group_events_is_valid_and_says_so():
    b = HistoryBuilder()
    b.send(0, ["a"], offset=0)
    for result in results(b.events).values():
        assert result.valid and result.value == 0 and result.details["no_groups"]


def test_records_consumed_twice_are_counted_with_who_consumed_them():
    b = Group()
    b.position(0, "c0", 0, reason="earliest")
    b.consumed(10, "c0", [0, 1, 2, 3])
    b.commit(11, "c0", 2)
    b.position(20, "c1", 2, generation=2)
    b.consumed(21, "c1", [2, 3, 4], generation=2)
    dup = results(b.events)["group_duplicates"]
    assert (dup.value, dup.valid, dup.details["extra_deliveries"]) == (2, False, 2)
    assert [e["offset"] for e in dup.examples] == [2, 3]
    assert dup.examples[0]["consumed_by"] == [
        {"process": "c0", "member_id": "c0-id", "generation": 1, "t_ms": 10},
        {"process": "c1", "member_id": "c1-id", "generation": 2, "t_ms": 21}]
    consumed = results(b.events)[GROUP_CONSUMED]
    assert (consumed.value, consumed.valid) == (7, True)  # every delivery: 4 + 3, the two duplicates too


def test_one_record_in_two_groups_is_no_duplicate():
    b = Group()
    b.consumed(10, "c0", [0])
    b.add(11, "d0", gh.GROUP_CONSUMED, **gh.consumed("other", "d0-id", 1, "t-0", [0]))
    assert results(b.events)["group_duplicates"].value == 0


def test_records_committed_past_but_never_consumed_are_counted():
    b = Group()
    for offset in range(6):
        b.send(0, [f"v{offset}"], offset=offset)
    b.position(1, "c0", 0, reason="earliest")
    b.consumed(2, "c0", [0, 1])
    b.commit(3, "c0", 5)  # committed before processing 2..4, then crashed
    b.position(4, "c1", 5, generation=2)
    b.consumed(5, "c1", [5])
    lost = results(b.events)["group_unconsumed"]
    assert (lost.value, lost.valid) == (3, False)
    assert [(e["offset"], e["committed"], e["process"]) for e in lost.examples] == [(2, 5, "c0"), (3, 5, "c0"),
                                                                                     (4, 5, "c0")]


def test_unconsumed_counts_only_from_where_the_group_started_and_only_what_exists():
    b = Group()
    b.read(0, [[3, "a"], [4, "b"], [7, "c"]])  # 5 and 6 compacted away or never written
    b.position(1, "c0", 4, reason="latest")
    b.consumed(2, "c0", [4])
    b.commit(3, "c0", 8)
    lost = results(b.events)["group_unconsumed"]
    assert [e["offset"] for e in lost.examples] == [7]


def test_a_commit_with_an_unknown_outcome_is_not_taken_as_committed():
    b = Group()
    b.send(0, ["a", "b", "c"], offset=0)
    b.position(1, "c0", 0, reason="earliest")
    b.commit(2, "c0", 3, outcome="info", error="REQUEST_TIMED_OUT")
    b.commit(3, "c0", 1, outcome="info")
    checked = results(b.events)
    assert checked["group_unconsumed"].value == 0
    assert checked["group_commits_backwards"].value == 0


def test_a_commit_below_the_previous_one_is_counted_in_answer_order():
    b = Group()
    b.commit(10, "c0", 5, outcome="fail", error="COORDINATOR_LOAD_IN_PROGRESS", mode="async")
    b.commit(11, "c0", 8, mode="async")
    b.commit(12, "c0", 5, mode="retry")
    b.commit(13, "c0", 9)
    back = results(b.events)["group_commits_backwards"]
    assert (back.value, back.valid) == (1, False)
    example = back.examples[0]
    assert (example["offset"], example["previous"], example["mode"], example["op"], example["previous_op"]) == \
        (5, 8, "retry", 3, 2)


def test_commits_answered_out_of_invoke_order_are_ordered_by_their_answers():
    b = Group()
    first = b.commit(10, "c0", 5, outcome=None)
    b.commit(11, "c0", 8)
    b.add(12, "c0", "ok", **gh.commit_completion(first, "g", {"t-0": 5}))  # the older one answered last
    assert results(b.events)["group_commits_backwards"].value == 1


def test_the_commit_outcome_is_info_unless_the_coordinator_refused_before_writing():
    assert gh.commit_outcome({}) == "ok"
    assert gh.commit_outcome({"t-0": "ILLEGAL_GENERATION"}) == "fail"
    assert gh.commit_outcome({"t-0": "UNKNOWN_MEMBER_ID", "t-1": "REQUEST_TIMED_OUT"}) == "info"
    for error in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "REQUEST_TIMED_OUT", "UNKNOWN_SERVER_ERROR"):
        assert gh.commit_outcome({"t-0": error}) == "info"


# -- what the group member writes -----------------------------------------------------------
def test_a_sound_group_run_passes_every_group_checker():
    world = GroupWorld(log_end=60)
    world.add("c0", auto_offset_reset="earliest")
    world.add("c1", auto_offset_reset="earliest")
    world.run(2000)
    world.add("c2", auto_offset_reset="earliest")
    world.run(8000)
    checked = results(world.events + world.final_read())
    consumed = checked.pop(GROUP_CONSUMED)
    assert all(r.valid and r.value == 0 for r in checked.values()), checked
    assert consumed.value == sum(world.log_end.values())  # each record of each partition once


def test_a_crash_after_processing_before_the_commit_duplicates():
    world = GroupWorld(log_end=1000)
    world.add("c0", commit="auto", auto_commit_interval_ms=5000, auto_offset_reset="earliest", batch=2)
    world.add("c1", commit="auto", auto_commit_interval_ms=5000, auto_offset_reset="earliest", batch=2)
    world.run(7000)  # auto-commits at 5.1 s; then two more seconds processed and not committed
    world.crash("c1")
    world.run(25000)
    dup = results(world.events + world.final_read())["group_duplicates"]
    assert not dup.valid and dup.value > 0
    assert {(c["process"], c["generation"]) for e in dup.examples for c in e["consumed_by"]} == {("c1", 1), ("c0", 2)}


def test_a_commit_before_processing_then_a_crash_loses_records():
    world = GroupWorld(log_end=1000)
    world.add("c0", commit="none", auto_offset_reset="earliest")
    world.add("c1", commit="none", auto_offset_reset="earliest")
    world.run(1000)
    member = world.member("c1")
    tp = member.assignment[0]
    position = member.fetch_positions()[tp]
    world._route("c1", member.commit_sync(world.now, {tp: position + 10}))  # before processing...
    world.crash("c1")  # ...and never processed
    world.run(15000)
    lost = results(world.events + world.final_read())["group_unconsumed"]
    assert lost.value == 10 and {e["partition"] for e in lost.examples} == {str(tp)}
    assert all(e["generation"] == 1 and e["process"] == "c1" for e in lost.examples)


def test_a_zombie_members_reprocessing_is_a_duplicate_and_its_fenced_commit_changes_nothing():
    world = GroupWorld(log_end=1000)
    world.add("c0", auto_offset_reset="earliest")
    world.add("c1", auto_offset_reset="earliest")
    world.run(1000)
    world.paused.add("c1")
    world.run(16000)
    world.paused.discard("c1")
    world.run(25000)
    checked = results(world.events + world.final_read())
    dup = checked["group_duplicates"]
    assert dup.value == 10  # one batch of 5 records of each of its two partitions
    assert all(e["consumed_by"][-1]["process"] == "c1" and e["consumed_by"][-1]["generation"] == 1
               for e in dup.examples)
    assert checked["group_commits_backwards"].value == 0 and checked["group_unconsumed"].value == 0


def test_the_seed_003_async_retry_is_caught_going_backwards():
    from broker_core.errors import ErrorCode
    world = GroupWorld(log_end=100)
    member = world.add("c0", commit="none", retry_async_commits=True, auto_offset_reset="earliest")
    world.run(500)
    tp = TopicPartition("t", 0)
    world.coord.ownership = lambda group: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    world._route("c0", member.commit_async(world.now, {tp: 5}))
    world.coord.ownership = lambda group: ErrorCode.NONE
    world._route("c0", member.commit_async(world.now, {tp: 8}))
    world.run(700)
    back = results(world.events + world.final_read())["group_commits_backwards"]
    assert back.value == 1 and (back.examples[0]["offset"], back.examples[0]["previous"]) == (5, 8)


def test_members_that_consumed_nothing_tested_nothing():
    """A group that joined and committed but consumed no record: the consumption
    results say so (invalid, tested: false) instead of a vacuous 0."""
    b = Group()
    b.position(0, "c0", 0, reason="earliest")
    b.commit(1, "c0", 0)
    checked = results(b.events)
    for name in ("group_duplicates", "group_unconsumed"):
        result = checked[name]
        assert (result.value, result.valid, result.details["tested"]) == (0, False, False)
        assert result.explanation.startswith("tested nothing: the group members consumed no record")
    assert checked["group_commits_backwards"].valid
    # a commit past records nobody consumed is still an anomaly, not "nothing tested"
    b.send(2, ["a", "b"], offset=0)
    b.commit(3, "c0", 2)
    lost = results(b.events)["group_unconsumed"]
    assert (lost.value, lost.valid) == (2, False) and "tested" not in lost.details
