"""A compacted log held in memory for the cleaner's tests: segments of batches with the
times the cleaner reads, appends and rolls at given times, and a cleaning's groups
swapped in as a log would swap them (PartitionLog does this in a later slice)."""
from __future__ import annotations

from typing import Sequence

from broker_core.cleaned_batch import CleanableBatch, record_offsets
from broker_core.cleaner import Cleaning
from broker_core.cleaner_selection import CleanableLog, LogToClean, SegmentInfo, grab_filthiest
from broker_core.config import BrokerConfig, broker_config, topic_config
from broker_core.records import Record, RecordBatch
from broker_core.types import TopicPartition


def compacted(**topic_overrides) -> BrokerConfig:
    return topic_config(broker_config(), {"cleanup.policy": "compact", **topic_overrides})


class Segment:
    def __init__(self, base_offset: int, now_ms: int):
        self.base_offset = base_offset
        self.batches: list[CleanableBatch] = []
        self.last_modified_ms = now_ms

    def info(self) -> SegmentInfo:
        stamps = [b.max_timestamp for b in self.batches]
        return SegmentInfo(self.base_offset, sum(b.size_bytes for b in self.batches),
                           largest_timestamp_ms=max(stamps, default=-1),
                           first_batch_timestamp_ms=stamps[0] if stamps else -1,
                           last_modified_ms=self.last_modified_ms, index_bytes=8 * len(self.batches))


class MemoryCompactedLog:
    def __init__(self, config: BrokerConfig, tp: TopicPartition = TopicPartition("c", 0), now_ms: int = 0):
        self.tp = tp
        self.config = config
        self.segments = [Segment(0, now_ms)]
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.checkpoint: int | None = None
        self.producer_last_offsets: dict[int, int] = {}

    def append(self, records: Sequence[tuple[str | None, str | None]], now_ms: int, producer_id: int = -1,
               base_sequence: int = -1) -> RecordBatch:
        batch = RecordBatch(self.log_end_offset, 0, [Record(k, v) for k, v in records], producer_id=producer_id,
                            producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence,
                            first_timestamp=now_ms, max_timestamp=now_ms)
        active = self.segments[-1]
        active.batches.append(batch)
        active.last_modified_ms = now_ms
        self.log_end_offset = batch.next_offset
        if producer_id >= 0:
            self.producer_last_offsets[producer_id] = batch.next_offset - 1
        return batch

    def roll(self, now_ms: int) -> None:
        """A new active segment at the log end (only after something was written)."""
        if self.segments[-1].batches:
            self.segments.append(Segment(self.log_end_offset, now_ms))

    # -- what the cleaner reads ------------------------------------------------------------
    def cleanable(self) -> CleanableLog:
        return CleanableLog(self.tp, self.config, self.log_start_offset, self.log_end_offset,
                            [s.info() for s in self.segments], self.checkpoint)

    def segment_batches(self, base_offset: int) -> Sequence[CleanableBatch]:
        return tuple(next(s for s in self.segments if s.base_offset == base_offset).batches)

    # -- cleaning --------------------------------------------------------------------------
    def choose(self, now_ms: int) -> LogToClean | None:
        return grab_filthiest([self.cleanable()], now_ms)

    def cleaning(self, to_clean: LogToClean) -> Cleaning:
        return Cleaning(to_clean, self, self.producer_last_offsets)

    def swap_in(self, cleaning: Cleaning) -> None:
        """Log.replaceSegments for each group, then the checkpoint (doneCleaning)."""
        assert cleaning.done
        for group in cleaning.groups:
            replaced = set(group.replaced)
            position = next(i for i, s in enumerate(self.segments) if s.base_offset == group.base_offset)
            new = Segment(group.base_offset, group.last_modified_ms)
            new.batches = list(group.batches)
            self.segments = [s for s in self.segments if s.base_offset not in replaced]
            self.segments.insert(position, new)
        self.checkpoint = cleaning.next_dirty_offset

    def clean(self, now_ms: int, budget: int = 1 << 30) -> Cleaning | None:
        """One cleaning of this log if the cleaner manager would choose it."""
        to_clean = self.choose(now_ms)
        if to_clean is None:
            return None
        cleaning = self.cleaning(to_clean)
        while not cleaning.step(budget):
            pass
        self.swap_in(cleaning)
        return cleaning

    # -- what a reader sees ------------------------------------------------------------------
    def read_all(self) -> list[tuple[int, str | None, str | None]]:
        """(offset, key, value) of every record from the log start, in order."""
        out = []
        for segment in self.segments:
            for batch in segment.batches:
                for offset, record in zip(record_offsets(batch), batch.records):
                    out.append((offset, record.key, record.value))
        return out

    def batches(self) -> list[CleanableBatch]:
        return [b for s in self.segments for b in s.batches]
