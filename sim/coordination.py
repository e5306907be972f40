"""A simulated ZooKeeper: sessions with timeouts, ephemeral nodes, versioned
compare-and-set (with a multi-op check), and one-shot watches. It is a node on the
network, so partitions cut brokers off from it as they would from a real ensemble.

The client half lives with each broker process, as kazoo would: it creates the
session, pings, forwards the core's requests and hands back replies and watches.
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
class Request:
    session_id: int
    request_id: int
    op: Any


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
            return coord.Reply(True, data=node.data, version=node.version)
        if kind is coord.Exists:
            if op.watch:
                self._data_watches.setdefault(op.path, set()).add(sid)
            node = self.znodes.get(op.path)
            return coord.Reply(node is not None, None if node else coord.NO_NODE, version=node.version if node else -1)
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
        self._replies: dict[tuple[int, int], coord.Reply] = {}
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
        elif kind is Request:
            key = (message.session_id, message.request_id)
            reply = self._replies.get(key)
            if reply is None:  # a resent request is answered again, not applied again
                reply = self.store.request(message.session_id, message.op, now)
                self._replies[key] = reply
            self._send(src, Response(message.session_id, message.request_id, reply))

    def _expiry_loop(self):
        while True:
            yield self.env.timeout(self.tick_ms)
            self.store.expire_idle(self.env.now)


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


class CoordinationClient:
    """The broker process's end of the session (what kazoo does for the real binding)."""

    def __init__(self, env: simpy.Environment, owner: str, timeout_ms: int, send: Callable[[Any], None],
                 deliver: Callable[[Any], None]):
        from broker_core.inputs import CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired
        self._inputs = (CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired)
        self.env = env
        self.owner = owner
        self.timeout_ms = timeout_ms
        self._send = send
        self._deliver = deliver
        self.session_id: int | None = None
        self.running = False
        self._generation = 0
        self._pending: list[Request] = []
        self._in_flight: dict[int, tuple[Request, float]] = {}
        self._create_sent_at = -1.0
        self.paused = False  # a frozen process sends no pings

    def connect(self) -> None:
        self.running = True
        self._generation += 1
        self._create_session()
        self._schedule_ping(self._generation)

    def _create_session(self) -> None:
        self._create_sent_at = self.env.now
        self._send(CreateSession(self.timeout_ms))

    def stop(self) -> None:
        self.running = False
        self._generation += 1
        self.session_id = None
        self.paused = False
        self._in_flight.clear()
        self._pending.clear()

    def close(self) -> None:
        """A clean close: the service drops the session (and its ephemeral nodes) now."""
        if self.session_id is not None:
            self._send(CloseSession(self.session_id))

    def request(self, request_id: int, op: Any) -> None:
        if self.session_id is None:
            self._pending.append(Request(-1, request_id, op))
            return
        self._send_request(Request(self.session_id, request_id, op))

    def _send_request(self, request: Request) -> None:
        self._in_flight[request.request_id] = (request, self.env.now)
        self._send(request)

    def _resend_overdue(self) -> None:
        """A request or its answer lost on a cut link: send it again (the service answers
        a repeat from its cache, so it takes effect once), as a reconnecting client would."""
        limit = self.timeout_ms / 3
        for request_id in sorted(self._in_flight):
            request, sent_at = self._in_flight[request_id]
            if self.env.now - sent_at >= limit:
                self._send_request(request)

    def _schedule_ping(self, generation: int) -> None:
        event = self.env.timeout(max(self.timeout_ms / 3, 1))
        event.callbacks.append(lambda _e: self._ping(generation))

    def _ping(self, generation: int) -> None:
        if generation != self._generation or not self.running:
            return
        if self.paused:
            self._schedule_ping(generation)
            return
        if self.session_id is None:
            if self.env.now - self._create_sent_at >= self.timeout_ms:
                self._create_session()  # the last attempt was lost
        else:
            self._send(Ping(self.session_id))
            self._resend_overdue()
        self._schedule_ping(generation)

    def handle(self, message: Any) -> None:
        if not self.running:
            return
        replied, expired, started, watch = self._inputs
        kind = type(message)
        if kind is SessionCreated:
            if self.session_id is not None:
                return  # a duplicate answer to a retried CreateSession
            self.session_id = message.session_id
            self._deliver(started(message.session_id))
            pending, self._pending = self._pending, []
            for request in pending:
                self._send_request(Request(self.session_id, request.request_id, request.op))
        elif message.session_id != self.session_id:
            return
        elif kind is Pong:
            if not message.alive:
                self._on_expired()
        elif kind is Response:
            if self._in_flight.pop(message.request_id, None) is None:
                return  # the answer to a request already answered
            if message.reply.error == coord.SESSION_EXPIRED:
                self._on_expired()
            else:
                self._deliver(replied(message.request_id, message.reply))
        elif kind is WatchEvent:
            self._deliver(watch(message.path, message.kind))

    def _on_expired(self) -> None:
        expired_id = self.session_id
        self.session_id = None
        self._in_flight.clear()  # the core abandons every task of the old session
        _, expired, _, _ = self._inputs
        self._deliver(expired(expired_id))
        if self.running:  # as Kafka does: start a new session and register again
            self._create_session()
