"""The core's coordination effects carried out against a real ZooKeeper with kazoo.

The core asks with ``CoordRequest(request_id, op)`` (``broker_core.coordination``) and
hears back through inputs: ``CoordReplied``, ``CoordWatchFired``, ``CoordSessionStarted``
and ``CoordSessionExpired``. This binding honours the contract of the simulated service
(``sim/coordination.py``):

* Replies are handed back in the order the requests were made (ZooKeeper answers a
  session's requests in order; the two requests kazoo chains on its own, a create with
  its parents and a watched read of a missing node, are held back to keep that order).
* Watch events and replies pass through one kazoo worker thread, so they reach the core
  in the order kazoo read them from the socket (ZooKeeper sends a watch event before the
  answer to any later read that sees the change).
* A request whose connection drops answers ``CONNECTION_LOSS`` (applied or not). kazoo
  queues what is sent while it reconnects, so the core's resend waits for the new
  connection, as the simulated client holds it.
* kazoo forgets its watches when the connection drops (it does not re-register them):
  each lost watch is reported as fired, so the core reads again and re-arms it.
* The session id handed over is kazoo's real session id: the core compares it with
  ``Reply.ephemeral_owner`` (ZooKeeper's Stat.ephemeralOwner).
* On expiry the core hears ``CoordSessionExpired``; kazoo opens a new session by itself
  and the core hears ``CoordSessionStarted`` with the new id. Answers and watches of the
  old session are dropped (the core abandoned its tasks), and a request the core sends
  before it hears of the new session waits for it.

The driver (a test loop, later the broker's server) calls ``request`` and takes inputs
with ``poll``; both run on the driver's thread. ``wakeup`` is called from kazoo's thread
whenever an input is ready, so an event loop can be woken.
"""
from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError, ConnectionLoss, KazooException, NodeExistsError, NoNodeError, NotEmptyError,
    OperationTimeoutError, RolledBackError, RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import Callback, EventType

from broker_core import coordination as coord
from broker_core.inputs import CoordReplied, CoordSessionExpired, CoordSessionStarted, CoordWatchFired

# kazoo's exceptions -> the Reply error names the core knows (ZooKeeper's own names).
# SessionExpiredError (and ConnectionClosedError, its subclass) has no entry: the answer
# is dropped and the expiry reaches the core as CoordSessionExpired.
ERRORS: tuple[tuple[type, str], ...] = (
    (NoNodeError, coord.NO_NODE),
    (NodeExistsError, coord.NODE_EXISTS),
    (BadVersionError, coord.BAD_VERSION),
    (NotEmptyError, coord.NOT_EMPTY),
    (ConnectionLoss, coord.CONNECTION_LOSS),
    (OperationTimeoutError, coord.CONNECTION_LOSS),  # no answer in time: applied or not
)

WATCH_KINDS = {EventType.CREATED: "created", EventType.DELETED: "deleted", EventType.CHANGED: "changed",
               EventType.CHILD: "children"}


OPS = (coord.Create, coord.SetData, coord.GetData, coord.GetChildren, coord.Exists, coord.Delete)


def error_name(exc: BaseException) -> str | None:
    """The Reply error for a kazoo exception; None for an expired session. An error the
    core has no name for (an ACL refusal, say) is named ``zookeeper_error:<kazoo class>``:
    a failed reply the core gives up on, rather than an answer that never comes."""
    if isinstance(exc, SessionExpiredError):
        return None
    for kind, name in ERRORS:
        if isinstance(exc, kind):
            return name
    return f"zookeeper_error:{type(exc).__name__}"


class _OneQueueHandler(SequentialThreadingHandler):
    """kazoo's threading handler with its two worker threads (watch callbacks, request
    completions) made one: both kinds run in the order the connection thread queued
    them, which is the order ZooKeeper sent them."""

    def __init__(self):
        super().__init__()
        self.completion_queue = self.callback_queue

    def start(self):
        with self._state_change:
            if self._running:
                return
            self.completion_queue = self.callback_queue
            self._workers.append(self._create_thread_worker(self.callback_queue))
            self._running = True

    def stop(self):
        super().stop()
        self.completion_queue = self.callback_queue


class _Watcher:
    """One watch of one session on one path. Equal watchers are one watch to kazoo (it
    keeps a set per path), as ZooKeeper keeps one per session, path and kind."""
    __slots__ = ("binding", "kind", "path", "session")

    def __init__(self, binding: "ZooKeeperCoordination", kind: str, path: str, session: int):
        self.binding, self.kind, self.path, self.session = binding, kind, path, session

    def _key(self):
        return self.kind, self.path, self.session

    def __eq__(self, other):
        return isinstance(other, _Watcher) and other.binding is self.binding and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __call__(self, event) -> None:
        if event.type == EventType.NONE:
            # kazoo dropped the watch with the connection: report it as fired so the
            # core reads the node again (what changed meanwhile) and sets it again.
            kind = "children" if self.kind == "children" else "changed"
        else:
            kind = WATCH_KINDS[event.type]
        self.binding._emit(self.session, CoordWatchFired(self.path, kind))


class ZooKeeperCoordination:
    """One broker's ZooKeeper session, carrying out the core's coordination requests."""

    def __init__(self, hosts: str, session_timeout_ms: int, wakeup: Callable[[], None] = lambda: None,
                 session_file: Path | None = None):
        self._session_file = session_file
        self._handler = _OneQueueHandler()
        self._client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000, handler=self._handler,
                                   connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 1.0})
        self._wakeup = wakeup
        self._lock = threading.RLock()  # the session views and the request pipeline
        self._order_lock = threading.Lock()  # the buffer that puts replies in request order
        self._zk_session: int | None = None  # the live session, as kazoo's connection thread knows it
        self._core_session: int | None = None  # the session the core was last told of
        self._held: list[tuple[int, Any]] = []  # asked while the core had no session
        self._inbox: queue.Queue = queue.Queue()
        self._pipeline: deque[tuple[int, int, Any]] = deque()  # (session, request_id, op) not yet sent
        self._chaining = False  # a request kazoo may split into several is in flight
        self._next_seq = 0
        self._next_out = 0
        self._done: dict[int, tuple[int, list]] = {}
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------
    def set_wakeup(self, wakeup: Callable[[], None]) -> None:
        """``wakeup`` is called (from any thread) whenever an input is ready for ``poll``:
        a runtime that is built after this object gives its own here."""
        self._wakeup = wakeup

    def start(self) -> None:
        """Connect in the background; the core hears CoordSessionStarted when connected."""
        self._client.add_listener(self._on_state)
        self._client.start_async()

    def close(self) -> None:
        """A clean close: ZooKeeper ends the session now, with its ephemeral nodes.
        Nothing more is handed to the core."""
        with self._lock:
            self._closed = True
        self._client.stop()
        self._client.close()

    @property
    def session_id(self) -> int | None:
        return self._zk_session

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """kazoo's (session id, password): another client can take the session over."""
        return self._client.client_id

    # -- the core's side -------------------------------------------------------------
    def request(self, request_id: int, op: Any) -> None:
        if type(op) not in OPS:
            raise TypeError(f"unknown coordination op {type(op).__name__}")
        with self._lock:
            if self._closed:
                return
            if self._core_session is None:
                self._held.append((request_id, op))  # sent once the core has a session
                return
            self._pipeline.append((self._core_session, request_id, op))
            self._pump()

    def _pump(self) -> None:
        """Send what is waiting, in order, unless a request kazoo may split into several
        (a create with its parents, a watched read of a missing node) is in flight: what
        comes after it waits, so that it sees its effects, as one ZooKeeper request's
        successors do. Called with ``_lock`` held."""
        while self._pipeline and not self._chaining:
            session, request_id, op = self._pipeline.popleft()
            if session != self._zk_session:
                continue  # its session is gone: the core hears of the expiry next
            self._chaining = _may_chain(op)
            self._submit(session, request_id, op)

    def poll(self, timeout_s: float | None = 0.0) -> Any | None:
        """The next input for the core, or None if none came within ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                session, event = self._inbox.get(timeout=remaining) if remaining != 0.0 else self._inbox.get_nowait()
            except queue.Empty:
                return None
            if self._accept(session, event):
                return event

    def _accept(self, session: int, event: Any) -> bool:
        """Update the core's view of the session as it is handed ``event``; False drops it."""
        with self._lock:
            if self._closed:
                return False
            kind = type(event)
            if kind is CoordSessionStarted:
                self._core_session = event.session_id
                held, self._held = self._held, []
                self._pipeline.extend((event.session_id, request_id, op) for request_id, op in held)
                self._pump()
                return True
            if kind is CoordSessionExpired:
                if event.session_id != self._core_session:
                    return False  # a session the core never heard of
                self._core_session = None
                self._held.clear()
                return True
            return session == self._core_session  # answers and watches of an old session are dropped

    # -- kazoo's side (its connection thread and its worker thread) -----------------
    def _on_state(self, state: str) -> None:
        """A kazoo state listener: runs on the connection thread, before kazoo fails the
        requests in flight. The inputs go through the worker queue to stay in order."""
        if state == KazooState.CONNECTED:
            client_id = self._client.client_id
            session = client_id[0] if client_id else None
            with self._lock:
                old, self._zk_session = self._zk_session, session
            if session is None or session == old:
                return  # reconnected within the same session
            self._publish_session(client_id)
            if old is not None:
                self._dispatch(old, CoordSessionExpired(old))
            self._dispatch(session, CoordSessionStarted(session))
        elif state == KazooState.LOST:
            with self._lock:
                old, self._zk_session = self._zk_session, None
            if old is not None:
                self._dispatch(old, CoordSessionExpired(old))
        # SUSPENDED: kazoo fails the requests in flight with ConnectionLoss and drops its
        # watches; both reach the core through their callbacks.

    def _publish_session(self, client_id: tuple[int, bytes]) -> None:
        """Write the new session's id and password to ``session_file`` (owner-only), so a
        fault injector can take the session over and close it: the only way to expire a
        ZooKeeper session from outside, as ZooKeeper itself does when a client is gone.
        Written to a temporary name first, so a reader never sees half of it."""
        if self._session_file is None:
            return
        text = json.dumps({"session_id": client_id[0], "password": client_id[1].hex()})
        temporary = self._session_file.with_name(self._session_file.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, self._session_file)

    def _dispatch(self, session: int, event: Any) -> None:
        self._handler.dispatch_callback(Callback("coordination", self._emit, (session, event)))

    def _emit(self, session: int, event: Any) -> None:
        self._inbox.put((session, event))
        self._wakeup()

    def _submit(self, session: int, request_id: int, op: Any) -> None:
        """Called with ``_lock`` held, so kazoo queues requests in sequence order."""
        seq = self._next_seq
        self._next_seq += 1
        chained = self._chaining

        def finish(reply: coord.Reply | None, extra: tuple = ()) -> None:
            events = ([CoordReplied(request_id, reply)] if reply is not None else []) + list(extra)
            self._complete(seq, session, events)
            if chained:
                with self._lock:
                    self._chaining = False
                    self._pump()

        try:
            _carry_out(self._client, op, _Watcher(self, _watch_kind(op), op.path, session), finish)
        except KazooException as exc:  # kazoo refused it at once; the reply says why
            finish(_failed(exc))

    def _complete(self, seq: int, session: int, events: list) -> None:
        # Handed over under the lock: an answer kazoo refused at once (the driver's
        # thread) and one from kazoo's worker must not pass each other.
        with self._order_lock:
            self._done[seq] = (session, events)
            while self._next_out in self._done:
                session_of, events_of = self._done.pop(self._next_out)
                self._next_out += 1
                for event in events_of:
                    self._emit(session_of, event)


def _may_chain(op: Any) -> bool:
    return (isinstance(op, coord.Create) and op.make_parents) or (isinstance(op, coord.GetData) and op.watch)


def _watch_kind(op: Any) -> str:
    return "children" if isinstance(op, coord.GetChildren) else "data"


def _failed(exc: BaseException) -> coord.Reply | None:
    name = error_name(exc)
    return None if name is None else coord.Reply(False, name)


def _stat_reply(stat, data: bytes | None = None, children: tuple[str, ...] = ()) -> coord.Reply:
    return coord.Reply(True, data=data, version=stat.version, children=children,
                       ephemeral_owner=stat.ephemeralOwner)


def _carry_out(client: KazooClient, op: Any, watcher: _Watcher, finish: Callable) -> None:
    """Send ``op`` with kazoo's async API; ``finish(reply, extra_inputs)`` gets the answer."""
    kind = type(op)
    watch = watcher if getattr(op, "watch", False) else None

    def on(result, convert: Callable[[Any], coord.Reply], on_error=None) -> None:
        def done(async_result) -> None:
            # Every request must be answered, or the replies after it wait forever.
            try:
                reply = convert(async_result.get())
            except Exception as exc:  # noqa: BLE001 - named by error_name
                if on_error is not None and on_error(exc):
                    return
                finish(_failed(exc))
                return
            finish(reply)
        result.rawlink(done)

    if kind is coord.Create:
        # ZooKeeper answers version 0 for a new node, as the simulated service does.
        on(client.create_async(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential,
                               makepath=op.make_parents),
           lambda path: coord.Reply(True, version=0, data=path.encode() if op.sequential else None))
    elif kind is coord.SetData and op.check_path is not None:
        transaction = client.transaction()
        transaction.check(op.check_path, op.check_version)
        transaction.set_data(op.path, op.data, op.version)
        on(transaction.commit_async(), _multi_reply)
    elif kind is coord.SetData:
        on(client.set_async(op.path, op.data, op.version), lambda stat: coord.Reply(True, version=stat.version))
    elif kind is coord.GetData:
        def missing(exc) -> bool:
            if not (watch and isinstance(exc, NoNodeError)):
                return False
            # ZooKeeper sets no watch on a read of a missing node; the simulated service
            # does, so that the node's creation is reported. An exists() sets it here.
            def armed(async_result) -> None:
                try:
                    stat = async_result.get()
                except Exception as exists_exc:  # noqa: BLE001 - named by error_name
                    finish(_failed(exists_exc))
                    return
                created = (CoordWatchFired(op.path, "created"),) if stat is not None else ()
                finish(coord.Reply(False, coord.NO_NODE), created)  # created meanwhile: say so
            client.exists_async(op.path, watch=watch).rawlink(armed)
            return True
        on(client.get_async(op.path, watch=watch), lambda value: _stat_reply(value[1], data=value[0]), missing)
    elif kind is coord.Exists:
        on(client.exists_async(op.path, watch=watch),
           lambda stat: coord.Reply(False, coord.NO_NODE) if stat is None else _stat_reply(stat))
    elif kind is coord.GetChildren:
        on(client.get_children_async(op.path, watch=watch, include_data=True),
           lambda value: coord.Reply(True, children=tuple(sorted(value[0])), version=value[1].version))
    elif kind is coord.Delete:
        on(client.delete_async(op.path, op.version), lambda _none: coord.Reply(True))
    else:
        raise TypeError(f"unknown coordination op {kind.__name__}")


def _multi_reply(results: list) -> coord.Reply:
    """A check-and-set multi: the check failing (node gone or moved) is CHECK_FAILED;
    the set failing keeps its own error. Ops rolled back around the failure say nothing."""
    check, written = results
    if isinstance(check, Exception) and not isinstance(check, (RolledBackError, RuntimeInconsistency)):
        return coord.Reply(False, coord.CHECK_FAILED)
    if isinstance(written, Exception):
        if isinstance(written, (RolledBackError, RuntimeInconsistency)):
            return coord.Reply(False, coord.CHECK_FAILED)
        return _failed(written) or coord.Reply(False, coord.SESSION_EXPIRED)
    return coord.Reply(True, version=written.version)
