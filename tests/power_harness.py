"""tests/harness.py's Cluster with a platter per broker, for power loss: the harness's
disks keep every write (the page cache); here each broker also has the files as the
platter holds them (what completed fsyncs covered, and the atomic ReplaceFiles), and
fsyncs can be held open, so that a power loss can fall while one is in flight."""
from __future__ import annotations

from broker_core.effects import DeleteFile, ReplaceFile
from broker_core.inputs import FsyncCompleted
from broker_core.storage import MemoryFiles
from tests.harness import Cluster


class PowerCluster(Cluster):
    """The harness with a platter per broker: an fsync makes durable the bytes its file
    held when it was issued, once it completes; ``held`` brokers' fsyncs complete only
    at ``complete_fsyncs``; ``power_loss`` restarts a broker from its platter."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.platters: dict[int, dict[str, bytes]] = {b: {} for b in self.brokers}
        self.held: set[int] = set()
        self.pending: dict[int, list[tuple[FsyncCompleted, bytes | None]]] = {b: [] for b in self.brokers}
        self._synced: dict[tuple[int, str, int], bytes | None] = {}

    def _push(self, at, target, event) -> None:
        if type(event) is FsyncCompleted:
            data = self.disks[target].files.get(event.path)
            snapshot = None if data is None else bytes(data)
            if target in self.held:
                self.pending[target].append((event, snapshot))
                return
            self._synced[(target, event.path, event.token)] = snapshot
        super()._push(at, target, event)

    def _apply(self, broker, effects) -> None:
        super()._apply(broker, effects)
        platter = self.platters[broker]
        for e in effects:  # a ReplaceFile is durable when done (write temp, fsync, rename)
            if type(e) is ReplaceFile:
                platter[e.path] = bytes(e.data)
            elif type(e) is DeleteFile:
                platter.pop(e.path, None)

    def _deliver(self, broker, event) -> None:
        if type(event) is FsyncCompleted:
            snapshot = self._synced.pop((broker, event.path, event.token), None)
            if snapshot is not None:
                self.platters[broker][event.path] = snapshot
        super()._deliver(broker, event)

    def complete_fsyncs(self, broker: int) -> None:
        """The held fsyncs of ``broker`` complete (in order, 1 ms from now)."""
        self.held.discard(broker)
        for event, snapshot in self.pending[broker]:
            self._synced[(broker, event.path, event.token)] = snapshot
            super()._push(self.now + 1, broker, event)
        self.pending[broker] = []

    def lose_power(self, broker: int) -> None:
        """The machine loses power and stays down: what no fsync covered is gone."""
        self.crash(broker)
        self.pending[broker] = []
        self.held.discard(broker)
        self.disks[broker] = MemoryFiles(self.platters[broker])

    def power_loss(self, broker: int) -> None:
        """The machine loses power and comes back once its coordination session expired
        (before, its registration would conflict)."""
        self.lose_power(broker)
        self.run_for(self.config.zookeeper_session_timeout_ms + 1000)
        self.start(broker)
