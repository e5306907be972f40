"""A small synchronous runtime that drives real core nodes without simpy: a router
with fixed latency, per-broker files (page cache only), timers, and the project's own
coordination store. Tests use it to exercise replication rules directly.

The coordination store is reached as through ZooKeeper's client: a request sent while
the link to it is blocked, or whose answer is blocked, fails with CONNECTION_LOSS once
the link works again (applied or not, as the block fell), and ``lose_answers`` makes a
chosen request be applied with its answer lost. A ``Halt`` effect stops the process; a
``CloseConnection`` is recorded in ``closed_connections``, a ``MuteConnection`` in
``muted_connections``."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from broker_core import coordination as coord
from broker_core.broker import BrokerNode
from broker_core.config import broker_config, topic_config
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import DeleteFile, Effect, Halt, RenameFile, ReplaceFile, TruncateFile, WriteBytes
from broker_core.errors import ErrorCode
from broker_core.storage import MemoryFiles, resolve_message
from broker_core.inputs import (
    CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired, FsyncCompleted,
    MessageReceived, Started, TimerFired)
from broker_core.messages import ProduceRequest, ProduceResponse
from broker_core.records import Record
from broker_core.types import TopicPartition
from broker_core.coordination_store import CoordinationStore
from faults.nodes import broker_id_of, broker_node

CLIENT = "client"
ZK = "zk"
PING_MS = 100


@dataclass(order=True)
class _Item:
    at: int
    seq: int
    target: Any = field(compare=False)
    event: Any = field(compare=False)
    incarnation: int = field(compare=False, default=0)


class Cluster:
    def __init__(self, brokers=(1, 2, 3), partitions=1, replication_factor=3, config=None,
                 topic="t", profile="kafka-2.7", latency_ms=1, assignment=None):
        self.config = broker_config(profile, config or {})
        self.topic_configs = {topic: topic_config(self.config, {})}
        self.brokers = tuple(brokers)
        self.latency = latency_ms
        self.now = 0
        self._queue: list[_Item] = []
        self._seq = 0
        self.nodes: dict[int, BrokerNode] = {}
        self.incarnation = {b: 0 for b in brokers}
        self.disks: dict[int, MemoryFiles] = {b: MemoryFiles() for b in brokers}
        self.sessions: dict[int, int] = {}
        self.timers: dict[int, dict] = {b: {} for b in brokers}
        self.blocked: set[tuple] = set()
        self.responses: dict[int, Any] = {}
        self.closed_connections: list[tuple[int, int, Any]] = []  # (t_ms, broker, client) per CloseConnection
        self.muted_connections: list[tuple[int, int, Any, int]] = []  # (t_ms, broker, client, until_ms)
        self.traces: list[tuple[int, int, str, dict]] = []
        self._lost: dict[int, list[int]] = {}  # requests whose connection dropped, per broker
        self._lose_rules: list[list] = []
        self.store = CoordinationStore(self._notify)
        assignment = {str(p): list(r) for p, r in assignment.items()} if assignment else {
            str(p): [brokers[(p + r) % len(brokers)] for r in range(replication_factor)] for p in range(partitions)}
        self.store.put(coord.topic_path(topic), coord.encode_data({"partitions": assignment}))
        self.topic = topic
        self._correlation = 0
        self._next_ping = PING_MS

    # -- lifecycle -------------------------------------------------------------------
    def start(self, broker: int) -> None:
        self.incarnation[broker] += 1
        self.timers[broker] = {}
        node = self.nodes[broker] = BrokerNode(broker, self.config, self.topic_configs)
        self._apply(broker, node.handle(Started(self.disks[broker].storage), self.now))
        self._open_session(broker)

    def start_all(self) -> None:
        for broker in self.brokers:
            self.start(broker)

    def crash(self, broker: int) -> None:
        self.nodes.pop(broker, None)
        self.sessions.pop(broker, None)
        self._lost.pop(broker, None)
        self.incarnation[broker] += 1

    def lose_answers(self, broker: int, op_type: type, path: str | None = None, count: int = 1, then=None) -> None:
        """The next ``count`` requests of ``broker`` of this type (on this path) reach the
        store and are applied, but their connection drops before the answer: the broker
        gets CONNECTION_LOSS. ``then()`` runs at that moment (another writer may move
        the node before the broker's retry)."""
        self._lose_rules.append([broker, op_type, path, count, then])

    def _answer_lost(self, broker: int, op) -> bool:
        for rule in self._lose_rules:
            target, op_type, path, count, then = rule
            if target == broker and type(op) is op_type and path in (None, op.path) and count > 0:
                rule[3] -= 1
                if then is not None:
                    then()
                return True
        return False

    def _open_session(self, broker: int) -> None:
        sid = self.store.create_session(broker_node(broker), self.config.zookeeper_session_timeout_ms, self.now)
        self.sessions[broker] = sid
        self._push(self.now + self.latency, broker, CoordSessionStarted(sid))

    # -- network ---------------------------------------------------------------------
    def block(self, a, b, both=True) -> None:
        self.blocked.add((a, b))
        if both:
            self.blocked.add((b, a))

    def isolate(self, broker: int) -> None:
        for other in list(self.brokers) + [ZK, CLIENT]:
            if other != broker:
                self.block(broker, other)

    def heal(self) -> None:
        self.blocked.clear()

    def _push(self, at: int, target, event) -> None:
        self._seq += 1
        inc = self.incarnation.get(target, 0) if isinstance(target, int) else 0
        heapq.heappush(self._queue, _Item(at, self._seq, target, event, inc))

    def _notify(self, owner: str, event) -> None:
        broker = broker_id_of(owner)
        if (ZK, broker) not in self.blocked:
            self._push(self.now + self.latency, broker, CoordWatchFired(event.path, event.kind))

    def _apply(self, broker: int, effects: list[Effect]) -> None:
        """Carry out ``broker``'s effects (tests wrap this to watch or add to them)."""
        carry_out_effects(effects, _BrokerEffects(self, broker))

    # -- time ------------------------------------------------------------------------
    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def run_until(self, t: int) -> None:
        while True:
            next_at = self._queue[0].at if self._queue else None
            if self._next_ping <= t and (next_at is None or self._next_ping <= next_at):
                self.now = self._next_ping
                self._ping()
                self._next_ping += PING_MS
                continue
            if next_at is None or next_at > t:
                break
            item = heapq.heappop(self._queue)
            self.now = item.at
            self._dispatch(item)
        self.now = t

    def wait_for(self, predicate, timeout_ms: int = 60000, step_ms: int = 10) -> bool:
        deadline = self.now + timeout_ms
        while self.now < deadline:
            if predicate():
                return True
            self.run_for(step_ms)
        return predicate()

    def _ping(self) -> None:
        for broker in sorted(self.nodes):
            if (broker, ZK) in self.blocked:
                continue
            sid = self.sessions.get(broker)
            if sid is not None and not self.store.touch(sid, self.now):
                del self.sessions[broker]
                self._lost.pop(broker, None)
                self._deliver(broker, CoordSessionExpired(sid))
                if broker in self.nodes:
                    self._open_session(broker)
            elif (ZK, broker) not in self.blocked and self._lost.get(broker):
                # reconnected within the session: what was in flight failed with CONNECTION_LOSS
                for request_id in self._lost.pop(broker):
                    self._deliver(broker, CoordReplied(request_id, coord.Reply(False, coord.CONNECTION_LOSS)))
        self.store.expire_idle(self.now)

    def _dispatch(self, item: _Item) -> None:
        if item.target == CLIENT:
            self.responses[item.event.correlation_id] = item.event
            return
        broker = item.target
        if item.incarnation != self.incarnation[broker] or broker not in self.nodes:
            return
        event = item.event
        if isinstance(event, tuple) and event[0] == "timer":
            _, key, token = event
            if self.timers[broker].get(key) != token:
                return
            del self.timers[broker][key]
            event = TimerFired(key)
        self._deliver(broker, event)

    def _deliver(self, broker: int, event) -> None:
        node = self.nodes.get(broker)
        if node is not None:
            self._apply(broker, node.handle(event, self.now))

    # -- observation and clients -----------------------------------------------------
    def partition(self, broker: int, p: int = 0):
        node = self.nodes.get(broker)
        return node.replicas.partitions.get(TopicPartition(self.topic, p)) if node else None

    def leader(self, p: int = 0) -> int | None:
        leaders = [b for b in sorted(self.nodes) if self.partition(b, p) and self.partition(b, p).is_leader]
        return leaders[-1] if leaders else None

    def settled(self, p: int = 0, replicas=None) -> bool:
        leader = self.leader(p)
        if leader is None:
            return False
        part = self.partition(leader, p)
        wanted = sorted(replicas or self.brokers)
        return sorted(part.isr) == wanted and all(
            self.partition(b, p) and self.partition(b, p).log.log_end_offset == part.log.log_end_offset for b in wanted)

    def values(self, broker: int, p: int = 0) -> list[str]:
        return [r.value for _, r in self.partition(broker, p).log.records()]

    def produce(self, broker: int, values: list[str], acks: int = -1, p: int = 0, timeout_ms: int = 30000) -> int:
        self._correlation += 1
        cid = self._correlation
        request = ProduceRequest(cid, acks, timeout_ms,
                                 {TopicPartition(self.topic, p): tuple(Record(None, v, 10) for v in values)})
        if (CLIENT, broker) not in self.blocked:
            self._push(self.now + self.latency, broker, MessageReceived(CLIENT, request))
        return cid

    def produce_and_wait(self, broker: int, values: list[str], acks: int = -1, p: int = 0,
                         wait_ms: int = 40000) -> ErrorCode | None:
        cid = self.produce(broker, values, acks, p)
        if acks == 0:
            self.run_for(10)
            return None
        self.wait_for(lambda: cid in self.responses, wait_ms, step_ms=1)
        response: ProduceResponse | None = self.responses.get(cid)
        if response is None:
            return None
        return response.partitions[TopicPartition(self.topic, p)].error

    def controller(self) -> int | None:
        active = [b for b in sorted(self.nodes) if self.nodes[b].controller.active]
        return active[-1] if active else None

    def traced(self, type_: str, **match) -> list[tuple[int, int, dict]]:
        return [(t, b, f) for t, b, ty, f in self.traces
                if ty == type_ and all(f.get(k) == v for k, v in match.items())]

    def send(self, broker: int, request, src=CLIENT) -> int:
        """Deliver any request to ``broker`` as if ``src`` sent it, unless that link is
        blocked (its correlation id must come from next_correlation_id; answers to
        CLIENT are kept in ``responses`` by correlation id)."""
        if (src, broker) not in self.blocked:
            self._push(self.now + self.latency, broker, MessageReceived(src, request))
        return request.correlation_id

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def request_and_wait(self, broker: int, build, wait_ms: int = 40000):
        """Send ``build(correlation_id)`` and return the response, or None."""
        cid = self.send(broker, build(self.next_correlation_id()))
        self.wait_for(lambda: cid in self.responses, wait_ms, step_ms=1)
        return self.responses.get(cid)


class _BrokerEffects:
    """One broker's port for the shared effect loop (broker_core/effect_loop.py): what
    each effect does in this router."""

    def __init__(self, cluster: Cluster, broker: int) -> None:
        self.cluster = cluster
        self.broker = broker

    @property
    def is_running(self) -> bool:
        return self.broker in self.cluster.nodes

    def send(self, dst: Any, message: Any) -> None:
        c, broker = self.cluster, self.broker
        if (broker, dst) in c.blocked:
            return
        message = resolve_message(message, c.disks[broker].storage)
        if dst == CLIENT:
            c._push(c.now + c.latency, CLIENT, message)
        else:
            c._push(c.now + c.latency, dst, MessageReceived(broker, message))

    def set_timer(self, key: tuple, at_ms: int) -> None:
        c = self.cluster
        c._seq += 1
        c.timers[self.broker][key] = c._seq
        c._push(max(at_ms, c.now), self.broker, ("timer", key, c._seq))

    def cancel_timer(self, key: tuple) -> None:
        self.cluster.timers[self.broker].pop(key, None)

    def write_bytes(self, effect: WriteBytes | TruncateFile | DeleteFile | ReplaceFile | RenameFile) -> None:
        self.cluster.disks[self.broker].apply(effect)

    file_effect = write_bytes  # the page cache takes every file effect alike

    def trace(self, type_: str, fields: Any) -> None:
        self.cluster.traces.append((self.cluster.now, self.broker, type_, dict(fields)))

    def coord_request(self, request_id: int, op: Any) -> None:
        c, broker = self.cluster, self.broker
        if (broker, ZK) in c.blocked:
            c._lost.setdefault(broker, []).append(request_id)  # never reached the store
            return
        reply = c.store.request(c.sessions.get(broker, -1), op, c.now)
        if reply.error == coord.SESSION_EXPIRED:
            return
        if c._answer_lost(broker, op):
            c._push(c.now + 2 * c.latency, broker, CoordReplied(request_id, coord.Reply(False, coord.CONNECTION_LOSS)))
        elif (ZK, broker) in c.blocked:
            c._lost.setdefault(broker, []).append(request_id)  # applied, answer lost
        else:
            c._push(c.now + 2 * c.latency, broker, CoordReplied(request_id, reply))

    def fsync(self, path: str, token: int) -> None:
        self.cluster._push(self.cluster.now + 1, self.broker, FsyncCompleted(path, token))

    def close_connection(self, dst: Any) -> None:
        # The client has one connection per broker and nothing to cancel on it: the
        # close is recorded for tests to check.
        self.cluster.closed_connections.append((self.cluster.now, self.broker, dst))

    def mute_connection(self, dst: Any, until_ms: int) -> None:
        # The in-test client sends one request at a time and waits for its answer: the
        # mute is recorded for tests to check, and the client honours it itself.
        self.cluster.muted_connections.append((self.cluster.now, self.broker, dst, until_ms))

    def halt(self, effect: Halt) -> None:
        c, broker = self.cluster, self.broker
        c.traces.append((c.now, broker, "broker_halted", {"reason": effect.reason, "clean": effect.clean}))
        sid = c.sessions.get(broker)
        if effect.clean and sid is not None:
            c.store.expire(sid, reason="closed")
        c.crash(broker)


def started_cluster(**kwargs) -> Cluster:
    """A started cluster whose partition has a leader and a full ISR."""
    cluster = Cluster(**kwargs)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000), "the cluster never elected a leader with a full ISR"
    return cluster
