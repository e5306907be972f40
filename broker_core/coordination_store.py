"""The coordination service's semantics (the subset of ZooKeeper the core uses), pure:
znodes with versions, sessions with timeouts, ephemeral nodes, versioned
compare-and-set (with a multi-op check) and one-shot watches. Time is passed in;
nothing here waits, sends or reads a clock.

It is the ground floor both bindings share: the simulation puts it on the simulated
network (sim/coordination.py), and the real binding embeds it in the broker's process
when no ZooKeeper is given (real_io/embedded_coordination.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from broker_core import coordination as coord


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
    child_sequence: int = 0  # the next sequential child's number (ZooKeeper takes the parent's cversion)


@dataclass
class Session:
    id: int
    owner: str
    timeout_ms: int
    last_heard: float
    connection: int = 0  # the client's current connection; requests on older ones are dropped


class AdminStore(Protocol):
    """What an administrator's tool does to the store from outside the cluster: the
    shared admin functions (broker_core/admin_nodes.py, dynamic_config.change_topic_config,
    quota_config.change_client_quota) write through this, on the simulation's
    CoordinationStore or on a real ZooKeeper (real_io/zk_admin_store.py)."""

    def get(self, path: str) -> bytes | None: ...

    def put(self, path: str, data: bytes) -> None: ...

    def set_data(self, path: str, data: bytes) -> None: ...

    def put_sequential(self, prefix: str, data: bytes) -> str: ...

    def children(self, path: str) -> list[str]: ...


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

    def set_data(self, path: str, data: bytes) -> None:
        """``put`` that fires the node's data watches when it existed, as an admin tool's
        setData does (``put`` keeps the older seeding's silence)."""
        existed = path in self.znodes
        self.put(path, data)
        if existed:
            self._fire(self._data_watches, path, "changed")

    def put_sequential(self, prefix: str, data: bytes) -> str:
        """Create a persistent sequential node (ZooKeeper's PERSISTENT_SEQUENTIAL): the
        prefix followed by a ten-digit number that grows with every such child of the
        parent. Returns the created node's path."""
        self._ensure_parents(prefix)
        parent = self.znodes[_parent(prefix)]
        path = f"{prefix}{parent.child_sequence:010d}"
        parent.child_sequence += 1
        self.put(path, data)
        return path

    def _create_sequential(self, sid: int, op: coord.Create) -> coord.Reply:
        """A sequential child: numbered past every child already there too, since a
        snapshot (the embedded store's) keeps the children but not the counter."""
        parent_path = _parent(op.path)
        if parent_path not in self.znodes:
            if not op.make_parents:
                return coord.Reply(False, coord.NO_NODE)
            self._ensure_parents(op.path)
        parent = self.znodes[parent_path]
        while f"{op.path}{parent.child_sequence:010d}" in self.znodes:
            parent.child_sequence += 1
        path = f"{op.path}{parent.child_sequence:010d}"
        parent.child_sequence += 1
        self._create_node(path, op.data, sid if op.ephemeral else None)
        return coord.Reply(True, version=0, data=path.encode())

    def get(self, path: str) -> bytes | None:
        node = self.znodes.get(path)
        return node.data if node else None

    def children(self, path: str) -> list[str]:
        """The node's children, sorted; none for a missing node. The admin functions
        (broker_core/admin_nodes.py) list through this, which a ZooKeeper-backed store
        (real_io/zk_admin_store.py) has too."""
        node = self.znodes.get(path)
        return sorted(node.children) if node else []

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
        if kind is coord.Create and op.sequential:
            return self._create_sequential(sid, op)
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


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"
