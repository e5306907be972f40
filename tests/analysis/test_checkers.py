"""The write-side checkers on hand-written histories: lost writes, duplicates,
inconsistent offsets, unseen records and produce error rates."""
from analysis.checkers import CHECKER_NAMES, GROUPS_ONLY, MAPPING_CHECKERS, MAX_EXAMPLES

from tests.analysis.builders import HistoryBuilder, records


def test_every_checker_answers_on_an_empty_history():
    results = HistoryBuilder().check()
    assert tuple(results) == tuple(n for n in CHECKER_NAMES if n not in GROUPS_ONLY)  # no group consumed
    assert all(r.value == (0 if name not in MAPPING_CHECKERS else {}) for name, r in results.items())
    assert results["unseen"].explanation == "no consumers"


# -- lost writes ---------------------------------------------------------------------

def test_acknowledged_values_all_read_back_are_not_lost():
    h = HistoryBuilder()
    h.send(10, ["a", "b"], offset=0)
    h.send(20, ["c"], offset=2, acks=1)
    h.read(100, records(["a", "b", "c"]))
    results = h.check()
    for name in ("lost_writes", "lost_writes_acks_all", "lost_writes_acks_1"):
        assert results[name].value == 0 and results[name].valid
    assert results["lost_writes"].details == {"unknown": 0, "acknowledged_records": 3}


def test_an_acknowledged_value_missing_from_the_final_read_is_lost_with_its_offset():
    h = HistoryBuilder()
    op = h.send(10, ["a", "b"], offset=0, done_ms=15)
    h.send(20, ["c"], offset=2, acks=1)
    h.read(100, records(["a"]) + [[1, "x"], [2, "c"]])
    results = h.check()
    lost = results["lost_writes"]
    assert lost.value == 1 and not lost.valid
    assert lost.examples == ({"t_ms": 15, "process": "producer-0", "op": op, "partition": "t-0",
                              "offset": 1, "value": "b", "acks": "all"},)
    assert results["lost_writes_acks_all"].value == 1
    assert results["lost_writes_acks_1"].value == 0


def test_lost_acks_1_writes_are_counted_apart_from_acks_all():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0, acks=1, partition="t-1")
    h.send(10, ["b"], offset=0, acks=-1, partition="t-0")
    h.read(100, [], partition="t-0", high_watermark=0)
    h.read(100, [], partition="t-1", high_watermark=0)
    results = h.check()
    assert results["lost_writes"].value == 2
    assert [e["value"] for e in results["lost_writes_acks_1"].examples] == ["a"]
    assert [e["value"] for e in results["lost_writes_acks_all"].examples] == ["b"]


def test_failed_unknown_and_unacknowledged_sends_are_never_lost():
    h = HistoryBuilder()
    h.send(10, ["f"], outcome="fail", error="NOT_ENOUGH_REPLICAS")
    h.send(11, ["i"], outcome="info", error="REQUEST_TIMED_OUT")
    h.send(12, ["n"], outcome=None)
    h.send(13, ["z"], outcome="info", acks=0)
    h.send(14, ["m"], offset=-1)  # acknowledged without a real offset
    h.read(100, [], high_watermark=0)
    assert h.check()["lost_writes"].value == 0


def test_values_of_an_unfinished_final_read_are_unknown_not_lost():
    h = HistoryBuilder()
    h.send(10, ["a", "b", "c"], offset=0)
    h.send(10, ["d"], offset=0, partition="t-1")
    h.read(100, records(["a"]), complete=False)  # t-0 gave up after offset 0; t-1 never read
    lost = h.check()["lost_writes"]
    assert lost.value == 0 and lost.valid
    assert lost.details["unknown"] == 3
    assert "3 unknown" in lost.explanation


def test_a_value_read_back_at_another_offset_is_not_lost_but_is_inconsistent():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)
    h.read(100, [[0, "q"], [1, "a"]])
    results = h.check()
    assert results["lost_writes"].value == 0
    assert results["inconsistent_offsets"].value == 1


def test_examples_are_capped_but_the_count_is_not():
    h = HistoryBuilder()
    h.send(10, [f"v{i}" for i in range(25)], offset=0)
    h.read(100, [], high_watermark=0)
    lost = h.check()["lost_writes"]
    assert lost.value == 25
    assert len(lost.examples) == MAX_EXAMPLES
    assert [e["offset"] for e in lost.examples] == list(range(MAX_EXAMPLES))


# -- duplicates ----------------------------------------------------------------------

def test_a_value_at_two_offsets_is_a_duplicate_naming_its_send():
    h = HistoryBuilder()
    op = h.send(10, ["a", "b"], offset=0)
    h.read(100, records(["a", "b", "a", "c", "a"]))
    dup = h.check()["duplicates"]
    assert dup.value == 1
    example = dup.examples[0]
    assert (example["value"], example["partition"], example["offsets"]) == ("a", "t-0", [0, 2, 4])
    assert example["sends"] == [{"process": "producer-0", "op": op, "outcome": "ok", "t_ms": 10}]
    assert dup.details == {"extra_copies": 2}


def test_distinct_values_are_not_duplicates():
    h = HistoryBuilder()
    h.send(10, ["a", "b"], offset=0)
    h.read(100, records(["a", "b"]))
    h.read(100, records(["c", "d"]), partition="t-1")
    assert h.check()["duplicates"].value == 0


# -- inconsistent offsets ----------------------------------------------------------

def test_consistent_acknowledgements_polls_and_read_give_no_inconsistency():
    h = HistoryBuilder()
    h.send(10, ["a", "b"], offset=0)
    h.poll(20, {"t-0": records(["a", "b"])})
    h.read(100, records(["a", "b"]))
    assert h.check()["inconsistent_offsets"].value == 0


def test_an_acknowledgement_and_the_read_disagreeing_on_an_offset():
    h = HistoryBuilder()
    op = h.send(10, ["a", "b"], offset=5, done_ms=12)
    h.read(100, [[5, "a"], [6, "z"]])
    result = h.check()["inconsistent_offsets"]
    assert result.value == 1
    assert result.examples == ({"partition": "t-0", "offset": 6, "values": [
        {"value": "z", "source": "read", "process": "reader", "op": 1, "t_ms": 101},
        {"value": "b", "source": "send", "process": "producer-0", "op": op, "t_ms": 12}]},)


def test_a_poll_and_an_acknowledgement_disagreeing_where_the_read_has_nothing():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=3)
    poll = h.poll(20, {"t-0": [[3, "other"]]}, process="consumer-1")
    h.read(100, [], complete=False)
    result = h.check()["inconsistent_offsets"]
    assert result.value == 1
    values = result.examples[0]["values"]
    assert [(v["value"], v["source"]) for v in values] == [("a", "send"), ("other", "poll")]
    assert values[1]["process"] == "consumer-1" and values[1]["op"] == poll


def test_one_offset_with_three_values_counts_once():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)
    h.poll(20, {"t-0": [[0, "b"]]})
    h.read(100, [[0, "c"]])
    result = h.check()["inconsistent_offsets"]
    assert result.value == 1
    assert [v["value"] for v in result.examples[0]["values"]] == ["c", "a", "b"]


# -- unseen ----------------------------------------------------------------------

def test_unseen_without_consumers_is_zero_with_a_note():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)
    h.read(100, records(["a"]))
    unseen = h.check()["unseen"]
    assert (unseen.value, unseen.valid, unseen.explanation) == (0, True, "no consumers")


def test_acknowledged_values_no_poll_returned_are_unseen():
    h = HistoryBuilder()
    h.send(10, ["a", "b"], offset=0)
    op = h.send(11, ["c"], offset=2, done_ms=13)
    h.send(12, ["never"], outcome="fail", error="NOT_ENOUGH_REPLICAS")
    h.poll(20, {"t-0": records(["a", "b"])})
    h.poll(30, {}, outcome="info")
    unseen = h.check()["unseen"]
    assert unseen.value == 1
    assert unseen.examples == ({"t_ms": 13, "process": "producer-0", "op": op, "partition": "t-0",
                                "offset": 2, "value": "c"},)


def test_everything_polled_leaves_nothing_unseen():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)
    h.poll(20, {"t-0": records(["a"])}, process="consumer-1")
    assert h.check()["unseen"].value == 0


# -- produce rates -----------------------------------------------------------------

def test_produce_error_and_timeout_rates_leave_acks_0_out():
    h = HistoryBuilder()
    for i in range(5):
        h.send(10 + i, [f"ok{i}"], offset=i)
    h.send(20, ["f1"], outcome="fail", error="NOT_ENOUGH_REPLICAS")
    h.send(21, ["f2"], outcome="fail", error="RECORD_LIST_TOO_LARGE")
    h.send(22, ["i1"], outcome="info", error="REQUEST_TIMED_OUT")
    h.send(23, ["i2"], outcome="info", error="NETWORK_EXCEPTION")
    h.send(24, ["i3"], outcome=None)  # no completion: unknown
    h.send(25, ["z1"], outcome="info", acks=0)
    h.send(26, ["z2"], outcome="info", acks=0)
    results = h.check()
    assert results["produce_error_rate"].value == 0.2
    assert results["produce_timeout_rate"].value == 0.3
    assert results["produce_timeout_rate"].details == {"sends": 10, "failed": 2, "unknown": 3, "acks_0_sends": 2}
    assert results["produce_error_rate"].valid


def test_produce_rates_without_sends_are_zero():
    results = HistoryBuilder().check()
    assert results["produce_error_rate"].value == 0.0
    assert results["produce_timeout_rate"].value == 0.0


def test_unseen_against_a_final_read_judges_offset_by_offset():
    h = HistoryBuilder()
    h.send(10, ["a", "b", "c"], offset=0)
    op = h.send(11, ["d", "e"], offset=3, done_ms=14)
    h.poll(20, {"t-0": records(["a", "b", "c", "d"])})
    h.read(100, records(["a", "b", "c", "d", "e"]))
    unseen = h.check()["unseen"]
    assert unseen.value == 1
    assert unseen.examples == ({"t_ms": 14, "process": "producer-0", "op": op, "partition": "t-0",
                                "offset": 4, "value": "e"},)


def test_a_value_polled_at_another_offset_or_copy_was_seen():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)  # the read has "a" at 0 and again at 2; a poll saw the copy at 2
    h.send(11, ["b"], offset=1)  # a poll saw "b", but at an offset where the read has "x"
    h.send(12, ["c"], offset=5)  # acknowledged at 5, read at 3, polled at 3
    h.poll(20, {"t-0": [[2, "a"]]})
    h.poll(21, {"t-0": [[4, "b"]]}, process="consumer-1")
    h.poll(22, {"t-0": [[3, "c"]]}, process="consumer-2")
    h.send(13, ["z"], offset=6)
    h.read(100, records(["a", "b", "a", "c", "x"]))
    unseen = h.check()["unseen"]
    assert [e["value"] for e in unseen.examples] == ["z"]


def test_sends_below_a_trimmed_final_read_are_judged_by_value():
    h = HistoryBuilder()
    op = h.send(10, ["a"], offset=3, done_ms=12)  # the read starts at 5 (retention) and has "a" there
    h.poll(20, {"t-0": [[6, "b"]]})
    h.read(100, [[5, "a"], [6, "b"]])
    results = h.check()
    assert results["lost_writes"].value == 0
    assert results["unseen"].examples == ({"t_ms": 12, "process": "producer-0", "op": op, "partition": "t-0",
                                           "offset": 3, "value": "a"},)


# -- failed but present (issue 8, item 16) -------------------------------------------

def test_a_failed_send_whose_record_is_in_the_final_read_is_failed_but_present():
    """``fail`` means certainly not appended; its unique value in the final read proves
    the client misclassified an error that may follow an append (acks=all and
    NOT_LEADER_OR_FOLLOWER after the leader appended, say)."""
    h = HistoryBuilder()
    h.send(10, ["a"], 0)
    op = h.send(20, ["b", "c"], outcome="fail", error="NOT_LEADER_OR_FOLLOWER")
    h.send(30, ["d"], outcome="fail", error="NOT_ENOUGH_REPLICAS")
    h.read(100, records(["a", "c"]))
    result = h.check()["failed_but_present"]
    assert result.value == 1 and not result.valid
    assert result.examples == ({"t_ms": 21, "process": "producer-0", "op": op, "partition": "t-0", "acks": "all",
                                "error": "NOT_LEADER_OR_FOLLOWER", "reason": None, "present": [[1, "c"]],
                                "values": 2},)
    assert result.details == {"records": 1, "failed_sends": 2}


def test_failed_sends_absent_from_the_read_or_present_in_another_partition_are_fine():
    h = HistoryBuilder()
    h.send(10, ["a"], outcome="fail", error="NOT_ENOUGH_REPLICAS")
    h.send(20, ["b"], outcome="info", error="REQUEST_TIMED_OUT")
    h.read(100, records(["b"]))
    h.read(100, records(["a"]), partition="t-1")
    result = h.check()["failed_but_present"]
    assert result.value == 0 and result.valid


def test_a_failed_value_among_many_confirmed_ones_is_found_by_the_flags():
    """The fast path looks only at offsets no confirmed send explains."""
    h = HistoryBuilder()
    values = [f"v{i}" for i in range(20)]
    for i, value in enumerate(values):
        if i != 13:
            h.send(i, [value], i)
    op = h.send(13, ["v13"], outcome="fail", error="NOT_LEADER_OR_FOLLOWER")
    h.read(100, records(values))
    result = h.check()["failed_but_present"]
    assert result.value == 1 and result.examples[0]["op"] == op and result.examples[0]["present"] == [[13, "v13"]]
