"""The two requests that ask a leader where its log stands rather than for its records:
a client's ListOffsets (by the earliest or latest offset, or by timestamp) and
OffsetsForLeaderEpoch (a follower's, or a client's, end offset of a leader epoch).

They read the hosted partitions and answer at once: no delayed operation, no state of
their own, so they live apart from ``replica_manager.py``'s produce and fetch paths (2.7.0
KafkaApis handleListOffsetRequest and handleOffsetForLeaderEpochRequest, through
ReplicaManager.fetchOffsetForTimestamp and lastOffsetForLeaderEpoch). The broker hands
them its context and ``ReplicaManager.partitions``.
"""
from __future__ import annotations

from typing import Hashable, Mapping

from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.messages import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, EpochEndOffset, ListOffsetsPartitionResult, ListOffsetsRequest,
    ListOffsetsResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse)
from broker_core.partition import Partition, leader_epoch_error
from broker_core.timestamp_lookup import offset_for_timestamp
from broker_core.types import TopicPartition


def handle_list_offsets(ctx: NodeContext, partitions: Mapping[TopicPartition, Partition], src: Hashable,
                        request: ListOffsetsRequest) -> None:
    """A client's ListOffsets (2.7.0 Partition.fetchOffsetForTimestamp, read
    uncommitted). A timestamp: broker_core.timestamp_lookup. Earliest: the log start offset, with the epoch of the earliest
    cached entry if it starts there (Log.fetchOffsetByTimestamp). Latest: the high
    watermark with the leader's epoch, or OFFSET_NOT_AVAILABLE while a new leader's
    high watermark is still below the log end offset it became leader at (the
    previous leader's committed records may lie above it): the consumer would
    otherwise start behind records it then reads twice. 0.8.2.2 answers the high
    watermark (``offsets_unavailable_below_epoch_start``)."""
    results = {}
    for tp in sorted(request.partitions):
        partition = partitions.get(tp)
        if partition is None or not partition.is_leader:
            results[tp] = ListOffsetsPartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            continue
        log = partition.log
        target = request.partitions[tp]
        if target == EARLIEST_TIMESTAMP:
            first = log.epochs.entries[0] if log.epochs.entries else None
            epoch = first[0] if first is not None and first[1] <= log.log_start_offset else -1
            results[tp] = ListOffsetsPartitionResult(ErrorCode.NONE, log.log_start_offset, epoch)
        elif target != LATEST_TIMESTAMP:
            results[tp] = offset_for_timestamp(log, target, _high_watermark_below_epoch_start(partition))
        elif _high_watermark_below_epoch_start(partition):
            results[tp] = ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)
        else:
            results[tp] = ListOffsetsPartitionResult(ErrorCode.NONE, log.high_watermark, partition.leader_epoch)
    ctx.send(src, ListOffsetsResponse(request.correlation_id, results))


def handle_offsets_for_leader_epoch(ctx: NodeContext, partitions: Mapping[TopicPartition, Partition],
                                    src: Hashable, request: OffsetsForLeaderEpochRequest) -> None:
    """2.7.0 Partition.lastOffsetForLeaderEpoch: fenced as a fetch is
    (``leader_epoch_error``), then the end offset of the asked epoch from the leader's
    epoch cache; before KIP-279 (``leader_epoch_kip101``) an offset only."""
    results = {}
    for tp in sorted(request.partitions):
        current_epoch, leader_epoch = request.partitions[tp]
        partition = partitions.get(tp)
        error = leader_epoch_error(partition, current_epoch)
        if partition is None or error is not ErrorCode.NONE:
            results[tp] = EpochEndOffset(error, -1, -1)
            continue
        epochs, log_end_offset = partition.log.epochs, partition.log.log_end_offset
        if partition.config.truncation == "leader_epoch_kip101":  # before KIP-279: an offset only
            results[tp] = EpochEndOffset(ErrorCode.NONE, -1, epochs.end_offset_for_kip101(leader_epoch, log_end_offset))
            continue
        epoch, end = epochs.end_offset_for(leader_epoch, log_end_offset)
        results[tp] = EpochEndOffset(ErrorCode.NONE, epoch, end)
    ctx.send(src, OffsetsForLeaderEpochResponse(request.correlation_id, results))


def _high_watermark_below_epoch_start(partition: Partition) -> bool:
    start = partition.leader_epoch_start_offset
    return (partition.config.offsets_unavailable_below_epoch_start and start is not None
            and start > partition.log.high_watermark)
