"""Startup, checkpoints and clean shutdown of a broker's logs (Kafka's LogManager)."""
from __future__ import annotations

from broker_core.effects import Fsync, Halt, ReplaceFile
from broker_core.inputs import ShutdownRequested
from broker_core.log_manager import (
    CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, decode_offset_checkpoint, encode_offset_checkpoint)
from broker_core.records import Record
from broker_core.types import TopicPartition
from broker_core.log_loader import recover_log
from broker_core.storage import MemoryFiles
from tests.broker_core.logs import AppliedLog
from tests.harness import Cluster

TP = TopicPartition("t", 0)


def _files(log: AppliedLog) -> dict:
    return {path: bytes(data) for path, data in log.disk.files.items()}


def _three_segments():
    log = AppliedLog(TP, segment_bytes=120)
    for value in ("a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40, "f" * 40):
        log.append_as_leader((Record(None, value),), 0)
    paths = sorted(p for p in log.disk.files if p.endswith(".log"))
    assert len(paths) >= 3
    return log, paths


def _flip(files: dict, path: str) -> dict:
    data = bytearray(files[path])
    at = max(data.rfind(bytes([c]) * 20) for c in b"abcdef") + 10
    data[at] ^= 0x02  # a letter of the last value becomes another: only the CRC can tell
    return {**files, path: bytes(data)}


def test_crcs_are_checked_from_the_segment_holding_the_recovery_point_on():
    """Kafka 2.7.0 Log.recoverLog (core/src/main/scala/kafka/log/Log.scala): only
    logSegments(recoveryPoint, Long.MaxValue) are recovered (their batches' CRCs
    checked); earlier segments were flushed and are trusted as they are."""
    log, paths = _three_segments()
    first_base = int(paths[0].rsplit("/", 1)[1][:-4])
    second_base = int(paths[1].rsplit("/", 1)[1][:-4])
    assert first_base == 0 and second_base > 0
    damaged = _flip(_files(log), paths[0])
    # recovery point in the second segment: the first is trusted, the flip goes unnoticed
    trusted, _, report = recover_log(TP, MemoryFiles(damaged).storage, 120, recovery_point=second_base)
    assert report.reason is None and trusted.log_end_offset == log.log_end_offset
    # recovery point 0 (never flushed): the first segment is checked and cut
    checked, _, report = recover_log(TP, MemoryFiles(damaged).storage, 120, recovery_point=0)
    assert "crc" in report.reason and checked.log_end_offset < second_base


def test_after_a_clean_shutdown_nothing_is_checked():
    """Kafka 2.7.0 Log.recoverLog: with the clean shutdown marker (hasCleanShutdownFile)
    recovery is skipped for every segment."""
    log, paths = _three_segments()
    damaged = _flip(_files(log), paths[-1])
    clean, _, report = recover_log(TP, MemoryFiles(damaged).storage, 120, clean_shutdown=True)
    assert report.reason is None and clean.log_end_offset == log.log_end_offset
    unclean, _, report = recover_log(TP, MemoryFiles(damaged).storage, 120, recovery_point=log.log_end_offset)
    assert report.reason is not None and unclean.log_end_offset < log.log_end_offset


def test_the_recovery_point_follows_flushes_and_truncations():
    """Kafka 2.7.0 Log.flush (recoveryPoint = offset once flushed) and Log.truncateTo
    (the recovery point never stays above the new log end)."""
    log = AppliedLog(TP, 1 << 30)
    for value in "abcd":
        log.append_as_leader((Record(None, value),), 0)
    assert log.recovery_point == 0
    fsyncs = [e for e in log.flush(0) if isinstance(e, Fsync)]
    for fsync in fsyncs:
        log.fsync_completed(fsync.path, fsync.token)
    assert log.recovery_point == 4
    log.truncate_to(2)
    assert log.recovery_point == 2


def test_offset_checkpoints_round_trip_and_an_unreadable_one_means_zero():
    marks = {TopicPartition("a-b", 3): 17, TP: 0}
    assert decode_offset_checkpoint(encode_offset_checkpoint(marks)) == marks
    assert decode_offset_checkpoint(b"0\n2\nt 0\n") == {}


def _shut_down(cluster: Cluster, broker: int) -> list:
    effects = []
    original = cluster._apply

    def spy(b, out):
        if b == broker:
            effects.extend(out)
        original(b, out)
    cluster._apply = spy
    cluster._deliver(broker, ShutdownRequested())
    assert cluster.wait_for(lambda: broker not in cluster.nodes, timeout_ms=60000)
    cluster._apply = original
    return effects


def test_a_clean_shutdown_flushes_every_log_then_writes_checkpoints_and_the_marker():
    """Kafka 2.7.0 LogManager.shutdown (core/src/main/scala/kafka/log/LogManager.scala):
    each log is flushed and closed, then the recovery points are checkpointed and the
    clean shutdown marker created; at the next start LogManager.loadLogs skips recovery
    and deletes the marker, so that a crash later is not taken for a clean stop."""
    cluster = Cluster(brokers=(1,), replication_factor=1)
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=(1,)))
    cluster.produce_and_wait(1, ["a", "b", "c"], acks=1)
    effects = _shut_down(cluster, 1)
    kinds = [type(e).__name__ for e in effects]
    halt = kinds.index("Halt")
    fsync = max(i for i, e in enumerate(effects) if isinstance(e, Fsync))
    marker = next(i for i, e in enumerate(effects) if isinstance(e, ReplaceFile) and e.path == CLEAN_SHUTDOWN_FILE)
    # (a sole replica has nowhere to go: the controlled shutdown completes at once)
    assert fsync < marker < halt and effects[halt] == Halt("controlled shutdown", clean=True, requested=True)
    files = cluster.disks[1].files
    assert CLEAN_SHUTDOWN_FILE in files
    assert decode_offset_checkpoint(bytes(files[RECOVERY_POINT_CHECKPOINT])) == {TP: 3}
    cluster.start(1)
    [recovered] = cluster.traced("log_recovered", partition="t-0")
    assert recovered[2]["clean_shutdown"] is True and recovered[2]["checked_from_offset"] is None
    assert CLEAN_SHUTDOWN_FILE not in cluster.disks[1].files


def test_a_crash_after_a_clean_start_is_recovered_from_the_recovery_point():
    """Kafka 2.7.0 LogManager.loadLogs: without the marker, recovery starts at the
    checkpointed recovery point (recovery-point-offset-checkpoint, written every
    log.flush.offset.checkpoint.interval.ms after LogManager.InitialTaskDelayMs)."""
    cluster = Cluster(brokers=(1,), replication_factor=1,
                      config={"log.flush.interval.messages": 2, "log.flush.offset.checkpoint.interval.ms": 1000})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=(1,)))
    cluster.produce_and_wait(1, ["a", "b", "c", "d"], acks=1)
    cluster.run_for(31000)  # past the first recovery-point checkpoint
    assert decode_offset_checkpoint(bytes(cluster.disks[1].files[RECOVERY_POINT_CHECKPOINT])) == {TP: 4}
    cluster.crash(1)
    cluster.run_for(20000)  # the old session expires: the restarted broker may register
    cluster.start(1)
    recovered = [e for e in cluster.traced("log_recovered", partition="t-0")]
    assert recovered[-1][2]["clean_shutdown"] is False and recovered[-1][2]["checked_from_offset"] == 4
    # the recovered log's flush counts: its durable offset reaches the log end
    assert cluster.wait_for(lambda: 1 in cluster.nodes and cluster.nodes[1]._all_logs()[TP].durable_offset == 4)


def test_a_broker_whose_startup_fails_closes_its_logs_as_a_clean_shutdown_does():
    """Kafka 2.7.0 core/src/main/scala/kafka/server/KafkaServer.scala startup: a failure
    (here zk/KafkaZkClient.scala registerBroker finding the node of the previous
    incarnation's live session) is caught and shutdown() runs: no controlled shutdown
    (startup never completed), ReplicaManager.shutdown checkpoints the high watermarks
    and LogManager.shutdown flushes every log, checkpoints the recovery points and writes
    the clean-shutdown marker; then the process exits on its own account (not a
    requested stop). 0.8.2.2 KafkaServer.startup / KafkaServerStartable.startup alike."""
    cluster = Cluster(brokers=(1, 2, 3))
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled())
    assert cluster.produce_and_wait(cluster.leader(), ["a", "b", "c"]) is not None
    assert cluster.wait_for(lambda: cluster.settled())
    cluster.crash(3)
    effects = []
    original = cluster._apply

    def spy(b, out):
        if b == 3:
            effects.extend(out)
        original(b, out)
    cluster._apply = spy
    cluster.start(3)  # long before the old session expires: registration fails
    assert cluster.wait_for(lambda: 3 not in cluster.nodes, timeout_ms=5000, step_ms=1)
    cluster._apply = original
    kinds = [type(e).__name__ for e in effects]
    halt = kinds.index("Halt")
    fsync = max(i for i, e in enumerate(effects) if isinstance(e, Fsync))
    marker = next(i for i, e in enumerate(effects) if isinstance(e, ReplaceFile) and e.path == CLEAN_SHUTDOWN_FILE)
    assert fsync < marker < halt
    assert effects[halt] == Halt("broker registration failed: node exists", clean=True, requested=False)
    assert cluster.traced("logs_closed")[-1][1] == 3
    files = cluster.disks[3].files
    assert decode_offset_checkpoint(bytes(files[RECOVERY_POINT_CHECKPOINT])) == {TP: 3}
    assert TP in decode_offset_checkpoint(bytes(files["replication-offset-checkpoint"]))
    cluster.run_for(20000)  # the old session expires
    cluster.start(3)
    recovered = cluster.traced("log_recovered", partition="t-0")
    assert recovered[-1][1] == 3 and recovered[-1][2]["clean_shutdown"] is True
