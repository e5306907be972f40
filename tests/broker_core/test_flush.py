"""Flushing as Kafka does it: on a segment roll, on the message count after an append,
and on time only when the log flusher runs (first 30 s after startup, then every
log.flush.scheduler.interval.ms, by default never)."""
from __future__ import annotations

from broker_core.config import LOG_FLUSHER_INITIAL_DELAY_MS, NEVER, broker_config
from broker_core.effects import Fsync
from broker_core.errors import ErrorCode
from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.harness import Cluster
from tests.broker_core.logs import AppliedLog

TP = TopicPartition("t", 0)


def test_a_rolled_segment_is_flushed_up_to_the_new_segments_base_offset():
    """Kafka 2.7.0 Log.roll schedules flush(newOffset) at once (0.8.2.2 Log.roll too): the
    segments before the new one are fsynced, and the durable offset becomes the new
    segment's base offset when they complete; the new segment's data stays unflushed."""
    log = AppliedLog(TP, segment_bytes=200)
    first_effects = []
    while len(log.segments) < 2:
        _, effects = log.append_as_leader([Record(None, f"v{log.log_end_offset}", 10)], 0)
        first_effects.append(effects)
    *before, rolled = first_effects
    assert not [e for effects in before for e in effects if isinstance(e, Fsync)]
    [fsync] = [e for e in rolled if isinstance(e, Fsync)]
    assert fsync.path == log.segments[0].path
    assert log.fsync_completed(fsync.path, fsync.token)
    assert log.durable_offset == log.segments[1].base_offset < log.log_end_offset


def test_after_an_append_only_the_message_count_triggers_a_flush():
    """Kafka 2.7.0 Log.append flushes when unflushedMessages >= flush.messages; the time
    since the last flush is not looked at there (LogManager.flushDirtyLogs does that)."""
    c = Cluster(brokers=(1,), replication_factor=1, config={"log.flush.interval.ms": 0})
    c.start_all()
    assert c.wait_for(lambda: c.leader() == 1)
    assert c.produce_and_wait(1, ["a"]) is ErrorCode.NONE
    c.run_for(100)
    assert c.partition(1).log.durable_offset == 0


def test_flush_ms_is_checked_only_when_the_log_flusher_runs_which_by_default_is_once():
    """Kafka 2.7.0 LogManager.startup schedules kafka-log-flusher (flushDirtyLogs) with
    delay InitialTaskDelayMs (30 s) and period log.flush.scheduler.interval.ms, whose
    default Long.MaxValue means it runs once. So log.flush.interval.ms=100 alone flushes
    nothing before 30 s, flushes once at 30 s, and never again."""
    c = Cluster(brokers=(1,), replication_factor=1, config={"log.flush.interval.ms": 100})
    c.start_all()
    assert c.wait_for(lambda: c.leader() == 1)
    assert c.produce_and_wait(1, ["a"]) is ErrorCode.NONE
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS - 1)
    assert c.partition(1).log.durable_offset == 0
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert c.partition(1).log.durable_offset == 1
    assert c.produce_and_wait(1, ["b"]) is ErrorCode.NONE
    c.run_for(60000)
    assert c.partition(1).log.durable_offset == 1


def test_the_log_flusher_runs_every_scheduler_interval_after_its_first_run():
    """Kafka 2.7.0 LogManager.startup: after the first run, flushDirtyLogs runs every
    log.flush.scheduler.interval.ms and flushes logs whose last flush is flush.ms old."""
    c = Cluster(brokers=(1,), replication_factor=1,
                config={"log.flush.interval.ms": 100, "log.flush.scheduler.interval.ms": 1000})
    c.start_all()
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert c.produce_and_wait(1, ["a"]) is ErrorCode.NONE
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 900)
    assert c.partition(1).log.durable_offset == 0
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 1010)
    assert c.partition(1).log.durable_offset == 1


def test_flush_ms_defaults_to_the_scheduler_interval():
    """Kafka 2.7.0 KafkaConfig.logFlushIntervalMs: log.flush.interval.ms, or when unset
    log.flush.scheduler.interval.ms (0.8.2.2 KafkaConfig the same)."""
    assert broker_config("kafka-2.7").flush_interval_ms == NEVER
    assert broker_config("kafka-2.7", {"log.flush.scheduler.interval.ms": 500}).flush_interval_ms == 500
    assert broker_config("kafka-0.8", {"log.flush.scheduler.interval.ms": 500,
                                       "log.flush.interval.ms": 200}).flush_interval_ms == 200
