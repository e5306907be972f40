"""Retention: which of a log's oldest segments are deleted, and why (Kafka 2.7.0
core/src/main/scala/kafka/log/Log.scala: deleteOldSegments, deletableSegments,
deleteRetentionMsBreachedSegments, deleteRetentionSizeBreachedSegments,
deleteLogStartOffsetBreachedSegments; run by LogManager.cleanupLogs every
log.retention.check.interval.ms).

Whole segments go, oldest first, while a rule holds and the segment lies wholly below
the high watermark (so the log start never passes it); a last segment that is empty is
never deleted. Sizes are v2 bytes (``Segment.log_bytes``): retention.bytes means the
same in the simulation as on the real broker's files. The log itself deletes the files
and moves the log start (``PartitionLog.delete_oldest_segments``).
"""
from __future__ import annotations

from typing import Callable

from broker_core.config import BrokerConfig
from broker_core.effects import Effect, Trace
from broker_core.log import PartitionLog, Segment

Predicate = Callable[[Segment, "Segment | None"], bool]


def deletable_count(log: PartitionLog, predicate: Predicate) -> int:
    """Log.deletableSegments: how many of the oldest segments ``predicate`` holds for,
    each wholly below the high watermark, a last empty one excepted."""
    segments = log.segments
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log.log_end_offset
        last_and_empty = following is None and segment.log_bytes == 0
        if log.high_watermark >= upper and not last_and_empty and predicate(segment, following):
            count += 1
        else:
            break
    return count


def _retention_ms_breached(log: PartitionLog, now_ms: int, config: BrokerConfig) -> Predicate | None:
    """deleteRetentionMsBreachedSegments: startMs - segment.largestTimestamp > retentionMs."""
    retention_ms = config.retention_ms
    if retention_ms < 0:
        return None
    return lambda segment, _following: now_ms - segment.largest_timestamp > retention_ms


def _retention_bytes_breached(log: PartitionLog, now_ms: int, config: BrokerConfig) -> Predicate | None:
    """deleteRetentionSizeBreachedSegments: while the log's size less the segments
    taken so far stays at or above retention.bytes."""
    retention_bytes = config.log_retention_bytes
    size = sum(segment.log_bytes for segment in log.segments)
    if retention_bytes < 0 or size < retention_bytes:
        return None
    excess = [size - retention_bytes]

    def breached(segment: Segment, _following: Segment | None) -> bool:
        if excess[0] - segment.log_bytes >= 0:
            excess[0] -= segment.log_bytes
            return True
        return False
    return breached


def _log_start_offset_breached(log: PartitionLog, now_ms: int, config: BrokerConfig) -> Predicate | None:
    """deleteLogStartOffsetBreachedSegments: the next segment starts at or below the
    log start (a follower that took its leader's log start)."""
    return lambda _segment, following: following is not None and following.base_offset <= log.log_start_offset


RULES = (("retention_ms", _retention_ms_breached), ("retention_bytes", _retention_bytes_breached),
         ("log_start_offset", _log_start_offset_breached))


def delete_old_segments(log: PartitionLog, now_ms: int, config: BrokerConfig) -> list[Effect]:
    """Log.deleteOldSegments with cleanup.policy=delete: each rule in Kafka's order,
    each deletion traced as ``segments_deleted`` with the new log start offset."""
    effects: list[Effect] = []
    for reason, rule in RULES:
        predicate = rule(log, now_ms, config)
        count = deletable_count(log, predicate) if predicate is not None else 0
        if not count:
            continue
        bases = [segment.base_offset for segment in log.segments[:count]]
        deleted_bytes = sum(segment.log_bytes for segment in log.segments[:count])
        effects += log.delete_oldest_segments(count, now_ms)
        effects += log.roll_traces()
        effects.append(Trace("segments_deleted", {
            "partition": str(log.tp), "reason": reason, "base_offsets": bases, "deleted_bytes": deleted_bytes,
            "log_start_offset": log.log_start_offset}))
    return effects
