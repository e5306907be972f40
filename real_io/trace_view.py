"""The cluster view of a real run read from its brokers' own traces, as the simulation
reads it from its brokers' state (sim/world.py ``cluster_view``; faults/triggers.py
names the fields).

Each ``isrlab serve`` process writes its trace line by line as it goes. A
``TraceTail`` follows one broker's file and keeps what that broker last said of itself:
its replicas' states from the ``replica_state`` samples (real_io/sampler.py), brought
forward by the events that change them between samples (``became_leader``,
``became_follower``, ``isr_shrunk``/``isr_expanded``, ``high_watermark_advanced``), and
whether it is the active controller (``controller_elected`` .. ``controller_resigned``,
with its controller epoch). Replicas a StopReplica deletes (``replicas_stopped`` with
``delete``) leave it. A new incarnation (``broker_started``) or a halt forgets
everything, as a simulated broker that restarts or stops.

So a trigger judges each broker by its own belief, as in the simulation, not by
ZooKeeper's record or by what one broker's metadata says of the others. The view lags
the brokers by the time a line takes to reach the file (the brokers write each line as
they trace it) and, for a replica's log end offset, by up to one sample interval: the
only field no event brings forward. A broker the runner knows to be down or paused
shows nothing, as in the simulation.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from faults.triggers import cluster_view


class TraceTail:
    """One broker's trace file, read as it grows."""

    def __init__(self, broker: int, path: Path):
        self.broker = broker
        self.path = path
        self._position = 0
        self._partial = b""
        self.partitions: dict[str, dict] = {}
        self.controller_epoch: int | None = None
        self.last_started_ms: int | None = None  # the t_ms of the last broker_started read

    def poll(self) -> None:
        """Read what was written since the last poll; a line cut short (being written, or
        by SIGKILL) waits for its end."""
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self._position)
                data = stream.read()
        except FileNotFoundError:
            return
        if not data:
            return
        self._position += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line a kill cut short, followed by the next incarnation's
            self.apply(event)

    def apply(self, event: dict) -> None:
        kind = event.get("type")
        if kind in ("broker_started", "broker_halted"):
            self.forget()
            if kind == "broker_started":
                self.last_started_ms = event["t_ms"]
        elif kind == "replica_state":
            self.partitions = {p: dict(s) for p, s in event["partitions"].items()}
        elif kind == "controller_elected":
            self.controller_epoch = event["controller_epoch"]
        elif kind == "controller_resigned":
            self.controller_epoch = None
        elif kind == "replicas_stopped" and event.get("delete"):
            # the replicas left the broker (a reassignment's removed replica, a deleted
            # topic): the simulation's snapshot no longer lists them, and a broker left
            # with none writes no further sample to say so
            for name in event["partitions"]:
                self.partitions.pop(name, None)
        elif kind in _REPLICA_EVENTS:
            state = self.partitions.setdefault(event["partition"], _unknown_replica())
            if kind == "became_leader":
                event = {**event, "leader": self.broker}  # the event is the leader's own: it names no leader
            _REPLICA_EVENTS[kind](state, event)


    def forget(self) -> None:
        self.partitions = {}
        self.controller_epoch = None


def _unknown_replica() -> dict:
    return {"role": "offline", "leader": -1, "leader_epoch": -1, "isr": [], "log_end_offset": 0,
            "high_watermark": 0, "log_start_offset": 0, "durable_offset": 0}


def _became_leader(state: dict, event: dict) -> None:
    state.update(role="leader", leader=event["leader"], leader_epoch=event["leader_epoch"], isr=event["isr"],
                 log_end_offset=event["log_end_offset"], high_watermark=event["high_watermark"])


def _became_follower(state: dict, event: dict) -> None:
    state.update(role="follower", leader=event["leader"], leader_epoch=event["leader_epoch"], isr=[],
                 log_end_offset=event["log_end_offset"], high_watermark=event["high_watermark"])


def _isr_changed(state: dict, event: dict) -> None:
    state["isr"] = event["isr"]


def _high_watermark_advanced(state: dict, event: dict) -> None:
    state["high_watermark"] = event["high_watermark"]
    state["log_end_offset"] = max(state["log_end_offset"], event["high_watermark"])


_REPLICA_EVENTS: dict[str, Callable[[dict, dict], None]] = {
    "became_leader": _became_leader, "became_follower": _became_follower, "isr_shrunk": _isr_changed,
    "isr_expanded": _isr_changed, "high_watermark_advanced": _high_watermark_advanced,
}


class TraceClusterView:
    """``view()`` for the fault executor and the triggers, over every broker's trace."""

    def __init__(self, traces: dict[int, Path], running: Callable[[int], int | None], partitions: list[str]):
        """``running(broker)``: while the process runs and is not paused, when it was
        started (ms on the traces' clock), else None. Until the trace says
        ``broker_started`` at or after that time, the running process has said nothing
        of itself yet, and what an earlier, killed one said (a SIGKILL writes nothing)
        is not shown."""
        self.tails = {broker: TraceTail(broker, path) for broker, path in sorted(traces.items())}
        self.running = running
        self.partitions = partitions

    def __call__(self) -> dict:
        states: dict[int, dict[str, dict]] = {}
        best: tuple[int, int] | None = None
        for broker, tail in self.tails.items():
            tail.poll()
            started_ms = self.running(broker)
            if started_ms is None or tail.last_started_ms is None or tail.last_started_ms < started_ms:
                continue
            states[broker] = tail.partitions
            epoch = tail.controller_epoch
            if epoch is not None and (best is None or epoch > best[1]):
                best = (broker, epoch)
        return cluster_view(best[0] if best else None, states, self.partitions)
