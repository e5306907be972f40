"""The executor of the fault vocabulary (faults/model.py), written once for every
binding; each binding carries the primitives out (faults/binding.py).

Every fault gets an id; ``fault_started`` and ``fault_ended`` carry it (faults/events.py),
so a timeline can shade the interval. A crash lasts until its broker restarts, a
network fault until it is undone or healed, a pause until resume, a disk fault until
restored; instant faults (restart, a connection reset, session expiry, bit flip, admin
writes) end as they start. A pause also ends when its broker's process is gone: a
killed process is no longer stopped (a SIGKILL ends a SIGSTOPped process).

Role targets resolve once, when the fault starts, by faults/roles.py on the binding's
cluster view (the one ``when:`` triggers test). ``fault_started`` records each role's
broker under ``roles``; a role that resolves to nothing makes the whole fault change
nothing (``no_effect``).

Faults are dispatched by their class (``HANDLERS``); adding a kind means a class in
faults/model.py, a handler here and, if it needs a new primitive, one method in each
binding.
"""
from __future__ import annotations

import random
from contextlib import nullcontext
from typing import Any, Callable, ContextManager

from faults import model as fm
from faults.binding import FaultBinding
from faults.events import fault_ended_fields, fault_started_fields
from faults.links import CuttingFault, Link, cut_links, reset_links
from faults.nodes import SERVICE_NODE, broker_node
from faults.roles import resolve_role

LINK_CHANGES = ("latency_ms", "jitter_ms", "loss", "duplicate", "reorder")  # a LinkFault's settings


class FaultExecutor:
    def __init__(self, binding: FaultBinding, role_rng: random.Random, rng: random.Random | None = None,
                 lock: ContextManager | None = None) -> None:
        """``role_rng``: its own stream, so that drawing a role shifts no other random
        choice; ``rng``: the faults' own draws (random halves, which bit flips);
        ``lock``: held by ``apply``, ``undo`` and the heals when several threads share
        the executor (the real binding's schedule, nemesis and final phase)."""
        self.binding = binding
        self.role_rng = role_rng
        self.rng = rng
        self._lock = lock if lock is not None else nullcontext()
        self.step = None  # the scenario step being applied, if any
        self._roles: dict = {}  # role -> broker (None: resolved to nothing), for the fault being applied
        self._next_id = 0
        self.active: dict[int, fm.Fault] = {}
        # a process is a broker id, or a client's node name (a group member, sim/faults.py)
        self._down: dict[Any, list[int]] = {}  # process -> ids of the faults that keep it down
        self._paused: dict[Any, int] = {}  # process -> id of the fault that paused it
        self._disk: dict[int, list[int]] = {}  # broker -> disk fault ids
        self._clock: dict[int, list[tuple[int, int]]] = {}  # fault id -> [(broker, delta)]

    # -- ids, events and roles -------------------------------------------------------
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
                out += [broker_node(b) for b in self.resolve([node])]
            else:
                out.append(node)
        return list(dict.fromkeys(out))

    def _resolve_roles(self, fault: fm.Fault) -> str | None:
        """Resolve every role the fault names, once; returns why the fault can change
        nothing when one resolves to no broker."""
        roles = fm.roles_of(fault)
        view = self.binding.cluster_view() if roles else {}
        problems = []
        for role in roles:
            broker, why = resolve_role(role, view, list(self.binding.brokers()), self.role_rng)
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
        self.binding.trace("nemesis", "fault_started", fields)
        if instant:
            self.binding.trace("nemesis", "fault_ended", fault_ended_fields(fault_id, fault))
        else:
            self.active[fault_id] = fault
        return fault_id

    def _end(self, fault_id: int) -> None:
        fault = self.active.pop(fault_id, None)
        if fault is not None:
            self.binding.trace("nemesis", "fault_ended", fault_ended_fields(fault_id, fault))

    # -- apply, undo, heal -----------------------------------------------------------
    def apply(self, fault: fm.Fault, step=None) -> int | None:
        """Start a fault (of the scenario's ``step``, if it is one); returns its id when
        it lasts (so that it can be undone)."""
        refused = self.binding.refusal(fault)
        if refused is not None:  # runners refuse these before the run: a bug if one gets here
            raise ValueError(refused)
        handler = HANDLERS[type(fault)]
        with self._lock:
            self.step = step
            try:
                unresolved = self._resolve_roles(fault)
                if unresolved is not None:  # applying the rest would not be the fault the step asked for
                    self._start(fault, instant=True, no_effect=unresolved, targets=[])
                    return None
                return handler(self, fault)
            finally:
                self.step = None
                self._roles = {}

    def undo(self, fault_id: int | None) -> None:
        """End a lasting fault early (a scenario's ``for:`` or the nemesis)."""
        with self._lock:
            fault = self.active.get(fault_id) if fault_id is not None else None
            if fault_id is not None and fault is not None:
                UNDO[type(fault)](self, fault_id)

    def heal_everything(self) -> None:
        """The final phase: every fault ends and every broker runs."""
        with self._lock:
            for fault_id in self.binding.heal_links():
                self._end(fault_id)
            for fault_id in sorted(self.active):
                fault = self.active.get(fault_id)
                if isinstance(fault, (fm.Pause, fm.ClockJump) + fm.DISK):
                    self.undo(fault_id)
            for broker in sorted(self.binding.brokers()):
                if not self.binding.is_alive(broker) or self._down.get(broker):
                    self._restart(broker)

    def restart_all(self) -> None:
        """``final.restart: all``: every broker is killed and started again."""
        with self._lock:
            brokers = tuple(sorted(self.binding.brokers()))
            for broker in brokers:
                self.binding.crash(broker)
            self.apply(fm.Restart(brokers))

    # -- processes -------------------------------------------------------------------
    def _take_down(self, fault, brokers: list[int], action: Callable[[int], None]) -> int | None:
        """Start a fault that stops processes; it lasts until every one restarts (and
        ends at once when there was nothing left to stop)."""
        fault_id = self._start(fault, instant=not brokers, targets=brokers,
                               no_effect=None if brokers else "no running broker to stop")
        for broker in brokers:
            action(broker)
            if broker in self._paused and not self.binding.is_paused(broker):
                self._unpaused(broker)  # the frozen process is gone: its pause is over
            self._down.setdefault(broker, []).append(fault_id)
        return fault_id if brokers else None

    def _running(self, refs) -> list[int]:
        return [b for b in self.resolve(refs) if self.binding.is_alive(b)]

    def _crash(self, fault: fm.Crash) -> int | None:
        return self._take_down(fault, self._running(fault.brokers), self.binding.crash)

    def _power_loss(self, fault: fm.PowerLoss) -> int | None:
        # a broker that is already down still loses what its disk had not synced
        return self._take_down(fault, list(self.resolve(fault.brokers)), self.binding.power_loss)

    def _shutdown(self, fault: fm.Shutdown) -> int | None:
        return self._take_down(fault, self._running(fault.brokers), self.binding.shutdown)

    def _restart_fault(self, fault: fm.Restart) -> None:
        brokers = self.resolve(fault.brokers)
        self._start(fault, instant=True, targets=list(brokers))
        for broker in brokers:
            self._restart(broker)

    def _restart(self, broker: int) -> None:
        if self.binding.is_alive(broker) and not self._down.get(broker):
            return
        if not self.binding.start(broker):
            return
        for fault_id in self._down.pop(broker, []):
            if not any(fault_id in ids for ids in self._down.values()):
                self._end(fault_id)

    def _undo_down(self, fault_id: int) -> None:
        for broker, ids in sorted(self._down.items(), key=_process_order):
            if fault_id in ids:
                self._restart(broker)

    def _pause(self, fault: fm.Pause) -> int | None:
        brokers = [b for b in self._running(fault.brokers) if not self.binding.is_paused(b)]
        fault_id = self._start(fault, instant=not brokers, targets=brokers,
                               no_effect=None if brokers else "no running broker to pause")
        for broker in brokers:
            self.binding.pause(broker)
            self._paused[broker] = fault_id
        return fault_id if brokers else None

    def _resume(self, fault: fm.Resume) -> None:
        brokers = self.resolve(fault.brokers)
        self._start(fault, instant=True, targets=list(brokers))
        for broker in brokers:
            self.binding.resume(broker)
            self._unpaused(broker)

    def _unpaused(self, broker: int) -> None:
        """``broker`` is no longer paused; its pause ends with the last broker it froze."""
        fault_id = self._paused.pop(broker, None)
        if fault_id is not None and fault_id not in self._paused.values():
            self._end(fault_id)

    def _undo_pause(self, fault_id: int) -> None:
        for broker, paused_by in sorted(self._paused.items(), key=_process_order):
            if paused_by == fault_id:
                del self._paused[broker]
                self.binding.resume(broker)
        self._end(fault_id)

    # -- network ---------------------------------------------------------------------
    def _network_fault(self, fault, links: set[Link], no_effect: str | None = None, **extra) -> int:
        if not links and no_effect is None:
            no_effect = "cuts no link"
        fault_id = self._start(fault, no_effect=no_effect, **extra)
        self.binding.cut_links(fault_id, links)
        return fault_id

    def _links(self, resolved: CuttingFault) -> set[Link]:
        """The links a network fault, its roles resolved to node names, cuts now."""
        return cut_links(resolved, self.binding.network_nodes())

    def _isolate(self, fault: fm.Isolate) -> int:
        nodes = self._resolve_nodes(fault.nodes)
        return self._network_fault(fault, self._links(fm.Isolate(tuple(nodes))), targets=nodes)

    def _split(self, fault: fm.Split) -> int:
        groups = [self._resolve_nodes(g) for g in fault.groups]
        seen: dict[str, int] = {}
        twice = sorted({n for i, g in enumerate(groups) for n in g if seen.setdefault(n, i) != i})
        if twice:  # a role resolved to a broker another group names: cut nothing
            return self._network_fault(fault, set(), targets=groups,
                                       no_effect=f"{', '.join(twice)} resolved into two groups")
        return self._network_fault(fault, self._links(fm.Split(tuple(map(tuple, groups)))), targets=groups)

    def _random_halves(self, fault: fm.RandomHalves) -> int:
        assert self.rng is not None, "random halves draws from the executor's rng"
        brokers = [broker_node(b) for b in sorted(self.binding.brokers())]
        self.rng.shuffle(brokers)
        cut = (len(brokers) + 1) // 2
        groups = [sorted(brokers[:cut]) + [SERVICE_NODE], sorted(brokers[cut:])]
        return self._network_fault(fault, self._links(fm.Split(tuple(map(tuple, groups)))), groups=groups)

    def _bridge(self, fault: fm.Bridge) -> int:
        halves = [self._resolve_nodes(h) for h in fault.halves]
        via = self._resolve_nodes([fault.via])
        links = self._links(fm.Bridge((tuple(halves[0]), tuple(halves[1])), via[0])) if via else set()
        return self._network_fault(fault, links, targets=halves)

    def _cut(self, fault: fm.Cut) -> int:
        sources, destinations = self._resolve_nodes(fault.sources), self._resolve_nodes(fault.destinations)
        return self._network_fault(fault, self._links(fm.Cut(tuple(sources), tuple(destinations))),
                                   targets=[sources, destinations])

    def _link(self, fault: fm.LinkFault) -> int:
        sources, destinations = self._resolve_nodes(fault.sources), self._resolve_nodes(fault.destinations)
        fault_id = self._start(fault, targets=[sources, destinations])
        pairs = {(a, b) for a in sources for b in destinations if a != b}
        if fault.symmetric:
            pairs |= {(b, a) for a, b in pairs}
        changes = {k: getattr(fault, k) for k in LINK_CHANGES if getattr(fault, k) is not None}
        self.binding.degrade_links(fault_id, pairs, changes)
        return fault_id

    def _reset(self, fault: fm.Reset) -> None:
        """Instant: nothing stays cut. ``links`` lists the pairs it reset (each once),
        ``connections`` how many connections the binding found on them; with none, the
        reset tested nothing (``no_effect``)."""
        sides = [self._resolve_nodes(side) for side in fault.between]
        links = reset_links(fm.Reset((tuple(sides[0]), tuple(sides[1]))), self.binding.network_nodes())
        connections = self.binding.reset_links(links) if links else 0
        pairs = sorted({tuple(sorted(link)) for link in links})
        no_effect = None if connections else ("no connection between them" if links else "names no link")
        self._start(fault, instant=True, targets=sides, links=[list(p) for p in pairs], connections=connections,
                    no_effect=no_effect)

    def _undo_network(self, fault_id: int) -> None:
        self.binding.restore_links(fault_id)
        self._end(fault_id)

    def _heal(self, fault: fm.Heal) -> None:
        self._start(fault, instant=True, scope=fault.scope)
        for fault_id in self.binding.heal_links():
            self._end(fault_id)
        if fault.scope == "all":
            self.heal_everything()

    # -- coordination and admin ------------------------------------------------------
    def _expire_session(self, fault: fm.ExpireSession) -> None:
        """Instant. A broker whose session could not be expired is named in ``missed``,
        and in ``no_effect`` when no broker's was: the fault changed nothing there."""
        expired, missed, actions = [], [], []
        for broker in self.resolve(fault.brokers):
            prepared = self.binding.expire_session(broker)
            if isinstance(prepared, str):
                missed.append(f"broker {broker}: {prepared}")
            else:
                expired.append(broker)
                actions.append(prepared)
        self._start(fault, instant=True, targets=expired, no_effect="; ".join(missed) if not expired else None,
                    **({"missed": missed} if missed else {}))
        for action in actions:
            action()

    def _preferred_election(self, fault: fm.PreferredReplicaElection) -> None:
        requested, written = self.binding.request_preferred_election(fault.partitions)
        self._start(fault, instant=True, requested=requested, written=written)

    def _topic_config(self, fault: fm.TopicConfig) -> None:
        written = self.binding.change_topic_config(fault.topic, dict(fault.config))
        if written is None:
            self._start(fault, instant=True, no_effect=f"topic {fault.topic} does not exist")
            return
        self._start(fault, instant=True, overrides=written)

    def _client_quota(self, fault: fm.ClientQuota) -> None:
        written = self.binding.change_client_quota(fault.entity, dict(fault.config))
        self._start(fault, instant=True, config=written)

    def _create_topic(self, fault: fm.CreateTopic) -> None:
        outcome = self.binding.create_topic(fault.topic, fault.partitions, fault.replication_factor,
                                            dict(fault.assignment) or None)
        if isinstance(outcome, str):
            self._start(fault, instant=True, no_effect=outcome)
            return
        self._start(fault, instant=True, written={str(p): list(r) for p, r in sorted(outcome.items())})

    def _delete_topic(self, fault: fm.DeleteTopic) -> None:
        refused = self.binding.delete_topic(fault.topic)
        self._start(fault, instant=True, **({"no_effect": refused} if refused else {}))

    def _create_partitions(self, fault: fm.CreatePartitions) -> None:
        outcome = self.binding.create_partitions(fault.topic, fault.count, fault.assignment or None)
        if isinstance(outcome, str):
            self._start(fault, instant=True, no_effect=outcome)
            return
        self._start(fault, instant=True, written={str(p): list(r) for p, r in sorted(outcome.items())})

    def _reassign(self, fault: fm.Reassign) -> None:
        refused = self.binding.reassign_partitions(dict(fault.partitions))
        partitions = {p: list(r) for p, r in fault.partitions}
        self._start(fault, instant=True, partitions=partitions, **({"no_effect": refused} if refused else {}))

    # -- disks and clocks ------------------------------------------------------------
    def _disk_fault(self, fault) -> int:
        brokers = self.resolve(fault.brokers)
        fault_id = self._start(fault, targets=list(brokers))
        for broker in brokers:
            self.binding.degrade_disk(broker, fault)
            self._disk.setdefault(broker, []).append(fault_id)
        return fault_id

    def _undo_disk(self, fault_id: int) -> None:
        for broker, ids in sorted(self._disk.items()):
            if fault_id in ids:
                ids.remove(fault_id)
                self.binding.restore_disk(broker)
                for other in list(ids):  # a restore ends every disk fault of that broker
                    ids.remove(other)
                    self._end(other)
        self._end(fault_id)

    def _bit_flip(self, fault: fm.BitFlip) -> None:
        assert self.rng is not None, "a bit flip draws its segment from the executor's rng"
        flipped = []
        brokers = self.resolve(fault.brokers)
        for broker in brokers:
            where = self.binding.flip_bit(broker, fault.partition, self.rng)
            if where is not None:
                flipped.append({"broker": broker, **where})
        self._start(fault, instant=True, targets=list(brokers), flipped=flipped)

    def _clock_jump(self, fault: fm.ClockJump) -> int:
        brokers = self.resolve(fault.brokers)
        fault_id = self._start(fault, targets=list(brokers))
        for broker in brokers:
            self.binding.shift_clock(broker, fault.delta_ms)
            self._clock.setdefault(fault_id, []).append((broker, fault.delta_ms))
        return fault_id

    def _undo_clock(self, fault_id: int) -> None:
        for broker, delta in self._clock.pop(fault_id, []):
            self.binding.shift_clock(broker, -delta)
        self._end(fault_id)


Handler = Callable[[FaultExecutor, Any], int | None]  # Any: the class the handler is keyed by

# Every fault class and what starts it. tests/faults/test_executor.py checks that every
# class of faults/model.py has one.
HANDLERS: dict[type, Handler] = {
    fm.Crash: FaultExecutor._crash, fm.PowerLoss: FaultExecutor._power_loss,
    fm.Restart: FaultExecutor._restart_fault, fm.Shutdown: FaultExecutor._shutdown,
    fm.Pause: FaultExecutor._pause, fm.Resume: FaultExecutor._resume,
    fm.Isolate: FaultExecutor._isolate, fm.Split: FaultExecutor._split,
    fm.RandomHalves: FaultExecutor._random_halves, fm.Bridge: FaultExecutor._bridge,
    fm.Cut: FaultExecutor._cut, fm.Reset: FaultExecutor._reset, fm.LinkFault: FaultExecutor._link,
    fm.Heal: FaultExecutor._heal,
    fm.ExpireSession: FaultExecutor._expire_session,
    fm.PreferredReplicaElection: FaultExecutor._preferred_election, fm.TopicConfig: FaultExecutor._topic_config,
    fm.ClientQuota: FaultExecutor._client_quota,
    fm.CreateTopic: FaultExecutor._create_topic, fm.DeleteTopic: FaultExecutor._delete_topic,
    fm.CreatePartitions: FaultExecutor._create_partitions, fm.Reassign: FaultExecutor._reassign,
    fm.SlowFsync: FaultExecutor._disk_fault, fm.WriteErrors: FaultExecutor._disk_fault,
    fm.DiskFull: FaultExecutor._disk_fault, fm.TornWrites: FaultExecutor._disk_fault,
    fm.BitFlip: FaultExecutor._bit_flip, fm.ClockJump: FaultExecutor._clock_jump,
}

# How a lasting fault is undone, by its class (faults/model.py's UNDOABLE).
UNDO: dict[type, Callable[[FaultExecutor, int], None]] = {
    cls: undo
    for family, undo in (((fm.Crash, fm.PowerLoss, fm.Shutdown), FaultExecutor._undo_down),
                         ((fm.Pause,), FaultExecutor._undo_pause), (fm.NETWORK, FaultExecutor._undo_network),
                         (fm.DISK, FaultExecutor._undo_disk), ((fm.ClockJump,), FaultExecutor._undo_clock))
    for cls in family
}


def _process_order(item: tuple) -> tuple:
    """Brokers by id, then clients by name (a fault may stop both)."""
    return (isinstance(item[0], str), item[0])
