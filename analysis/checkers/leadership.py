"""Who could serve each partition, replayed from the trace's facts in trace order.

A partition is *served* while some broker that claims its leadership (a
``became_leader`` not yet followed by a ``became_follower`` for it, in the same
incarnation of the process) is running, not paused and reachable by at least one
client, and the controller's last word on it was not "no leader" (``leader_elected``
with leader -1). Processes stop at a ``crash`` or ``power_loss`` fault (their
``targets``) and at ``broker_halted``, and start again at ``broker_started`` with no
partitions (a restarted broker leads nothing until a LeaderAndIsr names it). Pauses run
from a ``pause`` fault to its ``fault_ended`` or a ``resume`` naming the broker.

The replay answers at every moment, so availability is measured from intervals, not
from samples: when every broker is down no sample is written, yet the partition is
plainly unserved."""
from __future__ import annotations

from typing import Callable, Iterable

from analysis.trace import Event
from faults import model as fm
from faults.links import CuttingFault, cut_from_fields, cut_links
from faults.nodes import broker_id_of, broker_node

NO_LEADER = -1
CLIENT_PREFIXES = ("producer-", "consumer-")


class LeadershipReplay:
    """Feed it events in trace order; ``on_change(t_ms, partitions)`` is called with the
    partitions whose served state may have changed."""

    def __init__(self, clients: Iterable[str] | Callable[[], Iterable[str]] = (),
                 on_change: Callable[[int, Iterable[str]], None] | None = None):
        # the client nodes, or a function giving them: only network faults need them
        self._clients = clients
        self._client_list: list[str] | None = None
        self.on_change = on_change or (lambda t_ms, partitions: None)
        self.running: set[int] = set()
        self.paused: set[int] = set()
        self.cut_off: set[int] = set()
        self.claims: dict[str, dict[int, int]] = {}  # partition -> broker -> leader_epoch
        self.leads: dict[int, set[str]] = {}  # broker -> partitions it claims
        self.offline: set[str] = set()  # the controller's last election found no leader
        self.elected: dict[str, int] = {}  # partition -> the controller's last elected leader
        self.pauses: dict[int, list[int]] = {}  # pause fault id -> brokers
        # active cutting fault id -> the fault as it resolved (None: it cut nothing)
        self.network: dict[int, CuttingFault | None] = {}
        self.saw_leadership = False  # any became_leader at all (else the trace lacks these facts)
        self._handlers = {
            "broker_started": self._started, "broker_halted": self._stopped,
            "became_leader": self._became_leader, "became_follower": self._became_follower,
            "leader_elected": self._leader_elected, "fault_started": self._fault_started,
            "fault_ended": self._fault_ended,
        }

    @property
    def clients(self) -> list[str]:
        if self._client_list is None:
            given = self._clients() if callable(self._clients) else self._clients
            self._client_list = sorted(set(given))
        return self._client_list

    def feed(self, event: Event) -> None:
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(event)

    def serving(self, broker: int) -> bool:
        return broker in self.running and broker not in self.paused and broker not in self.cut_off

    def served(self, partition: str) -> bool:
        if partition in self.offline:
            return False
        return any(self.serving(b) for b in self.claims.get(partition, ()))

    def leader(self, partition: str) -> int:
        """The serving claimant with the highest leader epoch (-1 if none)."""
        if partition in self.offline:
            return NO_LEADER
        claims = [(epoch, b) for b, epoch in self.claims.get(partition, {}).items() if self.serving(b)]
        return max(claims)[1] if claims else NO_LEADER

    def partitions(self) -> list[str]:
        return sorted(set(self.claims) | set(self.elected))

    # -- handlers --------------------------------------------------------------------
    def _started(self, event: Event) -> None:
        broker = broker_id_of(event.node)
        if broker is not None:
            self.paused.discard(broker)
            self.running.add(broker)
            self.on_change(event.t_ms, self.leads.get(broker, ()))

    def _stopped(self, event: Event) -> None:
        broker = broker_id_of(event.node)
        if broker is not None:
            self._down(event.t_ms, broker)

    def _down(self, t_ms: int, broker: int) -> None:
        """The process is gone and its partitions with it."""
        self.running.discard(broker)
        self.paused.discard(broker)
        lost = self.leads.pop(broker, set())
        for partition in lost:
            self.claims[partition].pop(broker, None)
        self.on_change(t_ms, sorted(lost))

    def _became_leader(self, event: Event) -> None:
        broker, partition = broker_id_of(event.node), event["partition"]
        if broker is None:
            return
        self.saw_leadership = True
        self.claims.setdefault(partition, {})[broker] = event.get("leader_epoch", 0)
        self.leads.setdefault(broker, set()).add(partition)
        self.on_change(event.t_ms, (partition,))

    def _became_follower(self, event: Event) -> None:
        broker, partition = broker_id_of(event.node), event["partition"]
        if broker is None or broker not in self.claims.get(partition, {}):
            return
        del self.claims[partition][broker]
        self.leads[broker].discard(partition)
        self.on_change(event.t_ms, (partition,))

    def _leader_elected(self, event: Event) -> None:
        partition, leader = event["partition"], event.get("leader", NO_LEADER)
        self.elected[partition] = leader
        if leader < 0:
            self.offline.add(partition)
        else:
            self.offline.discard(partition)
        self.on_change(event.t_ms, (partition,))

    def _fault_started(self, event: Event) -> None:
        kind = event.get("fault")
        targets = event.get("targets") or []
        if kind in ("crash", "power_loss"):
            for broker in targets:
                if isinstance(broker, int):
                    self._down(event.t_ms, broker)
        elif kind == "pause":
            brokers = [b for b in targets if isinstance(b, int)]
            self.pauses[event["fault_id"]] = brokers
            self._pause(event.t_ms, brokers, True)
        elif kind == "resume":
            self._pause(event.t_ms, [b for b in targets if isinstance(b, int)], False)
        elif kind in fm.CUTTING_KINDS:
            self.network[event["fault_id"]] = cut_from_fields(event.fields)
            self._recompute_cut_off(event.t_ms)

    def _fault_ended(self, event: Event) -> None:
        fault_id = event.get("fault_id")
        if fault_id in self.pauses:
            self._pause(event.t_ms, self.pauses.pop(fault_id), False)
        elif fault_id in self.network:
            del self.network[fault_id]
            self._recompute_cut_off(event.t_ms)

    def _pause(self, t_ms: int, brokers: list[int], paused: bool) -> None:
        for broker in brokers:
            if paused:
                self.paused.add(broker)
            else:
                self.paused.discard(broker)
            self.on_change(t_ms, sorted(self.leads.get(broker, ())))

    def _recompute_cut_off(self, t_ms: int) -> None:
        """Brokers no client can exchange messages with (both ways) under the active
        network faults. Without clients in the trace nothing is cut off."""
        faults = [self.network[k] for k in sorted(self.network)]
        brokers = sorted(set(self.leads) | self.running)
        cut = set()
        if faults and self.clients:
            nodes = self.clients + [broker_node(b) for b in brokers]
            links: set[tuple[str, str]] = set()
            for fault in faults:
                if fault is not None:
                    links |= cut_links(fault, nodes)
            for broker in brokers:
                name = broker_node(broker)
                if all((c, name) in links or (name, c) in links for c in self.clients):
                    cut.add(broker)
        changed = cut ^ self.cut_off
        self.cut_off = cut
        for broker in sorted(changed):
            self.on_change(t_ms, sorted(self.leads.get(broker, ())))


def clients_of(processes: Iterable[str]) -> set[str]:
    return {p for p in processes if p.startswith(CLIENT_PREFIXES)}
