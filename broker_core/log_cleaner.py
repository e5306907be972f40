"""The broker's log cleaner: Kafka 2.7.0 LogCleaner's one CleanerThread
(log.cleaner.threads=1), driven by a timer instead of a thread.

core/src/main/scala/kafka/log/LogCleaner.scala, CleanerThread.doWork: try to clean the
filthiest log (cleanFilthiestLog: LogCleanerManager.grabFilthiestCompactedLog, then
Cleaner.clean), and when nothing was cleanable sleep log.cleaner.backoff.ms. Here a
timer ``("log-cleaner",)`` does the same, and a cleaning runs in steps of
log.cleaner.step.records records (isrlab's own key), each step one firing of the timer
followed by a zero-delay one, so that cleaning interleaves with traffic in the
simulation and on the real broker alike, deterministically. When a cleaning is done its
groups are swapped in (broker_core.log_cleaning.replace_segments) and the cleaner
checkpoint is written (LogCleanerManager.doneCleaning, updateCheckpoints), in Kafka's
OffsetCheckpointFile format as ``cleaner-offset-checkpoint``.

The timer is set only once some topic's cleanup.policy includes compact (and
log.cleaner.enable): a broker without compacted topics does exactly what it did before
the cleaner existed. Each replica cleans its own log, leader or follower.

A cleaning whose log changed under it (retention deleted a segment, a truncation cut
one, the replica was dropped) is abandoned, as Kafka aborts a cleaning on truncation
(LogCleanerManager.abortAndPauseCleaning); its next pass starts over.
"""
from __future__ import annotations

from typing import Callable, Mapping

from broker_core.cleaner import Cleaning
from broker_core.cleaner_selection import grab_filthiest
from broker_core.config import BrokerConfig, cleanup_policies
from broker_core.context import NodeContext
from broker_core.effects import ReplaceFile
from broker_core.errors import CoreError
from broker_core.log import PartitionLog
from broker_core.log_cleaning import SegmentBatches, cleanable_log, replace_segments
from broker_core.log_manager import decode_offset_checkpoint, encode_offset_checkpoint
from broker_core.storage import LogStorage
from broker_core.types import TopicPartition

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
TIMER = ("log-cleaner",)


def is_compacted(config: BrokerConfig) -> bool:
    """LogConfig.compact: cleanup.policy names compact."""
    return "compact" in cleanup_policies(config.log_cleanup_policy)


class _InProgress:
    """The cleaning under way: its log object and the shape of the sealed segments it
    started with, to tell whether the log changed under it."""
    __slots__ = ("tp", "log", "cleaning", "shape")

    def __init__(self, tp: TopicPartition, log: PartitionLog, cleaning: Cleaning):
        self.tp = tp
        self.log = log
        self.cleaning = cleaning
        self.shape = _shape(log)

    def log_unchanged(self, logs: Mapping[TopicPartition, PartitionLog]) -> bool:
        return logs.get(self.tp) is self.log and _shape(self.log)[:len(self.shape)] == self.shape


def _shape(log: PartitionLog) -> list[tuple[int, int]]:
    return [(s.base_offset, s.size_bytes) for s in log.segments[:-1]]


class LogCleaner:
    def __init__(self, ctx: NodeContext, config_for: Callable[[str], BrokerConfig]):
        self.ctx = ctx  # its config is the broker's: log.cleaner.enable, backoff and step size
        self.config_for = config_for
        self.checkpoints: dict[TopicPartition, int] = {}
        self.scheduled = False
        self.current: _InProgress | None = None

    def recovered(self, storage: LogStorage) -> None:
        """The cleaner checkpoint read back at startup (LogCleanerManager.allCleanerCheckpoints)."""
        self.checkpoints = decode_offset_checkpoint(storage.read_file(CLEANER_CHECKPOINT))

    def maybe_start(self, configs: list[BrokerConfig]) -> None:
        """Set the timer the first time some log's config is compacted."""
        if not self.scheduled and self.ctx.config.log_cleaner_enable and any(is_compacted(c) for c in configs):
            self.scheduled = True
            self.ctx.set_timer(TIMER, 0)

    def timer_fired(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        """CleanerThread.doWork, one step of it."""
        if self.current is None and not self._start_cleaning(logs):
            self.ctx.set_timer(TIMER, self.ctx.config.log_cleaner_backoff_ms)
            return
        self._step(logs)
        self.ctx.set_timer(TIMER, 0)

    def _start_cleaning(self, logs: Mapping[TopicPartition, PartitionLog]) -> bool:
        """cleanFilthiestLog's choice; False when no log is cleanable now."""
        now = self.ctx.now_ms
        candidates = {}
        for tp in sorted(logs):
            config = self.config_for(tp.topic)
            if is_compacted(config) and logs[tp].segments and logs[tp].storage is not None:
                candidates[tp] = cleanable_log(logs[tp], config, self.checkpoints.get(tp))
        to_clean = grab_filthiest(candidates.values(), now)
        if to_clean is None:
            return False
        tp, log = to_clean.tp, logs[to_clean.tp]
        if to_clean.force_update_checkpoint:  # grabFilthiestCompactedLog's updateCheckpoints
            self._checkpoint(tp, to_clean.first_dirty_offset)
        if to_clean.first_dirty_offset >= to_clean.first_uncleanable_offset:
            return False
        producers = {pid: entry.batches[-1].last_offset for pid, entry in log.producers.entries.items() if entry.batches}
        self.current = _InProgress(tp, log, Cleaning(to_clean, SegmentBatches(log), producers))
        self.ctx.trace("cleaning_started", partition=str(tp), first_dirty_offset=to_clean.first_dirty_offset,
                       first_uncleanable_offset=to_clean.first_uncleanable_offset,
                       cleanable_ratio=round(to_clean.cleanable_ratio, 6))
        return True

    def _step(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        current = self.current
        assert current is not None
        try:
            if not current.log_unchanged(logs):
                raise CoreError("the log changed")
            done = current.cleaning.step(max(self.ctx.config.log_cleaner_step_records, 1))
        except CoreError as error:
            self.current = None
            self.ctx.trace("cleaning_aborted", partition=str(current.tp), reason=str(error))
            return
        if done:
            self.current = None
            self._finish(current)

    def _finish(self, current: _InProgress) -> None:
        """Swap every group in, then the checkpoint (Cleaner.doClean, doneCleaning)."""
        cleaning, log = current.cleaning, current.log
        replaced = [list(group.replaced) for group in cleaning.groups]
        for group in cleaning.groups:
            for effect in replace_segments(log, group):
                self.ctx.emit(effect)
        self._checkpoint(current.tp, cleaning.next_dirty_offset)
        stats = cleaning.stats
        self.ctx.trace("segments_cleaned", partition=str(current.tp), base_offsets=replaced,
                       start_offset=cleaning.to_clean.first_dirty_offset, end_offset=cleaning.next_dirty_offset,
                       records_before=stats.records_read, records_after=stats.records_retained,
                       tombstones_removed=stats.tombstones_removed, bytes_before=stats.bytes_read,
                       bytes_after=stats.bytes_written, log_start_offset=log.log_start_offset)

    def _checkpoint(self, tp: TopicPartition, offset: int) -> None:
        self.checkpoints[tp] = offset
        self.ctx.emit(ReplaceFile(CLEANER_CHECKPOINT, encode_offset_checkpoint(self.checkpoints)))

    def forget(self, tp: TopicPartition) -> None:
        """A log deleted (StopReplica with delete): its checkpoint entry goes with it."""
        if self.checkpoints.pop(tp, None) is not None:
            self.ctx.emit(ReplaceFile(CLEANER_CHECKPOINT, encode_offset_checkpoint(self.checkpoints)))
