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

from dataclasses import dataclass
from typing import Any, Callable

import simpy

from broker_core import coordination as coord
from broker_core.coordination_store import CoordinationStore, WatchEvent
from faults.nodes import SERVICE_NODE

SERVICE = SERVICE_NODE


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
            self._connection_lost(self.session_id)
        elif self._ticks % 2 == 0:
            if self.connected:
                self._send(Ping(self.session_id))
            else:
                self._reconnect(self.session_id)  # the last attempt went unanswered
        self._schedule_ping(generation)

    def connection_reset(self) -> None:
        """The connection to the service was reset (a ``reset`` fault): the client hears
        it at once, as ZooKeeper's client does a closed socket, instead of after its read
        timeout. A frozen process notices later, by that timeout, once it wakes."""
        if self.running and self.connected and not self.paused and self.session_id is not None:
            self._connection_lost(self.session_id)

    def _connection_lost(self, session_id: int) -> None:
        """``session_id``: the open session, whose connection is lost (it outlives it)."""
        self.connected = False
        lost = sorted(self._in_flight)
        self._in_flight.clear()
        self._trace("coordination_connection_lost", {"session_id": session_id, "requests_lost": len(lost)})
        replied = self._inputs[0]
        for request_id in lost:
            self._deliver(replied(request_id, coord.Reply(False, coord.CONNECTION_LOSS)))
            if not self.running or self.connected or self.session_id is None:
                return  # the core halted, or its answer already opened the next connection
        self._reconnect(session_id)

    def _reconnect(self, session_id: int) -> None:
        self._discard()
        self.connection += 1
        self._send(Reconnect(session_id, self.connection))

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
                self._on_expired(message.session_id)
                return
            self.connected = True
            self.last_heard = self.env.now
            self._trace("coordination_reconnected", {"session_id": self.session_id, "connection": self.connection})
            self._flush_pending()
            return
        self.last_heard = self.env.now
        if kind is Pong:
            if not message.alive:
                self._on_expired(message.session_id)
        elif kind is Response:
            if message.request_id not in self._in_flight:
                return  # answered on a connection already given up: the request failed with CONNECTION_LOSS
            self._in_flight.discard(message.request_id)
            if message.reply.error == coord.SESSION_EXPIRED:
                self._on_expired(message.session_id)
            else:
                self._deliver(replied(message.request_id, message.reply))
        elif kind is WatchEvent:
            self._deliver(watch(message.path, message.kind))

    def _on_expired(self, expired_id: int) -> None:
        """``expired_id``: the session the service says is gone (the one open here)."""
        self.session_id = None
        self.connected = False
        self._in_flight.clear()  # the core abandons every task of the old session
        self._pending.clear()
        _, expired, _, _ = self._inputs
        self._deliver(expired(expired_id))
        if self.running:  # as Kafka does: start a new session and register again
            self._create_session()
