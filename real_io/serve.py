"""``isrlab serve``: one broker process on real sockets, files and coordination.

It locks the data directory, builds the node over the embedded coordination store (or
ZooKeeper with ``zk``), opens the listener, starts the node, and says it listens once the
broker knows itself live (the controller's first UpdateMetadata), so a client's first
Metadata request already names it. The listener is open before the broker registers,
as Kafka's SocketServer is bound before KafkaServer.startup registers the broker:
the controller's first requests to it come through it. SIGTERM or SIGINT asks the core
for a controlled shutdown; after it halts, every file written is fsynced and the
process exits 0.

Several such processes on one ZooKeeper are a cluster: ``peers`` says where each other
broker is reached (the core's requests to it go there, real_io/peer_channels.py) and
``advertise`` what address clients are told for each broker (by default its peer
address, and this broker's own listener for itself).
"""
from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from analysis.trace import TraceWriter
from broker_core.config import broker_config
from real_io.embedded_coordination import SNAPSHOT_FILE, EmbeddedCoordination
from real_io.files import DataDir
from real_io.listener_limits import ListenerConfigError, ListenerLimits, split_config
from real_io.protocol.apis import DEFAULT_MAX_REQUEST_BYTES
from real_io.runtime import BrokerRuntime, CoordinationPort
from real_io.sampler import start_sampler
from real_io.server import DEFAULT_CONNECTIONS_MAX_IDLE_MS, KafkaServer

LOCK_FILE = ".lock"
READY_TIMEOUT_S = 60.0
PROFILE = "kafka-2.7"  # the default behaviour profile


class ServeError(Exception):
    """A problem the operator can fix (a busy data directory, a port in use)."""


@dataclass
class ServeOptions:
    broker_id: int
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    zk: str | None = None
    trace: Path | None = None
    config: dict = field(default_factory=dict)  # Kafka-named overrides, the listener's keys among them
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    clock_origin: float | None = None  # CLOCK_MONOTONIC seconds that are t_ms 0; None: the start
    zk_session_file: Path | None = None  # where to publish each ZooKeeper session (fault injection)
    peers: dict[int, tuple[str, int]] = field(default_factory=dict)  # broker id -> where to connect to it
    advertise: dict[int, tuple[str, int]] = field(default_factory=dict)  # broker id -> the address clients get
    profile: str = PROFILE  # the core's behaviour profile (broker_core.config.PROFILES)
    sample_interval_ms: int = 0  # replica_state samples to the trace every this often (real_io/sampler.py); 0: none

    def advertised(self) -> dict[int, tuple[str, int]]:
        """Each broker's advertised address: --advertise, else its --peer address (this
        broker's own listener is added once it listens)."""
        return {**self.peers, **self.advertise}


def lock_data_dir(root: Path) -> int:
    """Kafka's LogManager lockLogDirs: one process per data directory."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ServeError(f"{root} is in use by another broker process") from None
    return fd


def _coordination(options: ServeOptions, data_dir: DataDir, session_timeout_ms: int) -> CoordinationPort:
    if options.zk is None:
        return EmbeddedCoordination(data_dir.root / SNAPSHOT_FILE)
    from real_io.coordination import ZooKeeperCoordination
    ensure_chroot(options.zk)
    return ZooKeeperCoordination(options.zk, session_timeout_ms, session_file=options.zk_session_file)


def ensure_chroot(hosts: str, timeout_s: float = 10.0) -> None:
    """A connect string's chroot is created if missing, as Kafka does before it uses
    it (2.7.0 KafkaServer.initZkClient: makeSurePersistentPathExists of the chroot)."""
    servers, slash, chroot = hosts.partition("/")
    if not slash or not chroot.strip("/"):
        return
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    client = KazooClient(hosts=servers)
    try:
        client.start(timeout=timeout_s)
        client.ensure_path("/" + chroot.strip("/"))
    except KazooTimeoutError:
        raise ServeError(f"cannot reach ZooKeeper at {servers} within {timeout_s:.0f}s") from None
    finally:
        client.stop()
        client.close()


def listener_limits(options: ServeOptions) -> tuple[dict, ListenerLimits]:
    """The core's overrides and the listener's limits (real_io/listener_limits.py keys),
    checked against ``socket.request.max.bytes``."""
    try:
        core, limits = split_config(options.config)
        limits.pool_bytes(options.max_request_bytes)
    except ListenerConfigError as error:
        raise ServeError(str(error)) from None
    return core, limits


async def serve(options: ServeOptions, on_ready: Callable[[str, int], None]) -> int:
    core_overrides, limits = listener_limits(options)
    config = broker_config(options.profile, core_overrides)
    try:
        lock = lock_data_dir(options.data_dir)
    except OSError as error:
        raise ServeError(f"cannot use the data directory {options.data_dir}: {error.strerror or error}") from None
    data_dir = DataDir(options.data_dir)
    trace_stream = _open_trace(options.trace) if options.trace else None
    writer = TraceWriter(trace_stream, f"serve-broker-{options.broker_id}", 0, "real") if trace_stream else None
    runtime = BrokerRuntime(options.broker_id, config, data_dir, _coordination(options, data_dir,
                                                                              config.zookeeper_session_timeout_ms),
                            writer, clock_origin=options.clock_origin, peers=options.peers,
                            advertised=options.advertised())
    server = KafkaServer(runtime, options.host, options.port, options.max_request_bytes,
                         options.connections_max_idle_ms, limits)
    loop = asyncio.get_running_loop()
    try:
        try:
            await server.start()
        except OSError as error:
            raise ServeError(f"cannot listen on {options.host}:{options.port}: {error.strerror or error}") from None
        runtime.advertised.setdefault(options.broker_id, (server.host, server.port))
        runtime.start()  # a request read before this is answered by closing its connection (server._ask)
        halted = runtime.halted
        assert halted is not None  # start() made it
        start_sampler(runtime, options.sample_interval_ms)
        await _until_live(runtime)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, runtime.shutdown)
        on_ready(server.host, server.port)
        halt = await halted
        return 0 if halt.requested else 1
    finally:
        await server.close()
        runtime.close()
        if trace_stream is not None:
            trace_stream.close()
        os.close(lock)


def _open_trace(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a", buffering=1, encoding="utf-8")
    except OSError as error:
        raise ServeError(f"cannot write the trace {path}: {error.strerror or error}") from None


async def _until_live(runtime: BrokerRuntime) -> None:
    """Wait for the controller's word that this broker is live, or for a halt."""
    deadline = runtime.loop.time() + READY_TIMEOUT_S
    while runtime.broker_id not in runtime.node.live_brokers():
        if not runtime.is_running:
            halt = runtime.halt_reason  # set with the halt that stopped it
            raise ServeError(f"the broker stopped while starting: {halt.reason if halt is not None else 'no reason'}")
        if runtime.loop.time() > deadline:
            raise ServeError(f"the broker did not become live within {READY_TIMEOUT_S:.0f}s "
                             "(is the coordination service reachable?)")
        await asyncio.sleep(0.01)


def run(options: ServeOptions) -> int:
    def ready(host: str, port: int) -> None:
        print(f"isrlab serve: broker {options.broker_id} listening on {host}:{port} "
              f"(data in {options.data_dir}, coordination: {options.zk or 'embedded'})", flush=True)
    try:
        return asyncio.run(serve(options, ready))
    except ServeError as error:
        print(f"isrlab: serve: {error}", file=sys.stderr)
        return 2
