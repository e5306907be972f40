"""A simulated ZooKeeper: sessions with timeouts, ephemeral nodes, versioned
compare-and-set (with a multi-op check), and one-shot watches. It is a node on the
network, so partitions cut brokers off from it as they would from a real ensemble.

The client half lives with each broker process, as kazoo would: it creates the
session, pings, forwards the core's requests and hands back replies and watches. Like
ZooKeeper's client it declares the connection lost after two thirds of the session
timeout without a word from the service: every request in flight then fails with
CONNECTION_LOSS (it may or may not have been applied), and the client reconnects to the
same session on a new connection. There is no answer cache: a request sent again is
applied again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import simpy

from broker_core import coordination as coord

SERVICE = "zk"


# -- wire messages between a client and the service ----------------------------------
@dataclass(frozen=True)
class CreateSession:
    timeout_ms: int


@dataclass(frozen=True)
class SessionCreated:
    session_id: int


@dataclass(frozen=True)
class Ping:
    session_id: int


@dataclass(frozen=True)
class Pong:
    session_id: int
    alive: bool


@dataclass(frozen=True)
class Reconnect:
    """Reattach a live session on a new connection (the old one is given up)."""
    session_id: int
    connection: int


@dataclass(frozen=True)
class Reconnected:
    session_id: int
    connection: int
    alive: bool


@dataclass(frozen=True)
class Request:
    session_id: int
    request_id: int
    op: Any
    connection: int = 0


@dataclass(frozen=True)
class CloseSession:
    session_id: int


@dataclass(frozen=True)
class Response:
    session_id: int
    request_id: int
    reply: coord.Reply


@dataclass(frozen=True)
class WatchEvent:
    session_id: int
    path: str
    kind: str


@dataclass
class Znode:
    data: bytes
    version: int = 0
    ephemeral_owner: int | None = None
    children: set[str] = field(default_factory=set)


@dataclass
class Session:
    id: int
    owner: str
    timeout_ms: int
    last_heard: float
    connection: int = 0  # the client's current connection; requests on older ones are dropped


class CoordinationStore:
    """The store itself, without simpy: znodes, sessions, versions and watches. Time is
    passed in; ``notify(owner, WatchEvent)`` delivers watch events. The simulated
    service wraps it, and so can a test that drives core nodes by hand."""

    def __init__(self, notify: Callable[[str, Any], None], trace: Callable[..., None] = lambda *a: None):
        self._notify = notify
        self._trace = trace
        self.znodes: dict[str, Znode] = {"/": Znode(b"")}
        self.sessions: dict[int, Session] = {}
        self._next_session = 1
        self._data_watches: dict[str, set[int]] = {}
        self._child_watches: dict[str, set[int]] = {}

    # -- admin (the scenario runner seeds topics as Kafka's admin tools do) ----------
    def put(self, path: str, data: bytes) -> None:
        self._ensure_parents(path)
        if path in self.znodes:
            self.znodes[path].data = data
            self.znodes[path].version += 1
        else:
            self._create_node(path, data, None)

    def get(self, path: str) -> bytes | None:
        node = self.znodes.get(path)
        return node.data if node else None

    def session_of(self, owner: str) -> int | None:
        for sid in sorted(self.sessions):
            if self.sessions[sid].owner == owner:
                return sid
        return None

    # -- sessions --------------------------------------------------------------------
    def create_session(self, owner: str, timeout_ms: int, now: float) -> int:
        sid = self._next_session
        self._next_session += 1
        self.sessions[sid] = Session(sid, owner, timeout_ms, now)
        return sid

    def touch(self, session_id: int, now: float) -> bool:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_heard = now
        return session is not None

    def expire_idle(self, now: float) -> None:
        for sid in sorted(self.sessions):
            session = self.sessions.get(sid)
            if session is not None and now - session.last_heard > session.timeout_ms:
                self.expire(sid)

    def expire(self, session_id: int, reason: str = "timeout") -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        self._trace("coordination", "session_expired_at_service", {"session_id": session_id, "owner": session.owner,
                                                                    "reason": reason})
        for path in sorted((p for p, n in self.znodes.items() if n.ephemeral_owner == session_id), reverse=True):
            self._delete_node(path)
        for watches in (self._data_watches, self._child_watches):
            for sids in watches.values():
                sids.discard(session_id)

    def request(self, session_id: int, op: Any, now: float) -> coord.Reply:
        if not self.touch(session_id, now):
            return coord.Reply(False, coord.SESSION_EXPIRED)
        return self._apply(session_id, op)

    # -- operations ------------------------------------------------------------------
    def _apply(self, sid: int, op: Any) -> coord.Reply:
        kind = type(op)
        if kind is coord.GetData:
            node = self.znodes.get(op.path)
            if op.watch:
                self._data_watches.setdefault(op.path, set()).add(sid)
            if node is None:
                return coord.Reply(False, coord.NO_NODE)
            return coord.Reply(True, data=node.data, version=node.version, ephemeral_owner=node.ephemeral_owner or 0)
        if kind is coord.Exists:
            if op.watch:
                self._data_watches.setdefault(op.path, set()).add(sid)
            node = self.znodes.get(op.path)
            if node is None:
                return coord.Reply(False, coord.NO_NODE)
            return coord.Reply(True, version=node.version, ephemeral_owner=node.ephemeral_owner or 0)
        if kind is coord.GetChildren:
            node = self.znodes.get(op.path)
            if node is None:
                return coord.Reply(False, coord.NO_NODE)
            if op.watch:
                self._child_watches.setdefault(op.path, set()).add(sid)
            return coord.Reply(True, children=tuple(sorted(node.children)), version=node.version)
        if kind is coord.Create:
            if op.path in self.znodes:
                return coord.Reply(False, coord.NODE_EXISTS)
            parent = _parent(op.path)
            if parent not in self.znodes:
                if not op.make_parents:
                    return coord.Reply(False, coord.NO_NODE)
                self._ensure_parents(op.path)
            self._create_node(op.path, op.data, sid if op.ephemeral else None)
            return coord.Reply(True, version=0)
        if kind is coord.SetData:
            if op.check_path is not None:
                checked = self.znodes.get(op.check_path)
                if checked is None or (op.check_version != coord.ANY_VERSION and checked.version != op.check_version):
                    return coord.Reply(False, coord.CHECK_FAILED)
            node = self.znodes.get(op.path)
            if node is None:
                return coord.Reply(False, coord.NO_NODE)
            if op.version != coord.ANY_VERSION and node.version != op.version:
                return coord.Reply(False, coord.BAD_VERSION)
            node.data = op.data
            node.version += 1
            self._fire(self._data_watches, op.path, "changed")
            return coord.Reply(True, version=node.version)
        if kind is coord.Delete:
            node = self.znodes.get(op.path)
            if node is None:
                return coord.Reply(False, coord.NO_NODE)
            if op.version != coord.ANY_VERSION and node.version != op.version:
                return coord.Reply(False, coord.BAD_VERSION)
            if node.children:
                return coord.Reply(False, coord.NOT_EMPTY)
            self._delete_node(op.path)
            return coord.Reply(True)
        raise TypeError(f"unknown coordination op {kind.__name__}")

    def _ensure_parents(self, path: str) -> None:
        parts = path.strip("/").split("/")[:-1]
        current = ""
        for part in parts:
            current += "/" + part
            if current not in self.znodes:
                self._create_node(current, b"", None)

    def _create_node(self, path: str, data: bytes, owner: int | None) -> None:
        self.znodes[path] = Znode(data, 0, owner)
        parent = _parent(path)
        self.znodes[parent].children.add(path.rsplit("/", 1)[1])
        self._fire(self._data_watches, path, "created")
        self._fire(self._child_watches, parent, "children")

    def _delete_node(self, path: str) -> None:
        self.znodes.pop(path, None)
        parent = _parent(path)
        if parent in self.znodes:
            self.znodes[parent].children.discard(path.rsplit("/", 1)[1])
        self._fire(self._data_watches, path, "deleted")
        self._fire(self._child_watches, parent, "children")

    def _fire(self, watches: dict[str, set[int]], path: str, kind: str) -> None:
        sids = watches.pop(path, None)
        for sid in sorted(sids or ()):
            session = self.sessions.get(sid)
            if session is not None:
                self._notify(session.owner, WatchEvent(sid, path, kind))




class CoordinationService:
    """The store as a node on the simulated network, expiring idle sessions on a tick."""

    def __init__(self, env: simpy.Environment, send: Callable[[str, Any], None], trace: Callable[..., None],
                 tick_ms: float = 100.0):
        self.env = env
        self._send = send
        self.store = CoordinationStore(lambda owner, event: send(owner, event), trace)
        self.tick_ms = tick_ms
        env.process(self._expiry_loop())

    def handle(self, src: str, message: Any) -> None:
        kind = type(message)
        now = self.env.now
        if kind is CreateSession:
            self._send(src, SessionCreated(self.store.create_session(src, message.timeout_ms, now)))
        elif kind is Ping:
            self._send(src, Pong(message.session_id, self.store.touch(message.session_id, now)))
        elif kind is CloseSession:
            self.store.expire(message.session_id, reason="closed")
        elif kind is Reconnect:
            session = self.store.sessions.get(message.session_id)
            alive = self.store.touch(message.session_id, now)
            if session is not None and message.connection > session.connection:
                session.connection = message.connection  # the session moved: its old connection is closed
            self._send(src, Reconnected(message.session_id, message.connection, alive))
        elif kind is Request:
            session = self.store.sessions.get(message.session_id)
            if session is not None and message.connection < session.connection:
                return  # sent on a connection the session has left: ZooKeeper closed it
            reply = self.store.request(message.session_id, message.op, now)
            self._send(src, Response(message.session_id, message.request_id, reply))

    def _expiry_loop(self):
        while True:
            yield self.env.timeout(self.tick_ms)
            self.store.expire_idle(self.env.now)


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


class CoordinationClient:
    """The broker process's end of the session (what kazoo does for the real binding).

    ``discard()`` drops what this client had sent on a cut link and not yet delivered:
    the socket it gave up takes its unsent bytes with it. ``trace(type, fields)``
    records connection losses and reconnects on the broker's node."""

    def __init__(self, env: simpy.Environment, owner: str, timeout_ms: int, send: Callable[[Any], None],
                 deliver: Callable[[Any], None], discard: Callable[[], None] = lambda: None,
                 trace: Callable[[str, dict], None] = lambda type_, fields: None):
        from broker_core.inputs import CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired
        self._inputs = (CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired)
        self.env = env
        self.owner = owner
        self.timeout_ms = timeout_ms
        self._send = send
        self._deliver = deliver
        self._discard = discard
        self._trace = trace
        self.session_id: int | None = None
        self.connected = False
        self.connection = 0
        self.last_heard = 0.0
        self.running = False
        self._generation = 0
        self._pending: list[tuple[int, Any]] = []
        self._in_flight: set[int] = set()
        self._create_sent_at = -1.0
        self._ticks = 0
        self.paused = False  # a frozen process sends no pings

    def connect(self) -> None:
        self.running = True
        self._generation += 1
        self._ticks = 0
        self._create_session()
        self._schedule_ping(self._generation)

    def _create_session(self) -> None:
        self._create_sent_at = self.env.now
        self._send(CreateSession(self.timeout_ms))

    def stop(self) -> None:
        self.running = False
        self._generation += 1
        self.session_id = None
        self.connected = False
        self.paused = False
        self._in_flight.clear()
        self._pending.clear()

    def close(self) -> None:
        """A clean close: the service drops the session (and its ephemeral nodes) now."""
        if self.session_id is not None:
            self._send(CloseSession(self.session_id))

    def request(self, request_id: int, op: Any) -> None:
        if self.session_id is None or not self.connected:
            self._pending.append((request_id, op))  # sent once (re)connected
            return
        self._in_flight.add(request_id)
        self._send(Request(self.session_id, request_id, op, self.connection))

    # The client wakes every sixth of the session timeout: it pings every third (every
    # other tick), and gives the connection up at two thirds without a word from the
    # service (ZooKeeper's read timeout), so that a dead link is noticed before the
    # session expires at the service.
    def _schedule_ping(self, generation: int) -> None:
        event = self.env.timeout(max(self.timeout_ms / 6, 1))
        event.callbacks.append(lambda _e: self._ping(generation))

    def _ping(self, generation: int) -> None:
        if generation != self._generation or not self.running:
            return
        self._ticks += 1
        if self.paused:
            self._schedule_ping(generation)
            return
        if self.session_id is None:
            if self.env.now - self._create_sent_at >= self.timeout_ms:
                self._create_session()  # the last attempt was lost
        elif self.connected and self.env.now - self.last_heard >= self.timeout_ms * 2 / 3:
            self._connection_lost()
        elif self._ticks % 2 == 0:
            if self.connected:
                self._send(Ping(self.session_id))
            else:
                self._reconnect()  # the last attempt went unanswered
        self._schedule_ping(generation)

    def _connection_lost(self) -> None:
        self.connected = False
        lost = sorted(self._in_flight)
        self._in_flight.clear()
        self._trace("coordination_connection_lost", {"session_id": self.session_id, "requests_lost": len(lost)})
        replied = self._inputs[0]
        for request_id in lost:
            self._deliver(replied(request_id, coord.Reply(False, coord.CONNECTION_LOSS)))
            if not self.running or self.connected or self.session_id is None:
                return  # the core halted, or its answer already opened the next connection
        self._reconnect()

    def _reconnect(self) -> None:
        self._discard()
        self.connection += 1
        self._send(Reconnect(self.session_id, self.connection))

    def _flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for request_id, op in pending:
            self.request(request_id, op)

    def handle(self, message: Any) -> None:
        if not self.running:
            return
        replied, expired, started, watch = self._inputs
        kind = type(message)
        if kind is SessionCreated:
            if self.session_id is not None:
                return  # a duplicate answer to a retried CreateSession
            self.session_id = message.session_id
            self.connected = True
            self.last_heard = self.env.now
            self._deliver(started(message.session_id))
            self._flush_pending()
            return
        if message.session_id != self.session_id:
            return
        if kind is Reconnected:
            if message.connection != self.connection or self.connected:
                return  # the answer to an attempt given up since
            if not message.alive:
                self._on_expired()
                return
            self.connected = True
            self.last_heard = self.env.now
            self._trace("coordination_reconnected", {"session_id": self.session_id, "connection": self.connection})
            self._flush_pending()
            return
        self.last_heard = self.env.now
        if kind is Pong:
            if not message.alive:
                self._on_expired()
        elif kind is Response:
            if message.request_id not in self._in_flight:
                return  # answered on a connection already given up: the request failed with CONNECTION_LOSS
            self._in_flight.discard(message.request_id)
            if message.reply.error == coord.SESSION_EXPIRED:
                self._on_expired()
            else:
                self._deliver(replied(message.request_id, message.reply))
        elif kind is WatchEvent:
            self._deliver(watch(message.path, message.kind))

    def _on_expired(self) -> None:
        expired_id = self.session_id
        self.session_id = None
        self.connected = False
        self._in_flight.clear()  # the core abandons every task of the old session
        self._pending.clear()
        _, expired, _, _ = self._inputs
        self._deliver(expired(expired_id))
        if self.running:  # as Kafka does: start a new session and register again
            self._create_session()
