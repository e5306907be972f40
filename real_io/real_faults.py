"""The real executor of the fault vocabulary (faults/model.py): the process faults a
real machine allows, applied with signals to ``isrlab serve`` processes.

| fault | what the executor does |
| --- | --- |
| crash | SIGKILL; memory is lost, the page cache keeps every write (as ``crash`` in the simulation) |
| restart | starts the process again on the same port and data directory; it recovers from its files |
| shutdown | SIGTERM: the broker's controlled shutdown, then it exits by itself |
| pause / resume | SIGSTOP / SIGCONT |
| crash, restart, pause, resume of a group member (``group-0-1``) | the same signals to the member's own process (real_io/real_groups.py) |
| expire_session | on ZooKeeper only (``--zk``): another client takes the broker's session over with its id and password (published by ``isrlab serve --zk-session-file``) and closes it, so ZooKeeper expires it as it does for a client that is gone |
| isolate, partition, random_halves, bridge, cut | with a fault proxy on every link (a cluster run): the proxy stops the directions ``faults/links.py`` cuts (no byte passes, the sender is not read: as packets a firewall drops and TCP sends again once healed) |
| reset | with a proxy: the proxy resets every connection of the links between each pair of nodes, both directions (``FaultProxyClient.reset``); the count is of TCP connections |
| link | with a proxy: ``latency_ms`` only (each chunk held that long); loss, duplication, reordering and jitter are refused |
| heal | ``network``: every proxy cut and delay ends; ``all``: also resume and restart every broker |
| power_loss | with a lossy file system under each data directory (real_io/lossy_fs.py): SIGKILL, then every file goes back to its last fsync |
| topic_config, client_quota, create_topic, delete_topic, create_partitions, reassign, preferred_replica_election | on ZooKeeper only (a cluster run, or ``--zk``): the nodes the admin tools write (``--zookeeper``), by the simulation's own functions (broker_core/admin_nodes.py, dynamic_config.change_topic_config, quota_config.change_client_quota) over a kazoo client in the brokers' chroot (real_io/zk_admin_store.py) |

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

from broker_core.admin_nodes import (
    add_partition_nodes, create_topic_nodes, mark_topic_deleted, request_preferred_election, write_reassignment)
from broker_core.dynamic_config import change_topic_config
from broker_core.quota_config import change_client_quota
from faults import model as fm
from faults.executor import FaultExecutor
from faults.links import Link
from real_io.broker_process import BrokerProcess
from real_io.fault_proxy_client import FaultProxyClient
from real_io.lossy_mount import LossyMount
from real_io.real_groups import RealGroupMember
from real_io.zk_admin_store import ZkAdminStore

SUPPORTED = frozenset({"crash", "restart", "shutdown", "pause", "resume", "heal"})
# the admin tools' steps: written into ZooKeeper by the functions the simulation uses
ADMIN_KINDS = frozenset({"topic_config", "client_quota", "create_topic", "delete_topic", "create_partitions",
                         "reassign", "preferred_replica_election"})
ON_ZOOKEEPER = frozenset({"expire_session"}) | ADMIN_KINDS  # supported when the broker runs on ZooKeeper
WITH_PROXY = frozenset(fm.NETWORK_KINDS) | {"reset"}  # supported with a fault proxy on every link
WITH_LOSSY_DISK = frozenset({"power_loss"})  # supported with a lossy file system under the data directories
_NETWORK = "needs a fault-injecting proxy on the links, which the real binding does not have yet"
_DISK = "needs a faulty file system under the data directory, which the real binding does not have yet"
UNSUPPORTED = {
    "power_loss": "a real process cannot lose the page cache's unsynced bytes without cutting the machine's "
                  "power (crash, SIGKILL, keeps them); a cluster run mounts a lossy file system for it",
    "clock": "the broker reads the machine's clock, which one process cannot jump alone",
    **{kind: _NETWORK for kind in fm.KINDS if kind in fm.NETWORK_KINDS},
    "slow_fsync": _DISK, "write_errors": _DISK, "disk_full": _DISK, "torn_writes": _DISK,
    "bit_flip": "flipping a bit under a running broker is not built yet",
    "reset": "needs the fault proxy on the links (real_io/fault_proxy.py), which only a cluster run has",
    "expire_session": "the embedded coordination store's session lives inside the broker process: "
                      "run with --zk HOST:PORT to expire a real ZooKeeper session",
    **{kind: "the embedded coordination store lives inside the broker process, where the run cannot write "
             "the admin tool's nodes: run with --zk HOST:PORT (a cluster run always has ZooKeeper)"
       for kind in sorted(ADMIN_KINDS)},
}
NEMESIS_SUPPORTED = frozenset({"crash", "pause", "shutdown", "crash_controller"})
# the nemesis's network kinds the proxy carries out ("link" draws loss, which it cannot)
NEMESIS_NETWORK = frozenset({"isolate", "random_halves", "bridge", "isolate_controller"})
EXPIRE_TIMEOUT_S = 10.0


def supported(on_zookeeper: bool, proxy: bool = False, lossy_disk: bool = False) -> frozenset:
    """The fault kinds a scenario may script on this binding: on ZooKeeper, with a fault
    proxy on every link, with a lossy file system under the data directories."""
    return (SUPPORTED | (ON_ZOOKEEPER if on_zookeeper else frozenset()) | (WITH_PROXY if proxy else frozenset())
            | (WITH_LOSSY_DISK if lossy_disk else frozenset()))


def nemesis_supported(on_zookeeper: bool, proxy: bool = False, lossy_disk: bool = False) -> frozenset:
    """The kinds the nemesis may draw on this binding."""
    return (NEMESIS_SUPPORTED | (ON_ZOOKEEPER if on_zookeeper else frozenset())
            | (WITH_PROXY & NEMESIS_NETWORK if proxy else frozenset())
            | (WITH_LOSSY_DISK if lossy_disk else frozenset()))

TraceFn = Callable[[str, str, dict], None]


class RealFaultBinding:
    """The primitives on ``isrlab serve`` processes. Every other primitive is one that
    ``refusal`` refuses before the executor gets to it: reaching one is a bug."""

    def __init__(self, brokers: dict[int, BrokerProcess], trace: TraceFn, view: Callable[[], dict],
                 zk: str | None = None, proxy: FaultProxyClient | None = None,
                 nodes: Callable[[], list[str]] | None = None,
                 lossy_disks: dict[int, LossyMount] | None = None, chroot: str = "",
                 members: dict[str, RealGroupMember] | None = None) -> None:
        """``zk``: the ZooKeeper servers (no chroot) the brokers run on, ``chroot`` the
        brokers' chroot in it (where the admin steps write); ``proxy``: the
        fault proxy on every link, with ``nodes`` the nodes its links join;
        ``lossy_disks``: each broker's data directory's lossy file system; ``members``:
        the scenario's group members by node name (filled before the schedule runs)."""
        self.processes = brokers
        self.members = members if members is not None else {}
        self.zk = zk
        self.chroot = chroot
        self._admin: ZkAdminStore | None = None
        self._admin_lock = threading.Lock()  # the schedule's thread and the final phase's
        self.proxy = proxy
        self._nodes = nodes
        self.lossy_disks = lossy_disks or {}
        self.supported = supported(zk is not None, proxy is not None, bool(lossy_disks))
        self._trace = trace
        self._view = view

    def refusal(self, fault: fm.Fault) -> str | None:
        kind = fm.kind_of(fault)
        if kind not in self.supported:
            return f"the real binding cannot apply {kind}: {UNSUPPORTED.get(kind, 'unknown fault')}"
        return link_refusal(fault)

    def trace(self, node: str, type_: str, fields: dict) -> None:
        self._trace(node, type_, fields)

    def cluster_view(self) -> dict:
        return self._view()

    def brokers(self) -> list[int]:
        return sorted(self.processes)

    # -- processes -------------------------------------------------------------------
    # A process is a broker (by id) or a group member (by node name, ``group-0-1``:
    # real_io/real_groups.py), as in the simulation's binding.
    def _process(self, process: int | str) -> BrokerProcess | RealGroupMember:
        return self.members[process] if isinstance(process, str) else self.processes[process]

    def is_alive(self, broker: int | str) -> bool:
        return self._process(broker).alive

    def is_paused(self, broker: int | str) -> bool:
        return self._process(broker).paused

    def crash(self, broker: int | str) -> None:
        self._process(broker).kill()

    def shutdown(self, broker: int) -> None:
        self.processes[broker].terminate()  # it continues a paused process first

    def start(self, broker: int | str) -> bool:
        if isinstance(broker, str):
            member = self.members[broker]
            if member.alive:
                return False
            member.start()
            return True
        process = self.processes[broker]
        if process.alive:  # a shutdown still under way: the restart waits for the exit
            if not process.wait_exit(30.0):
                process.kill()
        process.start()
        return True

    def pause(self, broker: int | str) -> None:
        self._process(broker).pause()

    def resume(self, broker: int | str) -> None:
        self._process(broker).resume()

    # -- coordination ----------------------------------------------------------------
    def expire_session(self, broker: int) -> Callable[[], None] | str:
        """Expire the broker's ZooKeeper session now: only trying tells whether it had
        one, so the take-over happens here and the action after ``fault_started`` is empty."""
        process = self.processes[broker]
        why = "it is not running" if not process.alive else expire_zk_session(self.zk, process.zk_session_file)
        return why if why is not None else _nothing

    # -- network (the fault proxy) ---------------------------------------------------
    def network_nodes(self) -> list[str]:
        """The nodes a cluster run names, else those the proxy's links join (a node on
        no link has no connection)."""
        proxy = self._with_proxy()
        if self._nodes is not None:
            return self._nodes()
        return sorted({node for link in proxy.state()["links"] for node in (link["src"], link["dst"])})

    def cut_links(self, fault_id: int, links: set) -> None:
        self._with_proxy().set_cuts(fault_id, sorted(links))

    def degrade_links(self, fault_id: int, links: set, changes: dict) -> None:
        """Only a delay: ``refusal`` refuses the rest before the run."""
        self._with_proxy().set_delays(fault_id, sorted(links), float(changes.get("latency_ms") or 0.0))

    def restore_links(self, fault_id: int) -> None:
        self._with_proxy().clear(fault_id)

    def heal_links(self) -> list[int]:
        if self.proxy is None:
            return []  # there is no network fault to end
        return sorted(int(fault_id) for fault_id in self.proxy.heal() if str(fault_id).isdigit())

    def reset_links(self, links: set[Link]) -> int:
        """The proxy resets both directions of a pair at once: one call per pair."""
        proxy = self._with_proxy()
        return sum(proxy.reset(a, b) for a, b in sorted({(min(link), max(link)) for link in links}))

    def _with_proxy(self) -> FaultProxyClient:
        if self.proxy is None:
            raise _refused("network faults")
        return self.proxy

    # -- power loss (the lossy file system) --------------------------------------------
    def power_loss(self, broker: int) -> None:
        """SIGKILL, then every file of the broker's data directory back to its last
        fsync (the lossy file system waits for the killed process's files to close)."""
        disk = self.lossy_disks.get(broker)
        if disk is None:
            raise _refused("power_loss")
        self.processes[broker].kill()
        disk.power_loss()

    # -- refused before the run (UNSUPPORTED) ----------------------------------------
    def degrade_disk(self, broker: int, fault) -> None:
        raise _refused("disk faults")

    def restore_disk(self, broker: int) -> None:
        raise _refused("disk faults")

    def flip_bit(self, broker: int, partition: str, rng) -> dict | None:
        raise _refused("bit_flip")

    def shift_clock(self, broker: int, delta_ms: int) -> None:
        raise _refused("clock")

    # -- admin steps: the simulation's functions (broker_core/admin_nodes.py ...) on ZooKeeper --
    def request_preferred_election(self, partitions) -> tuple[list[str], bool]:
        return request_preferred_election(self.admin_store(), partitions)

    def change_topic_config(self, topic: str, config: dict) -> dict | None:
        return change_topic_config(self.admin_store(), topic, config)

    def change_client_quota(self, entity: str, config: dict) -> dict:
        return change_client_quota(self.admin_store(), entity, config)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     assignment: dict | None) -> dict | str:
        return create_topic_nodes(self.admin_store(), topic, partitions, replication_factor, assignment)

    def delete_topic(self, topic: str) -> str | None:
        return mark_topic_deleted(self.admin_store(), topic)

    def create_partitions(self, topic: str, count: int, assignment: tuple | None) -> dict | str:
        return add_partition_nodes(self.admin_store(), topic, count, assignment)

    def reassign_partitions(self, partitions: dict[str, tuple[int, ...]]) -> str | None:
        return write_reassignment(self.admin_store(), partitions)

    def admin_store(self) -> ZkAdminStore:
        """The admin tools' ZooKeeper client (a session of its own, outside the brokers),
        opened at its first use; on the embedded store the admin steps are refused
        before the run."""
        if self.zk is None:
            raise _refused("coordination store it can write from outside the broker")
        with self._admin_lock:
            if self._admin is None:
                self._admin = ZkAdminStore.connect(self.zk, self.chroot)
            return self._admin

    def close(self) -> None:
        """End the admin tools' ZooKeeper session, if one was opened."""
        with self._admin_lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None


def link_refusal(fault: fm.Fault) -> str | None:
    """What of a link fault the proxy cannot do: it delays, it does not lose, duplicate,
    reorder or jitter (a TCP stream does not lose bytes; loss would be a reset)."""
    if not isinstance(fault, fm.LinkFault):
        return None
    unsupported = [name for name in ("jitter_ms", "loss", "duplicate", "reorder") if getattr(fault, name)]
    if unsupported:
        return (f"the real binding's fault proxy delays a link (latency) but cannot apply {', '.join(unsupported)}: "
                "a TCP connection does not lose or reorder bytes")
    return None


class RealFaultExecutor(FaultExecutor):
    """The shared executor on broker processes; the schedule, the nemesis and the final
    phase run on different threads and share its lock."""

    def __init__(self, binding: RealFaultBinding, role_rng) -> None:
        super().__init__(binding, role_rng, lock=threading.RLock())


def _nothing() -> None:
    pass


def _refused(what: str) -> NotImplementedError:
    return NotImplementedError(f"the real binding has no {what}: the runner refuses it before the run")


def expire_zk_session(zk: str | None, session_file: Path | None) -> str | None:
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
