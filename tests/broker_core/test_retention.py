"""Segments and retention (issue 22), each rule with the Kafka 2.7.0 file and function it
follows: segments roll by size and by age (LogSegment.shouldRoll), retention deletes
whole segments oldest first by time and by size below the high watermark
(Log.deleteOldSegments and its rules), the log start moves, fetches below it are out of
range, followers take the leader's log start, a restart keeps it."""
from __future__ import annotations

from broker_core.config import LOG_FLUSHER_INITIAL_DELAY_MS, broker_config
from broker_core.errors import ErrorCode
from broker_core.log_manager import LOG_START_CHECKPOINT, decode_offset_checkpoint
from broker_core.messages import CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, FetchPartition, FetchRequest, ListOffsetsRequest
from broker_core.records import Record, RecordBatch
from broker_core.retention import delete_old_segments
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog
from tests.harness import Cluster

TP = TopicPartition("t", 0)
# One record of the harness's (no key, a value standing for 10 bytes) in a v2 batch:
# 61 header bytes, a 1-byte length and a 16-byte body.
BATCH_BYTES = 78


def one_record(log: AppliedLog, now_ms: int = 0, max_timestamp: int = -1) -> None:
    batch = RecordBatch(0, -1, (Record(None, f"v{log.log_end_offset}", 10),), max_timestamp=max_timestamp)
    log.append_as_leader(batch, 0, now_ms)


def test_one_record_is_the_v2_size_the_tests_count():
    assert RecordBatch(0, 0, (Record(None, "v0", 10),)).size_bytes == BATCH_BYTES


def test_a_segment_rolls_when_the_next_batch_would_pass_segment_bytes():
    """2.7.0 LogSegment.shouldRoll: size > maxSegmentBytes - messagesSize (v2 bytes)."""
    log = AppliedLog(TP, segment_bytes=3 * BATCH_BYTES)
    for _ in range(7):
        one_record(log)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [s.log_bytes for s in log.segments] == [3 * BATCH_BYTES, 3 * BATCH_BYTES, BATCH_BYTES]
    assert [t.fields["reason"] for t in log.roll_traces()] == ["size", "size"]


def test_without_timestamps_a_segment_rolls_segment_ms_after_it_was_created():
    """2.7.0 LogSegment.timeWaitedForRoll: with no timestamp in its first batch, now
    less the segment's creation time; it rolls when that passes segment.ms - jitter."""
    log = AppliedLog(TP, segment_bytes=1 << 30)
    log.roll_ms = 100
    one_record(log, now_ms=1000)
    one_record(log, now_ms=1100)  # waited 100: not more than segment.ms
    assert len(log.segments) == 1
    one_record(log, now_ms=1101)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.segments[1].created_ms == 1101
    assert [(t.fields["base_offset"], t.fields["reason"]) for t in log.roll_traces()] == [(2, "time")]
    log.roll_jitter_ms = 40  # segment.ms - jitter: 60
    one_record(log, now_ms=1162)
    assert len(log.segments) == 3


def test_with_timestamps_a_segment_rolls_on_the_batches_time_not_the_clock():
    """2.7.0 LogSegment.timeWaitedForRoll: the new batch's max timestamp less the first
    batch's (rollingBasedTimestamp), whatever the broker's clock says."""
    log = AppliedLog(TP, segment_bytes=1 << 30)
    log.roll_ms = 100
    one_record(log, now_ms=0, max_timestamp=5000)
    one_record(log, now_ms=10_000, max_timestamp=5100)  # the clock moved 10 s; the batches 100 ms
    assert len(log.segments) == 1
    one_record(log, now_ms=10_000, max_timestamp=5101)
    assert len(log.segments) == 2


def _filled(segments: int, per_segment: int = 2, now_ms: int = 0) -> AppliedLog:
    log = AppliedLog(TP, segment_bytes=per_segment * BATCH_BYTES)
    for _ in range(segments * per_segment):
        one_record(log, now_ms)
    log.high_watermark = log.log_end_offset
    log.roll_traces()  # a partition traces the rolls of its appends
    return log


def test_retention_bytes_deletes_the_oldest_segments_until_the_log_fits():
    """2.7.0 Log.deleteRetentionSizeBreachedSegments: while size - segment.size stays
    >= retention.bytes, the oldest segment goes; the files go with it and the log start
    moves to the first segment left (Log.deleteSegments, maybeIncrementLogStartOffset)."""
    log = _filled(5)
    config = broker_config("kafka-2.7", {"log.retention.bytes": 5 * BATCH_BYTES})
    deleted_paths = [s.path for s in log.segments[:2]]
    effects = delete_old_segments(log, 0, config)
    assert [s.base_offset for s in log.segments] == [4, 6, 8]
    assert log.log_start_offset == 4
    assert not set(deleted_paths) & set(log.disk.files)
    [trace] = [e for e in effects if getattr(e, "type", None) == "segments_deleted"]
    assert trace.fields == {"partition": "t-0", "reason": "retention_bytes", "base_offsets": [0, 2],
                            "deleted_bytes": 4 * BATCH_BYTES, "log_start_offset": 4}
    assert log.records()[0][0] == 4  # reads start at the new log start


def test_retention_never_passes_the_high_watermark():
    """2.7.0 Log.deletableSegments: only segments whose next one starts at or below the
    high watermark (highWatermark >= upperBoundOffset), so the log start never passes it."""
    log = _filled(5)
    log.high_watermark = 5
    delete_old_segments(log, 0, broker_config("kafka-2.7", {"log.retention.bytes": 0}))
    assert log.log_start_offset == 4 and log.segments[0].base_offset == 4


def test_retention_ms_deletes_segments_by_their_largest_timestamp():
    """2.7.0 Log.deleteRetentionMsBreachedSegments: now - segment.largestTimestamp >
    retention.ms; LogSegment.largestTimestamp is the max timestamp, or without one the
    file's last modification (here: the time of its last append)."""
    log = AppliedLog(TP, segment_bytes=2 * BATCH_BYTES)
    for now in (0, 100, 200, 300, 400):
        one_record(log, now)
    one_record(log, 400, max_timestamp=50)  # segment [4, 6) holds a timestamp: 50 counts, not 400
    log.high_watermark = log.log_end_offset
    config = broker_config("kafka-2.7", {"log.retention.ms": 1000})
    assert delete_old_segments(log, 1100, config) == []  # 1100 - 100 is not more than 1000
    delete_old_segments(log, 1101, config)
    assert log.log_start_offset == 2
    # [2, 4) was last written at 300; [4, 6) at 400, but its largest timestamp is 50:
    # both are breached, so all goes (an empty segment is rolled first).
    delete_old_segments(log, 1301, config)
    assert log.log_start_offset == 6 and [s.base_offset for s in log.segments] == [6]


def test_when_every_segment_is_breached_an_empty_one_is_rolled_first():
    """2.7.0 Log.deleteSegments: "we must always have at least one segment": when all
    go, roll() first; the log start becomes the log end, and appends go on from there."""
    log = _filled(3)
    effects = delete_old_segments(log, 10_000, broker_config("kafka-2.7", {"log.retention.ms": 1000}))
    assert [s.base_offset for s in log.segments] == [6] and log.log_start_offset == log.log_end_offset == 6
    assert log.segments[0].path in log.disk.files  # the new active segment's file exists
    assert [e.fields["reason"] for e in effects if getattr(e, "type", None) == "segment_rolled"] == ["retention"]
    one_record(log, 10_001)
    assert log.records() == [(6, Record(None, "v6", 10))]


def test_an_empty_last_segment_is_never_deleted():
    """2.7.0 Log.deletableSegments: isLastSegmentAndEmpty stops the scan."""
    log = _filled(3)
    delete_old_segments(log, 10_000, broker_config("kafka-2.7", {"log.retention.ms": 1000}))
    assert delete_old_segments(log, 20_000, broker_config("kafka-2.7", {"log.retention.ms": 1000})) == []


def _retention_cluster(**config) -> Cluster:
    c = Cluster(config={"log.segment.bytes": 2 * BATCH_BYTES, "log.retention.check.interval.ms": 1000, **config})
    c.start_all()
    assert c.wait_for(c.settled, 5000)
    for i in range(10):
        assert c.produce_and_wait(1, [f"r{i}"]) is ErrorCode.NONE
    assert c.wait_for(c.settled, 5000)
    return c


def test_the_retention_check_runs_on_kafkas_schedule_on_every_replica():
    """2.7.0 LogManager.startup: kafka-log-retention (cleanupLogs) first after
    InitialTaskDelayMs (30 s), then every log.retention.check.interval.ms; each replica
    deletes its own segments."""
    c = _retention_cluster(**{"log.retention.bytes": 4 * BATCH_BYTES})
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS - 1)
    assert not c.traced("segments_deleted")
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert sorted(b for _, b, _ in c.traced("segments_deleted")) == [1, 2, 3]
    for broker in (1, 2, 3):
        log = c.partition(broker).log
        assert log.log_start_offset == 6 and sum(s.log_bytes for s in log.segments) == 4 * BATCH_BYTES
        assert not [p for p in c.disks[broker].files if p.startswith("t-0/") and p.endswith(".log")
                    and int(p[4:-4]) < 6]


def test_a_fetch_below_the_log_start_is_out_of_range_and_earliest_is_the_new_start():
    """2.7.0 Log.read: an offset below logStartOffset is OffsetOutOfRangeException
    (OFFSET_OUT_OF_RANGE); ListOffsets EARLIEST answers logStartOffset."""
    c = _retention_cluster(**{"log.retention.bytes": 4 * BATCH_BYTES})
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    fetch = c.request_and_wait(1, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {TP: FetchPartition(2, -1)}))
    assert fetch.partitions[TP].error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert fetch.partitions[TP].log_start_offset == 6
    earliest = c.request_and_wait(1, lambda cid: ListOffsetsRequest(cid, {TP: EARLIEST_TIMESTAMP}))
    assert earliest.partitions[TP].offset == 6
    fetch = c.request_and_wait(1, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {TP: FetchPartition(6, -1)}))
    assert fetch.partitions[TP].error is ErrorCode.NONE


def test_a_follower_takes_the_leaders_log_start_from_fetch_responses():
    """2.7.0 ReplicaFetcherThread.processPartitionData: log.maybeIncrementLogStartOffset(
    leaderLogStartOffset, LeaderOffsetIncremented). The leader alone has a retention
    limit (a topic override the followers have not read yet is the same situation): the
    followers' log start follows, mid-segment if need be, and their own check then
    deletes the segments wholly below it (deleteLogStartOffsetBreachedSegments)."""
    c = _retention_cluster()
    leader_config = broker_config("kafka-2.7", {"log.segment.bytes": 2 * BATCH_BYTES,
                                                "log.retention.check.interval.ms": 1000,
                                                "log.retention.bytes": 3 * BATCH_BYTES})
    c.nodes[1].replicas.partitions[TP].config = leader_config
    c.nodes[1].replicas.topic_configs["t"] = leader_config
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert c.partition(1).log.log_start_offset == 6  # 4 x 78 bytes left: 3 x 78 would not hold them
    assert not c.traced("segments_deleted", reason="retention_bytes")[1:]  # the leader's only
    assert c.produce_and_wait(1, ["after"]) is ErrorCode.NONE
    assert c.wait_for(c.settled, 5000)
    for follower in (2, 3):
        assert c.partition(follower).log.log_start_offset == 6
    c.run_for(1000)
    assert sorted(b for _, b, f in c.traced("segments_deleted", reason="log_start_offset")) == [2, 3]
    assert c.partition(2).log.segments[0].base_offset == 6


def test_a_restart_keeps_the_log_start():
    """2.7.0 LogManager.checkpointLogStartOffsetsInDir writes log-start-offset-checkpoint
    (where the log start lies above the first segment's base) every
    log.flush.start.offset.checkpoint.interval.ms and at shutdown; Log's loading takes
    max(checkpoint, first segment's base)."""
    c = _retention_cluster(**{"log.retention.bytes": 4 * BATCH_BYTES})
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    follower = c.partition(2).log
    follower.log_start_offset = 7  # as if taken from its leader mid-segment
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 60_000 + 10)  # kafka-recovery-point-checkpoint's period
    assert decode_offset_checkpoint(c.disks[2].files[LOG_START_CHECKPOINT]) == {TP: 7}
    for broker in (1, 2):
        c.crash(broker)
        c.start(broker)  # the logs are recovered at start, before any LeaderAndIsr names them
    assert c.nodes[1].replicas.recovered_logs[TP].log_start_offset == 6  # the first segment's base
    assert c.nodes[2].replicas.recovered_logs[TP].log_start_offset == 7  # the checkpoint's
