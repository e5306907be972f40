"""A broker's logs as a whole, at startup and shutdown, and their checkpoints (Kafka's
LogManager and the checkpoint parts of ReplicaManager).

- Startup (LogManager.loadLogs, Log.recoverLog): every partition directory is
  recovered through the storage port; CRCs are checked from each log's checkpointed
  recovery point on, and not at all when the clean-shutdown marker is present, which is
  then deleted (a crash after this start must not pass for a clean stop).
- Checkpoints: high watermarks (replication-offset-checkpoint, every
  replica.high.watermark.checkpoint.interval.ms) and recovery points
  (recovery-point-offset-checkpoint, every log.flush.offset.checkpoint.interval.ms
  after LogManager.InitialTaskDelayMs). Both files share Kafka's OffsetCheckpointFile
  format.
- Clean shutdown (LogManager.shutdown, after the controlled shutdown): flush every log,
  wait for the flushes, checkpoint high watermarks and recovery points, write the
  marker; then the process stops.
"""
from __future__ import annotations

from typing import Callable, Mapping

from broker_core.config import BrokerConfig, cleanup_policies
from broker_core.context import NodeContext
from broker_core.dynamic_config import configure_log
from broker_core.effects import DeleteFile, ReplaceFile
from broker_core.log import PartitionLog
from broker_core.log_loader import recover_log
from broker_core.storage import LogStorage
from broker_core.types import TopicPartition

HW_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def encode_offset_checkpoint(marks: Mapping[TopicPartition, int]) -> bytes:
    lines = ["0", str(len(marks))] + [f"{tp.topic} {tp.partition} {hw}" for tp, hw in sorted(marks.items())]
    return ("\n".join(lines) + "\n").encode()


def decode_offset_checkpoint(data: bytes | None) -> dict[TopicPartition, int]:
    if not data:
        return {}
    try:
        lines = data.decode().split("\n")
        marks = {}
        for line in lines[2:2 + int(lines[1])]:
            topic, partition, offset = line.rsplit(" ", 2)
            marks[TopicPartition(topic, int(partition))] = int(offset)
        return marks
    except (ValueError, IndexError, UnicodeDecodeError):
        return {}  # unreadable: every offset starts at 0 (safe: more is checked, less trusted)


class LogManager:
    def __init__(self, ctx: NodeContext, config_for: Callable[[str], BrokerConfig]):
        self.ctx = ctx
        self.config_for = config_for  # a topic's effective configuration
        self.closing: str | None = None  # the reason of a clean shutdown under way
        self._log_starts_written = b""  # the log-start-offset-checkpoint last written (none: empty)

    def recover(self, storage: LogStorage) -> dict[TopicPartition, PartitionLog]:
        ctx = self.ctx
        marks = decode_offset_checkpoint(storage.read_file(HW_CHECKPOINT))
        points = decode_offset_checkpoint(storage.read_file(RECOVERY_POINT_CHECKPOINT))
        raw_starts = storage.read_file(LOG_START_CHECKPOINT)
        starts = decode_offset_checkpoint(raw_starts)
        self._log_starts_written = raw_starts or b""
        clean = storage.read_file(CLEAN_SHUTDOWN_FILE) is not None
        directories = sorted({path.split("/", 1)[0] for path in storage.paths() if "/" in path})
        recovered = {}
        for directory in directories:
            try:
                tp = TopicPartition.parse(directory)
            except ValueError:
                continue
            config = self.config_for(tp.topic)
            log, effects, report = recover_log(tp, storage, config.log_segment_bytes, points.get(tp, 0),
                                               clean, config.log_index_interval_bytes, ctx.now_ms,
                                               "compact" in cleanup_policies(config.log_cleanup_policy))
            configure_log(log, config)
            for effect in effects:
                ctx.emit(effect)
            # 2.7.0 Log: the log start is the checkpointed one where above the first
            # segment's base (a follower that took its leader's start mid-segment).
            log.log_start_offset = min(max(starts.get(tp, 0), log.log_start_offset), log.log_end_offset)
            log.high_watermark = min(max(marks.get(tp, 0), log.log_start_offset), log.log_end_offset)
            for effect in log.flush(ctx.now_ms):  # make the recovered log durable, as recovery does
                ctx.emit(effect)
            recovered[tp] = log
            ctx.trace("log_recovered", partition=str(tp), log_end_offset=log.log_end_offset,
                      high_watermark=log.high_watermark, truncated_bytes=report.truncated_bytes,
                      reason=report.reason, deleted_segments=list(report.deleted_segments),
                      leader_epochs=[list(e) for e in log.epochs.entries],
                      clean_shutdown=clean, checked_from_offset=None if clean else points.get(tp, 0))
        if clean:
            ctx.emit(DeleteFile(CLEAN_SHUTDOWN_FILE))
        return recovered

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint_high_watermarks(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        self.ctx.emit(ReplaceFile(HW_CHECKPOINT, encode_offset_checkpoint(
            {tp: log.high_watermark for tp, log in logs.items()})))

    def checkpoint_recovery_points(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        self.ctx.emit(ReplaceFile(RECOVERY_POINT_CHECKPOINT, encode_offset_checkpoint(
            {tp: log.recovery_point for tp, log in logs.items()})))

    def checkpoint_log_starts(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        """2.7.0 LogManager.checkpointLogStartOffsetsInDir: the log start of each log
        where it lies above its first segment's base (elsewhere the segments say it).
        Written only when it changed, so that runs without retention never write it."""
        data = encode_offset_checkpoint({tp: log.log_start_offset for tp, log in logs.items()
                                         if log.segments and log.log_start_offset > log.segments[0].base_offset})
        unwritten = self._log_starts_written or encode_offset_checkpoint({})  # no file: as one of no logs
        if data != unwritten:
            self._log_starts_written = data
            self.ctx.emit(ReplaceFile(LOG_START_CHECKPOINT, data))

    # -- clean shutdown ----------------------------------------------------------------
    def start_closing(self, reason: str, logs: Mapping[TopicPartition, PartitionLog]) -> bool:
        """Flush every log; True when there was nothing to wait for."""
        self.closing = reason
        for tp in sorted(logs):
            for effect in logs[tp].flush(self.ctx.now_ms):
                self.ctx.emit(effect)
        return self.all_flushed(logs)

    @staticmethod
    def all_flushed(logs: Mapping[TopicPartition, PartitionLog]) -> bool:
        return all(log.durable_offset >= log.log_end_offset for log in logs.values())

    def finish_closing(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        """The checkpoints and the marker, once every flush completed."""
        self.checkpoint_high_watermarks(logs)
        self.checkpoint_recovery_points(logs)
        self.checkpoint_log_starts(logs)
        self.ctx.emit(ReplaceFile(CLEAN_SHUTDOWN_FILE, b""))
        self.ctx.trace("logs_closed", partitions=len(logs))
