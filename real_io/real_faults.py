"""The real executor of the fault vocabulary (faults/model.py): the process faults a
real machine allows, applied with signals to ``isrlab serve`` processes, and the
connection resets of a fault proxy when the run has one.

| fault | what the executor does |
| --- | --- |
| crash | SIGKILL; memory is lost, the page cache keeps every write (as ``crash`` in the simulation) |
| restart | starts the process again on the same port and data directory; it recovers from its files |
| shutdown | SIGTERM: the broker's controlled shutdown, then it exits by itself |
| pause / resume | SIGSTOP / SIGCONT |
| heal | ``network``: there is no network fault to end; ``all``: resume and restart every broker |
| expire_session | on ZooKeeper only (``--zk``): another client takes the broker's session over with its id and password (published by ``isrlab serve --zk-session-file``) and closes it, so ZooKeeper expires it as it does for a client that is gone |
| reset | with a fault proxy on the links only (``proxy``): the proxy resets every connection of the links between each pair of nodes, both directions (``FaultProxyClient.reset``); the count is of TCP connections |

Everything else is refused before the run starts (``UNSUPPORTED``). The shared executor
(faults/executor.py) keeps the books, writes the fault events and resolves roles (on the
view the runner reads from the broker's metadata); this module carries its primitives
out (faults/binding.py).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable

from faults import model as fm
from faults.executor import FaultExecutor
from faults.links import Link
from real_io.broker_process import BrokerProcess
from real_io.fault_proxy_client import FaultProxyClient

SUPPORTED = frozenset({"crash", "restart", "shutdown", "pause", "resume", "heal"})
ON_ZOOKEEPER = frozenset({"expire_session"})  # supported when the broker runs on ZooKeeper
ON_PROXY = frozenset({"reset"})  # supported when a fault proxy carries every link
_NETWORK = "needs a fault-injecting proxy on the links, which the real binding does not have yet"
_DISK = "needs a faulty file system under the data directory, which the real binding does not have yet"
UNSUPPORTED = {
    "power_loss": "a real process cannot lose the page cache's unsynced bytes without cutting the machine's "
                  "power (crash, SIGKILL, keeps them)",
    "clock": "the broker reads the machine's clock, which one process cannot jump alone",
    **{kind: _NETWORK for kind in fm.KINDS if kind in fm.NETWORK_KINDS},
    "reset": "needs the fault proxy on the links (real_io/fault_proxy.py), which this run does not have",
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


def supported(on_zookeeper: bool, with_proxy: bool = False) -> frozenset:
    """The fault kinds a scenario may script on this binding."""
    return SUPPORTED | (ON_ZOOKEEPER if on_zookeeper else frozenset()) | (ON_PROXY if with_proxy else frozenset())


def nemesis_supported(on_zookeeper: bool) -> frozenset:
    """The kinds the nemesis may draw on this binding."""
    return NEMESIS_SUPPORTED | ON_ZOOKEEPER if on_zookeeper else NEMESIS_SUPPORTED

TraceFn = Callable[[str, str, dict], None]


class RealFaultBinding:
    """The primitives on ``isrlab serve`` processes. Every other primitive is one that
    ``refusal`` refuses before the executor gets to it: reaching one is a bug."""

    def __init__(self, brokers: dict[int, BrokerProcess], trace: TraceFn, view: Callable[[], dict],
                 zk: str | None = None, proxy: FaultProxyClient | None = None) -> None:
        """``proxy``: the control client of the fault proxy every link goes through,
        named by faults/nodes.py's node names; without one, no network fault is possible."""
        self.processes = brokers
        self.zk = zk
        self.proxy = proxy
        self.supported = supported(zk is not None, proxy is not None)
        self._trace = trace
        self._view = view

    def refusal(self, fault: fm.Fault) -> str | None:
        kind = fm.kind_of(fault)
        if kind in self.supported:
            return None
        return f"the real binding cannot apply {kind}: {UNSUPPORTED.get(kind, 'unknown fault')}"

    def trace(self, node: str, type_: str, fields: dict) -> None:
        self._trace(node, type_, fields)

    def cluster_view(self) -> dict:
        return self._view()

    def brokers(self) -> list[int]:
        return sorted(self.processes)

    # -- processes -------------------------------------------------------------------
    def is_alive(self, broker: int) -> bool:
        return self.processes[broker].alive

    def is_paused(self, broker: int) -> bool:
        return self.processes[broker].paused

    def crash(self, broker: int) -> None:
        self.processes[broker].kill()

    def shutdown(self, broker: int) -> None:
        self.processes[broker].terminate()  # it continues a paused process first

    def start(self, broker: int) -> bool:
        process = self.processes[broker]
        if process.alive:  # a shutdown still under way: the restart waits for the exit
            if not process.wait_exit(30.0):
                process.kill()
        process.start()
        return True

    def pause(self, broker: int) -> None:
        self.processes[broker].pause()

    def resume(self, broker: int) -> None:
        self.processes[broker].resume()

    # -- coordination ----------------------------------------------------------------
    def expire_session(self, broker: int) -> Callable[[], None] | str:
        """Expire the broker's ZooKeeper session now: only trying tells whether it had
        one, so the take-over happens here and the action after ``fault_started`` is empty."""
        process = self.processes[broker]
        why = "it is not running" if not process.alive else _expire(self.zk, process.zk_session_file)
        return why if why is not None else _nothing

    # -- network, through the fault proxy -------------------------------------------
    def network_nodes(self) -> list[str]:
        """The nodes the proxy's links join (a node on no link has no connection)."""
        if self.proxy is None:
            raise _refused("network faults")
        return sorted({node for link in self.proxy.state()["links"] for node in (link["src"], link["dst"])})

    def reset_links(self, links: set[Link]) -> int:
        """The proxy resets both directions of a pair at once: one call per pair."""
        if self.proxy is None:
            raise _refused("reset")
        return sum(self.proxy.reset(a, b) for a, b in sorted({(min(link), max(link)) for link in links}))

    # -- refused before the run (UNSUPPORTED) ----------------------------------------
    def heal_links(self) -> list[int]:
        return []  # there is no network fault to end

    def power_loss(self, broker: int) -> None:
        raise _refused("power_loss")

    def cut_links(self, fault_id: int, links: set) -> None:
        raise _refused("network faults")

    def degrade_links(self, fault_id: int, links: set, changes: dict) -> None:
        raise _refused("link")

    def restore_links(self, fault_id: int) -> None:
        raise _refused("network faults")

    def degrade_disk(self, broker: int, fault) -> None:
        raise _refused("disk faults")

    def restore_disk(self, broker: int) -> None:
        raise _refused("disk faults")

    def flip_bit(self, broker: int, partition: str, rng) -> dict | None:
        raise _refused("bit_flip")

    def shift_clock(self, broker: int, delta_ms: int) -> None:
        raise _refused("clock")

    def request_preferred_election(self, partitions) -> tuple[list[str], bool]:
        raise _refused("preferred_replica_election")

    def change_topic_config(self, topic: str, config: dict) -> dict | None:
        raise _refused("topic_config")


class RealFaultExecutor(FaultExecutor):
    """The shared executor on broker processes; the schedule, the nemesis and the final
    phase run on different threads and share its lock."""

    def __init__(self, brokers: dict[int, BrokerProcess], trace: TraceFn, view: Callable[[], dict], role_rng,
                 zk: str | None = None, proxy: FaultProxyClient | None = None) -> None:
        """``zk``: the ZooKeeper servers (HOST:PORT, no chroot) the brokers run on, if any;
        ``proxy``: the fault proxy's control client, when every link goes through one."""
        super().__init__(RealFaultBinding(brokers, trace, view, zk, proxy), role_rng, lock=threading.RLock())


def _nothing() -> None:
    pass


def _refused(what: str) -> NotImplementedError:
    return NotImplementedError(f"the real binding has no {what}: the runner refuses it before the run")


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
