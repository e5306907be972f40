"""The coordination store embedded in the broker's process: the default when no
``--zk`` is given.

It is the same store the simulation runs (``broker_core.coordination_store``), with one
session that lives as long as the process: requests are applied at once and answered in
order, a watch event is handed over before the reply of the request that fired it (as
ZooKeeper sends it). Persistent nodes are kept in the data directory
(``embedded-coordination.json``, replaced atomically after every change), so topics and
partition states survive a restart as they would in ZooKeeper; ephemeral nodes die with
the process, as they would with its session.

The interface is ``ZooKeeperCoordination``'s: ``start``, ``request``, ``poll``, ``close``.
"""
from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Callable

from broker_core import coordination as coord
from broker_core.coordination_store import CoordinationStore, WatchEvent, Znode
from broker_core.inputs import CoordReplied, CoordSessionStarted, CoordWatchFired
from real_io.files import replace_durably

SNAPSHOT_FILE = "embedded-coordination.json"
_OWNER = "broker"
_MUTATIONS = (coord.Create, coord.SetData, coord.Delete)


class EmbeddedCoordination:
    def __init__(self, snapshot: str | Path | None, wakeup: Callable[[], None] = lambda: None):
        self._snapshot = Path(snapshot) if snapshot is not None else None
        self._wakeup = wakeup
        self._inputs: deque = deque()
        self.store = CoordinationStore(self._notify)
        self.session_id: int | None = None
        if self._snapshot is not None and self._snapshot.exists():
            load_snapshot(self.store, json.loads(self._snapshot.read_text()))

    def set_wakeup(self, wakeup: Callable[[], None]) -> None:
        """``wakeup`` is called (from any thread) whenever an input is ready for ``poll``:
        a runtime that is built after this object gives its own here."""
        self._wakeup = wakeup

    def start(self) -> None:
        self.session_id = self.store.create_session(_OWNER, 2**31, 0)
        self._inputs.append(CoordSessionStarted(self.session_id))
        self._wakeup()

    def close(self) -> None:
        if self.session_id is not None:
            self.store.expire(self.session_id, reason="closed")
            self.session_id = None

    def request(self, request_id: int, op: Any) -> None:
        if self.session_id is None:
            raise RuntimeError("request before start")
        reply = self.store.request(self.session_id, op, 0)
        self._inputs.append(CoordReplied(request_id, reply))
        if reply.ok and isinstance(op, _MUTATIONS):  # (an ephemeral create may make persistent parents)
            self._save()
        self._wakeup()

    def poll(self, timeout_s: float | None = 0.0) -> Any | None:
        return self._inputs.popleft() if self._inputs else None

    def _notify(self, owner: str, event: WatchEvent) -> None:
        self._inputs.append(CoordWatchFired(event.path, event.kind))

    def _save(self) -> None:
        if self._snapshot is not None:
            replace_durably(self._snapshot, json.dumps(snapshot(self.store), sort_keys=True).encode())


def snapshot(store: CoordinationStore) -> dict:
    """The persistent nodes: path -> [data as latin-1 text, version]."""
    return {path: [node.data.decode("latin-1"), node.version]
            for path, node in sorted(store.znodes.items()) if node.ephemeral_owner is None}


def load_snapshot(store: CoordinationStore, nodes: dict) -> None:
    for path in sorted(nodes, key=lambda p: (p.count("/"), p)):  # parents first
        data, version = nodes[path]
        if path == "/":
            continue
        store.znodes[path] = Znode(data.encode("latin-1"), int(version))
        parent = path.rsplit("/", 1)[0] or "/"
        store.znodes[parent].children.add(path.rsplit("/", 1)[1])
