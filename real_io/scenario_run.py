"""``isrlab run --binding real``: a scenario on real ``isrlab serve`` processes (one
alone, or several on a fresh local cluster with a fault proxy on every link) with real
clients (confluent-kafka) as the workload and signals, the proxy and a lossy file
system as the faults.

The run: start the brokers (each its own trace file, on the run's clock), create the topics,
run the producers and consumers and the fault schedule (and nemesis) for ``duration``,
then the final phase in the simulation's order (faults/final_phase.py: stop the
producers, wait for what is in flight, heal: resume and restart, wait until every
partition has its leader, write the replica digests, read every partition from the
beginning, let the consumers catch up), stop the broker, and merge
the broker's events and the clients' into one ``trace.jsonl`` ordered by time (binding
``real``). A one-broker scenario's times count from the moment the broker is live and
its topics exist; a cluster's from the moment its brokers are started, as in the
simulation (their timers then run in the same phase); its topics come once every broker
is live, and its clients once every partition has a leader.
``refusals`` (real_io/run_refusals.py) lists what a scenario asks that this binding
cannot do; the runner (scenarios/runner.py) refuses such a file before anything starts.
On ZooKeeper (a cluster run, or one broker with ``--zk``) the scenario's admin steps
(topic_config, client_quota, topic changes, reassign, preferred_replica_election) write
the nodes the simulation writes, by the same functions (real_io/zk_admin_store.py).
"""
from __future__ import annotations

import heapq
import itertools
import json
import math
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic

from analysis.compacted_topics import compacted_topics
from analysis.replica_digest import REPLICA_DIGEST_CHUNK, key_map_digest, record_digests
from analysis.trace import COMMON_FIELDS, TraceWriter, run_started_fields
from analysis.workload import client_id, workload_label
from broker_core.admin_nodes import admin_topic_nodes, assigned_replicas
from broker_core.dynamic_config import encode_overrides, topic_config_path
from broker_core.config import broker_config, client_defaults
from broker_core.types import TopicPartition
from faults import model as fm
from faults.final_phase import (
    Lag, ReadEverything, Request, StopProducers, Wait, carried_out_blocking, final_phase_steps, partition_settled)
from faults.nodes import SERVICE_NODE, broker_node
from faults.rng import derive
from faults.roles import role_partitions
from faults.schedule import nemesis_life, step_life
from real_io.broker_process import BrokerProcess
from real_io.ports import free_port
from real_io.cluster import CHROOT, CLIENT_NODE, ClusterError, LocalCluster
from real_io.real_clients import QUIET, RealConsumer, RealProducer, Worker, final_read, join_all, start_thread
from real_io.real_faults import RealFaultBinding, RealFaultExecutor
from real_io.real_groups import RealGroupMember, await_coordinators, member_specs, stop_members
from real_io.replica_files import read_replica
from real_io.run_refusals import is_cluster, refusals  # noqa: F401 (refusals: the runner asks here)
from real_io.trace_view import TraceClusterView

PROFILE = "kafka-2.7"  # the profile isrlab serve runs unless told
READY_TIMEOUT_S = 60.0
TRIGGER_POLL_MS = 50  # a metadata and a ListOffsets request per poll


class RealRunError(Exception):
    """The real run could not go on (the broker did not start): not a verdict."""


class _Recorder:
    """The clients' and runner's events on the run's clock (monotonic ms since start)."""

    def __init__(self, origin: float):
        self.origin = origin
        self.events: list[tuple[int, int, str, str, dict]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return int((time.monotonic() - self.origin) * 1000)

    def __call__(self, node: str, type_: str, fields: dict) -> None:
        with self._lock:
            self.events.append((self.now_ms(), next(self._order), node, type_, fields))

    def at(self, monotonic: float, node: str, type_: str, fields: dict) -> None:
        """An event another process of the machine stamped with its own
        ``time.monotonic()`` (one clock for every process: CLOCK_MONOTONIC)."""
        with self._lock:
            self.events.append((int((monotonic - self.origin) * 1000), next(self._order), node, type_, fields))


class RealRun:
    def __init__(self, scenario, seed: int, work_dir: Path, progress=None, zk: str | None = None):
        """``scenario`` is a scenarios.model.Scenario (the layer above; not imported).
        One broker runs alone: on ``zk`` (HOST:PORT, in a chroot of this run's own) or
        its embedded store. More run on a fresh local cluster (real_io/cluster.py): its
        own ZooKeeper, a fault proxy on every link, and a lossy file system under each
        data directory when the scenario may lose power."""
        self.scenario = scenario
        self.seed = seed
        self.progress = progress
        self.origin = time.monotonic()
        self.record = _Recorder(self.origin)
        work_dir.mkdir(parents=True, exist_ok=True)
        self.partitions = [str(TopicPartition(t.name, p)) for t in scenario.cluster.topics for p in range(t.partitions)]
        self.replicas = {str(TopicPartition(t.name, p)): list(r) for t in scenario.cluster.topics
                         for p, r in t.assignment.items()}
        config = broker_config(scenario.cluster.profile, dict(scenario.cluster.config))
        self.session_timeout_ms = config.zookeeper_session_timeout_ms
        self.cluster: LocalCluster | None = None
        self.chroot = ""  # the brokers' chroot in ZooKeeper
        self.zk: str | None = None
        if is_cluster(scenario):
            self.cluster = LocalCluster(work_dir / "cluster", broker_ids=list(scenario.cluster.brokers),
                                        profile=scenario.cluster.profile, config=dict(scenario.cluster.config),
                                        proxy=True, zk_tick_ms=_tick_for(self.session_timeout_ms),
                                        sample_interval_ms=scenario.sample_interval_ms,
                                        lossy_disks=_may_lose_power(scenario))
            self.cluster.origin = self.origin  # the brokers' traces on the run's clock
            self.brokers = self.cluster.brokers  # filled as the cluster starts
            self.zk = self.cluster.zk_hosts
            self.chroot = CHROOT
            self.traces = {b: self.cluster.broker_dir(b) / "trace.jsonl" for b in self.cluster.broker_ids}
            self.data_dirs = {b: self.cluster.broker_dir(b) / "data" for b in self.cluster.broker_ids}
        else:
            broker_id = scenario.cluster.brokers[0]
            data_dir = work_dir / f"broker-{broker_id}-data"
            shutil.rmtree(data_dir, ignore_errors=True)
            trace = work_dir / f"broker-{broker_id}-trace.jsonl"
            trace.unlink(missing_ok=True)
            self.zk = zk
            self.chroot = f"/isrlab-runs/{uuid.uuid4().hex}"
            self.brokers = {broker_id: BrokerProcess(
                broker_id, data_dir, free_port(), trace, dict(scenario.cluster.config), self.origin,
                work_dir / f"broker-{broker_id}.stderr", zk=None if zk is None else zk + self.chroot,
                zk_session_file=None if zk is None else work_dir / f"broker-{broker_id}.zk-session",
                profile=scenario.cluster.profile if scenario.cluster.profile != PROFILE else None,
                sample_interval_ms=scenario.sample_interval_ms)}
            self.traces = {broker_id: trace}
            self.data_dirs = {broker_id: data_dir}
        # the view also holds the __consumer_offsets partitions coordinator roles name
        self.view = TraceClusterView(self.traces, self._running,
                                     self.partitions + role_partitions(s.fault for s in scenario.faults))
        self.binding: RealFaultBinding | None = None
        self._final_started_ms: dict[int, float] = {}  # when the final phase last started each broker
        self.final_phase = False
        self.settled = False
        self._due_ms = 0.0  # the schedule's nominal time (now_ms)
        self.scenario_start: float | None = None  # the scenario's 0 ms (monotonic); None: when the workload starts
        self.members: dict[str, RealGroupMember] = {}  # the group consumers' processes, by node name
        self._no_coordinator: list[str] = []  # groups whose coordinator never answered before the clients
        self.work_dir = work_dir

    @property
    def bootstrap(self) -> str:
        if self.cluster is not None:
            return self.cluster.bootstrap
        return ",".join(process.bootstrap for process in self.brokers.values())

    def _running(self, broker: int) -> int | None:
        """While the broker runs, not paused: when its process was started, in ms on
        the run's clock (the view's test)."""
        process = self.brokers.get(broker)
        if process is None or not process.alive or process.paused or process.started_at is None:
            return None
        return int((process.started_at - self.origin) * 1000)

    def _faults(self) -> RealFaultExecutor:
        cluster = self.cluster
        proxy = cluster.proxy if cluster is not None else None
        nodes = [broker_node(b) for b in sorted(self.brokers)] + [SERVICE_NODE, CLIENT_NODE]
        self.binding = RealFaultBinding(self.brokers, self.record, self.view, self.zk, proxy, lambda: nodes,
                                        cluster.lossy_disks if cluster is not None else None, self.chroot,
                                        self.members)
        return RealFaultExecutor(self.binding, derive(self.seed, "fault-roles"))

    # -- the run -------------------------------------------------------------------
    def run(self) -> None:
        scenario = self.scenario
        self.record("world", "run_started", run_started_fields(scenario))
        try:
            self._start_brokers()
            self.faults = self._faults()
            coordinators = self._prepare_groups()
            self._create_topics()
            join_all(coordinators)
            if self._no_coordinator:
                raise RealRunError(f"no coordinator answered for the groups {', '.join(self._no_coordinator)} "
                                   f"within {READY_TIMEOUT_S:.0f}s")
            self._workload_and_faults()
            self._final_phase()
            self.record("world", "run_finished", {"settled": self.settled})
        finally:
            for member in self.members.values():  # a run that failed on the way leaves none behind
                member.kill()
            if self.binding is not None:
                self.binding.close()
            # after the run: the brokers' shutdown is not part of the trace
            if self.cluster is not None:
                self.cluster.stop()
            else:
                for process in self.brokers.values():
                    process.stop()
                if self.zk is not None:
                    _remove_chroot(self.zk, self.chroot)

    def _start_brokers(self) -> None:
        if self.cluster is not None:
            try:
                self.cluster.start(READY_TIMEOUT_S, before_brokers=self._start_clock)
            except ClusterError as error:
                raise RealRunError(f"the cluster did not start: {error}") from None
            return
        if self.zk is not None:
            self._write_topic_configs()
        for process in self.brokers.values():
            process.start()
            if not process.wait_ready(READY_TIMEOUT_S):
                said = process.last_words()
                if said:  # it exited saying why (a ZooKeeper it cannot reach, a port in use)
                    raise RealRunError(f"the broker exited while starting: {said}")
                raise RealRunError(f"the broker did not start within {READY_TIMEOUT_S:.0f}s; its stderr: "
                                   f"{process.stderr_path}")

    def _start_clock(self) -> None:
        """A cluster's scenario clock (and every broker's) begins as its brokers are
        started, as the simulation's brokers start at 0 ms, so that their timers (the
        high watermark checkpoint every 5 s, say) run in the simulation's phase, give or
        take a process's start (about half a second, always later). The topics come
        once every broker is live (``_create_topics``): a controller that found the
        topic before the preferred replica registered would elect another leader, which
        the simulation, whose brokers all start at once, does not."""
        self._write_topic_configs()
        self.origin = self.scenario_start = time.monotonic()
        self.record.origin = self.origin
        if self.cluster is not None:
            self.cluster.origin = self.origin

    def _write_topic_configs(self) -> None:
        """The topics' config overrides (``topics: [{config: ...}]``), written before any
        broker starts: each broker reads /config/topics at its first session, as the
        simulation's brokers are built with them, so the topic's first replicas already
        have them (a broker reads no config node it is not notified of later)."""
        nodes = [(topic_config_path(t.name), encode_overrides(t.config)) for t in self.scenario.cluster.topics
                 if t.config]
        if nodes and self.zk is not None:
            _write_admin_nodes(self.zk, self.chroot, nodes)

    def _topic_nodes(self) -> list[tuple[str, bytes]]:
        topics = self.scenario.cluster.topics
        return [node for t in topics for node in admin_topic_nodes(t.name, t.assignment, t.config)]

    def _create_topics(self) -> None:
        """On ZooKeeper as an administrator creates a topic with its assignment
        (broker_core/admin_nodes.py, as the simulation does), then wait until every
        partition has a leader; on the embedded store through CreateTopics. A cluster's
        clients start only then, their record schedule catching up from the scenario's
        0 ms."""
        if self.zk is None:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
            topics = [NewTopic(t.name, t.partitions, t.replication_factor) for t in self.scenario.cluster.topics]
            for name, future in sorted(admin.create_topics(topics, request_timeout=30).items()):
                try:
                    future.result(60)
                except Exception as error:
                    raise RealRunError(f"creating topic {name} failed: {error}") from None
        else:
            _write_admin_nodes(self.zk, self.chroot, self._topic_nodes())
        deadline = time.monotonic() + READY_TIMEOUT_S
        while any(self.view()["partitions"][p]["leader"] is None for p in self.partitions):
            if time.monotonic() > deadline:
                raise RealRunError(f"the topics' partitions had no leader within {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.05)

    def _prepare_groups(self) -> list[Worker]:
        """Once the brokers are live: launch the group members' processes, which wait
        (``_begin_members``), and make each group's coordinator ready on a thread of its
        own (real_io/real_groups.py await_coordinators), while the topics are created:
        the broker creates ``__consumer_offsets`` at the first FindCoordinator, so the
        two creations overlap and the group forms as early as it can."""
        groups = sorted({workload.group for workload in self.scenario.group_consumers})
        if not groups:
            return []
        for number, workload in enumerate(self.scenario.group_consumers):
            for name, spec in member_specs(workload, number, self.bootstrap):
                self.members[name] = RealGroupMember(name, spec, self.record.at,
                                                     self.work_dir / "group-members" / f"{name}.stderr")
                self.members[name].launch()
        first = self.scenario.group_consumers[0].topics[0]
        return [start_thread(self._await_coordinators, groups, (first, 0))]

    def _await_coordinators(self, groups: list[str], partition: tuple[str, int]) -> None:
        self._no_coordinator = await_coordinators(self.bootstrap, groups, partition, READY_TIMEOUT_S)

    def _workload_and_faults(self) -> None:
        scenario = self.scenario
        start = self.scenario_start if self.scenario_start is not None else time.monotonic()
        end = start + scenario.duration_ms / 1000.0
        defaults = client_defaults(scenario.cluster.profile)
        self.producers = [RealProducer(f"producer-{i}", w, scenario.topic(w.topic).partitions, self.bootstrap,
                                       self.record, w.partitioner or defaults.partitioner,
                                       derive(self.seed, f"partitioner-producer-{i}"),
                                       derive(self.seed, workload_label(f"producer-{i}")), client_id(w, "producer", i))
                          for i, w in enumerate(scenario.producers)]
        self.consumers = [RealConsumer(f"consumer-{i}", w, scenario.topic(w.topic).partitions, self.bootstrap,
                                       self.record, client_id(w, "consumer", i))
                          for i, w in enumerate(scenario.consumers)]
        self._begin_members(start)
        over = lambda: time.monotonic() >= end  # noqa: E731
        self._producing = [start_thread(p.run, start, over) for p in self.producers]
        self._consuming = [start_thread(c.run, start) for c in self.consumers]
        self._schedule = start_thread(self._drive, start)
        self._workload_end = end
        while not over():
            if self.progress:
                self.progress((time.monotonic() - start) * 1000, scenario.duration_ms)
            time.sleep(min(0.2, max(end - time.monotonic(), 0)))

    def _begin_members(self, start: float) -> None:
        """Every group member's application begins at its entry's ``start``."""
        for number, workload in enumerate(self.scenario.group_consumers):
            for name, _ in member_specs(workload, number, self.bootstrap):
                self.members[name].begin(start + workload.start_ms / 1000.0)

    def _drive(self, start: float) -> None:
        """The fault steps' and the nemesis's lives (faults/schedule.py) on one thread, in
        the order of their nominal times (ties in the order they were scheduled, as
        simpy runs them); ``now_ms`` is the nominal time of the wait that just ended, so
        a late wake-up does not move the schedule."""
        scenario = self.scenario
        lives = [step_life(step, scenario.duration_ms, self, TRIGGER_POLL_MS) for step in scenario.faults]
        if scenario.nemesis is not None:
            lives.append(nemesis_life(scenario.nemesis, derive(self.seed, "nemesis"), self))
        order = itertools.count()
        pending = [(0.0, next(order), life) for life in lives]
        while pending:
            due_ms, _, life = heapq.heappop(pending)
            self._due_ms = due_ms
            if not self._sleep_until(start + due_ms / 1000.0):
                break
            try:
                wait_ms = next(life)
            except StopIteration:
                continue
            heapq.heappush(pending, (due_ms + wait_ms, next(order), life))
        self._due_ms = math.inf

    def now_ms(self) -> float:
        """The schedule's time (faults/schedule.py reads it)."""
        return self._due_ms

    def cluster_view(self) -> dict:
        """The brokers' part from their traces, each group member's from the state lines
        its process writes as it goes (real_io/real_groups.py ``view``)."""
        view = self.view()
        view["members"] = {name: member.view() for name, member in self.members.items()}
        return view

    def trace(self, node: str, type_: str, fields: dict) -> None:
        self.record(node, type_, fields)

    def _sleep_until(self, at: float) -> bool:
        """False once the final phase began (nothing more may start or end)."""
        while not self.final_phase:
            left = at - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(0.02, left))
        return False

    # -- the final phase (faults/final_phase.py) -----------------------------------
    def _final_phase(self) -> None:
        """Carry out the final phase's requests with blocking calls on the run's clock."""
        final = self.scenario.final
        timeout_ms = max((w.request_timeout_ms for w in self.scenario.producers), default=0)
        steps = final_phase_steps(self, final.max_wait_ms, final.restart, timeout_ms)
        self.settled = carried_out_blocking(steps, self._carry_out)

    def _carry_out(self, request: Request) -> dict | None:
        """One final-phase request, blocking on the run's clock; returns its answer."""
        if isinstance(request, Wait):
            time.sleep(request.ms / 1000.0)
        elif isinstance(request, StopProducers):
            self._stop_producers(self._monotonic(request.deadline_ms))
        elif isinstance(request, ReadEverything):
            read = final_read(self.bootstrap, self.partitions, self.record,
                              self._monotonic(request.deadline_ms))
            return {p: entry[1] for p, entry in read.items()}
        return None

    def _monotonic(self, clock_ms: float) -> float:
        return self.origin + clock_ms / 1000.0

    def _stop_producers(self, deadline: float) -> None:
        join_all(self._producing)  # their threads end with the workload's duration
        # All at once: a producer's delivery reports arrive while it flushes, so one
        # flushed after another (a throttled one's 30 s backlog) would see its own acks late.
        flush_s = max(deadline - time.monotonic(), 0.0)
        join_all([start_thread(producer.finish, flush_s) for producer in self.producers])

    def clock_ms(self) -> float:
        return self.record.now_ms()

    def end_fault_schedule(self) -> None:
        # what falls due by the end (the last trigger polls included) runs before the final phase
        limit = self.scenario.duration_ms + 2 * TRIGGER_POLL_MS
        while self._schedule.is_alive() and self._due_ms <= limit and time.monotonic() < self._workload_end + 30:
            time.sleep(0.01)
        self.final_phase = True
        join_all([self._schedule])

    def heal_everything(self) -> None:
        self.faults.heal_everything()
        self._final_started_ms = {broker: self.clock_ms() for broker in self.brokers}

    def restart_all(self) -> None:
        self.faults.restart_all()
        self._final_started_ms = {broker: self.clock_ms() for broker in self.brokers}

    def restart_exited(self) -> None:
        """A broker that exited on its own starts again, at most once per session timeout
        (the simulation's rule: a 2.7 broker restarted while its old session still holds
        its registration exits at once)."""
        for broker, process in sorted(self.brokers.items()):
            now = self.clock_ms()
            if not process.alive and now - self._final_started_ms.get(broker, 0) >= self.session_timeout_ms:
                self._final_started_ms[broker] = now
                self.faults.apply(fm.Restart((broker,)))

    def is_settled(self) -> bool:
        """Every broker runs and every partition settled by the rule both bindings
        share (faults/final_phase.py), judged on each broker's own word (the view)."""
        if not all(process.ready for process in self.brokers.values()):
            return False
        partitions = self.view()["partitions"]
        return all(partition_settled(partitions[name]["replicas"], self._replicas_now(name))
                   for name in self.partitions)

    def _replicas_now(self, name: str) -> list[int]:
        """The partition's replicas as ZooKeeper's topic node holds them now (a
        reassignment moves them), as the simulation reads its store; the scenario's on
        the embedded store, which no admin step changes."""
        if self.zk is None or self.binding is None:
            return self.replicas[name]
        now = assigned_replicas(self.binding.admin_store(), TopicPartition.parse(name))
        return list(now) if now else self.replicas[name]

    def trace_replica_logs(self) -> None:
        """Every replica's digests below the leader's high watermark, as the simulation
        writes them, read from each replica's segment files (real_io/replica_files.py):
        nothing is in flight once settled, and a follower cannot be read over the wire."""
        partitions = self.view()["partitions"]
        cluster = self.scenario.cluster
        compacted = compacted_topics(cluster.config, [(t.name, t.config) for t in cluster.topics])
        for name in self.partitions:
            view = partitions[name]
            tp = TopicPartition.parse(name)
            for broker, state in sorted(view["replicas"].items()):
                upto = view["high_watermark"] if view["leader"] is not None else state["high_watermark"]
                keys: list | None = [] if tp.topic in compacted else None
                log_start, records = read_replica(self.data_dirs[broker], tp, upto, keys)
                fields = {
                    "partition": name, "upto_offset": upto, "log_start_offset": log_start,
                    "log_end_offset": state["log_end_offset"], "high_watermark": state["high_watermark"],
                    "chunk_size": REPLICA_DIGEST_CHUNK, "chunks": record_digests(records, log_start, upto)}
                if keys is not None:  # a compacted replica also stands for a key -> value map
                    digest, count = key_map_digest(zip(keys, (value for _, value in records)))
                    fields.update(key_map_digest=digest, key_map_keys=count)
                self.record(broker_node(broker), "replica_log", fields)

    def has_consumers(self) -> bool:
        return bool(self.consumers)

    def lagging_consumers(self, ends: dict) -> list[Lag]:
        return [Lag(c.name, p, False) for c in self.consumers for p in self.partitions
                if TopicPartition.parse(p).topic == c.spec.topic and c.is_behind(p, ends.get(p, 0))]

    def stop_consumers(self) -> None:
        for consumer in self.consumers:
            consumer.running = False
        join_all(self._consuming)
        for consumer in self.consumers:
            consumer.consumer.close()
        stop_members(list(self.members.values()))

    # -- one trace -----------------------------------------------------------------
    def write_trace(self, writer: TraceWriter) -> None:
        """The broker's events and the run's, one clock, ordered by time (the broker's
        first where they tie), up to ``run_finished``."""
        finished = self.record.events[-1][0]  # run_finished: the broker's teardown comes after it
        merged = [(t, 0, order, node, type_, fields) for order, (t, node, type_, fields)
                  in enumerate(e for b in sorted(self.traces) for e in _broker_events(self.traces[b])) if t <= finished]
        merged += [(t, 1, order, node, type_, fields) for t, order, node, type_, fields in self.record.events]
        merged.sort(key=lambda e: e[:3])
        for t, _, _, node, type_, fields in merged:
            writer.write(max(t, 0), node, type_, fields)


def _broker_events(path: Path):
    if not path.exists():
        return
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by SIGKILL
            yield raw["t_ms"], raw["node"], raw["type"], {k: v for k, v in raw.items() if k not in COMMON_FIELDS}


def _tick_for(session_timeout_ms: int) -> int:
    """A ZooKeeper tick that grants the scenario's session timeout (a server grants 2 to
    20 ticks)."""
    return max(1, min(2000, session_timeout_ms // 2))


def _may_lose_power(scenario) -> bool:
    return (any(isinstance(step.fault, fm.PowerLoss) for step in scenario.faults)
            or (scenario.nemesis is not None and "power_loss" in scenario.nemesis.kinds))


def _write_admin_nodes(zk: str, chroot: str, nodes: list[tuple[str, bytes]]) -> None:
    """Create each node (and its parents, the chroot's too) in order, as an
    administrator would."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError
    client = KazooClient(hosts=zk)
    try:
        client.start(timeout=10)
        for path, data in nodes:  # a topic's config node may be there already (_write_topic_configs)
            if client.exists(chroot + path) is None:
                client.create(chroot + path, data, makepath=True)
            else:
                client.set(chroot + path, data)
    except (KazooException, KazooTimeoutError) as error:
        raise RealRunError(f"writing the topics to ZooKeeper at {zk} failed: {type(error).__name__}: {error}") from None
    finally:
        client.stop()
        client.close()


def _check_session_timeout(scenario, zk: str) -> None:
    """Refuse a ZooKeeper that would not grant the scenario's session timeout: the
    broker would live by another timeout than the simulation models (for example a
    crashed broker's session outliving its restart), and the verdicts would differ for
    a reason that is not the broker's."""
    from real_io.zk_server import negotiated_session_timeout_ms
    asked = broker_config(scenario.cluster.profile, dict(scenario.cluster.config)).zookeeper_session_timeout_ms
    try:
        granted = negotiated_session_timeout_ms(zk, asked)
    except (OSError, ValueError) as error:
        raise RealRunError(f"cannot reach ZooKeeper at {zk}: {error}") from None
    if granted != asked:
        raise RealRunError(f"ZooKeeper at {zk} grants sessions of {granted} ms, not the {asked} ms the scenario asks "
                           f"(zookeeper.session.timeout.ms); a server allows 2 to 20 ticks of its tickTime: start one "
                           f"whose tick fits, e.g. isrlab zk start --tick-ms {max(1, asked // 2)}")


def _remove_chroot(zk: str, chroot: str) -> None:
    """The run's metadata goes with it; a ZooKeeper that went away keeps it (harmless:
    every run has a chroot of its own)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError
    client = KazooClient(hosts=zk)
    try:
        client.start(timeout=10)
        client.delete(chroot, recursive=True)
    except (KazooException, KazooTimeoutError):
        pass
    finally:
        client.stop()
        client.close()


def run_real(scenario, seed: int, writer: TraceWriter, work_dir: Path,
             progress: Callable[[float, int], None] | None = None, zk: str | None = None) -> None:
    """Run ``scenario`` for real (on ZooKeeper ``zk``, or the embedded store) and write
    its one trace through ``writer``."""
    if zk is not None:
        _check_session_timeout(scenario, zk)
    run = RealRun(scenario, seed, work_dir, progress, zk)
    run.run()
    run.write_trace(writer)
