"""The broker's partitions: produce, fetch, LeaderAndIsr, StopReplica, delayed operations,
and when the leader's ISR changes (how it changes is broker_core.isr_change; the offset
requests, ListOffsets and OffsetsForLeaderEpoch, are broker_core.offset_requests).
"""
from __future__ import annotations

from typing import Callable, Hashable, Mapping

from broker_core import mutants
from broker_core.config import BrokerConfig
from broker_core.context import NodeContext
from broker_core.dynamic_config import configure_log
from broker_core.delayed import DelayedFetch, DelayedProduce, HeldProduce, Purgatory
from broker_core.epoch_cache import UNDEFINED
from broker_core.effects import CloseConnection, DeleteFile
from broker_core.errors import ErrorCode
from broker_core.group_records import OFFSETS_TOPIC
from broker_core.isr_change import IsrChanger
from broker_core.log import PartitionLog
from broker_core.storage import LogStorage, StoredBatch
from broker_core.messages import (
    CONSUMER_REPLICA_ID, EPOCH_DURING_DELETE, NO_LEADER_EPOCH, FetchPartition, FetchPartitionResult, FetchRequest,
    FetchResponse, LeaderAndIsrRequest, LeaderAndIsrResponse, PartitionState, ProducePartitionResult, ProduceRequest,
    ProduceResponse, StopReplicaRequest, StopReplicaResponse)
from broker_core.partition import Partition, leader_epoch_error
from broker_core.quota_enforcement import JAVA_INT_MAX, ClientQuotaEnforcer
from broker_core.quota_replication import ReplicationQuotas, leader_read_throttled
from broker_core.types import TopicPartition

# Kafka's internal topics (Topic.isInternal, 2.7.0): only the broker itself appends to
# them (ReplicaManager.appendToLocalLog refuses a client's append with
# InvalidTopicException). isrlab has the group coordinator's topic only.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})


class InternalAppend:
    """The source of a produce the broker makes itself (2.7.0 ReplicaManager.appendRecords
    with internalTopicsAllowed and origin Coordinator, as GroupMetadataManager
    .appendForGroup calls it): the same append, flush and delayed-produce path as a
    client's, but its answer goes to ``done`` (the partitions' results) instead of a
    connection, and no client quota counts it."""
    __slots__ = ("done",)

    def __init__(self, done: Callable[[Mapping[TopicPartition, ProducePartitionResult]], None]) -> None:
        self.done = done


class ReplicaManager:
    def __init__(self, ctx: NodeContext, topic_configs: dict[str, BrokerConfig],
                 recovered_logs: dict[TopicPartition, PartitionLog]):
        self.ctx = ctx
        self.topic_configs = topic_configs
        self.partitions: dict[TopicPartition, Partition] = {}
        self.recovered_logs = recovered_logs
        self.storage: LogStorage | None = None  # the runtime's storage port, given at Started
        self.purgatory = Purgatory()
        self.controller_epoch = -1
        self.on_become_follower = lambda partition: None  # set by the node (the fetcher)
        self.on_become_leader = lambda partition: None
        self.stop_fetching = lambda tps: None  # set by the node (the fetcher)
        # 2.7.0 KafkaApis onLeadershipChange: a partition this broker started to lead
        # (True) or now follows or deleted (False); set by the node (the group coordinator)
        self.leadership_changed: Callable[[Partition, bool], None] = lambda partition, leading: None
        self.isr = IsrChanger(ctx, self.partitions, self._after_isr_change)
        self.client_quotas = ClientQuotaEnforcer(ctx)  # recorded where produces and fetches are answered
        self.replication_quotas = ReplicationQuotas.from_config(ctx.broker_id, ctx.config)
        self.replication_quotas.apply_topic_configs(topic_configs)

    def config_for(self, topic: str) -> BrokerConfig:
        return self.topic_configs.get(topic, self.ctx.config)

    def get_or_create(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            config = self.config_for(tp.topic)
            log = self.recovered_logs.pop(tp, None)
            if log is None:
                log = PartitionLog(tp, config.log_segment_bytes, self.storage, config.log_index_interval_bytes)
                configure_log(log, config)
            partition = Partition(self.ctx.broker_id, tp, log, config)
            self.partitions[tp] = partition
        return partition

    def leading(self) -> list[Partition]:
        return [p for tp, p in sorted(self.partitions.items()) if p.is_leader]

    # -- requests from the controller --------------------------------------------------
    def _fenced_controller(self, src: Hashable, request, name: str, response_type) -> bool:
        """A request from an older controller epoch than this broker has seen is refused
        (STALE_CONTROLLER_EPOCH: 2.7.0 ReplicaManager.becomeLeaderOrFollower,
        stopReplicas); otherwise its epoch becomes the newest seen."""
        if request.controller_epoch < self.controller_epoch and not mutants.STALE_CONTROLLER_EPOCH_ACCEPTED:
            self.ctx.trace("request_fenced", request=name, controller_epoch=request.controller_epoch,
                           known_controller_epoch=self.controller_epoch)
            self.ctx.send(src, response_type(request.correlation_id, ErrorCode.STALE_CONTROLLER_EPOCH))
            return True
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        return False

    # -- LeaderAndIsr ----------------------------------------------------------------
    def handle_leader_and_isr(self, src: Hashable, request: LeaderAndIsrRequest) -> None:
        ctx = self.ctx
        if self._fenced_controller(src, request, "leader_and_isr", LeaderAndIsrResponse):
            return
        errors = {}
        for tp in sorted(request.partitions):
            state = request.partitions[tp]
            partition = self.get_or_create(tp)
            errors[tp] = ErrorCode.NONE
            if state.leader_and_isr.leader_epoch <= partition.leader_epoch:
                continue  # already applied, or older than what this broker knows
            if state.leader_and_isr.leader == ctx.broker_id:
                self._become_leader(partition, state)
            elif state.leader_and_isr.leader in request.live_leaders:
                self._become_follower(partition, state)
            else:
                self._skip_become_follower(partition, state)
        ctx.send(src, LeaderAndIsrResponse(request.correlation_id, ErrorCode.NONE, errors))

    def _become_leader(self, partition: Partition, state: PartitionState) -> None:
        ctx = self.ctx
        self.isr.forget(partition.tp)
        was_leader = partition.is_leader
        for effect in partition.make_leader(state, ctx.now_ms):
            ctx.emit(effect)
        ctx.trace("became_leader", partition=str(partition.tp), leader_epoch=partition.leader_epoch,
                  isr=list(partition.isr), log_end_offset=partition.log.log_end_offset,
                  high_watermark=partition.log.high_watermark)
        self.on_become_leader(partition)
        if partition.maybe_advance_high_watermark():
            self._trace_high_watermark(partition)
        self._after_high_watermark_change(partition)
        if not was_leader:  # Partition.makeLeader's isNewLeader: a new epoch of a leader is no election
            self.leadership_changed(partition, True)

    def _skip_become_follower(self, partition: Partition, state: PartitionState) -> None:
        """ReplicaManager.makeFollowers (0.8.2.2 by the request's live leaders; 2.7.0 and
        3.0.0 by the metadata cache's alive brokers): a follower whose new leader is not
        alive (or is none) changes nothing: it keeps its leader, epoch and fetcher, so the
        same epoch can still be applied later. Only the log is created if missing
        (KAFKA-1647), which get_or_create did: a new partition stays without a leader."""
        self.ctx.trace("become_follower_skipped", partition=str(partition.tp), leader=state.leader_and_isr.leader,
                       leader_epoch=state.leader_and_isr.leader_epoch, current_leader=partition.leader,
                       current_leader_epoch=partition.leader_epoch, reason="leader_not_alive")

    def _become_follower(self, partition: Partition, state: PartitionState) -> None:
        was_leader = partition.is_leader
        self.isr.forget(partition.tp)
        old_leader = partition.leader
        partition.make_follower(state)
        self.ctx.trace("became_follower", partition=str(partition.tp), leader=partition.leader,
                       leader_epoch=partition.leader_epoch, log_end_offset=partition.log.log_end_offset,
                       high_watermark=partition.log.high_watermark)
        self.leadership_changed(partition, False)
        if was_leader and partition.config.demotion_completes_produces:
            # 2.7.0 ReplicaManager.makeFollowers: completeDelayedFetchOrProduceRequests for
            # every partition made follower; its parked produces find it no longer leads.
            # 0.8.2.2 makeFollowers leaves the purgatory alone (see handle_fetch).
            self._recheck_produces(partition.tp)
        if partition.config.truncation == "high_watermark" and old_leader == partition.leader:
            # 0.8.2 Partition.makeFollower returns false for the same leader: ReplicaManager
            # .makeFollowers neither truncates nor restarts the fetcher. (2.7 compares the
            # epochs as well, so an epoch bump there always restarts the fetcher.)
            return
        self.on_become_follower(partition)

    # -- StopReplica -----------------------------------------------------------------
    def handle_stop_replica(self, src: Hashable, request: StopReplicaRequest) -> None:
        """ReplicaManager.stopReplicas (2.7.0; 0.8.2.2 alike but without epochs): refuse an
        older controller epoch; skip a partition whose request epoch is not newer than
        its own (KIP-570: FENCED_LEADER_EPOCH, an equal epoch too), unless the request
        carries none or the deletion's (EpochDuringDelete); stop the fetchers of the
        rest. Without delete the partition stays as it is, log and state; with delete
        (a topic deletion) the partition and its log's files go (deletePartition,
        LogManager.asyncDelete). Delayed operations on it are checked again."""
        ctx = self.ctx
        if self._fenced_controller(src, request, "stop_replica", StopReplicaResponse):
            return
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in sorted(request.partitions):
            epoch = request.partitions[tp]
            partition = self.partitions.get(tp)
            stale = (partition is not None and epoch not in (NO_LEADER_EPOCH, EPOCH_DURING_DELETE)
                     and epoch <= partition.leader_epoch)
            errors[tp] = ErrorCode.FENCED_LEADER_EPOCH if stale else ErrorCode.NONE
        stopped = [tp for tp in sorted(errors) if errors[tp] is ErrorCode.NONE]
        self.stop_fetching(stopped)
        if request.delete_partitions:
            self._delete_partitions(stopped)
        for tp in stopped:  # completeDelayedFetchOrProduceRequests: a leader's waiting requests
            self._recheck_produces(tp)
            self._wake_fetches(self.purgatory.consumer_fetch_watch, tp)
            self._wake_fetches(self.purgatory.follower_fetch_watch, tp)
        ctx.trace("replicas_stopped", partitions=[str(tp) for tp in stopped], delete=request.delete_partitions,
                  ignored=[str(tp) for tp in sorted(errors) if errors[tp] is not ErrorCode.NONE],
                  controller_epoch=request.controller_epoch)
        ctx.send(src, StopReplicaResponse(request.correlation_id, ErrorCode.NONE, errors))

    def _delete_partitions(self, tps: list[TopicPartition]) -> None:
        """ReplicaManager.stopReplicas with deletePartition (2.7.0): the partition leaves
        the broker and its log's files are deleted, every file of its directory as the
        storage port lists them (Kafka renames the directory to <dir>.<uuid>-delete and
        deletes it later; a crash in between leaves files that the next StopReplica
        deletes again). A log recovered at startup but not yet named by a LeaderAndIsr
        goes too: its broker was offline when the deletion started."""
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            if partition is not None:
                self.leadership_changed(partition, False)
            log = partition.log if partition is not None else self.recovered_logs.pop(tp, None)
            self.isr.forget(tp)
            directory = f"{log.directory if log is not None else tp}/"
            paths = sorted(p for p in self.storage.paths() if p.startswith(directory)) if self.storage else []
            for path in paths:
                self.ctx.emit(DeleteFile(path))
            self.ctx.trace("replica_deleted", partition=str(tp), files=len(paths),
                           log_end_offset=log.log_end_offset if log is not None else None)

    # -- produce ---------------------------------------------------------------------
    def handle_produce(self, src: Hashable, request: ProduceRequest) -> None:
        ctx = self.ctx
        results: dict[TopicPartition, ProducePartitionResult] = {}
        required: dict[TopicPartition, int] = {}
        bases: dict[TopicPartition, int] = {}
        flushes: dict[TopicPartition, int] = {}
        appended: list[Partition] = []
        internal = type(src) is InternalAppend
        if not internal:
            self.client_quotas.request_arrived(src, request.client_id)
        for tp in sorted(request.partitions):
            partition = self.partitions.get(tp)
            if request.acks not in (0, 1, -1):
                results[tp] = ProducePartitionResult(ErrorCode.INVALID_REQUIRED_ACKS)
                continue
            if not internal and tp.topic in INTERNAL_TOPICS:
                results[tp] = ProducePartitionResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
                continue
            if partition is None:
                results[tp] = ProducePartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            error, batch, effects = partition.append_as_leader(request.partitions[tp], request.acks, ctx.now_ms)
            for effect in effects:
                ctx.emit(effect)
            if batch is None:
                results[tp] = ProducePartitionResult(error)
                continue
            appended.append(partition)
            if self.maybe_flush(partition):  # inline, as Kafka's Log.append: the answer waits for it
                flushes[tp] = partition.log.log_end_offset
            if request.acks == -1:
                required[tp] = batch.next_offset
                bases[tp] = batch.base_offset
            else:
                results[tp] = ProducePartitionResult(ErrorCode.NONE, batch.base_offset)
        if not internal:
            self.client_quotas.produce_received(src, request.correlation_id, request.client_id, request.user, request)
        held = HeldProduce(self.purgatory.next_id() if flushes else 0, src, request.correlation_id, request.acks,
                           request.timeout_ms, results, required, bases, flushes)
        if flushes:
            self.purgatory.hold_produce(held)
        else:
            self._answer_produce(held)
        for partition in appended:
            self._wake_fetches(self.purgatory.follower_fetch_watch, partition.tp)
            if partition.maybe_advance_high_watermark():
                self._trace_high_watermark(partition)
                self._after_high_watermark_change(partition)

    def _answer_produce(self, held: HeldProduce) -> None:
        """What KafkaApis does once ReplicaManager.appendRecords has appended (and flushed):
        acks=all parks a DelayedProduce and tries it at once (tryCompleteElseWatch: a
        duplicate of an idempotent producer's batch waits for an append the high
        watermark may already have passed); acks=1 answers; acks=0 answers nothing."""
        if held.required_offsets:
            op = DelayedProduce(self.purgatory.next_id(), held.src, held.correlation_id, held.required_offsets, held.base_offsets,
                                held.results)
            self.purgatory.park_produce(op)
            self.ctx.set_timer(op.timer_key, held.timeout_ms)
            self._try_complete_produce(op)
        elif held.acks != 0 or type(held.src) is InternalAppend:  # acks=0: a producer expects no answer
            self._send_produce(held.src, ProduceResponse(held.correlation_id, held.results))
        else:
            # acks=0: no answer carries the throttle time, but it mutes the connection
            self.client_quotas.produce_answered(held.src, held.correlation_id)
            if any(result.error is not ErrorCode.NONE for result in held.results.values()):
                # KafkaApis.handleProduceRequest (2.7.0 closeConnection; 0.8.2.2 alike): an
                # acks=0 producer hears of an error only by losing its connection, which
                # makes it refresh its metadata.
                self.ctx.emit(CloseConnection(held.src))

    def flush_completed(self, tp: TopicPartition) -> None:
        """An fsync of ``tp``'s log completed: answer the produces held for their flushes
        once the durable offset covers what each flush was to cover. A log truncated
        below that meanwhile has nothing left there to wait for (Kafka's append holds
        the partition's leaderIsrUpdateLock across its flush, so no leader change can
        come between; here one can, and the request is answered as appended)."""
        ids = self.purgatory.flush_watch.pop(tp, [])
        partition = self.partitions.get(tp)
        if not ids or partition is None:
            return
        log = partition.log
        remaining = []
        for op_id in ids:
            held = self.purgatory.held_produces[op_id]
            offset = held.flushes[tp]
            if log.durable_offset < offset <= log.log_end_offset:
                remaining.append(op_id)
                continue
            del held.flushes[tp]
            if not held.flushes:
                del self.purgatory.held_produces[op_id]
                self._answer_produce(held)
        if remaining:
            self.purgatory.flush_watch[tp] = remaining

    def _try_complete_produce(self, op: DelayedProduce, timed_out: bool = False) -> bool:
        """DelayedProduce.tryComplete and Partition.checkEnoughReplicasReachOffset
        (2.7.0; 0.8.2 alike): each partition is done when its high watermark passed the
        batch (an error if the maximal ISR is then below min.insync.replicas), or when
        this broker no longer leads it. There is no epoch check: a new epoch with the
        same leader (an ISR change by the controller) keeps it waiting. At the timeout
        (DelayedOperation.forceComplete, 0.8.2.2 expire) nothing is checked again: what
        still waits answers REQUEST_TIMED_OUT, even at a broker that no longer leads."""
        for tp in sorted(op.required_offsets):
            if tp in op.results:
                continue
            partition = self.partitions.get(tp)
            base = op.base_offsets[tp]
            if timed_out:
                op.results[tp] = ProducePartitionResult(ErrorCode.REQUEST_TIMED_OUT, base)
            elif partition is None or not partition.is_leader:
                op.results[tp] = ProducePartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif partition.log.high_watermark >= op.required_offsets[tp]:
                enough = (len(partition.maximal_isr) >= partition.config.min_insync_replicas
                          or mutants.ACKS_ALL_BELOW_MIN_ISR)
                op.results[tp] = ProducePartitionResult(
                    ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, base)
        if not op.is_complete:
            return False
        self.purgatory.produces.pop(op.id, None)
        self.ctx.cancel_timer(op.timer_key)
        self._send_produce(op.src, ProduceResponse(op.correlation_id, dict(sorted(op.results.items()))))
        return True

    def _send_produce(self, src: Hashable, response: ProduceResponse) -> None:
        """A produce's answer: to the client through its quotas, or to the broker's own
        append's callback (2.7.0 appendRecords' responseCallback either way)."""
        if type(src) is InternalAppend:
            src.done(response.partitions)
            return
        self.ctx.send(src, self.client_quotas.throttled_produce(src, response))

    def produce_timed_out(self, produce_id: int) -> None:
        op = self.purgatory.produces.get(produce_id)
        if op is not None:
            self._try_complete_produce(op, timed_out=True)

    def _recheck_produces(self, tp: TopicPartition) -> None:
        ids = self.purgatory.produce_watch.pop(tp, [])
        remaining = []
        for op_id in ids:
            op = self.purgatory.produces.get(op_id)
            if op is not None and not self._try_complete_produce(op):
                remaining.append(op_id)
        if remaining:
            self.purgatory.produce_watch[tp] = remaining

    def _after_high_watermark_change(self, partition: Partition) -> None:
        self._recheck_produces(partition.tp)
        self._wake_fetches(self.purgatory.consumer_fetch_watch, partition.tp)

    def _trace_high_watermark(self, partition: Partition) -> None:
        self.ctx.trace("high_watermark_advanced", partition=str(partition.tp),
                       high_watermark=partition.log.high_watermark, leader_epoch=partition.leader_epoch)

    def maybe_flush(self, partition: Partition) -> bool:
        """After an append, Kafka flushes on the message count only (Log.append); True
        when a flush started. A follower's append flushes the same way, but nothing
        waits for it (ReplicaFetcherThread.processPartitionData has no one to answer)."""
        if not partition.log.needs_flush_by_messages(partition.config.log_flush_interval_messages):
            return False
        for effect in partition.log.flush(self.ctx.now_ms):
            self.ctx.emit(effect)
        return True

    def flush_due(self) -> None:
        """The log flusher (LogManager.flushDirtyLogs): logs whose last flush is older
        than their flush.ms."""
        for tp in sorted(self.partitions):
            log = self.partitions[tp].log
            if log.needs_flush_by_time(self.ctx.now_ms, self.partitions[tp].config.flush_interval_ms):
                for effect in log.flush(self.ctx.now_ms):
                    self.ctx.emit(effect)

    # -- fetch -----------------------------------------------------------------------
    def handle_fetch(self, src: Hashable, request: FetchRequest) -> None:
        """ReplicaManager.fetchMessages (2.7.0): read, then update the leader's view of
        a follower from each partition read without error (updateFollowerFetchState
        skips a failed one). The response carries the high watermark as read, so a
        follower learns of an advance on its next fetch."""
        response, total_bytes, has_error = self._read_for_fetch(request)
        follower = request.replica_id != CONSUMER_REPLICA_ID
        if not follower:
            self.client_quotas.request_arrived(src, request.client_id)
        if follower:
            for tp in sorted(request.partitions):
                result = response.partitions[tp]
                # 3.0.0 ReplicaManager.updateFollowerFetchState: nor after a diverging epoch.
                if result.error is ErrorCode.NONE and result.diverging_epoch < 0:
                    self._record_follower_fetch(request.replica_id, tp, request.partitions[tp].fetch_offset)
                self._recheck_produces_of_former_leader(tp)
        if has_error or total_bytes >= request.min_bytes or request.max_wait_ms <= 0:
            self.ctx.send(src, response if follower else self.client_quotas.fetch_answered(
                src, request.client_id, request.user, response, total_bytes))
            return
        op = DelayedFetch(self.purgatory.next_id(), src, request)
        self.purgatory.park_fetch(op, follower)
        self.ctx.set_timer(op.timer_key, request.max_wait_ms)

    def _recheck_produces_of_former_leader(self, tp: TopicPartition) -> None:
        """0.8.2.2 KafkaApis.recordFollowerLogEndOffsets calls unblockDelayedProduceRequests
        for every partition of a follower's fetch, even one whose read failed: the only
        way (besides the timeout) a demoted leader answers its parked produces
        (NotLeaderForPartition, from Partition.checkEnoughReplicasReachOffset). At a
        broker that still leads, the check changes nothing (its high watermark's advances
        check already), so only a former leader's are checked."""
        if tp not in self.purgatory.produce_watch:
            return
        partition = self.partitions.get(tp)
        if partition is None or partition.is_leader or partition.config.demotion_completes_produces:
            return
        self._recheck_produces(tp)

    def _record_follower_fetch(self, replica_id: int, tp: TopicPartition, fetch_offset: int) -> None:
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return
        moved = partition.record_follower_fetch(replica_id, fetch_offset, self.ctx.now_ms)
        if not partition.isr_change_in_flight and replica_id in partition.caught_up_replicas():
            # Partition.maybeExpandIsr: the fetching follower joins, one at a time.
            self.isr.propose(partition, tuple(sorted(partition.isr + (replica_id,))), "caught_up")
        # 2.7.0 updateFollowerFetchState tries the high watermark only when the fetch moved
        # the follower's log end (0.8.2.2 tries at every fetch, which comes to the same
        # there: its ISR commits, the one other change, advance it at once).
        if moved and partition.maybe_advance_high_watermark():
            self._trace_high_watermark(partition)
            self._after_high_watermark_change(partition)

    def _read_for_fetch(self, request: FetchRequest) -> tuple[FetchResponse, int, bool]:
        follower = request.replica_id != CONSUMER_REPLICA_ID
        # A consumer's response limit: 2.7.0 KafkaApis.handleFetchRequest's fetchMaxBytes,
        # min(request MaxBytes, fetch.max.bytes, maxQuotaWindowBytes), read over by
        # ReplicaManager.readFromLocalLog (at least one batch only until a partition gave
        # some). A request without MaxBytes (the simulation's) and no quota: each
        # partition's max bytes alone. Followers keep theirs alone (their partitions come
        # in one fixed order here, where Kafka's fetch sessions rotate them).
        limit = JAVA_INT_MAX if follower else self.client_quotas.fetch_cap(request.client_id, request.user)
        if not follower and request.max_bytes < JAVA_INT_MAX:
            limit = min(limit, max(request.max_bytes, 0), self.ctx.config.fetch_max_bytes)
        # a follower's read is throttled only where some topic has throttled replicas
        throttling = follower and bool(self.replication_quotas.leader.throttled)
        results = {}
        total = 0
        has_error = False
        for tp in sorted(request.partitions):
            wanted = request.partitions[tp]
            partition = self.partitions.get(tp)
            error = leader_epoch_error(partition, wanted.current_leader_epoch)
            if partition is None or error is not ErrorCode.NONE:
                has_error = True
                results[tp] = _fetch_failure(error, partition, follower)
                continue
            log = partition.log
            if wanted.last_fetched_epoch >= 0:
                diverging = _diverging_epoch(partition, wanted, follower)
                if diverging is not None:
                    has_error = True  # answered at once (3.0.0 fetchMessages: hasDivergingEpoch)
                    results[tp] = diverging
                    continue
            if wanted.fetch_offset > log.log_end_offset or wanted.fetch_offset < log.log_start_offset:
                has_error = True
                results[tp] = _fetch_failure(ErrorCode.OFFSET_OUT_OF_RANGE, partition, follower)
                continue
            upper = None if follower else log.high_watermark
            if throttling and leader_read_throttled(self.replication_quotas, tp, request.replica_id, partition.isr,
                                                    self.ctx.now_ms):
                batches: tuple[StoredBatch, ...] = ()
            elif limit < JAVA_INT_MAX:
                batches = log.read(wanted.fetch_offset, min(wanted.max_bytes, limit - total), upper, min_one=total == 0)
            else:
                batches = log.read(wanted.fetch_offset, wanted.max_bytes, upper)
            size = sum(b.size_bytes for b in batches)
            total += size
            if throttling and self.replication_quotas.leader.is_throttled(tp):
                # KafkaApis sizeOfThrottledPartitions then quotas.leader.record (at each read:
                # a parked fetch's reads before its last are below min_bytes, usually none)
                self.replication_quotas.leader.record(size, self.ctx.now_ms)
            # The response refers to the stored bytes; the runtime resolves the regions
            # when it sends (sendfile, or the simulation's batch objects).
            results[tp] = FetchPartitionResult(ErrorCode.NONE, log.high_watermark, log.log_start_offset,
                                               log.log_end_offset if follower else -1, log.regions(batches))
        return FetchResponse(request.correlation_id, results), total, has_error

    def _wake_fetches(self, watch: dict, tp: TopicPartition) -> None:
        ids = self.purgatory.take(watch, tp)
        for op_id in ids:
            op = self.purgatory.fetches.get(op_id)
            if op is None:
                continue
            response, total, has_error = self._read_for_fetch(op.request)
            if total >= op.request.min_bytes or has_error:
                self._complete_fetch(op, response, total)
            else:
                watch.setdefault(tp, []).append(op_id)

    def fetch_wait_expired(self, fetch_id: int) -> None:
        op = self.purgatory.fetches.get(fetch_id)
        if op is not None:
            response, total, _ = self._read_for_fetch(op.request)
            self._complete_fetch(op, response, total, cancel_timer=False)

    def _complete_fetch(self, op: DelayedFetch, response: FetchResponse, total_bytes: int,
                        cancel_timer: bool = True) -> None:
        del self.purgatory.fetches[op.id]
        if cancel_timer:
            self.ctx.cancel_timer(op.timer_key)
        request = op.request
        if request.replica_id == CONSUMER_REPLICA_ID:
            response = self.client_quotas.fetch_answered(op.src, request.client_id, request.user, response, total_bytes)
        self.ctx.send(op.src, response)

    # -- ISR changes -----------------------------------------------------------------
    def check_isr(self) -> None:
        """The leader's periodic check (Partition.maybeShrinkIsr): drop followers that
        stopped catching up, unless an ISR change is already under way."""
        for partition in self.leading():
            if partition.isr_change_in_flight:
                continue
            lagging = partition.out_of_sync_replicas(self.ctx.now_ms)
            if lagging:
                new_isr = tuple(r for r in partition.isr if r not in lagging)
                self.isr.propose(partition, new_isr, "lagging")

    def _after_isr_change(self, partition: Partition) -> None:
        """A new ISR is in force. Under the zookeeper protocol the leader tries the high
        watermark at once (2.7.0 maybeShrinkIsr after shrinkIsrWithZk; 0.8.2.2 maybeShrinkIsr
        after updateIsr). An AlterIsr commit only records the ISR (2.7.0 and 3.0.0
        handleAlterIsrResponse, KAFKA-13091): the high watermark moves at the next append
        or follower fetch that moves a log end, and acks=all produces waiting for the
        removed replica wait until then or time out. 3.1.0 tries it in the callback
        (``alter_isr_commit_advances_high_watermark``)."""
        config = partition.config
        if config.isr_change_protocol == "alter_isr" and not config.alter_isr_commit_advances_high_watermark:
            return
        if partition.maybe_advance_high_watermark():
            self._trace_high_watermark(partition)
        self._after_high_watermark_change(partition)


def _diverging_epoch(partition: Partition, wanted: FetchPartition, follower: bool) -> FetchPartitionResult | None:
    """Partition.readRecords with a last fetched epoch (2.7.0 and 3.0.0; 3.0.0's order):
    the leader looks that epoch up as OffsetsForLeaderEpoch would. No answer (an epoch
    above its latest, or no epochs) is OFFSET_OUT_OF_RANGE, as is a fetch offset below its
    log start; an answer of a smaller epoch, or of an end below the fetch offset, is a
    diverging epoch with no records. None: read as usual."""
    log = partition.log
    epoch, end_offset = log.epochs.end_offset_for(wanted.last_fetched_epoch, log.log_end_offset)
    if end_offset == UNDEFINED or epoch == UNDEFINED or wanted.fetch_offset < log.log_start_offset:
        return _fetch_failure(ErrorCode.OFFSET_OUT_OF_RANGE, partition, follower)
    if epoch < wanted.last_fetched_epoch or end_offset < wanted.fetch_offset:
        return FetchPartitionResult(ErrorCode.NONE, log.high_watermark, log.log_start_offset,
                                    log.log_end_offset if follower else -1, (), epoch, end_offset)
    return None


def _fetch_failure(error: ErrorCode, partition: Partition | None, follower: bool) -> FetchPartitionResult:
    """A failed partition of a fetch still tells where the log stands (a follower that
    is ahead of an unclean leader needs its log end offset to truncate)."""
    if partition is None:
        return FetchPartitionResult(error)
    log = partition.log
    return FetchPartitionResult(error, log.high_watermark, log.log_start_offset,
                                log.log_end_offset if follower else -1)
