"""The simulated network: nodes on a networkx directed graph. An edge is a working
link; cutting a partition removes edges, healing restores them. Each link has latency,
jitter and loss; delivery on one link is FIFO (as TCP's), unless reordering is enabled.
"""
from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import networkx as nx
import simpy


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
        self._up: set[tuple[str, str]] = set()  # the working graph's edges, for the per-message check
        self._handlers: dict[str, Callable[[str, Any], None]] = {}
        self._last_delivery: dict[tuple[str, str], float] = {}
        self._links: dict[tuple[str, str], LinkSpec] = {}
        self._cuts: dict[int, set[tuple[str, str]]] = {}
        self._overrides: dict[int, tuple[list, dict]] = {}

    def add_node(self, name: str, handler: Callable[[str, Any], None]) -> None:
        self._handlers[name] = handler
        existing = sorted(self.full.nodes)
        self.full.add_edge(name, name)  # loopback: a controller talks to its own broker
        self.graph.add_edge(name, name)
        for other in existing:
            for a, b in ((name, other), (other, name)):
                self.full.add_edge(a, b)
                self.graph.add_edge(a, b)
        self._up = set(self.graph.edges)

    def clients(self) -> list[str]:
        return [n for n in self.nodes if n != "zk" and not n.startswith("broker-")]

    @property
    def nodes(self) -> list[str]:
        return sorted(self.full.nodes)

    def link(self, src: str, dst: str) -> LinkSpec:
        return self._links.get((src, dst), self.default_link)

    def send(self, src: str, dst: str, message: Any) -> None:
        self._send_seq += 1
        key = (src, dst)
        if key not in self._up or key in self._held:
            self._hold(src, dst, message, self._send_seq)
            return
        link = self._links.get(key, self.default_link)
        if link.loss and self.rng.random() < link.loss:
            return
        duplicated = link.duplicate and self.rng.random() < link.duplicate
        self._schedule(src, dst, message, link, self._send_seq)
        if duplicated:
            self._schedule(src, dst, message, link, self._send_seq)

    def _schedule(self, src: str, dst: str, message: Any, link: LinkSpec, seq: int) -> None:
        env = self.env
        now = env.now
        at = now + link.latency_ms + (self.rng.random() * link.jitter_ms if link.jitter_ms else 0.0)
        if not link.reorder:
            key = (src, dst)
            last = self._last_delivery.get(key, 0.0)
            if at < last:
                at = last
            self._last_delivery[key] = at
        env.timeout(at - now).callbacks.append(lambda _e: self._deliver(src, dst, message, seq))

    def _deliver(self, src: str, dst: str, message: Any, seq: int) -> None:
        if (src, dst) in self._up:
            self._handlers[dst](src, message)
        else:  # the link was cut while the message was on its way: it waits
            self._hold(src, dst, message, seq)

    def _hold(self, src: str, dst: str, message: Any, seq: int) -> None:
        insort(self._held.setdefault((src, dst), []),
               (seq, self.env.now, self.incarnation(src), self.incarnation(dst), message), key=lambda h: h[0])

    def discard_held(self, src: str, dst: str) -> None:
        """The sender gave its connection up: what waited on the cut link is gone with it."""
        self._held.pop((src, dst), None)

    def _release(self) -> None:
        """Deliver what waited on links that work again, oldest first."""
        for key in sorted(self._held):
            if not self.graph.has_edge(*key):
                continue
            src, dst = key
            link = self._links.get(key, self.default_link)
            for seq, held_at, src_inc, dst_inc, message in self._held.pop(key):
                stale = (self.env.now - held_at > self.hold_ms or src_inc != self.incarnation(src)
                         or dst_inc != self.incarnation(dst))
                if not stale:
                    self._schedule(src, dst, message, link, seq)

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
        self._rebuild()
        return ended

    def _rebuild(self) -> None:
        graph = self.full.copy()
        for fault_id in sorted(self._cuts):
            graph.remove_edges_from(e for e in self._cuts[fault_id] if graph.has_edge(*e))
        self.graph = graph
        self._up = set(graph.edges)
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

    def cut_edges(self) -> list[tuple[str, str]]:
        return sorted(set(self.full.edges) - set(self.graph.edges))

    # -- edge sets for the fault shapes ----------------------------------------------------
    def isolate_edges(self, nodes: Iterable[str]) -> set[tuple[str, str]]:
        nodes = set(nodes)
        return {(a, b) for a, b in self.full.edges if a != b and (a in nodes) != (b in nodes)}

    def split_edges(self, groups) -> set[tuple[str, str]]:
        member = {n: i for i, group in enumerate(groups) for n in group}
        return {(a, b) for a, b in self.full.edges
                if a in member and b in member and member[a] != member[b]}

    def bridge_edges(self, halves, via: str) -> set[tuple[str, str]]:
        left, right = set(halves[0]) - {via}, set(halves[1]) - {via}
        return {(a, b) for a, b in self.full.edges if (a in left and b in right) or (a in right and b in left)}

    def one_way_edges(self, sources, destinations) -> set[tuple[str, str]]:
        return {(a, b) for a in sources for b in destinations if a != b}
