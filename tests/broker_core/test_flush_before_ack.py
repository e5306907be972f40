"""A produce whose append flushes (flush.messages reached) is answered only once that
flush is durable, as in Kafka, where Log.append calls flush() inline in the request
handler thread: ReplicaManager.appendRecords returns, and the acks=1 response is sent or
the acks=all DelayedProduce created, only after the fsync. A power loss between the
fsync's start and its completion can then take only an unacknowledged record.

tests/power_harness.py's PowerCluster holds fsyncs open, so that a power loss can fall
while one is in flight."""
from __future__ import annotations

import pytest

from broker_core.config import LOG_FLUSHER_INITIAL_DELAY_MS
from broker_core.errors import ErrorCode
from broker_core.inputs import DiskWriteFailed
from broker_core.types import TopicPartition
from tests.harness import ZK, Cluster
from tests.power_harness import PowerCluster

TP = TopicPartition("t", 0)
FLUSH_EVERY_MESSAGE = {"log.flush.interval.messages": 1}
PROFILES = ["kafka-2.7", "kafka-0.8"]


def single_broker(profile: str, config=None) -> PowerCluster:
    c = PowerCluster(brokers=(1,), replication_factor=1, profile=profile,
                     config=FLUSH_EVERY_MESSAGE if config is None else config)
    c.start_all()
    assert c.wait_for(lambda: c.leader() == 1)
    return c


def acknowledged(c: Cluster, cids: dict[int, str]) -> list[str]:
    return [value for cid, value in cids.items()
            if cid in c.responses and c.responses[cid].partitions[TP].error is ErrorCode.NONE]


def answered_after_the_fsync(c: PowerCluster, broker: int, cid: int) -> None:
    """``cid`` stays unanswered while ``broker``'s fsyncs are held, and is answered once they complete."""
    c.run_for(200)
    assert c.pending[broker], "the append started no fsync"
    assert cid not in c.responses, "answered before its append's fsync completed"
    c.complete_fsyncs(broker)
    assert c.wait_for(lambda: cid in c.responses, 1000, step_ms=1)


def power_loss_keeps_what_was_acknowledged(c: PowerCluster, acks: int) -> None:
    """Two records acknowledged; a third whose fsync is in flight at the power loss."""
    cids = {c.produce(1, [value], acks=acks): value for value in ("a", "b")}
    assert c.wait_for(lambda: all(cid in c.responses for cid in cids), 1000, step_ms=1)
    c.held.add(1)
    cids[c.produce(1, ["c"], acks=acks)] = "c"
    c.run_for(200)
    assert c.pending[1] and c.partition(1).log.log_end_offset == 3
    c.power_loss(1)
    assert c.wait_for(lambda: c.leader() == 1, 60000)
    assert acknowledged(c, cids) == ["a", "b"]
    assert c.values(1) == ["a", "b"], "only the unacknowledged record is lost"


@pytest.mark.parametrize("profile", PROFILES)
def test_acks_1_is_answered_only_after_the_flush_its_append_started(profile):
    """kafka-2.7: 2.7.0 core/src/main/scala/kafka/log/Log.scala Log.append calls flush()
    inline when unflushedMessages >= config.flushInterval, before
    ReplicaManager.appendRecords (ReplicaManager.scala) returns and calls
    responseCallback. kafka-0.8: 0.8.2.2 Log.scala Log.append flushes the same way, inside
    KafkaApis.handleProducerOrOffsetCommitRequest's appendToLocalLog, before sendResponse."""
    c = single_broker(profile)
    c.held.add(1)
    cid = c.produce(1, ["a"], acks=1)
    answered_after_the_fsync(c, 1, cid)
    assert c.responses[cid].partitions[TP].error is ErrorCode.NONE
    assert c.partition(1).log.durable_offset == 1


@pytest.mark.parametrize("profile", PROFILES)
def test_acks_1_power_loss_during_the_flush_loses_only_an_unacknowledged_record(profile):
    """kafka-2.7: 2.7.0 Log.scala Log.append (flush() inline at flush.messages), then
    ReplicaManager.appendRecords answers acks=1. kafka-0.8: 0.8.2.2 Log.scala Log.append,
    KafkaApis.handleProducerOrOffsetCommitRequest. With flush.messages=1 an acknowledged
    record was fsynced, so a power loss cannot take it."""
    power_loss_keeps_what_was_acknowledged(single_broker(profile), acks=1)


@pytest.mark.parametrize("profile", PROFILES)
def test_acks_all_power_loss_during_the_flush_loses_only_an_unacknowledged_record(profile):
    """kafka-2.7: 2.7.0 Log.scala Log.append flushes before ReplicaManager.appendRecords
    creates the DelayedProduce (delayedProducePurgatory.tryCompleteElseWatch), so even an
    ISR of one, whose high watermark passes the batch at once, answers after the fsync.
    kafka-0.8: 0.8.2.2 Log.append flushes before KafkaApis.handleProducerOrOffsetCommitRequest
    reaches producerRequestPurgatory.checkAndMaybeWatch."""
    power_loss_keeps_what_was_acknowledged(single_broker(profile), acks=-1)


@pytest.mark.parametrize("profile", PROFILES)
def test_acks_all_waits_for_the_leaders_flush_after_the_isr_has_the_batch(profile):
    """kafka-2.7: 2.7.0 ReplicaManager.appendRecords creates the DelayedProduce only after
    appendToLocalLog (Log.append's inline flush) returns; followers fetching the batch
    meanwhile advance the high watermark, and the produce, checked at creation
    (tryCompleteElseWatch), completes then. kafka-0.8: 0.8.2.2 KafkaApis
    .handleProducerOrOffsetCommitRequest, checkAndMaybeWatch after appendToLocalLog."""
    c = PowerCluster(brokers=(1, 2, 3), profile=profile, config=FLUSH_EVERY_MESSAGE)
    c.start_all()
    assert c.wait_for(c.settled, 5000)
    leader = c.leader()
    c.held.add(leader)
    cid = c.produce(leader, ["a"], acks=-1)
    assert c.wait_for(lambda: c.partition(leader).log.high_watermark == 1, 1000, step_ms=1)
    answered_after_the_fsync(c, leader, cid)
    assert c.responses[cid].partitions[TP].error is ErrorCode.NONE


@pytest.mark.parametrize("profile", PROFILES)
def test_without_flush_messages_nothing_waits_for_an_fsync(profile):
    """kafka-2.7: 2.7.0 Log.scala Log.append flushes only at flush.messages (default
    Long.MaxValue), so by default the answer never waits on the disk. kafka-0.8: 0.8.2.2
    Log.append the same (log.flush.interval.messages, default Long.MaxValue)."""
    c = single_broker(profile, config={})
    c.held.add(1)
    cids = [c.produce(1, ["a"], acks=1), c.produce(1, ["b"], acks=-1)]
    assert c.wait_for(lambda: all(cid in c.responses for cid in cids), 1000, step_ms=1)
    assert not c.pending[1]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_flush_by_time_holds_no_produce(profile):
    """kafka-2.7: 2.7.0 LogManager.flushDirtyLogs runs on the kafka-log-flusher scheduler
    thread, not in a request handler: a produce arriving while its fsync runs is answered
    at once. kafka-0.8: 0.8.2.2 LogManager.flushDirtyLogs, scheduled the same way."""
    c = single_broker(profile, config={"log.flush.interval.ms": 100, "log.flush.scheduler.interval.ms": 1000})
    assert c.produce_and_wait(1, ["a"], acks=1) is ErrorCode.NONE
    c.held.add(1)
    c.run_until(LOG_FLUSHER_INITIAL_DELAY_MS + 10)
    assert c.pending[1], "the log flusher started no fsync"
    assert c.produce_and_wait(1, ["b"], acks=1, wait_ms=100) is ErrorCode.NONE


@pytest.mark.parametrize("profile", PROFILES)
def test_a_disk_failing_during_the_flush_halts_the_broker_without_an_answer(profile):
    """kafka-2.7: 2.7.0 Log.scala Log.flush runs in maybeHandleIOException: an fsync
    failing marks the log directory offline, and with its only one gone the broker halts
    (LogManager.handleLogDirFailure, Exit.halt); the produce is never acknowledged.
    kafka-0.8: 0.8.2.2 Log.append wraps the IOException in a KafkaStorageException, on
    which KafkaApis.appendToLocalLog halts (Runtime.getRuntime.halt)."""
    c = single_broker(profile)
    c.held.add(1)
    cid = c.produce(1, ["a"], acks=1)
    c.run_for(200)
    [(event, _)] = c.pending[1]
    c._deliver(1, DiskWriteFailed(event.path, "EIO"))
    c.run_for(200)
    assert c.traced("broker_halted") and 1 not in c.nodes
    assert cid not in c.responses


@pytest.mark.parametrize("profile", PROFILES)
def test_a_leader_truncated_while_its_flush_runs_answers_once_the_fsync_completes(profile):
    """Kafka cannot interleave this (2.7.0 Partition.appendRecordsToLeader holds
    leaderIsrUpdateLock across Log.append and its flush; 0.8.2.2
    Partition.appendMessagesToLeader likewise), the model can: the leader loses its
    partition and truncates the batch before the fsync completes. The fsync's completion
    still answers the held acks=1 produce (as appended: an acks=1 record a leader change
    takes); it does not wait for a durable offset the log no longer reaches."""
    c = PowerCluster(brokers=(1, 2, 3), profile=profile, config=FLUSH_EVERY_MESSAGE)
    c.start_all()
    assert c.wait_for(c.settled, 5000)
    old = c.leader()
    assert c.produce_and_wait(old, ["a"], acks=-1) is ErrorCode.NONE
    for other in c.brokers:
        if other != old:
            c.block(old, other)
    c.held.add(old)
    cid = c.produce(old, ["x"], acks=1)
    c.run_for(50)
    assert c.pending[old] and cid not in c.responses
    c.block(old, ZK)  # its session expires; another broker, without "x", takes over
    assert c.wait_for(lambda: c.leader() not in (None, old), 60000)
    c.heal()
    assert c.wait_for(lambda: c.partition(old).log.log_end_offset == 1, 60000)
    assert cid not in c.responses
    c.complete_fsyncs(old)
    assert c.wait_for(lambda: cid in c.responses, 1000, step_ms=1)
    assert c.responses[cid].partitions[TP].error is ErrorCode.NONE
    assert c.values(old) == ["a"]
