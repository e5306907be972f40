"""The simulated executor of the fault vocabulary (faults/model.py).

Every fault gets an id; ``fault_started`` and ``fault_ended`` carry it, so a timeline
can shade the interval. A crash lasts until its broker restarts, a network fault until
it is undone or healed, a pause until resume, a disk fault until restored; instant
faults (restart, session expiry, bit flip) end as they start.

Role targets (faults/model.py) resolve once, when the fault starts, by
faults/roles.py on the view that ``when:`` triggers test (World.cluster_view): the
controller is the active controller with the highest controller epoch, the leader of a
partition the broker that believes it leads it with the highest leader epoch. ``fault_started``
records each role's broker under ``roles``; a role that resolves to nothing makes the
whole fault change nothing (``no_effect``).
"""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.dynamic_config import change_topic_config
from broker_core.types import TopicPartition
from faults import model as fm
from faults.events import fault_ended_fields, fault_started_fields
from faults.links import CuttingFault, cut_links
from faults.nodes import SERVICE_NODE
from faults.roles import resolve_role
from sim.broker_host import broker_name


class SimFaultExecutor:
    def __init__(self, world, rng, role_rng=None):
        self.world = world
        self.step = None  # the scenario step being applied, if any
        self.rng = rng
        # its own stream, so that drawing a role shifts no other random choice
        self.role_rng = role_rng if role_rng is not None else rng
        self._roles: dict = {}  # role -> broker (None: resolved to nothing), for the fault being applied
        self._next_id = 0
        self.active: dict[int, fm.Fault] = {}
        self._down: dict[int, list[int]] = {}  # broker -> ids of the faults that keep it down
        self._paused: dict[int, int] = {}
        self._disk: dict[int, list[int]] = {}  # broker -> disk fault ids
        self._clock: dict[int, list[tuple[int, int]]] = {}  # fault id -> [(broker, delta)]

    # -- helpers ---------------------------------------------------------------------
    def resolve(self, refs) -> tuple[int, ...]:
        """Broker ids for a fault's broker targets, roles as resolved when it started."""
        out = []
        for ref in refs:
            if fm.is_role(ref):
                if self._roles.get(ref) is not None:
                    out.append(self._roles[ref])
            else:
                out.append(ref)
        return tuple(dict.fromkeys(out))

    def _resolve_nodes(self, nodes) -> list[str]:
        out = []
        for node in nodes:
            if fm.is_role(node):
                out += [broker_name(b) for b in self.resolve([node])]
            else:
                out.append(node)
        return list(dict.fromkeys(out))

    def _resolve_roles(self, fault: fm.Fault) -> str | None:
        """Resolve every role the fault names, once; returns why the fault can change
        nothing when one resolves to no broker."""
        view = self.world.cluster_view() if fm.roles_of(fault) else None
        problems = []
        for role in fm.roles_of(fault):
            broker, why = resolve_role(role, view, list(self.world.hosts), self.role_rng)
            self._roles[role] = broker
            if broker is None:
                problems.append(f"{role} resolved to no broker: {why}")
        return "; ".join(problems) or None

    def _start(self, fault: fm.Fault, instant: bool = False, no_effect: str | None = None, **extra) -> int:
        """``no_effect`` says why the fault changed nothing (it is traced, so that a
        scripted fault that never took effect fails the run)."""
        self._next_id += 1
        fault_id = self._next_id
        fields = fault_started_fields(fault_id, fault, self.step, self._roles, no_effect, **extra)
        self.world.trace("nemesis", "fault_started", fields)
        if instant:
            self._end(fault_id, fault)
        else:
            self.active[fault_id] = fault
        return fault_id

    def _end(self, fault_id: int, fault: fm.Fault | None = None) -> None:
        fault = fault or self.active.pop(fault_id, None)
        self.active.pop(fault_id, None)
        if fault is not None:
            self.world.trace("nemesis", "fault_ended", fault_ended_fields(fault_id, fault))

    # -- apply -----------------------------------------------------------------------
    def apply(self, fault: fm.Fault, step=None) -> int | None:
        """Start a fault (of the scenario's ``step``, if it is one); returns its id when
        it lasts (so that it can be undone)."""
        handler = getattr(self, "_apply_" + fm.kind_of(fault))
        self.step = step
        try:
            unresolved = self._resolve_roles(fault)
            if unresolved is not None:  # applying the rest would not be the fault the step asked for
                self._start(fault, instant=True, no_effect=unresolved, targets=[])
                return None
            return handler(fault)
        finally:
            self.step = None
            self._roles = {}

    def undo(self, fault_id: int | None) -> None:
        """End a lasting fault early (a scenario's ``for:`` or the nemesis)."""
        fault = self.active.get(fault_id) if fault_id is not None else None
        if fault is None:
            return
        hosts = self.world.hosts
        if isinstance(fault, (fm.Crash, fm.PowerLoss, fm.Shutdown)):
            for broker, ids in sorted(self._down.items()):
                if fault_id in ids:
                    self._restart(broker)
        elif isinstance(fault, fm.Pause):
            for broker, fid in sorted(self._paused.items()):
                if fid == fault_id:
                    del self._paused[broker]
                    hosts[broker].resume()
            self._end(fault_id)
        elif isinstance(fault, fm.NETWORK):
            self.world.network.remove_cuts(fault_id)
            self.world.network.remove_link_override(fault_id)
            self._end(fault_id)
        elif isinstance(fault, fm.DISK):
            for broker, ids in sorted(self._disk.items()):
                if fault_id in ids:
                    ids.remove(fault_id)
                    hosts[broker].disk.restore()
                    for other in list(ids):  # a restore ends every disk fault of that broker
                        ids.remove(other)
                        self._end(other)
            self._end(fault_id)
        elif isinstance(fault, fm.ClockJump):
            for broker, delta in self._clock.pop(fault_id, []):
                hosts[broker].clock_offset_ms -= delta
            self._end(fault_id)

    def _take_down(self, fault, brokers: list[int], action) -> int | None:
        """Start a fault that stops processes; it lasts until every one restarts (and
        ends at once when there was nothing left to stop)."""
        fault_id = self._start(fault, instant=not brokers, targets=brokers,
                               no_effect=None if brokers else "no running broker to stop")
        for broker in brokers:
            action(self.world.hosts[broker])
            self._down.setdefault(broker, []).append(fault_id)
        return fault_id if brokers else None

    def _apply_crash(self, fault: fm.Crash) -> int | None:
        brokers = [b for b in self.resolve(fault.brokers) if self.world.hosts[b].alive]
        return self._take_down(fault, brokers, lambda host: host.crash())

    def _apply_power_loss(self, fault: fm.PowerLoss) -> int | None:
        # a broker that is already down still loses what its disk had not synced
        return self._take_down(fault, list(self.resolve(fault.brokers)), lambda host: host.power_loss())

    def _apply_restart(self, fault: fm.Restart) -> None:
        brokers = self.resolve(fault.brokers)
        self._start(fault, instant=True, targets=list(brokers))
        for broker in brokers:
            self._restart(broker)

    def _restart(self, broker: int) -> None:
        host = self.world.hosts[broker]
        if host.alive:
            return
        host.start()
        for fault_id in self._down.pop(broker, []):
            if not any(fault_id in ids for ids in self._down.values()):
                self._end(fault_id)

    def _apply_shutdown(self, fault: fm.Shutdown) -> int | None:
        brokers = [b for b in self.resolve(fault.brokers) if self.world.hosts[b].alive]
        return self._take_down(fault, brokers, lambda host: host.shutdown())

    def _apply_pause(self, fault: fm.Pause) -> int | None:
        brokers = [b for b in self.resolve(fault.brokers) if self.world.hosts[b].alive and not self.world.hosts[b].paused]
        fault_id = self._start(fault, instant=not brokers, targets=brokers,
                               no_effect=None if brokers else "no running broker to pause")
        for broker in brokers:
            self.world.hosts[broker].pause()
            self._paused[broker] = fault_id
        return fault_id if brokers else None

    def _apply_resume(self, fault: fm.Resume) -> None:
        brokers = self.resolve(fault.brokers)
        self._start(fault, instant=True, targets=list(brokers))
        for broker in brokers:
            fault_id = self._paused.pop(broker, None)
            self.world.hosts[broker].resume()
            if fault_id is not None and fault_id not in self._paused.values():
                self._end(fault_id)

    def _network_fault(self, fault, edges, no_effect: str | None = None, **extra) -> int:
        if not edges and no_effect is None:
            no_effect = "cuts no link"
        fault_id = self._start(fault, no_effect=no_effect, **extra)
        self.world.network.add_cuts(fault_id, edges)
        return fault_id

    def _links(self, resolved: CuttingFault) -> set[tuple[str, str]]:
        """The links a network fault, its roles resolved to node names, cuts now."""
        return cut_links(resolved, self.world.network.nodes)

    def _apply_isolate(self, fault: fm.Isolate) -> int:
        nodes = self._resolve_nodes(fault.nodes)
        return self._network_fault(fault, self._links(fm.Isolate(tuple(nodes))), targets=nodes)

    def _apply_partition(self, fault: fm.Split) -> int:
        groups = [self._resolve_nodes(g) for g in fault.groups]
        seen: dict[str, int] = {}
        twice = sorted({n for i, g in enumerate(groups) for n in g if seen.setdefault(n, i) != i})
        if twice:  # a role resolved to a broker another group names: cut nothing
            return self._network_fault(fault, set(), targets=groups,
                                       no_effect=f"{', '.join(twice)} resolved into two groups")
        return self._network_fault(fault, self._links(fm.Split(tuple(map(tuple, groups)))), targets=groups)

    def _apply_random_halves(self, fault: fm.RandomHalves) -> int:
        brokers = [broker_name(b) for b in sorted(self.world.hosts)]
        self.rng.shuffle(brokers)
        cut = (len(brokers) + 1) // 2
        groups = [sorted(brokers[:cut]) + [SERVICE_NODE], sorted(brokers[cut:])]
        return self._network_fault(fault, self._links(fm.Split(tuple(map(tuple, groups)))), groups=groups)

    def _apply_bridge(self, fault: fm.Bridge) -> int:
        halves = [self._resolve_nodes(h) for h in fault.halves]
        via = self._resolve_nodes([fault.via])
        edges = self._links(fm.Bridge((tuple(halves[0]), tuple(halves[1])), via[0])) if via else set()
        return self._network_fault(fault, edges, targets=halves)

    def _apply_cut(self, fault: fm.Cut) -> int:
        sources, destinations = self._resolve_nodes(fault.sources), self._resolve_nodes(fault.destinations)
        return self._network_fault(fault, self._links(fm.Cut(tuple(sources), tuple(destinations))),
                                   targets=[sources, destinations])

    def _apply_link(self, fault: fm.LinkFault) -> int:
        sources, destinations = self._resolve_nodes(fault.sources), self._resolve_nodes(fault.destinations)
        fault_id = self._start(fault, targets=[sources, destinations])
        pairs = {(a, b) for a in sources for b in destinations if a != b}
        if fault.symmetric:
            pairs |= {(b, a) for a, b in pairs}
        changes = {k: getattr(fault, k) for k in ("latency_ms", "jitter_ms", "loss", "duplicate", "reorder")
                   if getattr(fault, k) is not None}
        self.world.network.add_link_override(fault_id, pairs, changes)
        return fault_id

    def _apply_heal(self, fault: fm.Heal) -> None:
        self._start(fault, instant=True, scope=fault.scope)
        for fault_id in self.world.network.heal():
            self._end(fault_id)
        if fault.scope == "all":
            self.heal_everything()

    def heal_everything(self) -> None:
        """The final phase: every fault ends and every broker runs."""
        for fault_id in self.world.network.heal():
            self._end(fault_id)
        for fault_id in sorted(self.active):
            fault = self.active.get(fault_id)
            if isinstance(fault, (fm.Pause, fm.ClockJump) + fm.DISK):
                self.undo(fault_id)
        for broker in sorted(self.world.hosts):
            if not self.world.hosts[broker].alive:
                self._restart(broker)

    def _apply_expire_session(self, fault: fm.ExpireSession) -> None:
        brokers = self.resolve(fault.brokers)
        self._start(fault, instant=True, targets=list(brokers))
        store = self.world.service.store
        for broker in brokers:
            session = store.session_of(broker_name(broker))
            if session is not None:
                store.expire(session, reason="forced")

    def _apply_preferred_replica_election(self, fault: fm.PreferredReplicaElection) -> None:
        """Write the request node as the admin tool does; like the tool, refuse while an
        earlier request is still there (the controller has not finished it)."""
        store = self.world.service.store
        path = coord.PREFERRED_REPLICA_ELECTION_PATH
        requested = list(fault.partitions) if fault.partitions is not None else _all_partitions(store)
        written = store.get(path) is None
        if written:
            entries = []
            for name in requested:
                tp = TopicPartition.parse(name)
                entries.append({"topic": tp.topic, "partition": tp.partition})
            store.put(path, coord.encode_data({"version": 1, "partitions": entries}))
        self._start(fault, instant=True, requested=requested, written=written)

    def _apply_topic_config(self, fault: fm.TopicConfig) -> None:
        """Write the topic's overrides and the change notification as kafka-configs.sh does."""
        written = change_topic_config(self.world.service.store, fault.topic, dict(fault.config))
        if written is None:
            self._start(fault, instant=True, no_effect=f"topic {fault.topic} does not exist")
            return
        self._start(fault, instant=True, overrides=written)

    def _disk_fault(self, fault, change) -> int:
        brokers = self.resolve(fault.brokers)
        fault_id = self._start(fault, targets=list(brokers))
        for broker in brokers:
            change(self.world.hosts[broker].disk)
            self._disk.setdefault(broker, []).append(fault_id)
        return fault_id

    def _apply_slow_fsync(self, fault: fm.SlowFsync) -> int:
        return self._disk_fault(fault, lambda disk: setattr(disk, "fsync_ms", fault.fsync_ms))

    def _apply_write_errors(self, fault: fm.WriteErrors) -> int:
        return self._disk_fault(fault, lambda disk: setattr(disk, "write_error", "EIO"))

    def _apply_disk_full(self, fault: fm.DiskFull) -> int:
        return self._disk_fault(fault, lambda disk: setattr(disk, "write_error", "ENOSPC"))

    def _apply_torn_writes(self, fault: fm.TornWrites) -> int:
        return self._disk_fault(fault, lambda disk: setattr(disk, "torn_writes", True))

    def _apply_bit_flip(self, fault: fm.BitFlip) -> None:
        flipped = []
        brokers = self.resolve(fault.brokers)
        for broker in brokers:
            disk = self.world.hosts[broker].disk
            segments = sorted(p for p in disk.files if p.startswith(fault.partition + "/") and p.endswith(".log"))
            if segments:
                path = segments[self.rng.randrange(len(segments))]
                flipped.append({"broker": broker, "path": path, "byte": disk.flip_bit(path)})
        self._start(fault, instant=True, targets=list(brokers), flipped=flipped)

    def _apply_clock(self, fault: fm.ClockJump) -> int:
        brokers = self.resolve(fault.brokers)
        fault_id = self._start(fault, targets=list(brokers))
        for broker in brokers:
            self.world.hosts[broker].clock_offset_ms += fault.delta_ms
            self._clock.setdefault(fault_id, []).append((broker, fault.delta_ms))
        return fault_id


def _all_partitions(store) -> list[str]:
    """Every partition the coordination store lists, as the admin tool reads them."""
    topics = store.znodes.get(coord.TOPICS_PATH)
    out = []
    for topic in sorted(topics.children if topics else ()):
        data = coord.decode_data(store.get(coord.topic_path(topic))) or {}
        out += [str(TopicPartition(topic, int(p))) for p in sorted(data.get("partitions", {}), key=int)]
    return out
