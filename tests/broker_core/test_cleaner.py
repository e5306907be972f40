"""The log cleaner's rules, each as Kafka 2.7.0 has it (file and function in each docstring)."""
import pytest

from broker_core.cleaned_batch import CleanedBatch
from broker_core.cleaner import Cleaning, delete_horizon_ms, group_segments_by_size
from broker_core.cleaner_selection import (CleanableLog, LogToClean, SegmentInfo, cleanable_offsets, grab_filthiest,
                                           max_compaction_delay)
from broker_core.config import broker_config, topic_config
from broker_core.types import TopicPartition
from tests.broker_core.compacted_logs import MemoryCompactedLog, compacted

DAY = 86400000
T0 = 1_000_000  # Kafka's horizon of 0 means "keep every tombstone" only as file times are never 0


def three_segments(config, now_ms=0):
    """Segments [0, 3), [3, 6) and the active one from 6: keys a, b, a | b, c, a | a."""
    log = MemoryCompactedLog(config)
    log.append([("a", "a0"), ("b", "b1")], now_ms)
    log.append([("a", "a2")], now_ms)
    log.roll(now_ms)
    log.append([("b", "b3"), ("c", "c4"), ("a", "a5")], now_ms)
    log.roll(now_ms)
    log.append([("a", "a6")], now_ms)
    return log


# -- which offsets, which log -------------------------------------------------------------------
def test_the_checkpoint_is_reset_to_the_log_start_when_out_of_range():
    """LogCleanerManager.scala cleanableOffsets: a checkpoint below the log start or beyond
    the log end restarts at the log start and forces the checkpoint's update."""
    log = three_segments(compacted())
    for checkpoint, first_dirty, force in [(None, 0, False), (3, 3, False), (99, 0, True)]:
        log.checkpoint = checkpoint
        offsets = cleanable_offsets(log.cleanable(), 0)
        assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (first_dirty, force)
    log.log_start_offset, log.checkpoint = 3, 1
    offsets = cleanable_offsets(log.cleanable(), 0)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (3, True)


def test_the_active_segment_is_never_cleanable():
    """LogCleanerManager.scala cleanableOffsets: "the active segment is always uncleanable"."""
    log = three_segments(compacted())
    assert cleanable_offsets(log.cleanable(), 0).first_uncleanable_dirty_offset == 6
    cleaning = log.clean(0)
    assert cleaning is not None and cleaning.next_dirty_offset == 6
    assert [(b.base_offset, b.records) for b in log.segments[-1].batches] == [(6, (("a", "a6", 0),))]
    assert [r for r in log.read_all() if r[1] == "a"] == [(5, "a", "a5"), (6, "a", "a6")]


def test_min_compaction_lag_stops_at_the_first_segment_with_a_recent_record():
    """LogCleanerManager.scala cleanableOffsets: the first dirty non-active segment whose
    largest timestamp is after now - min.compaction.lag.ms is uncleanable, and all after it."""
    log = MemoryCompactedLog(compacted(**{"min.compaction.lag.ms": 100}))
    log.append([("a", "1")], 0)
    log.roll(0)
    log.append([("a", "2")], 50)
    log.roll(50)
    log.append([("a", "3")], 60)
    assert cleanable_offsets(log.cleanable(), 120).first_uncleanable_dirty_offset == 1
    assert cleanable_offsets(log.cleanable(), 150).first_uncleanable_dirty_offset == 2
    assert cleanable_offsets(log.cleanable(), 99).first_uncleanable_dirty_offset == 0  # max(first dirty, ...)
    assert log.choose(99) is None  # nothing cleanable: no bytes in [0, 0)


def test_the_dirty_ratio_must_exceed_min_cleanable_dirty_ratio():
    """LogCleaner.scala LogToClean (cleanableBytes / totalBytes) and LogCleanerManager.scala
    grabFilthiestCompactedLog: a log is cleaned when its ratio is above (not at) the minimum."""
    log = three_segments(compacted())
    log.checkpoint = 3  # segment [0, 3) clean, [3, 6) dirty
    sizes = [s.info().size_bytes for s in log.segments]
    candidate = LogToClean(log.cleanable(), 3, 6)
    assert (candidate.clean_bytes, candidate.cleanable_bytes) == (sizes[0], sizes[1])
    ratio = sizes[1] / (sizes[0] + sizes[1])
    assert candidate.cleanable_ratio == pytest.approx(ratio)
    log.config = compacted(**{"min.cleanable.dirty.ratio": ratio})
    assert log.choose(0) is None
    log.config = compacted(**{"min.cleanable.dirty.ratio": ratio - 0.01})
    assert log.choose(0) is not None


def test_max_compaction_lag_forces_a_log_below_the_ratio():
    """LogCleanerManager.scala maxCompactionDelay and grabFilthiestCompactedLog: a dirty
    segment whose first batch is older than max.compaction.lag.ms makes the log cleanable
    whatever its ratio."""
    log = three_segments(compacted(**{"min.cleanable.dirty.ratio": 1.0, "max.compaction.lag.ms": 1000}), now_ms=10)
    assert log.choose(1010) is None
    assert max_compaction_delay(log.cleanable(), 0, 1011) == 1
    chosen = log.choose(1011)
    assert chosen is not None and chosen.need_compaction_now


def test_the_filthiest_compacted_log_is_chosen_and_ties_go_by_topic_partition():
    """LogCleanerManager.scala grabFilthiestCompactedLog: compacted logs only, none in
    progress, none empty; the highest ratio wins (Scala's max keeps the first of equals:
    isrlab orders logs by topic and partition so that the choice is deterministic)."""
    def log_of(topic, checkpoint, policy="compact"):
        log = three_segments(topic_config(broker_config(), {"cleanup.policy": policy,
                                                            "min.cleanable.dirty.ratio": 0.1}))
        log.tp, log.checkpoint = TopicPartition(topic, 0), checkpoint
        return log.cleanable()
    half, whole = log_of("half", 3), log_of("whole", 0)
    assert grab_filthiest([half, whole], 0).tp.topic == "whole"
    assert grab_filthiest([whole, half], 0, in_progress={TopicPartition("whole", 0)}).tp.topic == "half"
    assert grab_filthiest([log_of("z", 0), log_of("y", 0)], 0).tp.topic == "y"
    assert grab_filthiest([log_of("d", 0, "delete")], 0) is None
    empty = CleanableLog(TopicPartition("e", 0), compacted(), 0, 0, [SegmentInfo(0, 0)])
    assert grab_filthiest([empty], 0) is None
    assert grab_filthiest([log_of("both", 0, "compact,delete")], 0) is not None


def test_segments_are_grouped_up_to_segment_bytes():
    """LogCleaner.scala groupSegmentsBySize: consecutive segments whose sizes sum to at
    most segment.bytes (and indexes to at most the index bound) share one cleaned segment;
    a segment larger than the bound is a group of its own."""
    segments = [SegmentInfo(0, 40), SegmentInfo(10, 50), SegmentInfo(20, 30), SegmentInfo(30, 200),
                SegmentInfo(40, 10, index_bytes=5)]
    groups = group_segments_by_size(segments, 100, 1000, 50)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30], [40]]
    groups = group_segments_by_size(segments[:3], 1000, 0, 50)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20]]
    wide = [SegmentInfo(0, 1), SegmentInfo(2**31 + 5, 1)]
    assert len(group_segments_by_size(wide, 1000, 1000, 2**31 + 10)) == 2


# -- what a cleaning keeps ----------------------------------------------------------------------
def test_the_last_record_per_key_stays_at_its_offset_in_its_batch():
    """LogCleaner.scala shouldRetainRecord and MemoryRecords.java buildRetainedRecordsInto:
    a record stays when its offset is the map's offset for its key; a rewritten batch keeps
    its base offset and last offset (overrideLastOffset)."""
    log = three_segments(compacted())
    log.clean(T0)
    assert log.read_all() == [(3, "b", "b3"), (4, "c", "c4"), (5, "a", "a5"), (6, "a", "a6")]
    log = MemoryCompactedLog(compacted())
    log.append([("a", "a0"), ("b", "b1"), ("c", "c2")], T0)
    log.roll(T0)
    log.append([("a", "a3")], T0)
    log.roll(T0)
    log.append([("x", "x")], T0)
    log.clean(T0)
    assert log.read_all() == [(1, "b", "b1"), (2, "c", "c2"), (3, "a", "a3"), (4, "x", "x")]
    first = log.batches()[0]
    assert isinstance(first, CleanedBatch)
    assert (first.base_offset, first.next_offset, first.offsets) == (0, 3, (1, 2))
    # a later cleaning maps only its dirty range, [4, 6), and removes what it supersedes below
    log.append([("b", "b5")], T0)
    log.roll(T0)
    log.append([("y", "y")], T0)
    log.config = compacted(**{"min.cleanable.dirty.ratio": 0.01})
    assert log.clean(T0).next_dirty_offset == 6
    assert log.read_all() == [(2, "c", "c2"), (3, "a", "a3"), (4, "x", "x"), (5, "b", "b5"), (6, "y", "y")]


def test_a_batch_that_keeps_every_record_is_written_unchanged():
    """MemoryRecords.java filterTo: writeOriginalBatch when no record was filtered out."""
    log = three_segments(compacted())
    second = log.segments[1].batches[0]
    log.clean(0)
    assert any(b is second for b in log.batches())


def test_an_emptied_batch_is_dropped_unless_it_is_a_producers_last():
    """LogCleaner.scala cleanInto (checkBatchRetention: RETAIN_EMPTY for an active
    producer's last batch, DELETE_EMPTY otherwise) and MemoryRecords.java filterTo
    (writeEmptyHeader keeps base offset, last offset, producer id, epoch and sequence)."""
    log = MemoryCompactedLog(compacted())
    log.append([("k", "1"), ("j", "1")], 0, producer_id=7, base_sequence=0)
    log.append([("k", "2")], 0, producer_id=8, base_sequence=0)
    log.append([("k", "3"), ("j", "3")], 0, producer_id=8, base_sequence=1)
    log.append([("m", "4")], 0)
    log.producer_last_offsets = {7: 1}  # producer 8's last batch is elsewhere (it moved on)
    log.roll(0)
    log.append([("k", "5"), ("j", "5")], 0)
    log.clean(0)
    batches = log.batches()
    assert [(b.base_offset, b.next_offset, len(b.records)) for b in batches] == [(0, 2, 0), (3, 5, 2), (5, 6, 1), (6, 8, 2)]
    empty = batches[0]
    assert (empty.producer_id, empty.base_sequence, empty.last_sequence) == (7, 0, 1)
    assert empty.size_bytes < batches[1].size_bytes


def tombstone_history(segment_bytes):
    """A tombstone for k at offset 1, then three more cleanings 600, 2000 and 3000 ms later;
    the horizon each cleaning used, and whether k's tombstone was still there after it."""
    config = compacted(**{"delete.retention.ms": 1000, "segment.bytes": segment_bytes,
                          "min.cleanable.dirty.ratio": 0.01})
    log = MemoryCompactedLog(config)
    log.append([("k", "v"), ("k", None), ("j", "j")], T0)
    log.roll(T0)
    log.append([("x", "x")], T0)
    history = []
    for key, write_ms, clean_ms in [(None, None, T0), ("j", T0 + 500, T0 + 600), ("z", T0 + 2000, T0 + 2000),
                                    ("v", T0 + 3000, T0 + 3000)]:
        if key is not None:
            log.append([(key, key)], write_ms)
            log.roll(write_ms)
            log.append([(key + "'", "next")], write_ms)
        cleaning = log.clean(clean_ms)
        history.append((cleaning.delete_horizon_ms, (1, "k", None) in log.read_all()))
    return history


def test_tombstones_stay_until_delete_retention_past_the_last_clean_segment():
    """LogCleaner.scala Cleaner.clean (deleteHorizonMs = lastModified of the last segment
    below the first dirty offset - delete.retention.ms; 0 when there is none) and
    cleanSegments (a segment last modified after the horizon keeps its tombstones)."""
    # one segment per group (segment.bytes below any segment's size): each keeps its time
    assert tombstone_history(50) == [(0, True), (T0 - 1000, True), (T0 + 500 - 1000, True),
                                     (T0 + 2000 - 1000, False)]


def test_a_tombstone_merged_into_newer_groups_survives_as_in_kafka_2_7():
    """LogCleaner.scala cleanSegments gives a cleaned group the last modified time of its
    last segment, so a tombstone regrouped with newer segments at every cleaning never
    falls behind the horizon: KAFKA-8522, fixed in 3.1 (KIP-534); isrlab models 2.7."""
    assert [kept for _, kept in tombstone_history(1 << 30)] == [True, True, True, True]


def test_keyless_records_are_dropped_and_counted():
    """LogCleaner.scala shouldRetainRecord: a record without a key is invalid on a
    compacted log (stats.invalidMessage) and not kept."""
    log = MemoryCompactedLog(compacted())
    log.append([(None, "lost"), ("k", "kept")], 0)
    log.roll(0)
    log.append([("x", "x")], 0)
    cleaning = log.clean(0)
    assert cleaning is not None and cleaning.stats.invalid_records == 1
    assert log.read_all() == [(1, "k", "kept"), (2, "x", "x")]


def test_horizon_with_no_segment_below_the_first_dirty_offset_is_zero():
    """LogCleaner.scala Cleaner.clean: logSegments(0, firstDirtyOffset).lastOption None -> 0."""
    log = three_segments(compacted())
    assert delete_horizon_ms(LogToClean(log.cleanable(), 0, 6)) == 0
    log.segments[0].last_modified_ms = 5000
    assert delete_horizon_ms(LogToClean(log.cleanable(), 3, 6)) == 5000 - DAY


# -- bounded steps ------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [1, 2, 3, 7])
def test_a_step_does_at_most_its_budget_and_ends_as_one_whole_run(budget):
    """isrlab's own rule (Kafka's cleaner thread runs a cleaning to its end): a cleaning
    in steps of any budget reads each record once per phase and gives the same groups."""
    whole = three_segments(compacted())
    expected = whole.cleaning(whole.choose(0)).run()
    log = three_segments(compacted())
    cleaning = log.cleaning(log.choose(0))
    steps = 0
    while True:
        before = cleaning.stats.map_records_read + cleaning.stats.records_read
        done = cleaning.step(budget)
        assert cleaning.stats.map_records_read + cleaning.stats.records_read - before <= budget
        steps += 1
        if done:
            break
    assert steps >= (6 + 6) // budget
    assert [(g.replaced, g.batches) for g in cleaning.groups] == [(g.replaced, g.batches) for g in expected.groups]
    with pytest.raises(ValueError):
        cleaning.step(0)


def test_an_empty_range_is_refused():
    """A runtime misusing the core raises (ARCHITECTURE.md): grab_filthiest never offers
    a log with nothing to clean, so a Cleaning of one is a caller's mistake."""
    log = three_segments(compacted())
    with pytest.raises(ValueError):
        Cleaning(LogToClean(log.cleanable(), 6, 6), log, {})
