"""The controller: elected through the coordination store, it watches broker liveness,
elects partition leaders by Kafka's rules and tells brokers through LeaderAndIsr.

Like Kafka's controller it is single-threaded: events queue and run one at a time,
each as a coordination task. Every state write is a compare-and-set on the partition
state's version, made together with a check of /controller_epoch's version, so a
controller that has been replaced cannot overwrite its successor's decisions.

Some of its events live in their own modules, as functions that take the controller:
the controlled shutdown (``controlled_shutdown.py``), the preferred-replica
elections, automatic and admin-requested (``preferred_election.py``), new partitions
of a topic (``partition_admin.py``), topic deletion (``topic_deletion.py``, whose
TopicDeletionManager keeps the deletion's books) and partition reassignment
(``reassignment.py``).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from broker_core import controlled_shutdown, partition_admin, preferred_election, reassignment, reassignment_api, topic_deletion
from broker_core import coordination as coord
from broker_core import mutants
from broker_core.context import NodeContext
from broker_core.election import offline_partition_leader
from broker_core.errors import ErrorCode
from broker_core.messages import (
    AlterIsrPartitionResult, AlterIsrRequest, AlterIsrResponse, ControlledShutdownRequest, ControlledShutdownResponse,
    LeaderAndIsr, LeaderAndIsrRequest, LeaderAndIsrResponse, PartitionState, StopReplicaResponse, UpdateMetadataRequest,
    UpdateMetadataResponse)
from broker_core.types import NO_LEADER, TopicPartition

MAX_STATE_WRITE_ATTEMPTS = 5
AUTO_REBALANCE_FIRST_CHECK_MS = 5000  # onControllerFailover schedules the first check 5 s after failover


@dataclass
class BrokerChannel:
    """Requests to one broker, sent one at a time in order and resent on timeout."""
    broker: int
    queue: deque = field(default_factory=deque)
    in_flight: Any = None  # the request awaiting its response

    @property
    def timeout_key(self) -> tuple:
        return ("controller-request", self.broker)


class Controller:
    def __init__(self, ctx: NodeContext, unclean_for_topic):
        self.ctx = ctx
        self.unclean_for_topic = unclean_for_topic  # topic -> bool
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.live: set[int] = set()
        self.registrations: dict[int, int | None] = {}
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.channels: dict[int, BrokerChannel] = {}
        self.shutting_down: set[int] = set()
        # partitionsBeingReassigned with their full assignment (RS, AR, RR); RS is also in assignments
        self.reassignments: dict[TopicPartition, reassignment.ReplicaAssignment] = {}
        self._events: deque = deque()
        self._running = False
        self.deletion = topic_deletion.TopicDeletionManager(self)

    # -- lifecycle -------------------------------------------------------------------
    def activate(self, epoch: int, epoch_zk_version: int) -> None:
        self._reset()  # a controller trusts nothing it cached in an earlier term
        self.active = True
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.ctx.trace("controller_elected", controller_epoch=epoch)
        self.enqueue("startup")

    def resign(self) -> None:
        if not self.active:
            return
        self.active = False
        self.ctx.trace("controller_resigned", controller_epoch=self.epoch)
        reassignment_api.preempt(self, self._events)
        for broker in sorted(self.channels):
            self.ctx.cancel_timer(self.channels[broker].timeout_key)
        self._reset()

    def _reset(self) -> None:
        """Forget the controller context (Kafka's ControllerContext is rebuilt on failover):
        partition states read in an earlier term may have changed since."""
        self.live = set()
        self.registrations = {}
        self.assignments = {}
        self.states = {}
        self.channels = {}
        self.shutting_down = set()
        self.reassignments = {}
        self._events.clear()
        self._running = False
        self.deletion.reset()

    def enqueue(self, event) -> None:
        if not self.active:
            return
        if event in self._events:
            return  # one pending run of an event already covers this one
        self._events.append(event)
        self._run_next()

    def _run_next(self) -> None:
        if self._running or not self._events or not self.active:
            return
        event = self._events.popleft()
        self._running = True
        self.ctx.tasks.start(self._run(event))

    def _run(self, event):
        epoch = self.epoch
        completed = False
        try:
            if isinstance(event, tuple) and event[0] == "controlled_shutdown":
                yield from controlled_shutdown.on_controlled_shutdown(self, *event[1:])
            elif isinstance(event, tuple) and event[0] == "alter_isr":
                yield from self._on_alter_isr(*event[1:])
            elif isinstance(event, tuple) and event[0] == "topic_unclean_leader_election_enable":
                yield from self._on_topic_unclean_leader_election_enable(event[1])
            elif isinstance(event, tuple) and event[0] == "partition_modifications":
                yield from partition_admin.on_partition_modifications(self, event[1])
            elif isinstance(event, tuple) and event[0] == "replica_deletion_done":
                yield from self.deletion.replica_deletion_done(event[1], dict(event[2]))
            elif isinstance(event, tuple) and event[0] in reassignment_api.EVENTS:
                yield from reassignment_api.run(self, *event)
            elif isinstance(event, tuple) and event[0] == "reassignment_isr_change":
                yield from reassignment.on_isr_change(self, event[1])
            elif event == "partition_reassignment":
                yield from reassignment.on_zk_partition_reassignment(self)
            elif event == "topic_deletion":
                yield from self.deletion.on_topic_deletion()
            elif event == "auto_rebalance":
                yield from preferred_election.on_auto_rebalance(self)
            elif event == "preferred_replica_election":
                yield from preferred_election.on_preferred_replica_election(self)
            else:
                handler = {"startup": self._on_startup, "broker_change": self._on_broker_change,
                           "topic_change": self._on_topic_change}[event]
                yield from handler()
            completed = True
        finally:
            if self.active and self.epoch == epoch:
                self._running = False
                if completed:
                    self._run_next()

    # -- events ----------------------------------------------------------------------
    def _read_registrations(self):
        """broker id -> the session that registered it (KIP-380: a changed session is a
        bounce, a failure and a start even if the controller never saw the id missing)."""
        reply = yield coord.GetChildren(coord.BROKER_IDS_PATH, watch=True)
        if not reply.ok:
            return None
        registrations = {}
        for child in sorted(reply.children, key=int):
            data = yield coord.GetData(coord.broker_path(int(child)))
            if data.ok:
                registrations[int(child)] = data.value.get("session")
        return registrations

    def _on_startup(self):
        registrations = yield from self._read_registrations()
        self.registrations = registrations or {}
        self.live = set(self.registrations)
        yield from self._load_topics()
        self.ctx.trace("controller_started", controller_epoch=self.epoch, live_brokers=sorted(self.live))
        if self.ctx.config.failover_removes_dead_replicas:
            # 2.7's ReplicaStateMachine.startup moves the replicas of brokers that are
            # already dead to OfflineReplica before any election; 0.8.2 leaves them in ISRs.
            dead = sorted({b for tp in self.assignments for b in self.assignments[tp]} - self.live)
            yield from self._remove_replicas_from_isr(dead, "broker_failed")
        yield from self._bring_partitions_online(sorted(self.assignments))
        self._send_leader_and_isr(sorted(self.assignments), sorted(self.live))
        self._send_update_metadata()
        yield from preferred_election.on_preferred_replica_election(self)  # one requested while no controller ran
        # Deletions marked while no controller ran are read by a task of their own, not
        # inline: an extra round trip here would shift every later step of a failover.
        # (2.7 reads them before bringing partitions online; here a deleting topic's
        # partitions may get LeaderAndIsr once more before its deletion resumes.)
        if self.ctx.config.controller_watches_deletions:
            self.ctx.tasks.start(self._watch_deletions())
        if self.ctx.config.auto_leader_rebalance_enable:
            preferred_election.schedule_auto_rebalance(self, AUTO_REBALANCE_FIRST_CHECK_MS)
        # initializePartitionReassignments: those the topic nodes show resume now; the
        # admin node is read as an event of its own (its round trip would otherwise
        # shift every failover: see BrokerConfig.controller_watches_reassignments).
        yield from reassignment.resume_reassignments(self, lambda tp, full: True)
        if self.ctx.config.controller_watches_reassignments:
            self.enqueue("partition_reassignment")

    def _watch_deletions(self):
        reply = yield coord.GetChildren(topic_deletion.DELETE_TOPICS_PATH, watch=True)
        if reply.ok and reply.children:
            self.enqueue("topic_deletion")

    def _on_topic_change(self):
        known = set(self.assignments)
        yield from self._load_topics()
        new = sorted(set(self.assignments) - known)
        if new:
            yield from self._bring_partitions_online(new)
            self._send_leader_and_isr(new, sorted(self.live))
            self._send_update_metadata()

    def _load_topics(self):
        reply = yield coord.GetChildren(coord.TOPICS_PATH, watch=True)
        for topic in sorted(reply.children if reply.ok else ()):
            data = yield coord.GetData(coord.topic_path(topic), watch=True)  # for new partitions
            if not data.ok:
                continue
            full = reassignment.topic_node_reassignments(data.value, topic)
            for partition, replicas in sorted(data.value["partitions"].items(), key=lambda kv: int(kv[0])):
                tp = TopicPartition(topic, int(partition))
                if tp in self.assignments:
                    continue
                self.assignments[tp] = tuple(int(r) for r in replicas)
                if full[tp].is_being_reassigned:
                    self.reassignments[tp] = full[tp]
                state = yield coord.GetData(coord.partition_state_path(topic, int(partition)))
                if state.ok:
                    self.states[tp] = LeaderAndIsr.from_data(state.value, state.version)

    def _on_broker_change(self):
        """2.7.0 KafkaController.processBrokerChange: a broker registered by another session
        than the one the controller knew bounced (KIP-380) and is handled as failed, then
        started. 0.8.2.2's BrokerChangeListener compares ids only: a broker that left and
        came back between two reads of /brokers/ids is neither (controller_detects_bounce)."""
        registrations = yield from self._read_registrations()
        if registrations is None:
            return
        new_live = set(registrations)
        bounced = set()
        if self.ctx.config.controller_detects_bounce:
            bounced = {b for b in new_live & self.live if registrations[b] != self.registrations.get(b)}
        self.registrations = registrations
        if bounced:  # handle the failure half first, then the start below
            self.live -= bounced
            yield from self._handle_failures(sorted(bounced))
        dead = sorted(self.live - new_live)
        born = sorted(new_live - self.live)
        self.live = new_live
        self.shutting_down -= set(dead) | set(born)
        if not dead and not born:
            return
        self.ctx.trace("brokers_changed", live_brokers=sorted(new_live), failed=dead, started=born,
                       bounced=sorted(bounced))
        if dead:
            yield from self._handle_failures(dead)
        if born:
            hosted = [tp for tp in sorted(self.assignments) if any(b in self.assignments[tp] for b in born)]
            revived = []
            for tp in hosted:  # an offline partition may have a leader again
                state = self.states.get(tp)
                if state is not None and state.leader not in self.live:
                    if (yield from self._elect(tp)):
                        revived.append(tp)
            self._send_leader_and_isr(revived, sorted(self.live))
            self._send_leader_and_isr(hosted, born)
        self._send_update_metadata()
        if born:  # maybeResumeReassignments for those whose target replicas include a new broker
            yield from reassignment.resume_reassignments(self, lambda tp, full: any(b in full.target for b in born))
        if born and self.deletion.brokers_started(born):
            yield from self.deletion.resume()

    def _handle_failures(self, dead: list[int]):
        """KafkaController.onBrokerFailure / onReplicasBecomeOffline: elect new leaders
        for the partitions whose leader died, then move every replica of the dead brokers
        to OfflineReplica (out of the ISR, read fresh from the store)."""
        for broker in dead:
            channel = self.channels.pop(broker, None)
            if channel is not None:
                self.ctx.cancel_timer(channel.timeout_key)
        self.deletion.brokers_failed(dead)
        changed = []
        for tp in sorted(self.assignments):
            state = self.states.get(tp)
            if state is not None and state.leader not in self.live:
                if (yield from self._elect(tp)):
                    changed.append(tp)
        changed += yield from self._remove_replicas_from_isr(dead, "broker_failed")
        self._send_leader_and_isr(sorted(set(changed)), sorted(self.live))

    def handle_controlled_shutdown(self, src, request: ControlledShutdownRequest) -> None:
        if not self.active:
            self.ctx.send(src, ControlledShutdownResponse(request.correlation_id, ErrorCode.NOT_CONTROLLER))
            return
        self.enqueue(("controlled_shutdown", src, request.correlation_id, request.broker_id))

    def handle_alter_isr(self, src, request: AlterIsrRequest) -> None:
        if not self.active:
            self.ctx.send(src, AlterIsrResponse(request.correlation_id, ErrorCode.NOT_CONTROLLER))
            return
        self.enqueue(("alter_isr", src, request))

    def _on_alter_isr(self, src, request: AlterIsrRequest):
        """KafkaController.processAlterIsr (2.7.0): fence a stale broker epoch and a stale
        leader epoch, answer an ISR already in place with the current state, write the
        rest against the version the leader knows (INVALID_UPDATE_VERSION on a
        mismatch), then tell every broker through UpdateMetadata."""
        if request.broker_id not in self.live or self.registrations.get(request.broker_id) != request.broker_epoch:
            self.ctx.trace("request_fenced", request="alter_isr", broker=request.broker_id,
                           broker_epoch=request.broker_epoch, error=ErrorCode.STALE_BROKER_EPOCH.name)
            self.ctx.send(src, AlterIsrResponse(request.correlation_id, ErrorCode.STALE_BROKER_EPOCH))
            return
        results: dict[TopicPartition, AlterIsrPartitionResult] = {}
        for tp in sorted(request.partitions):
            proposed = request.partitions[tp]
            current = self.states.get(tp)
            if current is None:
                results[tp] = AlterIsrPartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif proposed.leader_epoch < current.leader_epoch:
                results[tp] = AlterIsrPartitionResult(ErrorCode.FENCED_LEADER_EPOCH)
            elif (proposed.leader, proposed.leader_epoch, proposed.isr) == (current.leader, current.leader_epoch,
                                                                            current.isr):
                results[tp] = AlterIsrPartitionResult(ErrorCode.NONE, current)
            else:
                new = LeaderAndIsr(proposed.leader, proposed.leader_epoch, proposed.isr, self.epoch)
                version = coord.ANY_VERSION if mutants.ISR_WRITE_UNVERSIONED else proposed.zk_version
                reply = yield coord.SetData(coord.partition_state_path(*tp), coord.encode_data(new.to_data()),
                                            version, check_path=coord.CONTROLLER_EPOCH_PATH,
                                            check_version=self.epoch_zk_version)
                if reply.ok:
                    self.states[tp] = replace(new, zk_version=reply.version)
                    results[tp] = AlterIsrPartitionResult(ErrorCode.NONE, self.states[tp])
                elif reply.error == coord.BAD_VERSION:
                    results[tp] = AlterIsrPartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
                else:
                    if reply.error == coord.CHECK_FAILED:
                        self.ctx.trace("controller_fenced", controller_epoch=self.epoch)
                    self.ctx.send(src, AlterIsrResponse(request.correlation_id, ErrorCode.NOT_CONTROLLER))
                    return
        self.ctx.send(src, AlterIsrResponse(request.correlation_id, ErrorCode.NONE, results))
        if any(r.error is ErrorCode.NONE for r in results.values()):
            self._send_update_metadata()
        for tp in sorted(results):  # an expansion may complete a reassignment (2.7.0 processAlterIsr)
            if results[tp].error is ErrorCode.NONE and tp in self.reassignments:
                self.enqueue(("reassignment_isr_change", tp))

    # -- state changes ---------------------------------------------------------------
    def _bring_partitions_online(self, tps):
        for tp in tps:
            if tp not in self.states:
                yield from self._create_state(tp)
            elif self.states[tp].leader not in self.live:
                yield from self._elect(tp)

    def _create_state(self, tp: TopicPartition):
        replicas = self.assignments[tp]
        live = [r for r in replicas if r in self.live]
        leader = live[0] if live else NO_LEADER
        state = LeaderAndIsr(leader, 0, tuple(live) if live else replicas[:1], self.epoch)
        reply = yield from coord.create_checked(coord.Create(
            coord.partition_state_path(*tp), coord.encode_data(state.to_data()), make_parents=True), None)
        if reply.ok:
            self.states[tp] = state
            self._trace_election(tp, state, "initial", unclean=False)
        else:
            fresh = yield coord.GetData(coord.partition_state_path(*tp))
            if fresh.ok:
                self.states[tp] = LeaderAndIsr.from_data(fresh.value, fresh.version)

    def _elect(self, tp: TopicPartition):
        """Offline-partition election. With no electable replica the leader becomes -1
        and the ISR keeps its last member, so that it alone can later return as leader."""
        unclean_used: list[bool] = []

        def decide(current: LeaderAndIsr):
            if current.leader in self.live:
                return None
            election = offline_partition_leader(self.assignments[tp], current.isr, self.live,
                                                self.unclean_for_topic(tp.topic))
            unclean_used[:] = [election.unclean]
            if election.leader is None:
                if current.leader == NO_LEADER:
                    return None
                return LeaderAndIsr(NO_LEADER, current.leader_epoch + 1, current.isr, self.epoch)
            isr = (election.leader,) if election.unclean else tuple(r for r in current.isr if r in self.live)
            epoch = current.leader_epoch if mutants.EPOCH_NOT_BUMPED else current.leader_epoch + 1
            return LeaderAndIsr(election.leader, epoch, isr, self.epoch)

        state = yield from self._write_state(tp, decide)
        if state is not None:
            self._trace_election(tp, state, "offline", unclean=bool(unclean_used and unclean_used[0]))
        return state is not None

    def _remove_replicas_from_isr(self, brokers, reason: str):
        """ReplicaStateMachine's OfflineReplica transition for every replica of these
        brokers; returns the partitions whose state changed."""
        changed = []
        for broker in brokers:
            for tp in sorted(self.assignments):
                if broker in self.assignments[tp] and tp in self.states:
                    if (yield from self._remove_from_isr(tp, broker, reason)):
                        changed.append(tp)
        return changed

    def _remove_from_isr(self, tp: TopicPartition, broker: int, reason: str):
        """ReplicaStateMachine.doRemoveReplicasFromIsr (2.7.0; KafkaController.removeReplicaFromIsr
        in 0.8.2.2). The state is the store's, read fresh: the leader changes the ISR
        without telling the controller, so the cached ISR may lack the broker. If the
        broker led, the partition has no leader. The last ISR member stays (2.7 always;
        0.8.2 only when unclean election is off for the topic), so that it alone can
        come back as a clean leader."""
        keep_last = not (self.ctx.config.unclean_empties_isr and self.unclean_for_topic(tp.topic))
        before: list[LeaderAndIsr] = []

        def decide(current: LeaderAndIsr):
            if broker not in current.isr:
                return None
            leader = NO_LEADER if current.leader == broker else current.leader
            isr = tuple(r for r in current.isr if r != broker)
            if not isr and keep_last:
                isr = current.isr
            if leader == current.leader and isr == current.isr:
                return None  # nothing to change (Kafka would still bump the leader epoch)
            before[:] = [current]
            return LeaderAndIsr(leader, current.leader_epoch + 1, isr, self.epoch)

        state = yield from self._write_state(tp, decide)
        if state is None:
            return False
        if state.isr != before[0].isr:
            self.ctx.trace("isr_shrunk", partition=str(tp), isr=list(state.isr), reason=reason,
                           leader_epoch=state.leader_epoch, zk_version=state.zk_version, by="controller")
        if state.leader != before[0].leader:
            self._trace_election(tp, state, "offline", unclean=False)  # its leader died: offline
        return True

    # -- a topic's config enabled unclean election -----------------------------------
    def _on_topic_unclean_leader_election_enable(self, topic: str):
        """2.7.0 KafkaController.processTopicUncleanLeaderElectionEnable: a config change
        enabled unclean election for the topic (TopicConfigHandler asked for it), so
        PartitionStateMachine.triggerOnlinePartitionStateChange(topic) elects leaders for
        its partitions in OfflinePartition or NewPartition state, unclean if it must."""
        offline = [tp for tp in sorted(self.assignments)
                   if tp.topic == topic and (tp not in self.states or self.states[tp].leader not in self.live)]
        self.ctx.trace("topic_unclean_election_enabled", topic=topic, offline_partitions=[str(tp) for tp in offline])
        changed = []
        for tp in offline:
            if tp not in self.states:
                yield from self._create_state(tp)
                changed += [tp] if tp in self.states else []
            elif (yield from self._elect(tp)):
                changed.append(tp)
        if changed:
            self._send_leader_and_isr(changed, sorted(self.live))
            self._send_update_metadata()

    def _read_state(self, tp: TopicPartition):
        """The partition state as the store holds it now (Kafka's controller reads it
        fresh before every election and ISR removal: getTopicPartitionStatesFromZk)."""
        fresh = yield coord.GetData(coord.partition_state_path(*tp))
        if not fresh.ok:
            return None
        current = LeaderAndIsr.from_data(fresh.value, fresh.version)
        self.states[tp] = current
        return current

    def _write_state(self, tp: TopicPartition, decide):
        """Decide from the store's current state and compare-and-set it; on a version
        conflict (a leader's ISR write in between) re-read and decide again."""
        path = coord.partition_state_path(*tp)
        current = yield from self._read_state(tp)
        for _ in range(MAX_STATE_WRITE_ATTEMPTS):
            if current is None:
                return None
            new = decide(current)
            if new is None:
                return None
            reply = yield from coord.conditional_update(coord.SetData(
                path, coord.encode_data(new.to_data()), current.zk_version,
                check_path=coord.CONTROLLER_EPOCH_PATH, check_version=self.epoch_zk_version))
            if reply.ok:
                new = replace(new, zk_version=reply.version)
                self.states[tp] = new
                return new
            if reply.error != coord.BAD_VERSION:
                if reply.error == coord.CHECK_FAILED:
                    self.ctx.trace("controller_fenced", controller_epoch=self.epoch)
                return None
            current = yield from self._read_state(tp)
        return None

    def _trace_election(self, tp: TopicPartition, state: LeaderAndIsr, kind: str, unclean: bool) -> None:
        self.ctx.trace("leader_elected", partition=str(tp), leader=state.leader, leader_epoch=state.leader_epoch,
                       isr=list(state.isr), election=kind, unclean=unclean, controller_epoch=self.epoch)

    def full_assignment(self, tp: TopicPartition) -> reassignment.ReplicaAssignment:
        """ControllerContext.partitionFullReplicaAssignment: RS with AR and RR."""
        return self.reassignments.get(tp) or reassignment.ReplicaAssignment(self.assignments[tp])

    # -- requests to brokers ---------------------------------------------------------
    def _partition_state(self, tp: TopicPartition) -> PartitionState:
        return PartitionState(self.states[tp], self.assignments[tp])

    def _send_leader_and_isr(self, tps, brokers) -> None:
        for broker in brokers:
            if broker not in self.live:
                continue
            states = {tp: self._partition_state(tp) for tp in tps
                      if tp in self.states and broker in self.assignments[tp]}
            if states:
                # 2.7.0 ControllerChannelManager.sendLeaderAndIsrRequest (0.8.2.2 alike): the
                # live (or shutting-down) brokers among the leaders named; our live set
                # still holds a broker while it shuts down.
                leaders = sorted({state.leader_and_isr.leader for state in states.values()} & self.live)
                self._enqueue_request(broker, lambda cid, s=states, ls=tuple(leaders): LeaderAndIsrRequest(
                    cid, self.ctx.broker_id, self.epoch, s, ls))

    def _send_update_metadata(self) -> None:
        states = {tp: self._partition_state(tp) for tp in sorted(self.states) if tp in self.assignments}
        live = tuple(sorted(self.live))
        for broker in live:
            self._enqueue_request(broker, lambda cid: UpdateMetadataRequest(
                cid, self.ctx.broker_id, self.epoch, live, states))

    def _enqueue_request(self, broker: int, build) -> None:
        channel = self.channels.setdefault(broker, BrokerChannel(broker))
        channel.queue.append(build(self.ctx.next_correlation_id()))
        self._pump(channel)

    def _pump(self, channel: BrokerChannel) -> None:
        if channel.in_flight is not None or not channel.queue:
            return
        channel.in_flight = channel.queue.popleft()
        self.ctx.send(channel.broker, channel.in_flight)
        self.ctx.set_timer(channel.timeout_key, self.ctx.config.controller_socket_timeout_ms)

    def handle_response(self, src, response: LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse
                        ) -> None:
        channel = self.channels.get(src)
        if channel is None or channel.in_flight is None:
            return
        if channel.in_flight.correlation_id != response.correlation_id:
            return
        if response.error is ErrorCode.STALE_CONTROLLER_EPOCH:
            self.ctx.trace("controller_fenced", controller_epoch=self.epoch, by_broker=src)
        if topic_deletion.is_deleting_stop_replica(channel.in_flight) and isinstance(response, StopReplicaResponse):
            errors = topic_deletion.deletion_errors(channel.in_flight, response)
            self.enqueue(("replica_deletion_done", src, tuple(sorted(errors.items()))))
        channel.in_flight = None
        self.ctx.cancel_timer(channel.timeout_key)
        self._pump(channel)

    def request_timed_out(self, broker: int) -> None:
        channel = self.channels.get(broker)
        if channel is None or channel.in_flight is None or broker not in self.live:
            return
        self.ctx.send(broker, channel.in_flight)  # resend, as Kafka's channel does on reconnect
        self.ctx.set_timer(channel.timeout_key, self.ctx.config.controller_socket_timeout_ms)

