"""The follower side of replication: one fetcher per leader broker, as in Kafka's
ReplicaFetcherThread. A partition first truncates (to its high watermark, or by leader
epoch through OffsetsForLeaderEpoch), then fetches in a loop."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from broker_core.context import NodeContext
from broker_core.epoch_cache import UNDEFINED
from broker_core.errors import ErrorCode
from broker_core.messages import (
    FetchPartition, FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse)
from broker_core.partition import Partition
from broker_core.types import TopicPartition


class FetchState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass
class LeaderFetcher:
    leader: int
    states: dict[TopicPartition, FetchState] = field(default_factory=dict)
    in_flight: int | None = None  # correlation id of the outstanding request
    backing_off: bool = False

    @property
    def timeout_key(self) -> tuple:
        return ("fetch-timeout", self.leader)

    @property
    def backoff_key(self) -> tuple:
        return ("fetch-backoff", self.leader)


class ReplicaFetcherManager:
    def __init__(self, ctx: NodeContext, partitions: dict[TopicPartition, Partition],
                 on_append=lambda partition: None):
        self.ctx = ctx
        self.partitions = partitions
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.on_append = on_append

    # -- membership ------------------------------------------------------------------
    def add_partition(self, partition: Partition) -> None:
        self.remove_partition(partition.tp)
        if partition.leader < 0:
            return
        rule = partition.config.truncation
        if rule == "leader_epoch" and partition.log.epochs.latest_epoch != UNDEFINED:
            state = FetchState.TRUNCATING
        else:
            self._truncate(partition, partition.log.high_watermark, "high_watermark")
            state = FetchState.FETCHING
        fetcher = self.fetchers.setdefault(partition.leader, LeaderFetcher(partition.leader))
        fetcher.states[partition.tp] = state
        self._maybe_send(fetcher)

    def remove_partition(self, tp: TopicPartition) -> None:
        for leader in sorted(self.fetchers):
            fetcher = self.fetchers[leader]
            if fetcher.states.pop(tp, None) is not None and not fetcher.states:
                self.ctx.cancel_timer(fetcher.timeout_key)
                self.ctx.cancel_timer(fetcher.backoff_key)
                del self.fetchers[leader]

    # -- requests --------------------------------------------------------------------
    def _maybe_send(self, fetcher: LeaderFetcher) -> None:
        if fetcher.in_flight is not None or fetcher.backing_off or not fetcher.states:
            return
        ctx = self.ctx
        correlation_id = ctx.next_correlation_id()
        truncating = sorted(tp for tp, s in fetcher.states.items() if s is FetchState.TRUNCATING)
        request: OffsetsForLeaderEpochRequest | FetchRequest
        if truncating:
            epochs = {tp: (self.partitions[tp].leader_epoch, self.partitions[tp].log.epochs.latest_epoch)
                      for tp in truncating}
            request = OffsetsForLeaderEpochRequest(correlation_id, ctx.broker_id, epochs)
        else:
            wanted = {tp: FetchPartition(self.partitions[tp].log.log_end_offset, self.partitions[tp].leader_epoch,
                                         ctx.config.replica_fetch_max_bytes)
                      for tp in sorted(fetcher.states)}
            request = FetchRequest(correlation_id, ctx.broker_id, ctx.config.replica_fetch_wait_max_ms,
                                   ctx.config.replica_fetch_min_bytes, wanted)
        fetcher.in_flight = correlation_id
        ctx.send(fetcher.leader, request)
        ctx.set_timer(fetcher.timeout_key, ctx.config.replica_socket_timeout_ms + ctx.config.replica_fetch_wait_max_ms)

    def request_timed_out(self, leader: int) -> None:
        fetcher = self.fetchers.get(leader)
        if fetcher is not None:
            fetcher.in_flight = None
            self.ctx.trace("fetch_timed_out", leader=leader)
            self._maybe_send(fetcher)

    def backoff_done(self, leader: int) -> None:
        fetcher = self.fetchers.get(leader)
        if fetcher is not None:
            fetcher.backing_off = False
            self._maybe_send(fetcher)

    def _finish(self, fetcher: LeaderFetcher, backoff: bool) -> None:
        fetcher.in_flight = None
        self.ctx.cancel_timer(fetcher.timeout_key)
        if backoff:
            fetcher.backing_off = True
            self.ctx.set_timer(fetcher.backoff_key, self.ctx.config.replica_fetch_backoff_ms)
        else:
            self._maybe_send(fetcher)

    def _fetcher_for_response(self, src, correlation_id: int) -> LeaderFetcher | None:
        fetcher = self.fetchers.get(src)
        if fetcher is None or fetcher.in_flight != correlation_id:
            return None  # late answer to a request we gave up on
        return fetcher

    # -- OffsetsForLeaderEpoch -------------------------------------------------------
    def handle_epoch_response(self, src, response: OffsetsForLeaderEpochResponse) -> None:
        fetcher = self._fetcher_for_response(src, response.correlation_id)
        if fetcher is None:
            return
        backoff = False
        for tp in sorted(response.partitions):
            if fetcher.states.get(tp) is not FetchState.TRUNCATING:
                continue
            result = response.partitions[tp]
            partition = self.partitions[tp]
            if result.error is not ErrorCode.NONE:
                backoff = True
                continue
            if result.leader_epoch == UNDEFINED:
                self._truncate(partition, partition.log.high_watermark, "high_watermark")
            else:
                target = result.end_offset
                if result.leader_epoch != partition.log.epochs.latest_epoch:
                    # KIP-279: the leader answered for an older epoch; use our own end of it.
                    own_epoch, own_end = partition.log.epochs.end_offset_for(result.leader_epoch, partition.log.log_end_offset)
                    if own_epoch == result.leader_epoch:
                        target = min(target, own_end)
                self._truncate(partition, target, "leader_epoch")
            fetcher.states[tp] = FetchState.FETCHING
        self._finish(fetcher, backoff)

    # -- Fetch -----------------------------------------------------------------------
    def handle_fetch_response(self, src, response: FetchResponse) -> None:
        fetcher = self._fetcher_for_response(src, response.correlation_id)
        if fetcher is None:
            return
        backoff = False
        for tp in sorted(response.partitions):
            if fetcher.states.get(tp) is not FetchState.FETCHING:
                continue
            result = response.partitions[tp]
            partition = self.partitions[tp]
            if result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(partition, result.log_end_offset, result.log_start_offset)
                continue
            if result.error is not ErrorCode.NONE:
                backoff = True
                continue
            self._apply(partition, result)
        self._finish(fetcher, backoff)

    def _apply(self, partition: Partition, result) -> None:
        log = partition.log
        appended = False
        for batch in result.batches:
            if batch.next_offset <= log.log_end_offset:
                continue
            if batch.base_offset != log.log_end_offset:
                break  # not contiguous: refetch from our log end
            for effect in log.append_as_follower(batch):
                self.ctx.emit(effect)
            appended = True
        new_high_watermark = min(result.high_watermark, log.log_end_offset)
        if new_high_watermark != log.high_watermark:
            log.high_watermark = new_high_watermark
        if appended:
            self.on_append(partition)

    def _out_of_range(self, partition: Partition, leader_log_end: int, leader_log_start: int) -> None:
        log = partition.log
        if 0 <= leader_log_end < log.log_end_offset:
            # The leader has less than we do (an unclean leader): drop what it lacks.
            self._truncate(partition, leader_log_end, "offset_out_of_range")
        elif leader_log_start > log.log_end_offset:
            self._truncate(partition, 0, "offset_out_of_range")
            log.log_start_offset = log.log_end_offset = log.high_watermark = leader_log_start

    def _truncate(self, partition: Partition, offset: int, rule: str) -> None:
        log = partition.log
        before = log.log_end_offset
        if offset >= before:
            return
        records_lost = [(b.base_offset + i, value) for b in log.read(offset, 2**62)
                        for i, value in enumerate(b.records.values) if b.base_offset + i >= offset]
        for effect in log.truncate_to(offset):
            self.ctx.emit(effect)
        self.ctx.trace("log_truncated", partition=str(partition.tp), rule=rule, from_offset=before,
                       to_offset=log.log_end_offset, leader=partition.leader, leader_epoch=partition.leader_epoch,
                       removed=[v for _, v in records_lost[:50]], removed_count=len(records_lost))
