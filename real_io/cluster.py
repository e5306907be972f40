"""A local cluster of real processes: one ZooKeeper and N ``isrlab serve`` brokers
(``isrlab cluster up|status|down``, and the real scenario runner's cluster).

``LocalCluster`` starts ZooKeeper (real_io/zk_server.py), then the brokers
(real_io/broker_process.py), waits until every broker listens, and keeps
``DIR/cluster.json`` up to date: every process it started, with its pid and start time
(real_io/process_identity.py), its ports, the ZooKeeper connect string and the
bootstrap address. Whatever stops the cluster (``stop``, leaving a ``with`` block, an
interrupted start, ``isrlab cluster down`` in another process) stops exactly the
processes that file names, brokers first and ZooKeeper last, and signals a pid only
while it still names the process that was started.

Every address one node uses to reach another comes from ``link_address``: today the
destination's own port; a fault proxy on every link replaces it there alone.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from broker_core.config import broker_config
from broker_core.coordination import BROKER_IDS_PATH
from broker_core.errors import ConfigError
from faults.nodes import SERVICE_NODE, broker_id_of, broker_node
from real_io import lossy_mount, process_identity, zk_server
from real_io.broker_process import BrokerProcess
from real_io.ports import free_port, port_in_use
from real_io.fault_proxy_client import FaultProxyClient, FaultProxyError, FaultProxyProcess
from real_io.lossy_mount import LossyMount
from real_io.process_identity import ProcessIdentity
from real_io.real_faults import expire_zk_session

CLUSTER_FILE = "cluster.json"
FORMAT = 1
HOST = "127.0.0.1"
CHROOT = "/isrlab"  # the brokers' metadata in ZooKeeper, under a chroot as Kafka deployments do
CLIENT_NODE = "client"  # faults/nodes.py: any name but broker-<id> and zk is a client
DEFAULT_PROFILE = "kafka-2.7"  # what isrlab serve runs when not told
READY_TIMEOUT_S = 90.0  # isrlab serve itself gives up after 60 s without becoming live
STOP_TIMEOUT_S = 30.0
ZK_TICK_MS = 2000


class ClusterError(Exception):
    """Something the operator can fix; the message says what."""


class LocalCluster:
    def __init__(self, directory: Path | str, brokers: int = 3, profile: str | None = None,
                 config: dict | None = None, *, port: int | None = None, zk_port: int | None = None,
                 zk_tick_ms: int = ZK_TICK_MS, stop_timeout_s: float = STOP_TIMEOUT_S,
                 broker_ids: list[int] | None = None, proxy: bool = False, proxy_with_launcher: bool = True,
                 sample_interval_ms: int | None = None, lossy_disks: bool = False):
        """``brokers`` brokers with ids 1..N; ``profile`` and ``config`` (Kafka-named
        overrides) go to every broker; ``port`` is the first broker's port (the others
        follow it) and ``zk_port`` ZooKeeper's, both free ports by default;
        ``stop_timeout_s``: how long a process has after SIGTERM before SIGKILL;
        ``broker_ids`` instead of 1..N (a scenario's); ``proxy``: every link through a
        fault proxy (real_io/fault_proxy.py), which exits with this process unless
        ``proxy_with_launcher`` is False (a detached ``isrlab cluster up``);
        ``sample_interval_ms``: the brokers write replica_state samples to their traces
        (real_io/sampler.py; the real scenario runner reads its view from them);
        ``lossy_disks``: each broker's data directory is a lossy file system
        (real_io/lossy_mount.py) that can lose what was not fsynced (power loss); it
        goes with this process."""
        if brokers < 1:
            raise ClusterError(f"a cluster needs at least one broker, not {brokers}")
        self.config = dict(config or {})
        try:
            broker_config(profile or DEFAULT_PROFILE, self.config)
        except ConfigError as error:
            raise ClusterError(str(error)) from None
        self.directory = Path(directory).resolve()
        self.broker_ids = sorted(broker_ids) if broker_ids is not None else list(range(1, brokers + 1))
        self.proxy_wanted = proxy
        self.proxy_with_launcher = proxy_with_launcher
        self.proxy_process: FaultProxyProcess | None = None
        self.proxy: FaultProxyClient | None = None
        self.proxy_identity: ProcessIdentity | None = None
        self._proxied: dict[tuple[str, str], str] = {}  # link -> the proxy's address for it
        self.sample_interval_ms = sample_interval_ms
        self.lossy_wanted = lossy_disks
        self.lossy_disks: dict[int, LossyMount] = {}
        self.profile = profile
        self.zk_tick_ms = zk_tick_ms
        self.origin = time.monotonic()  # every broker's trace clock: 0 ms is the launch
        self.ports = _choose_ports(self.broker_ids, port)
        self.zk_port = _choose_zk_port(zk_port, set(self.ports.values()))
        self.zookeeper: zk_server.RunningZooKeeper | None = None
        self.zk_identity: ProcessIdentity | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        self.stop_timeout_s = stop_timeout_s
        self.stopped = False
        self.stop_report: list[str] = []  # what the last stop did, one line per process
        self._began = False  # start got past its checks: there is something to stop
        self._lock = threading.RLock()

    # -- addresses ---------------------------------------------------------------------
    def link_address(self, src: str, dst: str) -> str:
        """Where node ``src`` connects to reach node ``dst`` (faults/nodes.py names).
        The one place a link's address is decided: the destination's own port, or with
        a proxy the port the proxy listens on for this link (added on first use)."""
        direct = self.direct_address(dst)
        if self.proxy is None:
            return direct
        with self._lock:
            address = self._proxied.get((src, dst))
            if address is None:
                port = self.proxy.add_link(src, dst, direct)
                address = self._proxied[(src, dst)] = f"{HOST}:{port}"
        return address

    def direct_address(self, dst: str) -> str:
        """Node ``dst``'s own address, behind any proxy."""
        if dst == SERVICE_NODE:
            return f"{HOST}:{self.zk_port}"
        broker = broker_id_of(dst)
        if broker not in self.ports:
            raise ValueError(f"no node {dst!r} in this cluster")
        return f"{HOST}:{self.ports[broker]}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.link_address(CLIENT_NODE, broker_node(b)) for b in self.broker_ids)

    @property
    def zk_hosts(self) -> str:
        """ZooKeeper as this launcher reaches it (no chroot)."""
        return f"{HOST}:{self.zk_port}"

    def zk_connect(self, broker: int) -> str:
        return self.link_address(broker_node(broker), SERVICE_NODE) + CHROOT

    def broker_dir(self, broker: int) -> Path:
        return self.directory / f"broker-{broker}"

    def serve_arguments(self, broker: int) -> list[str]:
        """The command line ``broker`` is started with."""
        return self._broker_process(broker).args

    def _broker_process(self, broker: int) -> BrokerProcess:
        node = broker_node(broker)
        listen = f"{HOST}:{self.ports[broker]}"
        peers = {o: self.link_address(node, broker_node(o)) for o in self.broker_ids if o != broker}
        # serve advertises a peer's --peer address and its own listen address unless told
        # otherwise: say so only where a client's link differs (a proxy in between).
        advertise = {o: address for o in self.broker_ids
                     if (address := self.link_address(CLIENT_NODE, broker_node(o))) != peers.get(o, listen)}
        folder = self.broker_dir(broker)
        return BrokerProcess(broker, folder / "data", self.ports[broker], folder / "trace.jsonl", self.config,
                             self.origin, folder / "stderr.log", zk=self.zk_connect(broker),
                             zk_session_file=folder / "zk-session.json", peers=peers or None,
                             advertise=advertise or None, profile=self.profile, new_session=True,
                             stdout_path=folder / "stdout.log", sample_interval_ms=self.sample_interval_ms)

    # -- starting and stopping ---------------------------------------------------------
    def __enter__(self) -> "LocalCluster":
        self._signals = _raising_on_termination()
        self._signals.__enter__()
        try:
            self.start()
        except BaseException:
            self._signals.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self._signals.__exit__(None, None, None)

    def start(self, timeout_s: float = READY_TIMEOUT_S, before_brokers: Callable[[], None] | None = None) -> None:
        """Start ZooKeeper and every broker and wait until each listens. On any failure
        or interruption (Ctrl-C, SIGTERM) everything started so far is stopped."""
        refuse_running(self.directory)
        with _raising_on_termination():
            try:
                self._start(timeout_s, before_brokers)
            except BaseException:
                self.stop()
                raise

    def _start(self, timeout_s: float, before_brokers: Callable[[], None] | None = None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._began = True
        # ZooKeeper is known by its pid file only once it answers: an interruption
        # waits for that (at most zk_server's own timeout).
        with _uninterrupted():
            try:
                self.zookeeper = zk_server.start(self.directory / "zookeeper", self.zk_port,
                                                 tick_time_ms=self.zk_tick_ms)
            except zk_server.ZooKeeperError as error:
                raise ClusterError(f"cannot start ZooKeeper: {error}") from None
            self.zk_identity = process_identity.identify(self.zookeeper.pid)
            self.write_record("starting")
        if self.proxy_wanted:
            with _uninterrupted():
                self.proxy_process = FaultProxyProcess(stderr_path=self.directory / "proxy.stderr",
                                                       with_parent=self.proxy_with_launcher)
                try:
                    self.proxy = self.proxy_process.start()
                except FaultProxyError as error:
                    raise ClusterError(f"cannot start the fault proxy: {error}") from None
                started = self.proxy_process.process
                assert started is not None  # start() returned: the process exists
                self.proxy_identity = process_identity.identify(started.pid)
                self.write_record("starting")
        if before_brokers is not None:  # ZooKeeper answers, no broker runs yet (a run's topics, its clock)
            before_brokers()
        for broker in self.broker_ids:
            with _uninterrupted():
                if self.lossy_wanted:
                    self._mount_lossy_disk(broker)
                process = self.brokers[broker] = self._broker_process(broker)
                process.start()
                self.write_record("starting")
        deadline = time.monotonic() + timeout_s
        for broker in self.broker_ids:
            process = self.brokers[broker]
            if not process.wait_ready(max(0.0, deadline - time.monotonic())):
                raise ClusterError(self._why_not_started(process, timeout_s))
        self.write_record("running")

    def _mount_lossy_disk(self, broker: int) -> None:
        folder = self.broker_dir(broker)
        (folder / "data").mkdir(parents=True, exist_ok=True)
        try:
            self.lossy_disks[broker] = lossy_mount.mount(folder / "disk", folder / "data",
                                                         log_path=folder / "lossy-fs.log")
        except lossy_mount.LossyFsError as error:
            raise ClusterError(f"cannot mount broker {broker}'s lossy file system: {error}") from None

    def _why_not_started(self, process: BrokerProcess, timeout_s: float) -> str:
        said = process.last_words()
        if said is None:
            return (f"broker {process.broker_id} did not start listening within {timeout_s:.0f}s; "
                    f"its output: {process.stderr_path}")
        hint = ""
        if "unrecognized arguments" in said and ("--peer" in said or "--profile" in said):
            hint = (" (this isrlab serve cannot replicate between brokers yet: only a one-broker cluster "
                    "without --profile runs on it)")
        return f"broker {process.broker_id} exited while starting: {said}{hint}; its output: {process.stderr_path}"

    def stop(self, timeout_s: float | None = None) -> list[str]:
        """Stop every process this cluster started, brokers first, ZooKeeper last; what
        happened to each, one line per process. Ctrl-C and SIGTERM wait until it is done."""
        with self._lock, _ignoring_termination():
            if not self._began:  # nothing started: the directory may hold another cluster's file
                return []
            if self.zookeeper is None:  # an interrupted start: its pid file is all there is
                self.zookeeper = zk_server.status(self.directory / "zookeeper")
                if self.zookeeper is not None:
                    self.zk_identity = process_identity.identify(self.zookeeper.pid)
            self.write_record("stopping")
            said = stop_recorded(self.record("stopping"), self.stop_timeout_s if timeout_s is None else timeout_s)
            for process in self.brokers.values():
                process.wait_exit(0)  # reap: the Popen learns its child is gone
            if self.proxy_process is not None:
                self.proxy_process.stop()  # stopped already by its pid: this closes the client and reaps it
                self.proxy = None
            for broker, disk in sorted(self.lossy_disks.items()):
                try:
                    disk.unmount()
                except lossy_mount.LossyFsError as error:
                    said.append(f"broker {broker}'s lossy file system: {error}")
            self.lossy_disks = {}
            self.stopped = True
            self.stop_report = said
            self.write_record("stopped")
            return said

    # -- faults (the real scenario runner's primitives) ---------------------------------
    def kill(self, broker: int) -> None:
        """SIGKILL: what the broker wrote stays in the page cache."""
        self.brokers[broker].kill()

    def pause(self, broker: int) -> None:
        self.brokers[broker].pause()

    def resume(self, broker: int) -> None:
        self.brokers[broker].resume()

    def shutdown(self, broker: int) -> None:
        """SIGTERM: the broker's controlled shutdown; it exits by itself."""
        self.brokers[broker].terminate()

    def restart(self, broker: int, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """A new incarnation on the same port, data directory and trace (after the
        running one, if any, has stopped); True once it listens. False when it exited
        instead: as Kafka 2.7 does, a broker started while its killed incarnation's
        session still holds /brokers/ids/<id> exits (``registered_brokers`` tells when
        the old session is gone; the simulation's supervisor restarts it later)."""
        with self._lock:
            process = self.brokers[broker]
            if process.alive:
                process.stop(self.stop_timeout_s)
            with _uninterrupted():
                process.start()
                self.write_record("running")
        return process.wait_ready(timeout_s)

    def expire_zk_session(self, broker: int) -> str | None:
        """Expire the broker's ZooKeeper session now (real_io/real_faults.py); None when
        done, else why not."""
        process = self.brokers[broker]
        if not process.alive:
            return f"broker {broker} is not running"
        return expire_zk_session(self.zk_hosts, process.zk_session_file)

    def registered_brokers(self, timeout_s: float = 10.0) -> list[int]:
        """The brokers registered in ZooKeeper now (/brokers/ids)."""
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError
        from kazoo.handlers.threading import KazooTimeoutError
        client = KazooClient(hosts=self.zk_hosts + CHROOT)
        try:
            client.start(timeout=timeout_s)
            return sorted(int(child) for child in client.get_children(BROKER_IDS_PATH))
        except NoNodeError:
            return []
        except KazooTimeoutError:
            raise ClusterError(f"ZooKeeper at {self.zk_hosts} did not answer within {timeout_s:.0f}s") from None
        finally:
            client.stop()
            client.close()

    def states(self) -> dict[int, str]:
        """Each broker: ``alive`` (listening), ``starting``, ``paused`` or ``down``."""
        out = {}
        for broker in self.broker_ids:
            process = self.brokers.get(broker)
            if process is None or not process.alive:
                out[broker] = "down"
            elif process.paused:
                out[broker] = "paused"
            else:
                out[broker] = "alive" if process.ready else "starting"
        return out

    # -- cluster.json --------------------------------------------------------------------
    def record(self, state: str) -> dict:
        """What ``cluster.json`` holds (docs/real-io.md describes the format)."""
        zookeeper = None
        if self.zookeeper is not None:
            zookeeper = {"directory": str(self.zookeeper.directory), "hosts": self.zk_hosts,
                         "connect": self.zk_hosts + CHROOT, "port": self.zk_port,
                         **(self.zk_identity.to_data() if self.zk_identity else {"pid": self.zookeeper.pid})}
        brokers = {}
        for broker, process in sorted(self.brokers.items()):
            brokers[str(broker)] = {
                "listen": f"{HOST}:{self.ports[broker]}", "port": self.ports[broker],
                "advertised": self.link_address(CLIENT_NODE, broker_node(broker)),
                "data_dir": str(self.broker_dir(broker) / "data"), "stdout": str(process.stdout_path),
                "stderr": str(process.stderr_path), "trace": str(self.broker_dir(broker) / "trace.jsonl"),
                "zk_session_file": str(process.zk_session_file), "argv": process.args,
                **(process.identity.to_data() if process.identity else {})}
        proxy = None
        if self.proxy_identity is not None and self.proxy is not None:
            host, port = self.proxy.address
            proxy = {"control": f"{host}:{port}", **self.proxy_identity.to_data(),
                     "links": {f"{src}->{dst}": address for (src, dst), address in sorted(self._proxied.items())}}
        return {"format": FORMAT, "state": state, "directory": str(self.directory), "profile": self.profile,
                "config": self.config, "bootstrap": self.bootstrap, "zookeeper": zookeeper, "brokers": brokers,
                "proxy": proxy,
                "launcher": {"pid": os.getpid()}, "written_at": time.time()}

    def write_record(self, state: str) -> None:
        """Replace the file whole (a reader never sees half of it)."""
        path = self.directory / CLUSTER_FILE
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.record(state), indent=2, sort_keys=True) + "\n")
        os.replace(temporary, path)


def read_record(directory: Path | str) -> dict:
    """The cluster.json of ``directory``; ClusterError when there is none or it is not one."""
    path = Path(directory).resolve() / CLUSTER_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {path.parent} (no {CLUSTER_FILE}); start one with: "
                           f"isrlab cluster up --dir {directory}") from None
    except (OSError, ValueError) as error:
        raise ClusterError(f"{path} cannot be read as a cluster file: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ClusterError(f"{path} is not a cluster file of format {FORMAT}")
    return record


def recorded_processes(record: dict) -> list[tuple[str, dict]]:
    """(name, entry) of every process the record names: brokers by id, ZooKeeper last."""
    named = [(f"broker {b}", entry) for b, entry in sorted((record.get("brokers") or {}).items(),
                                                           key=lambda item: int(item[0]))]
    if record.get("proxy"):  # after the brokers (their last words pass through it), before ZooKeeper
        named.append(("fault proxy", record["proxy"]))
    if record.get("zookeeper"):
        named.append(("ZooKeeper", record["zookeeper"]))
    return named


def running_processes(record: dict) -> list[str]:
    running = []
    for name, entry in recorded_processes(record):
        identity = _identity(entry)
        if identity is not None and process_identity.is_running(identity):
            running.append(name)
    return running


def refuse_running(directory: Path) -> None:
    if not (directory / CLUSTER_FILE).exists():
        return
    running = running_processes(read_record(directory))
    if running:
        raise ClusterError(f"a cluster is still running in {directory} ({', '.join(running)}); "
                           f"stop it first with: isrlab cluster down --dir {directory}")


def stop_recorded(record: dict, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    """Stop every process ``record`` names that is still the process started: SIGTERM,
    SIGKILL after ``timeout_s``; brokers one after another, ZooKeeper last (a broker's
    controlled shutdown needs it). One line per process saying what happened."""
    said = []
    for name, entry in recorded_processes(record):
        identity = _identity(entry)
        where = entry.get("listen") or entry.get("hosts") or entry.get("control") or "?"
        if identity is None:
            said.append(f"{name} ({where}): never started")
            continue
        outcome = process_identity.stop(identity, timeout_s)
        if outcome == "not running" and process_identity.identify(identity.pid) is not None:
            outcome = "not running (its pid now names another process, left alone)"
        said.append(f"{name} (pid {identity.pid}, {where}): {outcome}")
    zookeeper = record.get("zookeeper")
    if zookeeper and zk_server.status(zookeeper["directory"]) is None:
        (Path(zookeeper["directory"]) / zk_server.PID_FILE).unlink(missing_ok=True)
    return said


def down(directory: Path | str, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    """``isrlab cluster down``: stop what ``directory``'s cluster.json names (from any
    process: the launcher may be long gone) and mark the file stopped."""
    record = read_record(directory)
    said = stop_recorded(record, timeout_s)
    record["state"] = "stopped"
    path = Path(directory).resolve() / CLUSTER_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path)
    return said


def _identity(entry: dict) -> ProcessIdentity | None:
    try:
        return ProcessIdentity.from_data(entry)
    except (KeyError, TypeError, ValueError):
        return None


# -- ports ---------------------------------------------------------------------------------
def _choose_ports(broker_ids: list[int], first: int | None) -> dict[int, int]:
    if first is None:
        ports: dict[int, int] = {}
        while len(ports) < len(broker_ids):
            port = free_port()
            if port not in ports.values():
                ports[broker_ids[len(ports)]] = port
        return ports
    ports = {broker: first + i for i, broker in enumerate(broker_ids)}
    for broker, port in ports.items():
        if port > 65535:
            raise ClusterError(f"broker {broker} would listen on port {port}, past 65535: choose a lower --port")
        if port_in_use(port):
            raise ClusterError(f"port {port} on {HOST} (broker {broker}) is in use by another process: "
                               "choose another --port, or leave it out for free ports")
    return ports


def _choose_zk_port(port: int | None, taken: set[int]) -> int:
    if port is None:
        chosen = free_port()
        while chosen in taken:
            chosen = free_port()
        return chosen
    if port in taken or port_in_use(port):
        raise ClusterError(f"port {port} on {HOST} (ZooKeeper) is in use: choose another --zk-port, "
                           "or leave it out for a free port")
    return port


# -- signals -------------------------------------------------------------------------------
_TERMINATING = (signal.SIGTERM, signal.SIGHUP)
_INTERRUPTING = (signal.SIGINT, *_TERMINATING)


class _Deferred(threading.local):
    depth = 0  # how many _uninterrupted blocks the main thread is in
    pending: int | None = None  # a signal that arrived inside one


_deferred = _Deferred()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def _on_signal(signum, _frame) -> None:
    if _deferred.depth:
        _deferred.pending = signum
        return
    _interrupt(signum)


@contextmanager
def _raising_on_termination() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt and SIGTERM and SIGHUP raise SystemExit in the
    main thread, so that a terminated launcher unwinds and stops its cluster (their
    default action would end it at once and leave the processes running); inside an
    ``_uninterrupted`` block they wait for its end."""
    if not _on_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in _INTERRUPTING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Starting a process and recording it happen together or not at all: an exception
    raised between the fork and the record would leave a process nobody knows of."""
    _deferred.depth += 1
    try:
        yield
    finally:
        _deferred.depth -= 1
        if _deferred.depth == 0 and _deferred.pending is not None:
            signum, _deferred.pending = _deferred.pending, None
            _interrupt(signum)


@contextmanager
def _ignoring_termination() -> Iterator[None]:
    """While the cluster stops, a second Ctrl-C or SIGTERM must not cut the cleanup
    short (every step of it is bounded by a timeout)."""
    if not _on_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in _INTERRUPTING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
