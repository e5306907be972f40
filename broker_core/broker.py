"""BrokerNode: the one object a runtime drives. ``handle(input, now_ms)`` returns the
effects to carry out. A crash throws the node away; a restart builds a new one that
recovers from the bytes the runtime says survived."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from broker_core import (
    config_handlers, coordination as coord, mutants, offset_requests, partition_admin, reassignment, reassignment_api,
    topic_deletion)
from broker_core.config import LOG_FLUSHER_INITIAL_DELAY_MS, NEVER, TOPIC_KEYS, BrokerConfig
from broker_core.context import NodeContext
from broker_core.controller import Controller
from broker_core.config_admin import ConfigAdmin
from broker_core import quota_admin
from broker_core.config_describe import ConfigLayers, static_layer
from broker_core.dynamic_config import CONFIG_CHANGES_PATH, TopicConfigListener
from broker_core.effects import Effect, Halt
from broker_core.errors import CoreError, ErrorCode
from broker_core.fetcher import ReplicaFetcherManager
from broker_core.inputs import (
    CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired, DiskWriteFailed,
    FsyncCompleted, Input, MessageReceived, RequestHandled, ShutdownRequested, Started, TimerFired)
from broker_core.log import PartitionLog
from broker_core.retention import delete_old_segments
from broker_core.log_cleaner import LogCleaner
from broker_core.log_manager import LogManager
from broker_core.messages import (
    AlterIsrRequest, AlterIsrResponse, ControlledShutdownRequest, ControlledShutdownResponse, FetchRequest, FetchResponse, LeaderAndIsrRequest, LeaderAndIsrResponse, ListOffsetsRequest,
    MetadataRequest, MetadataResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse,
    PartitionMetadata, PartitionState, ProduceRequest, StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest,
    UpdateMetadataResponse, InitProducerIdRequest, CreateTopicsRequest, AlterConfigsRequest, CreatePartitionsRequest,
    DeleteTopicsRequest, FindCoordinatorRequest)
from broker_core.group_host import GROUP_REQUESTS, TIMER_PREFIX, GroupHost
from broker_core.group_partitions import LOAD_TIMER, GroupPartitions
from broker_core.partition import snapshots_json
from broker_core.producer_ids import ProducerIdManager
from broker_core.replica_manager import INTERNAL_TOPICS, ReplicaManager
from broker_core.topic_admin import TOP_LEVEL_PATHS, TopicCreator, create_top_level_path
from broker_core.types import NO_LEADER, TopicPartition

_PARTITION_REQUESTS = (ProduceRequest, FetchRequest, ListOffsetsRequest, OffsetsForLeaderEpochRequest,
                       LeaderAndIsrRequest)
CONTROLLED_SHUTDOWN_MAX_RETRIES = 3  # Kafka's controlled.shutdown.max.retries
CONTROLLED_SHUTDOWN_RETRY_MS = 5000  # controlled.shutdown.retry.backoff.ms


class BrokerNode:
    def __init__(self, broker_id: int, config: BrokerConfig, topic_configs: Mapping[str, BrokerConfig] | None = None):
        self.broker_id = broker_id
        self.ctx = NodeContext(broker_id, config)
        self.config = config
        self.topic_configs = dict(topic_configs or {})
        self.started = False
        self.session_id: int | None = None
        self.registered_once = False  # a failed registration ends the process only at startup
        self.replicas = ReplicaManager(self.ctx, self.topic_configs, {})
        self.fetchers = ReplicaFetcherManager(self.ctx, self.replicas.partitions, on_append=self._on_follower_append,
                                              quota=self.replicas.replication_quotas.follower)
        self.replicas.on_become_follower = self.fetchers.add_partition
        self.replicas.on_become_leader = lambda p: self.fetchers.remove_partition(p.tp)
        self.replicas.stop_fetching = self._stop_fetching
        self.replicas.isr.controller_id = self._controller_id
        self.replicas.isr.broker_epoch = lambda: self.session_id
        self.held: list[MessageReceived] = []  # requests waiting for a partition's lock
        self.controller = Controller(self.ctx, self._unclean_enabled)
        self.producer_ids = ProducerIdManager(self.ctx)
        self.logs = LogManager(self.ctx, self.replicas.config_for)
        self.cleaner = LogCleaner(self.ctx, self.replicas.config_for)
        self.topics = TopicCreator(self.ctx, lambda: self.controller.active, lambda: self.metadata,
                                   lambda: self.config_layers)
        # where groups live (FindCoordinator, __consumer_offsets' loads and appends)
        self.groups = GroupPartitions(self.ctx, self.replicas, self.topics, lambda: self.metadata,
                                      lambda: self.metadata_live)
        self.replicas.leadership_changed = self.groups.leadership_changed
        self.group_host = GroupHost(self.ctx, self.groups, lambda: self.metadata)  # the group coordinator
        self.config_listener = TopicConfigListener(
            self.ctx, lambda topic, configs: config_handlers.topic_config_read(self, topic, configs),
            lambda entity, configs: config_handlers.broker_config_read(self, entity, configs),
            self.replicas.client_quotas.apply_config)
        self.config_admin = ConfigAdmin(self.ctx, broker_id, self.has_topic)
        self.quota_admin = quota_admin.QuotaAdmin(self.ctx)  # AlterClientQuotas, DescribeClientQuotas
        # What DescribeConfigs shows: the static config and the dynamic layers read from
        # /config/brokers, and each topic's overrides as stored (every key, as text).
        self.static_config = config
        self.config_layers = ConfigLayers(static_layer(broker_id, config))
        self.topic_overrides: dict[str, dict[str, str]] = {}
        # topics configured by the runtime at start (a scenario's topic configs): their
        # overrides, to put on top of a changed broker config
        self.initial_overrides = {topic: {key: getattr(topic_cfg, attribute) for key, attribute in TOPIC_KEYS.items()
                                          if getattr(topic_cfg, attribute) != getattr(config, attribute)}
                                  for topic, topic_cfg in self.topic_configs.items()}
        self.metadata_live: tuple[int, ...] = ()
        self.metadata_controller = NO_LEADER
        self.metadata: dict[TopicPartition, PartitionState] = {}
        self.shutdown_attempts = 0
        self._stop_requested = True  # whether the stop under way was asked for (a controlled shutdown)
        self._shutdown_correlation: int | None = None
        self._handlers: dict[type, Callable[[Any], None]] = {
            Started: self._on_started, MessageReceived: self._on_message, TimerFired: self._on_timer,
            CoordSessionStarted: self._on_session_started, CoordSessionExpired: self._on_session_expired,
            CoordReplied: self._on_coord_reply, CoordWatchFired: self._on_watch, FsyncCompleted: self._on_fsync,
            DiskWriteFailed: self._on_disk_write_failed, ShutdownRequested: self._on_shutdown_requested,
            RequestHandled: self.replicas.client_quotas.request_handled,
        }

    def request_quota_enabled(self) -> bool:
        """Whether a request_percentage quota was ever set (2.7's ``quotasEnabled``): a
        binding that measures request times asks before it hands one over."""
        return self.replicas.client_quotas.quotas.request.quotas_enabled

    def _controller_id(self) -> int:
        return self.broker_id if self.controller.active else self.metadata_controller

    def _stop_fetching(self, tps) -> None:
        for tp in tps:
            self.fetchers.remove_partition(tp)

    def _unclean_enabled(self, topic: str) -> bool:
        return self.replicas.config_for(topic).unclean_leader_election_enable

    # -- the one entry point ---------------------------------------------------------
    def handle(self, event: Input, now_ms: int) -> list[Effect]:
        ctx = self.ctx
        if now_ms < 0:
            raise CoreError("time must not be negative")
        ctx.now_ms = now_ms
        if not self.started and not isinstance(event, Started):
            raise CoreError(f"broker {self.broker_id}: {type(event).__name__} before Started")
        if self.logs.closing is not None and type(event) not in (FsyncCompleted, DiskWriteFailed):
            return []  # shutting down: no requests, timers or coordination are served any more
        if type(event) is MessageReceived:
            self._on_message(event)  # most inputs: called directly, not through the table
        else:
            handler = self._handlers.get(type(event))
            if handler is None:
                raise CoreError(f"broker {self.broker_id}: unknown input {type(event).__name__}")
            handler(event)
        if ctx.replay_requested:
            ctx.replay_requested = False
            self._replay_held()
        out, ctx.out = ctx.out, []
        return out

    def _on_started(self, event: Started) -> None:
        if self.started:
            raise CoreError(f"broker {self.broker_id} started twice")
        self.started = True
        ctx = self.ctx
        self.replicas.storage = event.storage
        recovered = self.logs.recover(event.storage)
        self.replicas.recovered_logs = recovered
        ctx.trace("broker_started", recovered_partitions=[str(tp) for tp in sorted(recovered)])
        ctx.set_timer(("isr-check",), self.config.isr_expiration_interval_ms)
        ctx.set_timer(("hw-checkpoint",), self.config.replica_high_watermark_checkpoint_interval_ms)
        ctx.set_timer(("recovery-point-checkpoint",), LOG_FLUSHER_INITIAL_DELAY_MS)  # kafka-recovery-point-checkpoint
        # Kafka's kafka-log-flusher task: first after LogManager.InitialTaskDelayMs, then
        # every log.flush.scheduler.interval.ms (by default never again). Always set: a
        # topic's flush.ms may change before it runs.
        ctx.set_timer(("flush-check",), LOG_FLUSHER_INITIAL_DELAY_MS)
        # Kafka's kafka-log-retention task: first after InitialTaskDelayMs, then every
        # log.retention.check.interval.ms (broker_core.retention).
        ctx.set_timer(("retention-check",), LOG_FLUSHER_INITIAL_DELAY_MS)
        self.group_host.started()  # the offset expiry check (offsets.retention.check.interval.ms)
        self.cleaner.recovered(event.storage)
        self.cleaner.maybe_start([self.config, *self.topic_configs.values(),
                                  *(self.replicas.config_for(tp.topic) for tp in sorted(recovered))])

    # -- coordination ----------------------------------------------------------------
    def _on_session_started(self, event: CoordSessionStarted) -> None:
        self.session_id = event.session_id
        self.ctx.trace("session_started", session_id=event.session_id)
        self.group_host.session_started(event.session_id)
        # KafkaServer.startup creates the top-level paths before it registers. The
        # creates are sent together, ahead of the registration: a session's requests
        # are applied in order, so they exist before anything else this broker writes.
        for path in TOP_LEVEL_PATHS:
            self.ctx.tasks.start(create_top_level_path(path))
        # The topic configs are read before the broker registers, as KafkaServer.startup
        # reads them for its LogManager; then the change notifications are watched.
        self.config_listener.session_started()
        self.ctx.tasks.start(self._register())

    def _on_session_expired(self, event: CoordSessionExpired) -> None:
        if event.session_id != self.session_id:
            return
        self.ctx.trace("session_expired", session_id=event.session_id)
        self.session_id = None
        self.controller.resign()
        self.ctx.tasks.cancel_all()  # ends any ISR write in flight, releasing its lock

    def _register(self):
        """Create this broker's ephemeral /brokers/ids node. The node of a previous
        incarnation whose session has not expired yet is a conflict: 0.8.2.2 (ZkUtils
        createEphemeralPathExpectConflictHandleZKBug) backs off for the session timeout
        and retries; 2.7.0 (KafkaZkClient.registerBroker, checkedEphemeralCreate) throws,
        and KafkaServer.startup fails: the process exits."""
        # The session id marks this incarnation, so the controller can tell a bounce.
        session = self.session_id
        data = coord.encode_data({"broker_id": self.broker_id, "session": session})
        path = coord.broker_path(self.broker_id)
        while True:
            reply = yield from coord.create_checked(coord.Create(path, data, ephemeral=True, make_parents=True), session)
            if reply.ok:
                break
            if reply.error != coord.NODE_EXISTS:
                return
            retry = self.config.registration_conflict == "retry"
            self.ctx.trace("broker_registration_conflict", session_id=session, owner_session=reply.ephemeral_owner,
                           action="retry" if retry else "exit")
            if not retry:
                if not self.registered_once:  # at startup the exception ends the process
                    self._close_logs("broker registration failed: node exists", requested=False)
                return  # later (after a session expiry) Kafka logs the error and goes on
            yield coord.Sleep(self.config.zookeeper_session_timeout_ms)
        self.registered_once = True
        self.ctx.trace("broker_registered")
        yield from self._elect_controller()

    def _elect_controller(self):
        session = self.session_id
        while True:
            reply = yield from coord.create_checked(coord.Create(
                coord.CONTROLLER_PATH, coord.encode_data({"brokerid": self.broker_id}), ephemeral=True), session)
            if reply.ok:
                break
            if reply.error != coord.NODE_EXISTS:
                return
            exists = yield coord.Exists(coord.CONTROLLER_PATH, watch=True)
            if exists.ok:
                return  # someone else controls; the watch tells us when that ends
        epoch_reply = yield coord.GetData(coord.CONTROLLER_EPOCH_PATH)
        if epoch_reply.ok:
            epoch = int(epoch_reply.value) + 1
            written = yield from coord.conditional_update(
                coord.SetData(coord.CONTROLLER_EPOCH_PATH, coord.encode_data(epoch), epoch_reply.version))
        else:
            epoch = 1
            written = yield from coord.create_checked(
                coord.Create(coord.CONTROLLER_EPOCH_PATH, coord.encode_data(epoch)), session)
        if not written.ok:
            yield coord.Delete(coord.CONTROLLER_PATH)
            return
        self.controller.activate(epoch, written.version)

    def _on_watch(self, event: CoordWatchFired) -> None:
        if self.session_id is None:
            return
        if event.path == coord.CONTROLLER_PATH:
            if not self.controller.active:
                self.ctx.tasks.start(self._elect_controller())
        elif event.path == coord.BROKER_IDS_PATH:
            self.controller.enqueue("broker_change")
        elif event.path == coord.TOPICS_PATH:
            self.controller.enqueue("topic_change")
        elif event.path == topic_deletion.DELETE_TOPICS_PATH:
            self.controller.enqueue("topic_deletion")
        elif reassignment.watch_event(event.path) is not None:
            self.controller.enqueue(reassignment.watch_event(event.path))
        elif event.path.startswith(coord.TOPICS_PATH + "/") and event.path.count("/") == 3:
            self.controller.enqueue(("partition_modifications", event.path.rsplit("/", 1)[1]))
        elif event.path == coord.PREFERRED_REPLICA_ELECTION_PATH:
            self.controller.enqueue("preferred_replica_election")
        elif event.path == CONFIG_CHANGES_PATH:
            self.config_listener.changes_notified()

    def _on_coord_reply(self, event: CoordReplied) -> None:
        self.ctx.tasks.on_reply(event.request_id, event.reply)

    # -- messages --------------------------------------------------------------------
    def _on_message(self, event: MessageReceived) -> None:
        message, src = event.message, event.src
        kind = type(message)
        locked = self.replicas.isr.locked
        if locked and kind in _PARTITION_REQUESTS and not locked.isdisjoint(message.partitions):
            # A request handler thread would block on the partition's leaderIsrUpdateLock
            # while the leader's ISR write is in flight (zookeeper protocol).
            self.held.append(event)
            return
        if kind is FetchRequest:
            self.replicas.handle_fetch(src, message)
        elif kind is FetchResponse:
            self.fetchers.handle_fetch_response(src, message)
        elif kind is ProduceRequest:
            self.replicas.handle_produce(src, message)
        elif kind is MetadataRequest:
            self._handle_metadata(src, message)
        elif kind is ListOffsetsRequest:
            offset_requests.handle_list_offsets(self.ctx, self.replicas.partitions, src, message)
        elif kind is OffsetsForLeaderEpochRequest:
            offset_requests.handle_offsets_for_leader_epoch(self.ctx, self.replicas.partitions, src, message)
        elif kind is OffsetsForLeaderEpochResponse:
            self.fetchers.handle_epoch_response(src, message)
        elif kind is LeaderAndIsrRequest:
            self.replicas.handle_leader_and_isr(src, message)
        elif kind is UpdateMetadataRequest:
            self._handle_update_metadata(src, message)
        elif kind is StopReplicaRequest:
            self.replicas.handle_stop_replica(src, message)
        elif kind in (LeaderAndIsrResponse, UpdateMetadataResponse, StopReplicaResponse):
            self.controller.handle_response(src, message)
        elif kind is ControlledShutdownRequest:
            self.controller.handle_controlled_shutdown(src, message)
        elif kind is ControlledShutdownResponse:
            self._on_controlled_shutdown_response(message)
        elif kind is AlterIsrRequest:
            self.controller.handle_alter_isr(src, message)
        elif kind is AlterIsrResponse:
            self.replicas.isr.handle_response(message)
        elif kind is InitProducerIdRequest:
            self.producer_ids.handle_init_producer_id(src, message)
        elif kind is AlterConfigsRequest:
            self.config_admin.handle_alter(src, message)
        elif kind in reassignment_api.REQUESTS:
            reassignment_api.handle(self.controller, src, message)
        elif kind in quota_admin.REQUESTS:
            self.quota_admin.handle(src, message)
        elif kind is CreateTopicsRequest:
            self.topics.handle_create_topics(src, message)
        elif kind is FindCoordinatorRequest:
            self.groups.handle_find_coordinator(src, message)
        elif kind in GROUP_REQUESTS:
            self.group_host.handle(src, message)
        elif kind is DeleteTopicsRequest:
            topic_deletion.handle_delete_topics(self.topics, self.controller, {tp.topic for tp in self.metadata},
                                                src, message)
        elif kind is CreatePartitionsRequest:
            partition_admin.handle_create_partitions(self.topics, self.controller.active,
                                                     self.controller.deletion.is_queued, src, message)
        else:
            self.ctx.trace("request_rejected", src=str(src), reason=f"unknown message {kind.__name__}")

    def _replay_held(self) -> None:
        """Requests held for a lock that is now released run in arrival order; those
        still blocked are held again."""
        held, self.held = self.held, []
        for event in held:
            self._on_message(event)

    # -- controlled shutdown -----------------------------------------------------------
    def _on_shutdown_requested(self, event: ShutdownRequested) -> None:
        if self.shutdown_attempts == 0:
            self.ctx.trace("shutdown_requested")
        self._attempt_controlled_shutdown()

    def _attempt_controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away; after max retries, stop anyway."""
        if self.shutdown_attempts >= CONTROLLED_SHUTDOWN_MAX_RETRIES:
            self.ctx.trace("controlled_shutdown_gave_up", attempts=self.shutdown_attempts)
            self._close_logs("controlled shutdown gave up")
            return
        self.shutdown_attempts += 1
        self.ctx.set_timer(("shutdown-retry",), CONTROLLED_SHUTDOWN_RETRY_MS)
        controller = self.broker_id if self.controller.active else self.metadata_controller
        if controller == NO_LEADER:
            return
        self._shutdown_correlation = self.ctx.next_correlation_id()
        self.ctx.send(controller, ControlledShutdownRequest(self._shutdown_correlation, self.broker_id))

    def _on_controlled_shutdown_response(self, response: ControlledShutdownResponse) -> None:
        if response.correlation_id != self._shutdown_correlation:
            return
        self._shutdown_correlation = None
        if response.error is ErrorCode.NONE and not response.remaining_partitions:
            self.ctx.cancel_timer(("shutdown-retry",))
            self.ctx.trace("controlled_shutdown_completed", attempts=self.shutdown_attempts)
            self._close_logs("controlled shutdown")

    def _close_logs(self, reason: str, requested: bool = True) -> None:
        """Kafka 2.7.0 KafkaServer.shutdown after the controlled shutdown: the socket
        server stops taking requests, then LogManager.shutdown flushes every log; the
        checkpoints and the clean-shutdown marker follow when the flushes complete.
        A failed startup takes the same path (2.7.0 KafkaServer.startup catches the
        error and calls shutdown(), which skips the controlled shutdown as startup never
        completed; 0.8.2.2 KafkaServer.startup alike, then KafkaServerStartable exits 1):
        ``requested`` False, the process exits on its own account."""
        self.ctx.cancel_timer(("shutdown-retry",))
        self._stop_requested = requested
        if self.logs.start_closing(reason, self._all_logs()):
            self._halt_after_closing()

    def _halt_after_closing(self) -> None:
        reason = self.logs.closing or "shutdown"
        self.logs.finish_closing(self._all_logs())
        self.logs.closing = None
        self.ctx.emit(Halt(reason, clean=True, requested=self._stop_requested))

    def _handle_update_metadata(self, src, request: UpdateMetadataRequest) -> None:
        """2.7.0 ReplicaManager.maybeUpdateMetadataCache: an older controller epoch is
        refused, as LeaderAndIsr and StopReplica are (the mutant
        stale-controller-epoch-accepted applies it, and its epoch replaces the newer one)."""
        if request.controller_epoch < self.replicas.controller_epoch and not mutants.STALE_CONTROLLER_EPOCH_ACCEPTED:
            self.ctx.send(src, UpdateMetadataResponse(request.correlation_id, ErrorCode.STALE_CONTROLLER_EPOCH))
            return
        self.replicas.controller_epoch = request.controller_epoch
        self.metadata_live = request.live_brokers
        self.metadata_controller = request.controller_id
        self.metadata = dict(request.partitions)
        self.ctx.send(src, UpdateMetadataResponse(request.correlation_id, ErrorCode.NONE))
        self.topics.metadata_updated()
        self.replicas.isr.metadata_updated(request.live_brokers)  # an AlterIsr may move to a new controller

    def _handle_metadata(self, src, request: MetadataRequest) -> None:
        partitions = {}
        for tp in sorted(self.metadata):
            if request.topics is not None and tp.topic not in request.topics:
                continue
            state = self.metadata[tp]
            lai = state.leader_and_isr
            error = ErrorCode.NONE if lai.leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE
            partitions[tp] = PartitionMetadata(error, lai.leader, lai.leader_epoch, state.replicas, lai.isr)
        self.ctx.send(src, MetadataResponse(request.correlation_id, self.metadata_live, self.metadata_controller,
                                            partitions, self._unknown_topic_errors(request)))

    def _unknown_topic_errors(self, request: MetadataRequest) -> dict[str, ErrorCode]:
        """KafkaApis.getTopicMetadata (2.7.0): a requested topic this broker does not
        know is created when the request allows it and auto.create.topics.enable (an
        internal topic always, broker_core/group_partitions.py)."""
        if request.topics is None:
            return {}
        known = {tp.topic for tp in self.metadata}
        auto = request.allow_auto_topic_creation and self.config.auto_create_topics_enable
        errors = {}
        for topic in sorted(set(request.topics) - known):
            if topic in INTERNAL_TOPICS:  # created whatever auto-creation says
                errors[topic] = self.groups.metadata_for_missing_topic()
            else:
                errors[topic] = self.topics.auto_create(topic) if auto else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return errors

    # -- timers and disk -------------------------------------------------------------
    def _on_timer(self, event: TimerFired) -> None:
        key = event.key
        kind = key[0]
        if kind == "task":
            self.ctx.tasks.on_timer(key)
        elif kind == "fetch-wait":
            self.replicas.fetch_wait_expired(key[1])
        elif kind == "produce-timeout":
            self.replicas.produce_timed_out(key[1])
        elif kind == "fetch-timeout":
            self.fetchers.request_timed_out(key[1])
        elif kind == "fetch-backoff":
            self.fetchers.backoff_done(key[1])
        elif kind == "alter-isr-tick":
            self.replicas.isr.tick()
        elif kind == "alter-isr-timeout":
            self.replicas.isr.request_timed_out()
        elif kind == "controller-request":
            self.controller.request_timed_out(key[1])
        elif kind == "isr-check":
            self.replicas.check_isr()
            self.ctx.set_timer(key, self.config.isr_expiration_interval_ms)
        elif kind == "hw-checkpoint":
            self._checkpoint_high_watermarks()
            self.ctx.set_timer(key, self.config.replica_high_watermark_checkpoint_interval_ms)
        elif kind == "recovery-point-checkpoint":
            self.logs.checkpoint_recovery_points(self._all_logs())
            self.logs.checkpoint_log_starts(self._all_logs())  # kafka-log-start-offset-checkpoint, same period
            self.ctx.set_timer(key, max(self.config.log_flush_offset_checkpoint_interval_ms, 1))
        elif kind == "retention-check":
            self._delete_old_segments()
            self.ctx.set_timer(key, self.config.log_retention_check_interval_ms)
        elif kind == "log-cleaner":
            self.cleaner.timer_fired(self._all_logs())
        elif kind == "create-topics":
            self.topics.timed_out(key[1])
        elif kind == LOAD_TIMER:
            self.groups.load_timer_fired(key[1])
        elif kind.startswith(TIMER_PREFIX):
            self.group_host.on_timer(key)
        elif kind == "shutdown-retry":
            self._attempt_controlled_shutdown()
        elif kind == "flush-check":
            self.replicas.flush_due()
            if self.config.log_flush_scheduler_interval_ms < NEVER:
                self.ctx.set_timer(key, max(self.config.log_flush_scheduler_interval_ms, 1))
        else:
            raise CoreError(f"unknown timer {key!r}")

    def _all_logs(self) -> dict[TopicPartition, PartitionLog]:
        """Every log this broker has: hosted partitions', and those recovered at startup
        that no LeaderAndIsr has named yet."""
        logs = dict(self.replicas.recovered_logs)
        logs.update((tp, p.log) for tp, p in self.replicas.partitions.items())
        return logs

    def _delete_old_segments(self) -> None:
        """LogManager.cleanupLogs: every log's retention rules, with its topic's config
        as it is now (a dynamic change applies at the next check)."""
        logs = self._all_logs()
        for tp in sorted(logs):
            for effect in delete_old_segments(logs[tp], self.ctx.now_ms, self.config_for_topic(tp.topic)):
                self.ctx.emit(effect)

    def _checkpoint_high_watermarks(self) -> None:
        self.logs.checkpoint_high_watermarks(self._all_logs())

    def _on_fsync(self, event: FsyncCompleted) -> None:
        directory = event.path.split("/", 1)[0]
        try:
            tp = TopicPartition.parse(directory)
        except ValueError:
            return
        logs = self._all_logs()
        log = logs.get(tp)
        if log is not None:
            log.fsync_completed(event.path, event.token)
            self.replicas.flush_completed(tp)
        if self.logs.closing is not None and self.logs.all_flushed(logs):
            self._halt_after_closing()

    def _on_disk_write_failed(self, event: DiskWriteFailed) -> None:
        """With its only log directory failed a Kafka broker halts: it must not serve a
        log whose appends it cannot trust."""
        self.ctx.trace("log_dir_failed", path=event.path, reason=event.reason)
        self.ctx.emit(Halt(f"log directory failed: {event.reason}"))

    def _on_follower_append(self, partition) -> None:
        self.replicas.maybe_flush(partition)

    # -- observation (no effects) ----------------------------------------------------
    # What a runtime may read of a node: plain values and frozen records, never the
    # objects behind them, so that the bindings depend on these methods only.
    def has_partitions(self) -> bool:
        """Whether this broker hosts a replica of any partition."""
        return bool(self.replicas.partitions)

    def snapshot(self) -> dict[str, dict]:
        """The state of every hosted partition, for samplers and fault triggers."""
        return {str(tp): p.snapshot() for tp, p in sorted(self.replicas.partitions.items())}

    def snapshot_json(self) -> str:
        """``snapshot()`` as compact, key-sorted, ASCII-only JSON text, written from the
        replicas' fields without building the dicts: the simulation's sampler writes it
        for every broker at every sample."""
        return snapshots_json(self.replicas.partitions)

    def replica_log(self, tp: TopicPartition) -> ReplicaLog | None:
        """The hosted replica of ``tp``'s offsets and every batch it stores from its log
        start (read through the storage port); None when ``tp`` is not hosted here."""
        partition = self.replicas.partitions.get(tp)
        if partition is None:
            return None
        log = partition.log
        return ReplicaLog(log.log_start_offset, log.log_end_offset, log.high_watermark,
                          log.load(log.log_start_offset))

    def active_controller_epoch(self) -> int | None:
        """The controller epoch this broker won, while it is the active controller; None
        when it is not (its session expired, or another broker controls)."""
        return self.controller.epoch if self.controller.active else None

    def live_brokers(self) -> tuple[int, ...]:
        """The live brokers of the controller's last UpdateMetadata to this broker."""
        return self.metadata_live

    def has_topic(self, topic: str) -> bool:
        """Whether the controller's last UpdateMetadata named a partition of ``topic``."""
        return any(tp.topic == topic for tp in self.metadata)

    def config_layers_now(self) -> ConfigLayers:
        """The static and dynamic config layers DescribeConfigs describes."""
        return self.config_layers

    def stored_topic_overrides(self, topic: str) -> dict[str, str]:
        """``topic``'s overrides as this broker last read and took them (every key, as text)."""
        return dict(self.topic_overrides.get(topic, {}))

    def config_for_topic(self, topic: str) -> BrokerConfig:
        """The config ``topic``'s logs run with: the broker's, overridden by the topic's."""
        return self.replicas.config_for(topic)

    def last_correlation_id(self) -> int:
        """The id of the last request this node sent (0: none; ids count up per process).
        A runtime that resets a connection tells by it which answers belong to requests
        sent on the old one."""
        return self.ctx.last_correlation_id


@dataclass(frozen=True)
class ReplicaLog:
    """One replica's log as the final phase digests it (``BrokerNode.replica_log``)."""
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    batches: tuple  # the stored batch objects, in offset order
