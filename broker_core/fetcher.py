"""The follower side of replication: one fetcher per leader broker, as in Kafka's
ReplicaFetcherThread. A partition first truncates (to its high watermark, or by leader
epoch through OffsetsForLeaderEpoch, in one round or several), then fetches in a loop;
under ``truncation: diverging_epoch`` it fetches at once and truncates when a fetch
response names a diverging epoch."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from broker_core import mutants
from broker_core.config import EPOCH_TRUNCATION_RULES
from broker_core.context import NodeContext
from broker_core.cleaned_batch import record_offsets
from broker_core.effects import Halt
from broker_core.epoch_cache import UNDEFINED
from broker_core.errors import ErrorCode
from broker_core.messages import (
    EpochEndOffset, FetchPartition, FetchPartitionResult, FetchRequest, FetchResponse,
    OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse)
from broker_core.partition import Partition
from broker_core.quota_replication import ReplicationQuota, follower_fetch_throttled
from broker_core.types import TopicPartition


class FetchState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass
class LeaderFetcher:
    leader: int
    states: dict[TopicPartition, FetchState] = field(default_factory=dict)
    # While truncating: Kafka's PartitionFetchState.fetchOffset (the high watermark at
    # first, then each round's offset), the rounds so far, and the current leader epoch
    # the outstanding OffsetsForLeaderEpoch request was sent with.
    fetch_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    rounds: dict[TopicPartition, int] = field(default_factory=dict)
    asked_in_epoch: dict[TopicPartition, int] = field(default_factory=dict)
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
                 on_append=lambda partition: None, quota: ReplicationQuota | None = None):
        self.ctx = ctx
        self.partitions = partitions
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.on_append = on_append
        self.quota = quota if quota is not None else ReplicationQuota()  # the follower throttle
        self.in_sync: dict[TopicPartition, bool] = {}  # PartitionFetchState.isReplicaInSync, from the last answer

    # -- membership ------------------------------------------------------------------
    def add_partition(self, partition: Partition) -> None:
        self.remove_partition(partition.tp)
        if partition.leader < 0:
            return
        fetcher = self.fetchers.setdefault(partition.leader, LeaderFetcher(partition.leader))
        rule = partition.config.truncation
        has_epochs = partition.log.epochs.latest_epoch != UNDEFINED
        fetcher.rounds[partition.tp] = 0
        if rule == "diverging_epoch" and has_epochs:
            # 3.0.0 AbstractFetcherThread.partitionFetchState (isTruncationOnFetchSupported)
            # and ReplicaManager.initialFetchOffset: fetch from the log end at once.
            fetcher.states[partition.tp] = FetchState.FETCHING
        elif rule in EPOCH_TRUNCATION_RULES and has_epochs:
            fetcher.states[partition.tp] = FetchState.TRUNCATING
            fetcher.fetch_offsets[partition.tp] = partition.log.high_watermark
        else:
            self._truncate(partition, partition.log.high_watermark, "high_watermark")
            fetcher.states[partition.tp] = FetchState.FETCHING
        self._maybe_send(fetcher)

    def remove_partition(self, tp: TopicPartition) -> None:
        for leader in sorted(self.fetchers):
            fetcher = self.fetchers[leader]
            fetcher.fetch_offsets.pop(tp, None)
            fetcher.rounds.pop(tp, None)
            fetcher.asked_in_epoch.pop(tp, None)
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
        truncating = [tp for tp, s in fetcher.states.items() if s is FetchState.TRUNCATING]
        truncating.sort()
        request: OffsetsForLeaderEpochRequest | FetchRequest
        if truncating:
            epochs = {tp: (self.partitions[tp].leader_epoch, self.partitions[tp].log.epochs.latest_epoch)
                      for tp in truncating}
            fetcher.asked_in_epoch = {tp: epochs[tp][0] for tp in truncating}
            request = OffsetsForLeaderEpochRequest(correlation_id, ctx.broker_id, epochs)
        else:
            now = ctx.now_ms
            wanted = {tp: self._fetch_partition(self.partitions[tp]) for tp in sorted(fetcher.states)
                      if not follower_fetch_throttled(self.quota, tp, self.in_sync.get(tp, False), now)}
            if not wanted:  # every partition throttled: no request, back off (AbstractFetcherThread.maybeFetch)
                fetcher.backing_off = True
                ctx.set_timer(fetcher.backoff_key, ctx.config.replica_fetch_backoff_ms)
                return
            request = FetchRequest(correlation_id, ctx.broker_id, ctx.config.replica_fetch_wait_max_ms,
                                   ctx.config.replica_fetch_min_bytes, wanted)
        fetcher.in_flight = correlation_id
        ctx.send(fetcher.leader, request)
        ctx.set_timer(fetcher.timeout_key, ctx.config.replica_socket_timeout_ms + ctx.config.replica_fetch_wait_max_ms)

    def _fetch_partition(self, partition: Partition) -> FetchPartition:
        """What one partition's fetch asks for: from the log end; the current leader
        epoch unless the profile's fetches carry none (0.8.2 FetchRequest); the epoch of
        the last record under ``diverging_epoch`` (3.0.0 ReplicaFetcherThread.buildFetch:
        LastFetchedEpoch, which after an append or truncation is the log's latest epoch)."""
        config = partition.config
        current_epoch = partition.leader_epoch if config.follower_fetch_leader_epoch else -1
        last_fetched = partition.log.epochs.latest_epoch if config.truncation == "diverging_epoch" else -1
        return FetchPartition(partition.log.log_end_offset, current_epoch, self.ctx.config.replica_fetch_max_bytes,
                              last_fetched)

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
            partition = self.partitions[tp]
            if fetcher.states.get(tp) is not FetchState.TRUNCATING:
                continue
            if fetcher.asked_in_epoch.get(tp) != partition.leader_epoch:
                continue  # asked in an earlier epoch: the new epoch asks again (Kafka ignores it too)
            result = response.partitions[tp]
            if result.error is not ErrorCode.NONE:
                backoff = True
                continue
            self._truncation_round(fetcher, partition, result)
        self._finish(fetcher, backoff)

    def _truncation_round(self, fetcher: LeaderFetcher, partition: Partition, result) -> None:
        tp = partition.tp
        rule = partition.config.truncation
        requested_epoch = partition.log.epochs.latest_epoch
        if rule == "leader_epoch_kip101":
            target, done = self._kip101_target(partition, result, fetcher.fetch_offsets[tp]), True
        else:
            target, done = self._kip279_target(partition, result, fetcher.fetch_offsets[tp])
        fetcher.rounds[tp] += 1
        self.ctx.trace("epoch_end_offset_received", partition=str(tp), leader=partition.leader,
                       leader_epoch=partition.leader_epoch, rule=rule, round=fetcher.rounds[tp],
                       requested_epoch=requested_epoch, answered_epoch=result.leader_epoch,
                       answered_end_offset=result.end_offset, log_end_offset=partition.log.log_end_offset,
                       truncate_to=target, done=done)
        fallback = result.end_offset == UNDEFINED
        self._truncate(partition, target, "high_watermark" if fallback else rule, fetcher.rounds[tp])
        if done:
            fetcher.states[tp] = FetchState.FETCHING
        fetcher.fetch_offsets[tp] = target

    @staticmethod
    def _kip101_target(partition: Partition, result, fetch_offset: int) -> int:
        """Kafka 0.11 to 1.1 (1.1.0 ReplicaFetcherThread.maybeTruncate): one round, the
        leader's offset only. UNDEFINED: the high watermark; an offset at or past our log
        end: keep the log; else truncate to it, whatever epoch our records there carry."""
        if result.end_offset == UNDEFINED:
            return fetch_offset
        return min(result.end_offset, partition.log.log_end_offset)

    @staticmethod
    def _kip279_target(partition: Partition, result, fetch_offset: int) -> tuple[int, bool]:
        """Kafka 2.0+ (2.7.0 AbstractFetcherThread.getOffsetTruncationState): returns the
        offset to truncate to and whether truncation is complete. If the leader answered
        an epoch we do not have, truncate to our end of the largest epoch below it and ask
        again (KIP-279); the next request carries our latest epoch after that truncation."""
        log = partition.log
        if result.end_offset == UNDEFINED:
            return fetch_offset, True
        if result.leader_epoch == UNDEFINED:
            return min(result.end_offset, log.log_end_offset), True
        own_epoch, own_end = log.epochs.end_offset_for(result.leader_epoch, log.log_end_offset)
        if own_end == UNDEFINED:
            # We track no epoch at or below the answer: the leader's offset alone.
            return min(result.end_offset, log.log_end_offset), True
        if own_epoch != result.leader_epoch:
            return min(own_end, log.log_end_offset), False
        return min(own_end, result.end_offset, log.log_end_offset), True

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
                if not self._out_of_range(partition, result.log_end_offset, result.log_start_offset):
                    return  # the broker halted: nothing after this happens
                continue
            if result.error is not ErrorCode.NONE:
                backoff = True
                continue
            if self._apply(partition, result):
                fetcher.rounds[tp] = 0
            if result.diverging_epoch >= 0 and partition.config.truncation == "diverging_epoch":
                self._truncate_on_fetch_response(fetcher, partition, result)
        self._finish(fetcher, backoff)

    def _truncate_on_fetch_response(self, fetcher: LeaderFetcher, partition: Partition,
                                    result: FetchPartitionResult) -> None:
        """3.0.0 AbstractFetcherThread.truncateOnFetchResponse: the diverging epoch is
        taken as an OffsetsForLeaderEpoch answer (getOffsetTruncationState, KIP-279), the
        initial offset being the fetch offset (our log end); whether or not truncation is
        complete the partition keeps fetching, and its next fetch, carrying the log's
        latest epoch after the truncation, is the next round."""
        tp = partition.tp
        answer = EpochEndOffset(ErrorCode.NONE, result.diverging_epoch, result.diverging_end_offset)
        last_fetched = partition.log.epochs.latest_epoch
        target, done = self._kip279_target(partition, answer, partition.log.log_end_offset)
        fetcher.rounds[tp] += 1
        self.ctx.trace("diverging_epoch_received", partition=str(tp), leader=partition.leader,
                       leader_epoch=partition.leader_epoch, round=fetcher.rounds[tp], last_fetched_epoch=last_fetched,
                       diverging_epoch=result.diverging_epoch, diverging_end_offset=result.diverging_end_offset,
                       log_end_offset=partition.log.log_end_offset, truncate_to=target, done=done)
        self._truncate(partition, target, "diverging_epoch", fetcher.rounds[tp])

    def _apply(self, partition: Partition, result) -> bool:
        log = partition.log
        appended = False
        if self.quota.is_throttled(partition.tp):  # processPartitionData: quota.record(records.sizeInBytes)
            self.quota.record(sum(b.size_bytes for b in result.batches), self.ctx.now_ms)
        for batch in result.batches:
            if batch.next_offset <= log.log_end_offset:
                continue
            if batch.base_offset < log.log_end_offset:
                break  # straddles our log end: refetch from it
            # (A batch past our log end is the leader's compacted log: the cleaner removed
            # the offsets between, and a follower appends across the gap as Kafka's does.)
            for effect in log.append_as_follower(batch, self.ctx.now_ms):
                self.ctx.emit(effect)
            appended = True
        for effect in log.roll_traces() if log.rolls else ():
            self.ctx.emit(effect)
        if self.quota.throttled:  # processFetchRequest: lag = leader's high watermark - next offset
            self.in_sync[partition.tp] = result.high_watermark - log.log_end_offset <= 0
        new_high_watermark = (result.high_watermark if mutants.FOLLOWER_HW_UNCAPPED
                              else min(result.high_watermark, log.log_end_offset))
        if new_high_watermark != log.high_watermark:
            log.high_watermark = new_high_watermark
        if result.log_start_offset > log.log_start_offset and not mutants.LOG_START_NOT_APPLIED:
            # 2.7.0 ReplicaFetcherThread.processPartitionData: the follower takes the
            # leader's log start (maybeIncrementLogStartOffset, LeaderOffsetIncremented);
            # its own retention check then deletes the segments below it.
            for effect in log.maybe_increment_log_start_offset(result.log_start_offset):
                self.ctx.emit(effect)
        if appended:
            self.on_append(partition)
        return appended

    def _out_of_range(self, partition: Partition, leader_log_end: int, leader_log_start: int) -> bool:
        """The fetch offset is out of range at the leader, whose log end and start come
        with the answer (Kafka asks ListOffsets for them). Returns False when the broker
        halted instead."""
        log = partition.log
        if partition.config.follower_out_of_range == "halt_if_unclean_off":
            return self._out_of_range_08(partition, leader_log_end, leader_log_start)
        # 2.7.0 AbstractFetcherThread.fetchOffsetAndTruncate (3.0.0 alike).
        if 0 <= leader_log_end < log.log_end_offset:
            # The leader has less than we do (an unclean leader): drop what it lacks.
            self._truncate(partition, leader_log_end, "offset_out_of_range")
        elif leader_log_start > log.log_end_offset:
            self._truncate_fully_and_start_at(partition, leader_log_start)
        # else: keep the log and fetch from its end (max(leader's start, our end))
        return True

    def _out_of_range_08(self, partition: Partition, leader_log_end: int, leader_log_start: int) -> bool:
        """0.8.2.2 ReplicaFetcherThread.handleOffsetOutOfRange: a leader behind us may be
        truncated to only where the topic allows unclean election; else the broker halts
        (Runtime.halt(1)) rather than lose data. A leader not behind us: truncate fully
        and start at its log start, whatever our log end."""
        log = partition.log
        if 0 <= leader_log_end < log.log_end_offset:
            if not partition.config.unclean_leader_election_enable:
                self.ctx.trace("truncation_refused", partition=str(partition.tp), leader=partition.leader,
                               leader_epoch=partition.leader_epoch, leader_log_end_offset=leader_log_end,
                               log_end_offset=log.log_end_offset, reason="unclean_leader_election_disabled")
                self.ctx.emit(Halt(f"log truncation is not allowed for topic {partition.tp.topic}: leader "
                                   f"{partition.leader}'s latest offset {leader_log_end} is less than "
                                   f"replica's latest offset {log.log_end_offset}"))
                return False
            self._truncate(partition, leader_log_end, "offset_out_of_range")
        else:
            self._truncate_fully_and_start_at(partition, leader_log_start)
        return True

    def _truncate_fully_and_start_at(self, partition: Partition, offset: int) -> None:
        log = partition.log
        self._truncate(partition, 0, "offset_out_of_range")
        log.log_start_offset = log.log_end_offset = log.high_watermark = offset

    def _truncate(self, partition: Partition, offset: int, rule: str, round_: int = 0) -> None:
        log = partition.log
        before = log.log_end_offset
        if mutants.FOLLOWER_SKIPS_TRUNCATION and rule != "offset_out_of_range":
            return  # a follower's truncation on becoming one, or by leader epoch, skipped
        if offset >= before:
            if partition.config.truncation in ("leader_epoch", "diverging_epoch"):
                # Kafka 2.1+ Log.truncateTo: even with nothing to remove, drop epochs that
                # start at the log end (a leader that assigned its epoch but appended
                # nothing), or the next round would ask for that epoch again.
                for effect in log.drop_epochs_at_log_end():
                    self.ctx.emit(effect)
            return
        records_lost = [(o, value) for b in log.load(offset)
                        for o, value in zip(record_offsets(b), b.records.values) if o >= offset]
        for effect in log.truncate_to(offset):
            self.ctx.emit(effect)
        self.ctx.trace("log_truncated", partition=str(partition.tp), rule=rule, from_offset=before,
                       to_offset=log.log_end_offset, leader=partition.leader, leader_epoch=partition.leader_epoch,
                       round=round_,
                       removed=[v for _, v in records_lost[:50]], removed_count=len(records_lost))
