"""The simulated world of one run: built from a scenario and one seed, it runs the
workload and the fault schedule, then the final phase (heal, restart, wait for full
ISRs, read everything), writing every event to the trace."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator

from faults import model as fm
from faults.final_phase import (
    SETTLE_POLL_MS, Lag, StopProducers, Wait, carried_out, final_phase_steps, partition_settled)
from faults.schedule import nemesis_life, step_life
from faults.nodes import broker_id_of
from faults.roles import role_partitions
from faults.triggers import cluster_view

import simpy

if TYPE_CHECKING:  # imported when a run checks invariants, not by every run
    from broker_core.invariants import Violation
    from sim.invariant_checks import InvariantChecks

from analysis.compacted_topics import compacted_topics
from analysis.replica_digest import REPLICA_DIGEST_CHUNK, batch_key_values, key_map_digest, replica_digests
from analysis.trace import TraceWriter, run_started_fields
from analysis.workload import client_id, workload_label
from broker_core.config import broker_config, client_defaults, topic_config
from broker_core.admin_nodes import admin_topic_nodes, assigned_replicas
from broker_core.types import TopicPartition
from sim.broker_host import BrokerHost, broker_name
from sim.clients import SimReader
from sim.consumer import SimConsumer
from sim.group_consumer import SimGroupConsumer
from sim.group_member_types import member_configs
from sim.producer import SimProducer
from sim.coordination import SERVICE, CoordinationService
from sim.disk import SimDisk
from sim.faults import SimFaultExecutor
from sim.network import LinkSpec, Network
from faults.rng import derive

TRIGGER_POLL_MS = 5


@contextmanager
def collector_tuned_for_runs() -> Iterator[None]:
    """A run allocates millions of long-lived objects (records, batches, events) and
    makes few reference cycles; the collector's default of a pass every 700 allocations
    took a fifth of the run's time (bench/sim_speed.py). Restored afterwards.

    Restoring the default alone would start a pass at once: a run leaves its count of
    young objects far above 700 (42,000 after bench/sim_speed.py's sticky run), and
    that pass scans every object the run made while its world is still in use, to free
    almost nothing (8 objects; 4-8% of the timed compiled run). The run's objects are
    moved to the oldest generation unscanned instead (``gc.freeze`` then
    ``gc.unfreeze``, which also zeroes the count): the next full collection looks at
    them, as it would at whatever else is old."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 20, 100)
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:  # unfreeze would also release what a caller froze
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*thresholds)


class World:
    def __init__(self, scenario: Any, seed: int, writer: TraceWriter, progress=None, check_invariants: bool = False):
        """``scenario`` is a scenarios.model.Scenario (the layer above; not imported here).
        ``check_invariants``: run the replication invariants after every input a core
        handles (sim/invariant_checks.py); the first violation stops the run and is
        left in ``self.violation`` (with ``violation_at_ms``)."""
        self.scenario = scenario
        self.seed = seed
        self.writer = writer
        self.progress = progress
        self.env = simpy.Environment()
        spec = scenario.network
        self.hosts: dict[int, BrokerHost] = {}
        self.network = Network(self.env, derive(seed, "network"),
                               LinkSpec(spec.latency_ms, spec.jitter_ms, spec.loss), spec.hold_ms,
                               self._incarnation)
        self.service = CoordinationService(self.env, lambda dst, m: self.network.send(SERVICE, dst, m), self.trace)
        self.network.add_node(SERVICE, self.service.handle)
        cluster = scenario.cluster
        base = broker_config(cluster.profile, cluster.config)
        if not any(isinstance(step.fault, fm.DeleteTopic) for step in scenario.faults):
            base = replace(base, controller_watches_deletions=False)  # see BrokerConfig
        if not any(isinstance(step.fault, fm.Reassign) for step in scenario.faults):
            base = replace(base, controller_watches_reassignments=False)  # the same, for reassignments
        topic_configs = {t.name: topic_config(base, t.config) for t in cluster.topics}
        broker_trace = self.trace if scenario.trace_high_watermarks else self._trace_without_high_watermarks
        self.checks: InvariantChecks | None = None
        self.violation: Violation | None = None
        self.violation_at_ms: float | None = None
        if check_invariants:
            from sim.invariant_checks import InvariantChecks
            self.checks = InvariantChecks(self.service.store)
        for broker in cluster.brokers:
            disk = SimDisk(self.env, scenario.disk.fsync_ms, derive(seed, f"disk-{broker}"))
            self.hosts[broker] = self._host(broker, base, topic_configs, disk, broker_trace)
            if cluster.supervisor_restart_ms is not None:
                self.hosts[broker].on_exit = self._supervise
        for topic in cluster.topics:
            for path, data in admin_topic_nodes(topic.name, topic.assignment, topic.config):
                self.service.store.put(path, data)
        self.partitions = [TopicPartition(t.name, p) for t in cluster.topics for p in range(t.partitions)]
        self.replicas = {TopicPartition(t.name, p): r for t in cluster.topics for p, r in t.assignment.items()}
        # the view also holds the __consumer_offsets partitions coordinator roles name
        self.view_partitions = [str(tp) for tp in self.partitions] + role_partitions(s.fault for s in scenario.faults)
        self._start_clients(scenario, seed)
        self.reader = SimReader(self.env, self.network, "reader", list(cluster.brokers), self.trace, self.partitions)
        self.faults = SimFaultExecutor(self, derive(seed, "faults"), derive(seed, "fault-roles"))
        self.settled = False
        self.final_phase = False

    def _host(self, broker: int, base, topic_configs, disk: SimDisk, broker_trace) -> BrokerHost:
        if self.checks is None:
            return BrokerHost(self.env, self.network, broker, base, topic_configs, disk, broker_trace)
        from sim.invariant_checks import CheckedBrokerHost
        return CheckedBrokerHost(self.checks, self.env, self.network, broker, base, topic_configs, disk, broker_trace)

    def _start_clients(self, scenario: Any, seed: int) -> None:
        """Producers and consumers behave as the Java clients of the cluster's profile,
        unless a workload entry says otherwise."""
        defaults = client_defaults(scenario.cluster.profile)
        brokers = list(scenario.cluster.brokers)
        self.producers = []
        for i, w in enumerate(scenario.producers):
            name = f"producer-{i}"
            self.producers.append(SimProducer(self.env, self.network, name, brokers, self.trace, w,
                                              scenario.topic(w.topic).partitions,
                                              w.partitioner or defaults.partitioner,
                                              derive(seed, f"partitioner-{name}"),
                                              w.sequence_restart or defaults.sequence_restart,
                                              derive(seed, workload_label(name))))
            self.producers[-1].client_id = client_id(w, "producer", i)
        self.consumers = []
        for i, w in enumerate(scenario.consumers):
            tps = [tp for tp in self.partitions if tp.topic == w.topic]
            validate = defaults.validate_positions if w.validate_positions is None else w.validate_positions
            self.consumers.append(SimConsumer(self.env, self.network, f"consumer-{i}", brokers, self.trace, tps,
                                              poll_interval_ms=w.poll_interval_ms, start_ms=w.start_ms,
                                              auto_offset_reset=w.auto_offset_reset, start_offset=w.start_offset,
                                              validate_positions=validate))
            self.consumers[-1].client_id = client_id(w, "consumer", i)
        self.group_members: dict[str, SimGroupConsumer] = {}
        partitions = {t.name: t.partitions for t in scenario.cluster.topics}
        for number, w in enumerate(scenario.group_consumers):
            for name, config in member_configs(w, number):
                self.group_members[name] = SimGroupConsumer(self.env, self.network, name, brokers, self.trace,
                                                            config, w, partitions)

    def _incarnation(self, node: str) -> int:
        broker = broker_id_of(node)
        host = self.hosts.get(broker) if broker is not None else None
        return host.incarnation if host is not None else 0

    def trace(self, node: str, type_: str, fields: dict) -> None:
        self.writer.write(int(self.env.now), node, type_, fields)

    def _trace_without_high_watermarks(self, node: str, type_: str, fields: dict) -> None:
        """The brokers' trace when the scenario sets ``trace_high_watermarks: false``."""
        if type_ != "high_watermark_advanced":
            self.writer.write(int(self.env.now), node, type_, fields)

    # -- the run ---------------------------------------------------------------------
    def run(self) -> None:
        main = self.env.process(self._main())
        with collector_tuned_for_runs():
            if self.checks is None:
                self.env.run(until=main)
            else:
                self._run_checked(main)

    def _run_checked(self, main) -> None:
        """Run until the end or the first invariant violation, which stops the run: the
        trace ends with ``invariant_violated`` (no final phase, no run_finished)."""
        from sim.invariant_checks import InvariantBroken
        checks = self.checks
        assert checks is not None
        try:
            self.env.run(until=main)
        except InvariantBroken:
            # simpy may re-raise a copy from a process: the checker kept the first one
            violation, at_ms = checks.first, checks.first_at_ms
            assert violation is not None and at_ms is not None
            self.violation, self.violation_at_ms = violation, at_ms
            self.writer.write(int(at_ms), "world", "invariant_violated",
                              {**violation.to_fields(), "checked_inputs": checks.checked})

    def _main(self):
        scenario = self.scenario
        self.trace("world", "run_started", run_started_fields(scenario))
        for host in self.hosts.values():
            host.start()
        for step in scenario.faults:
            self.env.process(self._drive(step_life(step, scenario.duration_ms, self, TRIGGER_POLL_MS)))
        if scenario.nemesis is not None:
            self.env.process(self._drive(nemesis_life(scenario.nemesis, derive(self.seed, "nemesis"), self)))
        self.env.process(self._sampler())
        if scenario.disk.writeback_ms:
            self.env.process(self._writeback(scenario.disk.writeback_ms))
        if self.progress:
            self.env.process(self._progress(scenario.duration_ms))
        yield self.env.timeout(scenario.duration_ms)
        yield from self._final_phase()
        self.trace("world", "run_finished", {"settled": self.settled})

    def now_ms(self) -> float:
        return self.env.now

    def _drive(self, life):
        """Run a fault step's or the nemesis's life (faults/schedule.py) on simulated time."""
        for wait_ms in life:
            yield self.env.timeout(wait_ms)

    def _final_phase(self):
        """Carry out the final phase's requests (faults/final_phase.py) on simulated time."""
        final = self.scenario.final
        timeout_ms = max((p.spec.request_timeout_ms for p in self.producers), default=0)
        steps = final_phase_steps(self, final.max_wait_ms, final.restart, timeout_ms)
        self.settled = yield from carried_out(steps, self._carry_out)

    def _carry_out(self, request):
        """One final-phase request, on simulated time; returns its answer."""
        if isinstance(request, Wait):
            yield self.env.timeout(request.ms)
        elif isinstance(request, StopProducers):
            yield from self._stop_producers(request.deadline_ms)
        else:
            yield from self.reader.run(request.deadline_ms)
            return {tp: got.next_offset for tp, got in self.reader.results.items()}
        return None

    def _stop_producers(self, deadline_ms: float):
        for producer in self.producers:
            producer.stop()
        while self.env.now < deadline_ms and not all(p.idle for p in self.producers):
            yield self.env.timeout(SETTLE_POLL_MS)
        for producer in self.producers:
            producer.drain()

    # -- the final phase's primitives (faults/final_phase.py FinalPhaseRun) -----------
    def clock_ms(self) -> float:
        return self.env.now

    def end_fault_schedule(self) -> None:
        self.final_phase = True

    def heal_everything(self) -> None:
        self.faults.heal_everything()

    def restart_all(self) -> None:
        for broker in sorted(self.hosts):
            self.hosts[broker].crash()
        self.faults.apply(fm.Restart(tuple(sorted(self.hosts))))

    def _supervise(self, broker: int) -> None:
        """A process supervisor: a broker that exited on its own (a 2.7 broker whose
        registration its old session still held, a failed log directory) is started
        again after ``cluster.supervisor.restart_after``, and again after each exit."""
        def restart_later():
            yield self.env.timeout(self.scenario.cluster.supervisor_restart_ms)
            host = self.hosts[broker]
            if host.exited and not host.alive:
                self.trace("world", "supervisor_restarted", {"broker": broker})
                self.faults.apply(fm.Restart((broker,)))
        self.env.process(restart_later())

    def restart_exited(self) -> None:
        """The final phase restarts a broker that exited on its own, as a supervisor
        would, at most once per session timeout: a 2.7 broker restarted while its old
        session still held its registration fails startup and exits."""
        for broker in sorted(self.hosts):
            host = self.hosts[broker]
            if not host.alive and self.env.now - host.started_at >= host.config.zookeeper_session_timeout_ms:
                self.faults.apply(fm.Restart((broker,)))

    def has_consumers(self) -> bool:
        return bool(self.consumers)

    def lagging_consumers(self, ends: dict) -> list[Lag]:
        return [Lag(c.name, str(tp), c.has_given_up(tp))
                for c in self.consumers for tp in c.partitions if c.is_behind(tp, ends.get(tp, 0))]

    def stop_consumers(self) -> None:
        for consumer in self.consumers:
            consumer.stop()
        for member in self.group_members.values():
            member.stop()

    def trace_replica_logs(self) -> None:
        """What every replica holds below the leader's high watermark, as digests of
        fixed chunks of offsets, so that a checker can find replicas that diverge."""
        if self.checks is not None and self.is_settled():  # once healed and settled: the replicas agree
            self.checks.healed(self.env.now)
        snaps = self.snapshots()
        memo: dict = {}
        compacted = compacted_topics(self.scenario.cluster.config,
                                     [(t.name, t.config) for t in self.scenario.cluster.topics])
        for tp in self.partitions:
            key = str(tp)
            leaders = [s[key] for s in snaps.values() if key in s and s[key]["role"] == "leader"]
            committed = leaders[0]["high_watermark"] if len(leaders) == 1 else None
            for broker in sorted(self.hosts):
                node = self.hosts[broker].node
                log = node.replica_log(tp) if node else None
                if log is None:
                    continue
                upto = log.high_watermark if committed is None else committed
                fields = {
                    "partition": key, "upto_offset": upto, "log_start_offset": log.log_start_offset,
                    "log_end_offset": log.log_end_offset, "high_watermark": log.high_watermark,
                    "chunk_size": REPLICA_DIGEST_CHUNK,
                    "chunks": replica_digests(log.batches, log.log_start_offset, upto, memo)}
                if tp.topic in compacted:  # a compacted replica also stands for a key -> value map
                    digest, keys = key_map_digest(batch_key_values(log.batches, log.log_start_offset, upto))
                    fields.update(key_map_digest=digest, key_map_keys=keys)
                self.trace(broker_name(broker), "replica_log", fields)

    # -- observation -----------------------------------------------------------------
    def controller(self) -> int | None:
        """The broker that is active controller with the highest controller epoch."""
        best = None
        for broker, host in sorted(self.hosts.items()):
            epoch = host.node.active_controller_epoch() if host.node is not None else None
            if epoch is not None and (best is None or epoch > best[1]):
                best = (broker, epoch)
        return best[0] if best else None

    def snapshots(self) -> dict[int, dict[str, dict]]:
        return {b: h.node.snapshot() for b, h in sorted(self.hosts.items()) if h.node is not None}

    def cluster_view(self) -> dict:
        """What triggers judge (faults/triggers.py): per partition, the leader with the
        highest epoch, its ISR and high watermark, and every replica's state."""
        members = {name: member.view() for name, member in self.group_members.items()}
        return cluster_view(self.controller(), self.snapshots(), self.view_partitions, members)

    def is_settled(self) -> bool:
        """Every partition settled by the rule both bindings share (faults/final_phase.py)."""
        snaps = self.snapshots()
        return all(partition_settled({b: s[str(tp)] for b, s in snaps.items() if str(tp) in s}, self._replicas_now(tp))
                   for tp in self.partitions)

    def _replicas_now(self, tp: TopicPartition) -> tuple[int, ...]:
        """The partition's replicas as its topic node holds them now (a reassignment moves
        them); the scenario's own where the node is gone."""
        return assigned_replicas(self.service.store, tp) or tuple(self.replicas[tp])

    def _sampler(self):
        interval = self.scenario.sample_interval_ms
        while True:
            for broker, host in sorted(self.hosts.items()):  # what snapshots() holds, as JSON text
                node = host.node
                if node is not None and node.has_partitions():
                    self.writer.write_json(int(self.env.now), broker_name(broker), "replica_state",
                                           '{"partitions":%s}' % node.snapshot_json())
            yield self.env.timeout(interval)

    def _writeback(self, interval_ms: int):
        while True:
            yield self.env.timeout(interval_ms)
            for broker in sorted(self.hosts):
                self.hosts[broker].disk.sync_all()

    def _progress(self, duration_ms: int):
        step = max(duration_ms // 20, 1)
        while True:
            self.progress(self.env.now, duration_ms)
            yield self.env.timeout(step)
