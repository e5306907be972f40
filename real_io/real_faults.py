"""The real executor of the fault vocabulary (faults/model.py): the process faults a
real machine allows, applied with signals to ``isrlab serve`` processes.

| fault | what the executor does |
| --- | --- |
| crash | SIGKILL; memory is lost, the page cache keeps every write (as ``crash`` in the simulation) |
| restart | starts the process again on the same port and data directory; it recovers from its files |
| shutdown | SIGTERM: the broker's controlled shutdown, then it exits by itself |
| pause / resume | SIGSTOP / SIGCONT |
| heal | ``network``: there is no network fault to end; ``all``: resume and restart every broker |
| expire_session | on ZooKeeper only (``--zk``): another client takes the broker's session over with its id and password (published by ``isrlab serve --zk-session-file``) and closes it, so ZooKeeper expires it as it does for a client that is gone |

Everything else is refused before the run starts (``UNSUPPORTED``). Fault events carry
the simulation's fields (faults/events.py), so the checkers read them alike; roles
resolve with faults/roles.py on the view the runner reads from the broker's metadata.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable

from faults import model as fm
from faults.events import fault_ended_fields, fault_started_fields
from faults.roles import resolve_role
from real_io.broker_process import BrokerProcess

SUPPORTED = frozenset({"crash", "restart", "shutdown", "pause", "resume", "heal"})
ON_ZOOKEEPER = frozenset({"expire_session"})  # supported when the broker runs on ZooKeeper
_NETWORK = "needs a fault-injecting proxy on the links, which the real binding does not have yet"
_DISK = "needs a faulty file system under the data directory, which the real binding does not have yet"
UNSUPPORTED = {
    "power_loss": "a real process cannot lose the page cache's unsynced bytes without cutting the machine's "
                  "power (crash, SIGKILL, keeps them)",
    "clock": "the broker reads the machine's clock, which one process cannot jump alone",
    **{kind: _NETWORK for kind in fm.KINDS if kind in fm.NETWORK_KINDS},
    "slow_fsync": _DISK, "write_errors": _DISK, "disk_full": _DISK, "torn_writes": _DISK,
    "bit_flip": "flipping a bit under a running broker is not built yet",
    "expire_session": "the embedded coordination store's session lives inside the broker process: "
                      "run with --zk HOST:PORT to expire a real ZooKeeper session",
    "preferred_replica_election": "the embedded coordination store lives inside the broker process; "
                                  "the run cannot write its admin node",
    "topic_config": "the embedded coordination store lives inside the broker process; the run cannot write "
                    "the topic's config node and change notification",
}
NEMESIS_SUPPORTED = frozenset({"crash", "pause", "shutdown", "crash_controller"})
EXPIRE_TIMEOUT_S = 10.0


def supported(on_zookeeper: bool) -> frozenset:
    """The fault kinds a scenario may script on this binding."""
    return SUPPORTED | ON_ZOOKEEPER if on_zookeeper else SUPPORTED


def nemesis_supported(on_zookeeper: bool) -> frozenset:
    """The kinds the nemesis may draw on this binding."""
    return NEMESIS_SUPPORTED | ON_ZOOKEEPER if on_zookeeper else NEMESIS_SUPPORTED

TraceFn = Callable[[str, str, dict], None]


class RealFaultExecutor:
    def __init__(self, brokers: dict[int, BrokerProcess], trace: TraceFn, view: Callable[[], dict], role_rng,
                 zk: str | None = None):
        """``zk``: the ZooKeeper servers (HOST:PORT, no chroot) the brokers run on, if any."""
        self.brokers = brokers
        self.zk = zk
        self.supported = supported(zk is not None)
        self.trace = trace
        self.view = view
        self.role_rng = role_rng
        self.active: dict[int, fm.Fault] = {}
        self._down: dict[int, list[int]] = {}  # broker -> ids of the faults that keep it down
        self._paused: dict[int, int] = {}
        self._next_id = 0
        self._lock = threading.RLock()  # the schedule, the nemesis and the final phase share it

    # -- helpers ---------------------------------------------------------------------
    def _resolve(self, fault: fm.Fault) -> tuple[dict, list[str]]:
        roles, problems = {}, []
        view = self.view() if fm.roles_of(fault) else None
        for role in fm.roles_of(fault):
            broker, why = resolve_role(role, view, sorted(self.brokers), self.role_rng)
            roles[role] = broker
            if broker is None:
                problems.append(f"{role} resolved to no broker: {why}")
        return roles, problems

    def _targets(self, fault: fm.Fault, roles: dict) -> list[int]:
        out = []
        for ref in fm.brokers_of(fault):
            broker = roles.get(ref) if fm.is_role(ref) else ref
            if broker is not None and broker not in out:
                out.append(broker)
        return out

    def _start(self, fault, step, roles, instant=False, no_effect=None, **extra) -> int:
        self._next_id += 1
        fault_id = self._next_id
        self.trace("nemesis", "fault_started", fault_started_fields(fault_id, fault, step, roles, no_effect, **extra))
        if instant:
            self.trace("nemesis", "fault_ended", fault_ended_fields(fault_id, fault))
        else:
            self.active[fault_id] = fault
        return fault_id

    def _end(self, fault_id: int) -> None:
        fault = self.active.pop(fault_id, None)
        if fault is not None:
            self.trace("nemesis", "fault_ended", fault_ended_fields(fault_id, fault))

    # -- apply -----------------------------------------------------------------------
    def apply(self, fault: fm.Fault, step=None) -> int | None:
        """Start a fault (of the scenario's ``step``, if it is one); its id when it lasts."""
        kind = fm.kind_of(fault)
        if kind not in self.supported:  # the runner refuses these before the run: a bug if one gets here
            raise ValueError(f"the real binding cannot apply {kind}: {UNSUPPORTED.get(kind, 'unknown fault')}")
        with self._lock:
            roles, problems = self._resolve(fault)
            if problems:
                self._start(fault, step, roles, instant=True, no_effect="; ".join(problems), targets=[])
                return None
            return getattr(self, "_apply_" + kind)(fault, step, roles, self._targets(fault, roles))

    def _take_down(self, fault, step, roles, brokers: list[int], action) -> int | None:
        fault_id = self._start(fault, step, roles, instant=not brokers, targets=brokers,
                               no_effect=None if brokers else "no running broker to stop")
        for broker in brokers:
            action(self.brokers[broker])
            paused_by = self._paused.pop(broker, None)
            if paused_by is not None and paused_by not in self._paused.values():
                self._end(paused_by)  # the frozen process is gone: its pause is over
            self._down.setdefault(broker, []).append(fault_id)
        return fault_id if brokers else None

    def _apply_crash(self, fault, step, roles, targets) -> int | None:
        running = [b for b in targets if self.brokers[b].alive]
        return self._take_down(fault, step, roles, running, BrokerProcess.kill)

    def _apply_shutdown(self, fault, step, roles, targets) -> int | None:
        running = [b for b in targets if self.brokers[b].alive]
        return self._take_down(fault, step, roles, running, BrokerProcess.terminate)

    def _apply_restart(self, fault, step, roles, targets) -> None:
        self._start(fault, step, roles, instant=True, targets=targets)
        for broker in targets:
            self._restart(broker)

    def _restart(self, broker: int) -> None:
        process = self.brokers[broker]
        if process.alive and not self._down.get(broker):
            return
        if process.alive:  # a shutdown still under way: the restart waits for the exit
            if not process.wait_exit(30.0):
                process.kill()
        process.start()
        for fault_id in self._down.pop(broker, []):
            if not any(fault_id in ids for ids in self._down.values()):
                self._end(fault_id)

    def _apply_pause(self, fault, step, roles, targets) -> int | None:
        running = [b for b in targets if self.brokers[b].alive and not self.brokers[b].paused]
        fault_id = self._start(fault, step, roles, instant=not running, targets=running,
                               no_effect=None if running else "no running broker to pause")
        for broker in running:
            self.brokers[broker].pause()
            self._paused[broker] = fault_id
        return fault_id if running else None

    def _apply_resume(self, fault, step, roles, targets) -> None:
        self._start(fault, step, roles, instant=True, targets=targets)
        for broker in targets:
            self._resume(broker)

    def _resume(self, broker: int) -> None:
        fault_id = self._paused.pop(broker, None)
        self.brokers[broker].resume()
        if fault_id is not None and fault_id not in self._paused.values():
            self._end(fault_id)

    def _apply_expire_session(self, fault, step, roles, targets) -> None:
        """Expire each target's ZooKeeper session now (instant, as the simulation's
        coordination service does it). A broker that is down, or whose session is
        already gone, is named in ``no_effect``: the fault changed nothing there."""
        expired, missed = [], []
        for broker in targets:
            process = self.brokers[broker]
            why = "it is not running" if not process.alive else _expire(self.zk, process.zk_session_file)
            if why is None:
                expired.append(broker)
            else:
                missed.append(f"broker {broker}: {why}")
        self._start(fault, step, roles, instant=True, targets=expired,
                    no_effect="; ".join(missed) if not expired else None, **({"missed": missed} if missed else {}))

    def _apply_heal(self, fault, step, roles, targets) -> None:
        self._start(fault, step, roles, instant=True, scope=fault.scope)
        if fault.scope == "all":
            self.heal_everything()

    # -- undo and heal ---------------------------------------------------------------
    def undo(self, fault_id: int | None) -> None:
        """End a lasting fault early (a scenario's ``for:`` or the nemesis)."""
        with self._lock:
            fault = self.active.get(fault_id) if fault_id is not None else None
            if isinstance(fault, (fm.Crash, fm.Shutdown)):
                for broker, ids in sorted(self._down.items()):
                    if fault_id in ids:
                        self._restart(broker)
            elif isinstance(fault, fm.Pause):
                for broker, paused_by in sorted(self._paused.items()):
                    if paused_by == fault_id:
                        self._resume(broker)

    def heal_everything(self) -> None:
        """The final phase: every paused broker resumes and every stopped one restarts."""
        with self._lock:
            for broker in sorted(self._paused):
                self._resume(broker)
            for broker in sorted(self.brokers):
                if not self.brokers[broker].alive or self._down.get(broker):
                    self._restart(broker)

    def restart_all(self) -> None:
        """``final.restart: all``: every broker is killed and started again."""
        with self._lock:
            for broker in sorted(self.brokers):
                self.brokers[broker].kill()
            self.apply(fm.Restart(tuple(sorted(self.brokers))))


def _expire(zk: str | None, session_file: Path | None) -> str | None:
    """Take the session written in ``session_file`` over and close it; why not, or None.
    ZooKeeper moves the session to the new connection (the broker's own connection is
    dropped) and the close ends it: its ephemeral nodes go and the broker hears of the
    expiry when it reconnects, as after a real session timeout."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    if zk is None or session_file is None:
        return "the broker does not run on ZooKeeper"
    try:
        written = json.loads(session_file.read_text(encoding="utf-8"))
        client_id = (int(written["session_id"]), bytes.fromhex(written["password"]))
    except (OSError, ValueError, KeyError, TypeError):
        return "it has not published a ZooKeeper session yet"
    thief = KazooClient(hosts=zk, client_id=client_id)
    try:
        thief.start(timeout=EXPIRE_TIMEOUT_S)
        taken = thief.client_id is not None and thief.client_id[0] == client_id[0]
    except KazooTimeoutError:
        taken = False
    finally:
        thief.stop()  # closes whichever session the thief holds: the broker's, if it took it
        thief.close()
    # kazoo opens a new session of its own when the old one is already gone
    return None if taken else f"its session {client_id[0]:#x} was already gone"
