"""The simulated network: nodes on a networkx directed graph. An edge is a working
link; cutting a partition removes edges, healing restores them. Each link has latency,
jitter and loss; delivery on one link is FIFO (as TCP's), unless reordering is enabled.
"""
from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, replace
from functools import partial
from heapq import heappush
from typing import Any, Callable, Final, Iterable, Iterator

import networkx as nx
import simpy
from simpy.events import NORMAL, URGENT

from faults.nodes import SERVICE_NODE, broker_id_of
from sim.deadlines import has_simpy_internals


@dataclass(frozen=True)
class ConnectionReset:
    """Sent by a host's OS to a client when the broker process behind its connection
    died (``correlation_id`` None: every request in flight is affected), or refused
    one request because no process listens (that request never reached a broker)."""
    broker: int
    correlation_id: int | None = None


@dataclass(frozen=True)
class LinkSpec:
    latency_ms: float = 1.0
    jitter_ms: float = 0.5
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: bool = False


Handler = Callable[[str, Any], None]


def _no_handler(src: str, message: Any) -> None:
    raise KeyError("no node to deliver to")


def _lost(src: str, message: Any) -> None:
    """Where a message still on its way over a reset connection goes: nowhere."""


class _Link:
    """One directed pair's state, found once per message: whether the working graph has
    the edge, whether messages wait on it, its spec and its last delivery time (FIFO)."""

    def __init__(self, src: str, dst: str, spec: LinkSpec, handler: Handler) -> None:
        self.src = src
        self.dst = dst
        self.spec = spec
        self.handler = handler
        self.up = False
        self.held = False  # messages wait in Network._held: later ones queue behind them
        self.last_delivery = 0.0
        self.used = False  # a message was sent since the connection was last reset: there is one to reset
        # after a reset: whether a message answers a request sent on the old connection (it is lost)
        self.stale: Callable[[Any], bool] | None = None


class _Delivery:
    """A message on its way: the simpy event that delivers it. simpy's step reads
    ``callbacks`` (then clears it) and ``_ok``, as of a Timeout; one object per message
    instead of a Timeout, its callback list and a closure."""

    def __init__(self, network: Network, link: _Link, message: Any, seq: int) -> None:
        self.callbacks: Any = _DELIVER
        self._ok = True
        self._value: Any = None
        self.network = network
        self.link = link
        self.message = message
        self.seq = seq


def _deliver_event(event: _Delivery) -> None:
    event.network._deliver(event.link, event.message, event.seq)


_DELIVER: Final = (_deliver_event,)


class Network:
    """Messages on a cut link wait, as TCP retransmits, and are delivered in order when
    the link returns, unless they waited longer than ``hold_ms`` (the connection would
    have been given up) or either end restarted meanwhile (its connections died with
    it). ``loss`` in a link fault drops messages outright."""

    def __init__(self, env: simpy.Environment, rng, default_link: LinkSpec, hold_ms: float = 30000.0,
                 incarnation: Callable[[str], int] = lambda node: 0):
        self.env = env
        self.rng = rng
        self.default_link = default_link
        self.hold_ms = hold_ms
        self.incarnation = incarnation
        self._held: dict[tuple[str, str], list[tuple[int, float, int, int, Any]]] = {}
        self._send_seq = 0  # held messages keep their sending order, as TCP does
        self.graph = nx.DiGraph()
        self.full = nx.DiGraph()  # every link that exists when nothing is cut
        self._handlers: dict[str, Handler] = {}
        # every pair's _Link by source, then destination (no tuple built per message)
        self._routes: dict[str, dict[str, _Link]] = {}
        # the Timeout's place in simpy's queue, taken directly (sim/deadlines.py says why that is exact)
        self._exact = has_simpy_internals(env)
        # simpy keeps one queue and one event counter for its whole life
        self._queue: list = env._queue if self._exact else []
        self._event_ids: Iterator[int] = env._eid if self._exact else iter(())
        self._links: dict[tuple[str, str], LinkSpec] = {}
        self._cuts: dict[int, set[tuple[str, str]]] = {}
        self._overrides: dict[int, tuple[list, dict]] = {}

    def add_node(self, name: str, handler: Handler) -> None:
        self._handlers[name] = handler
        existing = sorted(self.full.nodes)
        self.full.add_edge(name, name)  # loopback: a controller talks to its own broker
        self.graph.add_edge(name, name)
        for other in existing:
            for a, b in ((name, other), (other, name)):
                self.full.add_edge(a, b)
                self.graph.add_edge(a, b)
        for routes in self._routes.values():
            found = routes.get(name)
            if found is not None:
                found.handler = handler
        self._sync_up()

    def _link_state(self, src: str, dst: str) -> _Link:
        routes = self._routes.get(src)
        if routes is None:
            routes = self._routes[src] = {}
        found = routes.get(dst)
        if found is None:
            found = routes[dst] = _Link(src, dst, self._links.get((src, dst), self.default_link),
                                        self._handlers.get(dst, _no_handler))
            found.up = self.graph.has_edge(src, dst)
            found.held = (src, dst) in self._held
        return found

    def _sync_up(self) -> None:
        """The working graph changed: every link's ``up`` follows it."""
        for src in self.full.nodes:
            for dst in self.full.nodes:
                self._link_state(src, dst).up = self.graph.has_edge(src, dst)

    def clients(self) -> list[str]:
        return [n for n in self.nodes if n != SERVICE_NODE and broker_id_of(n) is None]

    @property
    def nodes(self) -> list[str]:
        return sorted(self.full.nodes)

    def link(self, src: str, dst: str) -> LinkSpec:
        return self._links.get((src, dst), self.default_link)

    def send(self, src: str, dst: str, message: Any) -> None:
        self._send_seq += 1
        seq = self._send_seq
        routes = self._routes.get(src)
        state = routes.get(dst) if routes is not None else None
        if state is None:
            state = self._link_state(src, dst)
        state.used = True
        if state.stale is not None and state.stale(message):
            return
        if not state.up or state.held:
            self._hold(state, message, seq)
            return
        link = state.spec
        if link.loss and self.rng.random() < link.loss:
            return
        duplicated = link.duplicate and self.rng.random() < link.duplicate
        self._schedule(state, message, seq)
        if duplicated:
            self._schedule(state, message, seq)

    def _schedule(self, state: _Link, message: Any, seq: int) -> None:
        env = self.env
        link = state.spec
        now: float = env._now if self._exact else env.now
        at = now + link.latency_ms + (self.rng.random() * link.jitter_ms if link.jitter_ms else 0.0)
        if not link.reorder:
            last = state.last_delivery
            if at < last:
                at = last
            state.last_delivery = at
        delay = at - now
        event = _Delivery(self, state, message, seq)
        if self._exact:  # what env.timeout(delay) does, without its Python calls
            heappush(self._queue, (now + delay, NORMAL, next(self._event_ids), event))
        else:
            env.schedule(event, NORMAL, delay)  # type: ignore[arg-type]

    def _deliver(self, state: _Link, message: Any, seq: int) -> None:
        if state.up:
            state.handler(state.src, message)
        else:  # the link was cut while the message was on its way: it waits
            self._hold(state, message, seq)

    def _hold(self, state: _Link, message: Any, seq: int) -> None:
        src, dst = state.src, state.dst
        state.held = True
        insort(self._held.setdefault((src, dst), []),
               (seq, self.env.now, self.incarnation(src), self.incarnation(dst), message), key=lambda h: h[0])

    def discard_held(self, src: str, dst: str) -> None:
        """The sender gave its connection up: what waited on the cut link is gone with it."""
        if self._held.pop((src, dst), None) is not None:
            self._link_state(src, dst).held = False

    # -- connection resets ----------------------------------------------------------------
    def reset(self, a: str, b: str, stale: Callable[[str, Any], bool] | None = None) -> bool:
        """Reset the connection between ``a`` and ``b``: every message on its way or held
        on either direction is lost, and what is sent next goes on a new connection (the
        same cuts and link settings apply; nothing is cut). ``stale(dst, message)``: the
        message answers a request ``dst`` sent on the old connection, so it is lost too
        when sent later (a long-polled fetch the leader still holds). Whether there was a
        connection: a message sent on it since its last reset (or either end's crash)."""
        had = False
        for src, dst in ((a, b), (b, a)):
            old = self._link_state(src, dst)
            had = had or old.used
            fresh = _Link(src, dst, old.spec, old.handler)
            fresh.up = old.up
            if stale is not None:
                fresh.stale = partial(stale, dst)
            self._routes[src][dst] = fresh
            self._held.pop((src, dst), None)
            # The deliveries already in simpy's queue hold the old link: they now reach
            # nothing, and the per-message path pays no check for it.
            old.handler = _lost
            old.up = True
        return had

    def forget_connections(self, node: str) -> None:
        """``node``'s process died: its connections went with it (what crash and the
        incarnation checks of held messages already account for), so a later reset of
        them finds none until a message opens a new one."""
        for src, routes in self._routes.items():
            for dst, state in routes.items():
                if node in (src, dst):
                    state.used = False
                    state.stale = None  # a new process numbers its requests from 1 again

    def tell(self, src: str, dst: str, message: Any) -> None:
        """Hand ``message`` to ``dst`` not over the link but as ``dst``'s own OS tells it
        of its connection to ``src`` (a reset), at once (``at_once``)."""
        handler = self._handlers[dst]
        self.at_once(lambda: handler(src, message))

    def at_once(self, action: Callable[[], None]) -> None:
        """Run ``action`` at this instant, once the running event is done and before any
        other due now: a node then hears of its reset connection before it can send on
        it again, and after the fault that reset it was traced. One simpy event, spent
        only when a reset happens."""
        event = simpy.Event(self.env)
        event._ok = True
        event._value = None
        event.callbacks.append(lambda _event: action())
        self.env.schedule(event, URGENT)

    def _release(self) -> None:
        """Deliver what waited on links that work again, oldest first."""
        for key in sorted(self._held):
            if not self.graph.has_edge(*key):
                continue
            src, dst = key
            state = self._link_state(src, dst)
            state.held = False
            for seq, held_at, src_inc, dst_inc, message in self._held.pop(key):
                stale = (self.env.now - held_at > self.hold_ms or src_inc != self.incarnation(src)
                         or dst_inc != self.incarnation(dst))
                if not stale:
                    self._schedule(state, message, seq)

    # -- partitions and degraded links, per fault ---------------------------------------
    # Each active fault owns a set of cut edges (or link overrides); the working graph is
    # the full graph minus every active cut, so ending one fault restores only its edges.
    def add_cuts(self, fault_id: int, edges: Iterable[tuple[str, str]]) -> None:
        self._cuts[fault_id] = set(edges) & set(self.full.edges)
        self._rebuild()

    def remove_cuts(self, fault_id: int) -> None:
        if self._cuts.pop(fault_id, None) is not None:
            self._rebuild()

    def heal(self) -> list[int]:
        """Remove every cut and link override; returns the fault ids that ended."""
        ended = sorted(set(self._cuts) | set(self._overrides))
        self._cuts.clear()
        self._overrides.clear()
        self._links.clear()
        self._sync_specs()
        self._rebuild()
        return ended

    def _rebuild(self) -> None:
        graph = self.full.copy()
        for fault_id in sorted(self._cuts):
            graph.remove_edges_from(e for e in self._cuts[fault_id] if graph.has_edge(*e))
        self.graph = graph
        self._sync_up()
        self._release()

    def add_link_override(self, fault_id: int, pairs: Iterable[tuple[str, str]], changes: dict) -> None:
        self._overrides[fault_id] = (sorted(set(pairs)), dict(changes))
        self._rebuild_links()

    def remove_link_override(self, fault_id: int) -> None:
        if self._overrides.pop(fault_id, None) is not None:
            self._rebuild_links()

    def _rebuild_links(self) -> None:
        self._links.clear()
        for fault_id in sorted(self._overrides):
            pairs, changes = self._overrides[fault_id]
            for pair in pairs:
                self._links[pair] = replace(self._links.get(pair, self.default_link), **changes)
        self._sync_specs()

    def _sync_specs(self) -> None:
        for routes in self._routes.values():
            for state in routes.values():
                state.spec = self._links.get((state.src, state.dst), self.default_link)

    def cut_edges(self) -> list[tuple[str, str]]:
        return sorted(set(self.full.edges) - set(self.graph.edges))
