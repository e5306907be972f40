"""Logs for tests that drive a PartitionLog directly, without a runtime."""
from __future__ import annotations

from broker_core.config import BrokerConfig
from broker_core.context import NodeContext
from broker_core.effects import Send
from broker_core.fetcher import ReplicaFetcherManager
from broker_core.log import PartitionLog
from broker_core.log_loader import recover_log
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.partition import Partition
from broker_core.records import Record, RecordBatch
from broker_core.storage import MemoryFiles
from broker_core.types import TopicPartition


class AppliedLog(PartitionLog):
    """A log whose file effects are carried out at once on its own in-memory files, as
    a runtime carries them out after each input; so the log's stored batches can be read
    back through its storage port (``records()``, truncation traces)."""

    def __init__(self, tp: TopicPartition, segment_bytes: int):
        self.disk = MemoryFiles()
        super().__init__(tp, segment_bytes, self.disk.storage)

    def _append(self, batch, now_ms: int = 0) -> list:
        effects = super()._append(batch, now_ms)
        self.disk.apply_all(effects)
        return effects

    def delete_oldest_segments(self, count: int, now_ms: int) -> list:
        effects = super().delete_oldest_segments(count, now_ms)
        self.disk.apply_all(effects)
        return effects

    def truncate_to(self, offset: int) -> list:
        effects = super().truncate_to(offset)
        self.disk.apply_all(effects)
        return effects


def recover(tp: TopicPartition, files: dict, segment_bytes: int):
    """recover_log over files given as a dict of bytes."""
    return recover_log(tp, MemoryFiles(files).storage, segment_bytes)


def follower_of_broker_1(config: BrokerConfig, tp: TopicPartition, batches, led_in_epoch: int | None = None,
                         start: int = 0):
    """Broker 2 as a follower of broker 1 (leader epoch 7), driven directly: its log starts
    at ``start`` and holds ``(offset, epoch, value)`` one-record batches; ``led_in_epoch``:
    it led in that epoch before and wrote nothing. Returns (ctx, partition, fetchers),
    the partition already added to its fetcher."""
    ctx = NodeContext(2, config)
    log = AppliedLog(tp, config.log_segment_bytes)
    log.log_start_offset = log.log_end_offset = log.high_watermark = start
    for offset, epoch, value in batches:
        log.append_as_follower(RecordBatch(offset, epoch, (Record(None, value, 10),)))
    if led_in_epoch is not None:
        log.assign_epoch(led_in_epoch)
    partition = Partition(2, tp, log, config)
    partition.make_follower(PartitionState(LeaderAndIsr(1, 7, (1, 2), 1), (1, 2)))
    manager = ReplicaFetcherManager(ctx, {tp: partition})
    manager.add_partition(partition)
    return ctx, partition, manager


def sent_messages(ctx: NodeContext) -> list:
    """The messages a directly driven node has sent since the last call."""
    sent = [e.message for e in ctx.out if isinstance(e, Send)]
    ctx.out.clear()
    return sent
