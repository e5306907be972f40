"""The compaction checkers on hand-built histories: each passes on a sound history, fails
on the anomaly it names, counts what an unacknowledged write may explain as unknown
(never as an anomaly), and says "not tested" when it had nothing to judge."""
from __future__ import annotations

import pytest

from analysis.checkers import run_checkers
from analysis.history import build_history
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario
from tests.analysis.builders import HistoryBuilder

COMPACTION = ("compacted_final_values", "resurrected_keys", "compacted_replicas_converge", "offsets_unchanged",
              "keeping_up_consumer_sees_all")


def started(compact: bool = True, retention_ms: int = 1000) -> HistoryBuilder:
    b = HistoryBuilder()
    config = {"cleanup.policy": "compact", "delete.retention.ms": retention_ms} if compact else {}
    b.add(0, "world", "run_started", config={}, topics=[{"name": "t", "partitions": 1, "replication_factor": 2,
                                                         "config": config, "assignment": {"0": [1, 2]}}])
    return b


def send(b: HistoryBuilder, t_ms: int, records: list[tuple[str, str | None]], offset: int | None = None,
         outcome: str | None = "ok", process: str = "producer-0") -> None:
    op = b._op(process)
    b.add(t_ms, process, "invoke", f="send", op=op, partition="t-0", acks=-1, keys=[k for k, _ in records],
          values=[v for _, v in records])
    if outcome is not None:
        fields = {"f": "send", "op": op, "partition": "t-0"}
        if offset is not None:
            fields["offset"] = offset
        b.add(t_ms + 1, process, outcome, **fields)


def read(b: HistoryBuilder, t_ms: int, records: list[tuple[int, str, str | None]], high_watermark: int) -> None:
    op = b._op("reader")
    b.add(t_ms, "reader", "invoke", f="read", op=op, partition="t-0")
    b.add(t_ms + 1, "reader", "ok", f="read", op=op, partition="t-0", records=[[o, v] for o, _, v in records],
          keys=[k for _, k, _ in records], high_watermark=high_watermark)


def poll(b: HistoryBuilder, t_ms: int, records: list[tuple[int, str, str | None]], position: int = 0,
         process: str = "consumer-0") -> None:
    op = b._op(process)
    b.add(t_ms, process, "invoke", f="poll", op=op, positions={"t-0": position})
    b.add(t_ms + 1, process, "ok", f="poll", op=op, records={"t-0": [[o, v] for o, _, v in records]},
          keys={"t-0": [k for _, k, _ in records]}, high_watermarks={"t-0": 99})


def check(b: HistoryBuilder):
    return run_checkers(build_history(b.events))


def sound() -> HistoryBuilder:
    """a1, b1, a2 and a tombstone of b, all acknowledged; a consumer read them as they
    came, and the final read, after cleaning, holds a2 and b's tombstone."""
    b = started()
    send(b, 10, [("a", "a1"), ("b", "b1")], 0)
    send(b, 20, [("a", "a2"), ("b", None)], 2)
    poll(b, 30, [(0, "a", "a1"), (1, "b", "b1"), (2, "a", "a2"), (3, "b", None)])
    read(b, 500, [(2, "a", "a2"), (3, "b", None)], 4)
    for node in ("broker-1", "broker-2"):
        b.add(600, node, "replica_log", partition="t-0", upto_offset=4, key_map_digest="abc", key_map_keys=1,
              chunks=[])
    return b


def test_a_sound_compacted_history_passes_every_compaction_checker():
    results = check(sound())
    for name in COMPACTION:
        assert results[name].valid and results[name].value == 0 and results[name].details["tested"], \
            (name, results[name].explanation)


def test_without_a_compacted_topic_the_checkers_pass_but_say_they_tested_nothing():
    b = started(compact=False)
    send(b, 10, [("a", "a1")], 0)
    read(b, 500, [(0, "a", "a1")], 1)
    results = check(b)
    for name in COMPACTION:
        assert results[name].valid and not results[name].details["tested"]
        assert "not tested: no topic has cleanup.policy compact" in results[name].explanation


def test_a_compacted_topic_with_nothing_to_judge_fails_as_untested():
    b = started()
    send(b, 10, [("a", "a1")], outcome="fail")
    results = check(b)
    for name in COMPACTION:
        assert not results[name].valid and results[name].value == 0, name
        assert results[name].explanation.startswith("not tested: "), results[name].explanation


def test_a_stale_final_value_fails_and_names_the_key_and_both_values():
    b = started()
    send(b, 10, [("a", "a1")], 0)
    send(b, 20, [("a", "a2")], 1)
    read(b, 500, [(0, "a", "a1")], 2)  # a2 was acknowledged at 1 and is gone
    result = check(b)["compacted_final_values"]
    assert result.value == 1 and not result.valid
    example = result.examples[0]
    assert (example["key"], example["kind"], example["read"]) == ("a", "stale_value", {"offset": 0, "value": "a1"})
    assert (example["expected"]["value"], example["expected"]["offset"]) == ("a2", 1)


def test_a_later_value_an_unacknowledged_write_may_have_applied_is_info_not_fail():
    b = started()
    send(b, 10, [("a", "a1")], 0)
    send(b, 20, [("a", "a2")], outcome="info")  # timed out: it may have been appended
    read(b, 500, [(1, "a", "a2")], 2)
    result = check(b)["compacted_final_values"]
    assert result.valid and result.value == 0 and result.details["unknown"] == 1
    # a value no send explains is a failure
    b = started()
    send(b, 10, [("a", "a1")], 0)
    send(b, 20, [("a", "a2")], outcome="fail")  # certainly not appended
    read(b, 500, [(1, "a", "a2")], 2)
    assert check(b)["compacted_final_values"].value == 1


@pytest.mark.parametrize("read_ms,clock_fault,outcome", [(2000, False, "pass"), (500, False, "fail"),
                                                        (500, True, "info")])
def test_a_removed_tombstone_is_fine_only_after_delete_retention(read_ms, clock_fault, outcome):
    """Kafka removes a tombstone no sooner than delete.retention.ms (1 s here) after it was
    appended; a clock fault moves the broker's clock, so early removal is then unknown."""
    b = started(retention_ms=1000)
    if clock_fault:
        b.add(5, "nemesis", "fault_started", fault="clock", fault_id=1)
    send(b, 10, [("a", "a1")], 0)
    send(b, 100, [("a", None)], 1)
    read(b, read_ms, [], 2)
    result = check(b)["compacted_final_values"]
    assert (result.value, result.details["unknown"]) == {"pass": (0, 0), "fail": (1, 0), "info": (0, 1)}[outcome]


def resurrection(final: list, late_write: bool = False) -> HistoryBuilder:
    b = started()
    send(b, 10, [("a", "a1")], 0)
    if late_write:  # sent before the tombstone, outcome unknown: a retry may land after it
        send(b, 50, [("a", "a0")], outcome=None, process="producer-1")
    send(b, 100, [("a", None)], 1)
    poll(b, 200, [(0, "a", "a1"), (1, "a", None)])
    read(b, 1000, final, 3)
    return b


def test_a_key_back_with_an_older_value_after_its_tombstone_was_read_is_resurrected():
    result = check(resurrection([(0, "a", "a1")]))["resurrected_keys"]  # tombstone gone, a1 left
    assert result.value == 1 and not result.valid
    example = result.examples[0]
    assert (example["key"], example["offset"], example["value"]) == ("a", 0, "a1")
    assert example["tombstone"]["offset"] == 1 and example["tombstone_read_ms"] == 201
    assert example["written_by"][0]["offset"] == 0


def test_a_tombstone_cleaned_away_with_its_older_values_is_no_resurrection():
    result = check(resurrection([]))["resurrected_keys"]
    assert result.valid and result.details["tombstones_judged"] == 1


def test_an_older_unacknowledged_write_landing_after_the_tombstone_is_info():
    result = check(resurrection([(1, "a", None), (2, "a", "a0")], late_write=True))["resurrected_keys"]
    assert result.valid and result.value == 0 and result.details["unknown"] == 1


def test_replicas_with_different_key_maps_do_not_converge():
    b = sound()
    b.events[-1].fields["key_map_digest"] = "def"
    result = check(b)["compacted_replicas_converge"]
    assert result.value == 1 and result.examples[0]["replicas"] == [["broker-1"], ["broker-2"]]
    b.events[-1].fields["upto_offset"] = 3  # different ranges: not comparable
    result = check(b)["compacted_replicas_converge"]
    assert not result.valid and result.explanation.startswith("not tested") and "1 not comparable" in \
        result.explanation


def test_a_record_read_at_another_offset_or_offsets_going_back_within_a_read_fail():
    b = sound()
    poll(b, 40, [(3, "a", "a2")], position=3, process="consumer-1")  # a2 was acknowledged and read at 2
    result = check(b)["offsets_unchanged"]
    kinds = sorted(e["kind"] for e in result.examples)
    assert kinds == ["offset_changed", "value_moved"]
    b = sound()
    poll(b, 40, [(2, "a", "a2"), (1, "b", "b1")], process="consumer-1")
    result = check(b)["offsets_unchanged"]
    assert [e["kind"] for e in result.examples] == ["not_increasing"]


def test_a_keeping_up_consumer_must_see_every_acknowledged_record_unless_cleaned_before_it_got_there():
    b = started()
    send(b, 10, [("a", "a1"), ("b", "b1")], 0)
    send(b, 20, [("a", "a2")], 2)
    poll(b, 30, [(0, "a", "a1")])
    poll(b, 60, [(2, "a", "a2")], position=1)  # it never got b1 at offset 1
    result = check(b)["keeping_up_consumer_sees_all"]
    assert result.value == 1 and result.examples[0]["offset"] == 1 and result.examples[0]["value"] == "b1"
    # a cleaning of [0, 2) while the consumer's position was 1: b1 was not required of it
    b.add(40, "broker-1", "segments_cleaned", partition="t-0", end_offset=2)
    result = check(b)["keeping_up_consumer_sees_all"]
    assert result.valid and result.details["excused"] == 1
    # a consumer left behind at the end: what lies past its position is unknown
    b = started()
    send(b, 10, [("a", "a1"), ("b", "b1")], 0)
    poll(b, 30, [(0, "a", "a1")])
    b.add(900, "world", "consumers_behind", waited_ms=1, behind=[["consumer-0", "t-0"]])
    result = check(b)["keeping_up_consumer_sees_all"]
    assert result.valid and result.details["unknown"] == 1


def test_a_simulated_keyed_run_with_tombstones_passes_the_compaction_checkers(tmp_path):
    """Without a cleaner (a later slice) nothing is removed: every checker judges the
    whole log, and the replicas' key -> value digests agree."""
    text = """
name: compacted
cluster: {brokers: 3, topics: [{name: t, partitions: 2, config: {cleanup.policy: compact}}]}
workload:
  producers: [{topic: t, rate: 200, keys: 5, key_distribution: uniform, tombstone_rate: 0.2}]
  consumers: [{topic: t}]
duration: 2s
"""
    result = run_scenario(parse_scenario(text, "compacted.yaml"), 1, tmp_path)
    assert result.passed, result.untested
    for name in COMPACTION:
        assert result.verdict.results[name].details["tested"], name
