"""The consumer checkers on hand-written histories: non-monotonic offsets, skips,
truncated reads and high watermark regressions."""
from analysis.checkers.consumers import is_reset

from tests.analysis.builders import HistoryBuilder, records

SIX = records(["a", "b", "c", "d", "e", "f"])


def test_a_consumer_reading_in_order_raises_nothing():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:2], "t-1": records(["x"])}, {"t-0": 2, "t-1": 1})
    h.poll(20, {"t-0": SIX[2:]}, {"t-0": 6})
    h.read(100, SIX)
    h.read(100, records(["x"]), partition="t-1")
    results = h.check()
    for name in ("consumer_non_monotonic", "consumer_skips", "consumer_truncated_reads", "hw_regressions"):
        assert results[name].value == 0 and results[name].valid, name


# -- non-monotonic -------------------------------------------------------------------

def test_an_offset_at_or_below_the_previous_one_is_non_monotonic():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:3]})
    op = h.poll(20, {"t-0": SIX[1:2]})
    h.read(100, SIX)
    result = h.check()["consumer_non_monotonic"]
    assert result.value == 1 and not result.valid
    assert result.examples == ({"t_ms": 21, "process": "consumer-0", "op": op, "partition": "t-0",
                                "offset": 1, "previous_offset": 2, "value": "b"},)


def test_a_repeated_offset_within_one_poll_is_non_monotonic():
    h = HistoryBuilder()
    h.poll(10, {"t-0": [[0, "a"], [1, "b"], [1, "b"]]})
    assert h.check()["consumer_non_monotonic"].value == 1


def test_an_offset_out_of_range_reset_excuses_going_back():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:4]})
    h.poll(20, {}, errors={"t-0": "OFFSET_OUT_OF_RANGE"})
    h.poll(30, {"t-0": SIX[2:]})
    h.read(100, SIX)
    assert h.check()["consumer_non_monotonic"].value == 0


def test_other_errors_do_not_excuse_going_back():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:4]})
    h.poll(20, {}, errors={"t-0": "NOT_LEADER_OR_FOLLOWER"})
    h.poll(30, {"t-0": SIX[2:]})
    assert h.check()["consumer_non_monotonic"].value == 1


def test_a_reset_on_one_partition_does_not_excuse_another():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:4], "t-1": SIX[:4]})
    h.poll(20, {}, errors={"t-1": "OFFSET_OUT_OF_RANGE"})
    h.poll(30, {"t-0": SIX[:1], "t-1": SIX[:1]})
    examples = h.check()["consumer_non_monotonic"].examples
    assert [e["partition"] for e in examples] == ["t-0"]


def test_consumers_and_partitions_are_judged_separately():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:4]}, process="consumer-0")
    h.poll(11, {"t-0": SIX[:2], "t-1": SIX[:1]}, process="consumer-1")
    h.poll(12, {"t-1": SIX[:2]}, process="consumer-0")
    assert h.check()["consumer_non_monotonic"].value == 0


def test_polls_are_judged_in_completion_order():
    h = HistoryBuilder()
    h.add(10, "consumer-0", "invoke", f="poll", op=1, positions={"t-0": 0})
    h.add(11, "consumer-0", "invoke", f="poll", op=2, positions={"t-1": 0})
    h.add(20, "consumer-0", "ok", f="poll", op=2, records={"t-0": SIX[2:4]}, high_watermarks={})
    h.add(30, "consumer-0", "ok", f="poll", op=1, records={"t-0": SIX[4:]}, high_watermarks={})
    assert h.check()["consumer_non_monotonic"].value == 0


def test_is_reset_names_only_offset_out_of_range():
    assert is_reset("OFFSET_OUT_OF_RANGE") and is_reset("OffsetOutOfRangeError")
    assert not is_reset("NOT_LEADER_OR_FOLLOWER") and not is_reset("UNKNOWN_TOPIC_OR_PARTITION")


# -- skips -------------------------------------------------------------------------

def test_jumping_over_records_the_final_read_has_is_a_skip():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:2]})
    op = h.poll(20, {"t-0": SIX[4:]})
    h.read(100, SIX)
    result = h.check()["consumer_skips"]
    assert result.value == 1 and not result.valid
    assert result.examples == ({"t_ms": 21, "process": "consumer-0", "op": op, "partition": "t-0",
                                "kind": "jump", "from_offset": 1, "to_offset": 4, "missed_count": 2,
                                "missed": [[2, "c"], [3, "d"]]},)
    assert result.details == {"missed_records": 2, "replaced_records": 0}


def test_a_gap_the_final_read_also_has_is_not_a_skip():
    h = HistoryBuilder()
    h.poll(10, {"t-0": [[0, "a"], [1, "b"]]})
    h.poll(20, {"t-0": [[5, "f"]]})
    h.read(100, [[0, "a"], [1, "b"], [5, "f"]])
    assert h.check()["consumer_skips"].value == 0


def test_a_gap_after_a_reset_is_not_a_skip():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:2]})
    h.poll(20, {}, errors={"t-0": "OFFSET_OUT_OF_RANGE"})
    h.poll(30, {"t-0": SIX[5:]})
    h.read(100, SIX)
    assert h.check()["consumer_skips"].value == 0


def test_skips_within_one_poll_are_found_and_listed_up_to_five():
    h = HistoryBuilder()
    many = records([f"v{i}" for i in range(20)])
    h.poll(10, {"t-0": [many[0], many[19]]})
    h.read(100, many)
    example = h.check()["consumer_skips"].examples[0]
    assert example["missed_count"] == 18
    assert [o for o, _ in example["missed"]] == [1, 2, 3, 4, 5]


# -- truncated reads --------------------------------------------------------------

def test_a_record_read_then_replaced_in_the_log_is_a_truncated_read():
    h = HistoryBuilder()
    op = h.poll(10, {"t-0": [[0, "a"], [1, "lost"]]}, process="consumer-2")
    h.read(100, [[0, "a"], [1, "b"]])
    result = h.check()["consumer_truncated_reads"]
    assert result.value == 1
    assert result.examples == ({"t_ms": 11, "process": "consumer-2", "op": op, "partition": "t-0",
                                "offset": 1, "value": "lost", "final_value": "b"},)


def test_a_record_read_past_the_final_high_watermark_is_a_truncated_read():
    h = HistoryBuilder()
    h.poll(10, {"t-0": records(["a", "b", "c"])})
    h.read(100, records(["a", "b"]), high_watermark=2)
    result = h.check()["consumer_truncated_reads"]
    assert [(e["offset"], e["value"], e["final_value"]) for e in result.examples] == [(2, "c", None)]


def test_the_same_truncated_record_seen_twice_counts_once():
    h = HistoryBuilder()
    h.poll(10, {"t-0": [[0, "x"]]}, process="consumer-0")
    h.poll(10, {"t-0": [[0, "x"]]}, process="consumer-1")
    h.read(100, [[0, "a"]])
    assert h.check()["consumer_truncated_reads"].value == 1


def test_what_an_unfinished_or_trimmed_final_read_cannot_tell_is_unknown():
    h = HistoryBuilder()
    h.poll(10, {"t-0": [[0, "old"], [7, "a"], [9, "late"]], "t-9": [[0, "q"]]})
    h.read(100, [[5, "x"], [6, "y"], [7, "a"]], complete=False)  # starts at 5 (retention), gave up at 8
    result = h.check()["consumer_truncated_reads"]
    assert result.value == 0 and result.valid
    assert result.details == {"unknown": 3}


# -- high watermark regressions ----------------------------------------------------

def test_a_high_watermark_below_an_earlier_one_is_a_regression():
    h = HistoryBuilder()
    first = h.poll(10, {}, {"t-0": 5})
    h.poll(20, {}, {"t-0": 7})
    h.poll(30, {}, {"t-0": 7})
    low = h.poll(40, {}, {"t-0": 6})
    result = h.check()["hw_regressions"]
    assert first == 1
    assert result.value == 1 and not result.valid
    assert result.examples == ({"t_ms": 41, "process": "consumer-0", "op": low, "partition": "t-0",
                                "high_watermark": 6, "earlier_high_watermark": 7, "earlier_op": 2},)


def test_high_watermarks_of_other_consumers_or_partitions_do_not_compare():
    h = HistoryBuilder()
    h.poll(10, {}, {"t-0": 9, "t-1": 3}, process="consumer-0")
    h.poll(20, {}, {"t-0": 2, "t-1": 4}, process="consumer-1")
    h.poll(30, {}, {"t-1": 5}, process="consumer-0")
    assert h.check()["hw_regressions"].value == 0


def test_a_skip_counts_only_the_offsets_the_final_read_has():
    h = HistoryBuilder()
    h.poll(10, {"t-0": SIX[:5]})
    op = h.poll(20, {"t-0": [[9, "late"]]})  # past the read's end: only offset 5 was missed
    h.read(100, SIX)
    result = h.check()["consumer_skips"]
    assert result.value == 1
    assert result.examples[0]["op"] == op
    assert (result.examples[0]["missed_count"], result.examples[0]["missed"]) == (1, [[5, "f"]])
    h2 = HistoryBuilder()
    h2.poll(10, {"t-0": [[7, "x"]]})
    h2.poll(20, {"t-0": [[9, "y"]]})  # a jump wholly past the read's end misses nothing
    h2.read(100, SIX)
    assert h2.check()["consumer_skips"].value == 0


# -- skips by a replaced log (issue 8, item 17) --------------------------------------

OLD = records(["a", "b", "old-c", "old-d"])
NEW = records(["a", "b", "c", "d", "e", "f"])


def test_records_replaced_under_a_consumers_position_are_skipped():
    """The log under the consumer was truncated and rewritten (an unclean election, or
    a 2.7 consumer without KIP-320's check): it read old-c, old-d at 2, 3, then e, f
    at 4, 5, so its offsets never jumped, yet it never got c and d."""
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD})
    op = h.poll(20, {"t-0": NEW[4:]})
    h.read(100, NEW)
    result = h.check()["consumer_skips"]
    assert result.value == 1 and not result.valid
    assert result.examples == ({"t_ms": 21, "process": "consumer-0", "op": op, "partition": "t-0",
                                "kind": "replaced", "from_offset": 2, "to_offset": 4, "missed_count": 2,
                                "missed": [[2, "c"], [3, "d"]], "read_instead": [[2, "old-c"], [3, "old-d"]]},)
    assert result.details == {"missed_records": 2, "replaced_records": 2}


def test_a_truncation_reset_then_reading_the_new_records_is_no_skip():
    """KIP-320: the consumer detects the truncation and moves back to offset 2, written
    as a position_reset line before its next fetch; it then reads c and d."""
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD}, positions={"t-0": 0})
    h.reset(15, to_offset=2, from_offset=4)
    h.poll(20, {"t-0": NEW[2:]}, positions={"t-0": 2})
    h.read(100, NEW)
    results = h.check()
    assert results["consumer_skips"].value == 0
    assert results["consumer_non_monotonic"].value == 0  # the reset excuses going back to 2


def test_reading_the_final_record_elsewhere_in_the_same_stretch_is_no_skip():
    """Going back without a reset is non-monotonic, but the record was read."""
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD})
    h.poll(20, {"t-0": NEW[2:]})
    h.read(100, NEW)
    results = h.check()
    assert results["consumer_skips"].value == 0
    assert results["consumer_non_monotonic"].value == 1


def test_records_replaced_before_the_last_reset_are_not_judged():
    """Since its last reset: a consumer whose position restarted at 4 (out of range)
    is not asked for what lies below 4."""
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD})
    h.reset(15, to_offset=4, from_offset=4, reason="out_of_range")
    h.poll(20, {"t-0": NEW[4:]})
    h.read(100, NEW)
    assert h.check()["consumer_skips"].value == 0


def test_a_reset_that_comes_after_a_poll_was_invoked_does_not_apply_to_it():
    """The fetch took its position when it was invoked; a reset written while it was in
    flight restarts only the fetches after it."""
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD})
    h.add(20, "consumer-0", "invoke", f="poll", op=2, positions={"t-0": 4})
    h.reset(21, to_offset=2, from_offset=4)
    h.add(22, "consumer-0", "ok", f="poll", op=2, records={"t-0": NEW[4:]}, high_watermarks={})
    h.read(100, NEW)
    assert h.check()["consumer_skips"].details["replaced_records"] == 2


def test_a_first_record_above_the_reset_offset_is_a_jump():
    """After a reset to 0 the consumer fetches at 0; getting offset 2 first means it
    jumped over 0 and 1."""
    h = HistoryBuilder()
    h.reset(0, to_offset=0, reason="initial")
    op = h.poll(10, {"t-0": NEW[2:]})
    h.read(100, NEW)
    result = h.check()["consumer_skips"]
    assert result.value == 1
    assert (result.examples[0]["kind"], result.examples[0]["op"], result.examples[0]["missed"]) == \
           ("jump", op, [[0, "a"], [1, "b"]])


def test_resets_of_one_consumer_or_partition_do_not_touch_another():
    h = HistoryBuilder()
    h.poll(10, {"t-0": OLD}, process="consumer-1")
    h.reset(15, to_offset=2, process="consumer-0")
    h.reset(15, to_offset=2, partition="t-1", process="consumer-1")
    h.poll(20, {"t-0": NEW[4:]}, process="consumer-1")
    h.read(100, NEW)
    result = h.check()["consumer_skips"]
    assert result.details["replaced_records"] == 2 and result.examples[0]["process"] == "consumer-1"
