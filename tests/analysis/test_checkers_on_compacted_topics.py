"""The checkers written before compaction, taught about it (analysis/checkers/
compacted_removals.py), on hand-built histories: a record a cleaning removed because a
later acknowledged write of its key lay in the cleaned range (Kafka 2.7.0
LogCleaner.scala shouldRetainRecord over buildOffsetMap's map) is not lost, not unseen,
not skipped and not a truncated read; replicas that cleaned differently are not
divergent where their key maps agree. Each test also fails a history where the same
record could not have been removed (no cleaning, a range that ends too soon, a cleaning
after the poll), so the excuse is never blanket."""
from __future__ import annotations

from tests.analysis.builders import HistoryBuilder
from tests.analysis.test_compaction_checkers import check, poll, read, send, started


def cleaned(b, t_ms: int, end_offset: int, node: str = "broker-1") -> None:
    b.add(t_ms, node, "segments_cleaned", partition="t-0", start_offset=0, end_offset=end_offset)


def writes(b) -> None:
    """a1, b1, a2, b2 at offsets 0 to 3, all acknowledged."""
    send(b, 10, [("a", "a1"), ("b", "b1")], 0)
    send(b, 20, [("a", "a2"), ("b", "b2")], 2)


def test_a_record_superseded_in_a_cleaned_range_is_not_lost():
    b = started()
    writes(b)
    cleaned(b, 100, 4)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    result = check(b)["lost_writes"]
    assert result.valid and result.details["removed_by_compaction"] == 2, result


def test_a_missing_record_is_lost_without_a_cleaning_or_when_its_successor_lay_past_the_cleaned_range():
    for end in (None, 2):  # no cleaning; a cleaning of [0, 2), which a2 and b2 lie past
        b = started()
        writes(b)
        if end is not None:
            cleaned(b, 100, end)
        read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
        result = check(b)["lost_writes"]
        assert not result.valid and result.value == 2, (end, result)
        assert "removed_by_compaction" not in result.details
    # the last write of a key (nothing supersedes it) missing is lost, cleaning or not,
    # and so is the write it superseded: a removal is excused only by what survived
    b = started()
    writes(b)
    cleaned(b, 100, 4)
    read(b, 500, [(3, "b", "b2")], 4)
    result = check(b)["lost_writes"]
    assert result.value == 2 and {e["value"] for e in result.examples} == {"a1", "a2"}
    assert result.details["removed_by_compaction"] == 1  # b1, superseded by b2 which is there


def test_a_removed_tombstone_is_excused_only_where_the_delete_held():
    """A tombstone gone from the final read is fine if no older value of its key is
    there; if one is, the delete was lost (the older value is back), and so was the
    tombstone."""
    for held, lost in ((True, 0), (False, 1)):
        b = started()
        send(b, 10, [("z", "z1"), ("a", "a1"), ("a", None)], 0)
        cleaned(b, 100, 3)
        read(b, 500, [(0, "z", "z1")] + ([] if held else [(1, "a", "a1")]), 3)
        result = check(b)["lost_writes"]
        assert result.value == lost, (held, result)


def test_a_record_only_an_unacknowledged_write_may_have_superseded_is_unknown():
    b = started()
    send(b, 10, [("a", "a1"), ("b", "b1")], 0)
    send(b, 20, [("a", "a2")], outcome="info")
    cleaned(b, 100, 3)
    read(b, 500, [(1, "b", "b1"), (2, "a", "a2")], 3)
    result = check(b)["lost_writes"]
    assert result.valid and result.details["unknown"] == 1


def test_a_late_consumer_need_not_see_what_cleaning_removed_but_must_see_the_rest():
    b = started()
    writes(b)
    cleaned(b, 100, 4)
    poll(b, 200, [(2, "a", "a2"), (3, "b", "b2")], position=0)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    result = check(b)["unseen"]
    assert result.valid and result.details["removed_by_compaction"] == 2
    b = started()
    writes(b)
    cleaned(b, 100, 4)
    poll(b, 200, [(3, "b", "b2")], position=3)  # a2, the last value of a, never seen
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    result = check(b)["unseen"]
    assert not result.valid and result.value == 1


def _jump_history(cleaned_at: int | None) -> dict:
    """A consumer reads a1, then (from a replica that cleaned [0, 4)) jumps to a2;
    the final read, from a replica that never cleaned, still holds b1 at offset 1."""
    b = started()
    writes(b)
    poll(b, 30, [(0, "a", "a1")])
    if cleaned_at is not None:
        cleaned(b, cleaned_at, 4)
    poll(b, 50, [(2, "a", "a2"), (3, "b", "b2")], position=1)
    read(b, 500, [(0, "a", "a1"), (1, "b", "b1"), (2, "a", "a2"), (3, "b", "b2")], 4)
    return check(b)


def test_a_jump_over_a_record_cleaning_had_removed_is_no_skip():
    result = _jump_history(40)["consumer_skips"]
    assert result.valid and result.details["removed_by_compaction"] == 1, result


def test_a_jump_over_a_record_not_yet_removed_is_a_skip():
    for cleaned_at in (None, 60):  # no cleaning; a cleaning only after the poll jumped
        result = _jump_history(cleaned_at)["consumer_skips"]
        assert not result.valid and result.details["missed_records"] == 1, (cleaned_at, result)


def test_a_record_read_before_cleaning_removed_it_is_not_a_truncated_read():
    b = started()
    writes(b)
    poll(b, 30, [(0, "a", "a1"), (1, "b", "b1"), (2, "a", "a2"), (3, "b", "b2")])
    cleaned(b, 100, 4)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    result = check(b)["consumer_truncated_reads"]
    assert result.valid and result.details["removed_by_compaction"] == 2
    # the same reads with a range cleaned that ends at 2: a2 and b2 lay past it, so a1
    # and b1 could not have gone, and were truncated
    b = started()
    writes(b)
    poll(b, 30, [(0, "a", "a1"), (1, "b", "b1"), (2, "a", "a2"), (3, "b", "b2")])
    cleaned(b, 100, 2)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    result = check(b)["consumer_truncated_reads"]
    assert not result.valid and result.value == 2


def _replicas(b, digests: dict[str, str]) -> None:
    """Each replica's chunk differs (each cleaned its own way); key maps as given."""
    for i, (node, key_map) in enumerate(sorted(digests.items())):
        b.add(600, node, "replica_log", partition="t-0", upto_offset=4, log_start_offset=0, chunk_size=100,
              chunks=[[0, f"chunk-{i}"]], key_map_digest=key_map, key_map_keys=2)


def test_replicas_cleaned_differently_are_not_divergent_where_their_key_maps_agree():
    b = started()
    writes(b)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    _replicas(b, {"broker-1": "same", "broker-2": "same"})
    results = check(b)
    assert results["divergence"].valid and results["divergence"].details["compacted_key_maps_agree"] == 1
    assert results["compacted_replicas_converge"].valid


def test_replicas_whose_key_maps_differ_are_divergent():
    b = started()
    writes(b)
    read(b, 500, [(2, "a", "a2"), (3, "b", "b2")], 4)
    _replicas(b, {"broker-1": "one", "broker-2": "other"})
    results = check(b)
    assert not results["divergence"].valid and not results["compacted_replicas_converge"].valid
    # a topic that is not compacted has no key maps: differing chunks are divergence
    b = started(compact=False)
    writes(b)
    for i, node in enumerate(("broker-1", "broker-2")):
        b.add(600, node, "replica_log", partition="t-0", upto_offset=4, log_start_offset=0, chunk_size=100,
              chunks=[[0, f"chunk-{i}"]])
    assert not check(b)["divergence"].valid


def test_without_compaction_a_missing_record_is_lost_even_with_a_cleaning_event():
    """A segments_cleaned line on a topic that is not compacted excuses nothing."""
    b = started(compact=False)
    writes(b)
    cleaned(b, 100, 4)
    read(b, 500, [(0, "a", "a1"), (3, "b", "b2")], 4)
    result = check(b)["lost_writes"]
    assert not result.valid and result.value == 2


def test_below_the_first_record_read_retention_excuses_only_a_topic_whose_policy_deletes():
    """cleanup.policy compact alone never deletes segments (Log.deleteOldSegments runs
    only with delete), so a record below the final read's first one that no later write
    superseded is lost; with compact,delete it may have been deleted by retention."""
    for policy, lost in (("compact", 1), ("compact,delete", 0)):
        b = HistoryBuilder()
        b.add(0, "world", "run_started", config={}, topics=[{
            "name": "t", "partitions": 1, "replication_factor": 2, "assignment": {"0": [1, 2]},
            "config": {"cleanup.policy": policy, "delete.retention.ms": 1000}}])
        send(b, 10, [("z", "z1"), ("a", "a1"), ("a", "a2")], 0)
        cleaned(b, 100, 3)
        read(b, 500, [(2, "a", "a2")], 3)
        result = check(b)["lost_writes"]
        assert result.value == lost, (policy, result)
        assert result.details["removed_by_compaction"] == 1  # a1, superseded by a2
