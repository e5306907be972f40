"""The simulated network: nodes on a networkx directed graph. An edge is a working
link; cutting a partition removes edges, healing restores them. Each link has latency,
jitter and loss; delivery on one link is FIFO (as TCP's), unless reordering is enabled.
"""
from __future__ import annotations

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
    def __init__(self, env: simpy.Environment, rng, default_link: LinkSpec):
        self.env = env
        self.rng = rng
        self.default_link = default_link
        self.graph = nx.DiGraph()
        self.full = nx.DiGraph()  # every link that exists when nothing is cut
        self._handlers: dict[str, Callable[[str, Any], None]] = {}
        self._last_delivery: dict[tuple[str, str], float] = {}
        self._links: dict[tuple[str, str], LinkSpec] = {}
        self.messages_sent = 0
        self.messages_dropped = 0

    def add_node(self, name: str, handler: Callable[[str, Any], None]) -> None:
        self._handlers[name] = handler
        existing = sorted(self.full.nodes)
        self.full.add_edge(name, name)  # loopback: a controller talks to its own broker
        self.graph.add_edge(name, name)
        for other in existing:
            for a, b in ((name, other), (other, name)):
                self.full.add_edge(a, b)
                self.graph.add_edge(a, b)

    def clients(self) -> list[str]:
        return [n for n in self.nodes if n != "zk" and not n.startswith("broker-")]

    @property
    def nodes(self) -> list[str]:
        return sorted(self.full.nodes)

    def link(self, src: str, dst: str) -> LinkSpec:
        return self._links.get((src, dst), self.default_link)

    def set_link(self, src: str, dst: str, spec: LinkSpec | None) -> None:
        if spec is None:
            self._links.pop((src, dst), None)
        else:
            self._links[(src, dst)] = spec

    def send(self, src: str, dst: str, message: Any) -> None:
        self.messages_sent += 1
        if not self.graph.has_edge(src, dst):
            self.messages_dropped += 1
            return
        link = self._links.get((src, dst), self.default_link)
        rng = self.rng
        if link.loss and rng.random() < link.loss:
            self.messages_dropped += 1
            return
        copies = 2 if link.duplicate and rng.random() < link.duplicate else 1
        for _ in range(copies):
            self._schedule(src, dst, message, link)

    def _schedule(self, src: str, dst: str, message: Any, link: LinkSpec) -> None:
        now = self.env.now
        at = now + link.latency_ms + (self.rng.random() * link.jitter_ms if link.jitter_ms else 0.0)
        if not link.reorder:
            key = (src, dst)
            last = self._last_delivery.get(key, 0.0)
            if at < last:
                at = last
            self._last_delivery[key] = at
        event = self.env.timeout(at - now)
        handler = self._handlers[dst]
        event.callbacks.append(lambda _e: self._deliver(src, dst, handler, message))

    def _deliver(self, src: str, dst: str, handler, message: Any) -> None:
        # A link cut while the message was on its way loses it, as a dropped packet would.
        if self.graph.has_edge(src, dst):
            handler(src, message)
        else:
            self.messages_dropped += 1

    # -- partitions ------------------------------------------------------------------
    def cut(self, pairs: Iterable[tuple[str, str]]) -> None:
        for a, b in pairs:
            if self.graph.has_edge(a, b):
                self.graph.remove_edge(a, b)

    def isolate(self, node: str, keep: Iterable[str] = ()) -> None:
        keep = set(keep)
        self.cut([(node, o) for o in self.nodes if o != node and o not in keep] +
                 [(o, node) for o in self.nodes if o != node and o not in keep])

    def split(self, groups: list[list[str]]) -> None:
        """Only links within a group stay; nodes in no group keep all their links."""
        member = {n: i for i, group in enumerate(groups) for n in group}
        pairs = [(a, b) for a, b in sorted(self.full.edges)
                 if a in member and b in member and member[a] != member[b]]
        self.cut(pairs)

    def heal(self) -> None:
        self.graph = self.full.copy()

    def cut_edges(self) -> list[tuple[str, str]]:
        return sorted(set(self.full.edges) - set(self.graph.edges))
