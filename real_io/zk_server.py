"""A local standalone ZooKeeper for the real-I/O binding, run from Debian's ``zookeeper``
package (``isrlab zk start|stop``, and the tests' fixture).

The server listens on 127.0.0.1 only. Its directory holds the ``zoo.cfg`` written here,
the data directory, the server's output (``zookeeper.log``) and a pid file, so that
``stop`` finds the process ``start`` left running.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from real_io.ports import port_in_use

HOST = "127.0.0.1"
DEFAULT_PORT = 2181
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
CONF_DIR = Path("/etc/zookeeper/conf")  # the package's log4j configuration
# Debian installs the server jar here; its manifest names the jars it needs.
JAR_CANDIDATES = (Path("/usr/share/java/zookeeper.jar"), Path("/usr/share/zookeeper/zookeeper.jar"))
INSTALL_HINT = "install it with: apt-get update && apt-get install -y zookeeper"
PID_FILE = "zookeeper.pid"
CONFIG_FILE = "zoo.cfg"
LOG_FILE = "zookeeper.log"


class ZooKeeperError(Exception):
    """A ZooKeeper that cannot be started or stopped; the message says why."""


@dataclass(frozen=True)
class RunningZooKeeper:
    directory: Path
    host: str
    port: int
    pid: int

    @property
    def hosts(self) -> str:
        """The connect string a client (kazoo) takes."""
        return f"{self.host}:{self.port}"


def find_server_jar() -> Path:
    for jar in JAR_CANDIDATES:
        if jar.is_file():
            return jar
    raise ZooKeeperError(f"the ZooKeeper server is not installed (no {JAR_CANDIDATES[0]}); {INSTALL_HINT}")


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(f"no java on PATH: the ZooKeeper server needs a Java runtime; {INSTALL_HINT}")
    return java


def server_available() -> str | None:
    """None when java and the server jar are installed, else the reason they are not."""
    try:
        find_java()
        find_server_jar()
    except ZooKeeperError as exc:
        return str(exc)
    return None


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str | None:
    """Send one of ZooKeeper's four-letter commands; None when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(word.encode())
            chunks = []
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode(errors="replace")


def write_config(directory: Path, port: int, host: str = HOST, tick_time_ms: int = 2000) -> Path:
    data_dir = directory / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_FILE
    config.write_text("\n".join([
        f"tickTime={tick_time_ms}",
        f"dataDir={data_dir.resolve()}",
        f"clientPort={port}",
        f"clientPortAddress={host}",  # loopback only, never every interface
        "admin.enableServer=false",  # the admin HTTP server would take port 8080
        "4lw.commands.whitelist=ruok,srvr",  # ruok is how start knows the server answers
        "",
    ]))
    return config


def start(directory: Path | str, port: int = DEFAULT_PORT, host: str = HOST, timeout_s: float = 30.0,
          tick_time_ms: int = 2000) -> RunningZooKeeper:
    """Start a standalone server in ``directory`` and wait until it answers ``ruok``."""
    directory = Path(directory).resolve()
    java, jar = find_java(), find_server_jar()
    running = status(directory)
    if running is not None:
        raise ZooKeeperError(f"a ZooKeeper started from {directory} is already running (pid {running.pid}, "
                             f"{running.hosts}); stop it first with: isrlab zk stop --dir {directory}")
    if port_in_use(port, host):
        raise ZooKeeperError(f"port {port} on {host} is taken by another process; choose another with --port")
    directory.mkdir(parents=True, exist_ok=True)
    config = write_config(directory, port, host, tick_time_ms)
    classpath = f"{CONF_DIR}:{jar}" if CONF_DIR.is_dir() else str(jar)
    with open(directory / LOG_FILE, "ab") as log:
        # A session of its own: the server outlives the command that started it, and a
        # Ctrl-C in that terminal does not reach it.
        process = subprocess.Popen([java, "-cp", classpath, MAIN_CLASS, str(config)], cwd=directory,
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    (directory / PID_FILE).write_text(f"{process.pid} {host} {port}\n")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            (directory / PID_FILE).unlink(missing_ok=True)
            raise ZooKeeperError(f"ZooKeeper exited with status {process.returncode} before answering; "
                                 f"its output: {directory / LOG_FILE}\n{_tail(directory / LOG_FILE)}")
        if four_letter_word(host, port, "ruok", timeout=0.5) == "imok":
            return RunningZooKeeper(directory, host, port, process.pid)
        time.sleep(0.05)
    _terminate(process.pid)
    (directory / PID_FILE).unlink(missing_ok=True)
    raise ZooKeeperError(f"ZooKeeper did not answer on {host}:{port} within {timeout_s:g}s; "
                         f"its output: {directory / LOG_FILE}")


def status(directory: Path | str) -> RunningZooKeeper | None:
    """The server this directory's pid file names, if that process is still a ZooKeeper."""
    directory = Path(directory).resolve()
    try:
        pid_text, host, port = (directory / PID_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if not _is_zookeeper(pid):
        return None  # a stale file: the process is gone (or the pid was reused)
    return RunningZooKeeper(directory, host, int(port), pid)


def stop(directory: Path | str, timeout_s: float = 15.0) -> RunningZooKeeper:
    """Stop the server started from ``directory``: SIGTERM, then SIGKILL if it lingers."""
    directory = Path(directory).resolve()
    running = status(directory)
    if running is None:
        (directory / PID_FILE).unlink(missing_ok=True)
        raise ZooKeeperError(f"no ZooKeeper started from {directory} is running")
    _terminate(running.pid, timeout_s)
    (directory / PID_FILE).unlink(missing_ok=True)
    return running


def _terminate(pid: int, timeout_s: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while _alive(pid):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        # Reap it if it is our child (the fixture starts it in this process).
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_zookeeper(pid: int) -> bool:
    if not _alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to ask: trust the pid file
    return MAIN_CLASS.encode() in cmdline


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def negotiated_session_timeout_ms(hosts: str, asked_ms: int, timeout_s: float = 10.0) -> int:
    """The session timeout ZooKeeper grants a client that asks for ``asked_ms``: the
    server clamps it to [minSessionTimeout, maxSessionTimeout], by default 2 and 20
    ticks. Found by a handshake of ZooKeeper's own protocol (a ConnectRequest and its
    ConnectResponse, then closeSession), since kazoo does not keep the granted value.
    OSError when the first server of ``hosts`` cannot be reached."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _granted_timeout_ms(hosts, asked_ms, timeout_s)
        except _NotServing:
            # a server that has just started answers ruok before it serves sessions
            if time.monotonic() > deadline:
                raise OSError("ZooKeeper keeps closing the connection (not serving sessions)") from None
            time.sleep(0.1)


class _NotServing(OSError):
    pass


def _granted_timeout_ms(hosts: str, asked_ms: int, timeout_s: float) -> int:
    from kazoo.protocol.serialization import Connect
    server = hosts.split("/", 1)[0].split(",")[0]
    host, _, port = server.rpartition(":")
    with socket.create_connection((host or HOST, int(port)), timeout_s) as connection:
        connection.settimeout(timeout_s)
        request = bytes(Connect(0, 0, asked_ms, 0, b"\x00" * 16, False).serialize())
        connection.sendall(len(request).to_bytes(4, "big") + request)
        size = int.from_bytes(_read_exactly(connection, 4), "big", signed=True)
        if not 0 < size < 1 << 16:
            raise OSError(f"{server} did not answer as ZooKeeper does")
        reply, _ = Connect.deserialize(_read_exactly(connection, size), 0)
        close_session = (1).to_bytes(4, "big") + (-11).to_bytes(4, "big", signed=True)  # xid 1, OpCode.closeSession
        connection.sendall(len(close_session).to_bytes(4, "big") + close_session)
    return int(reply.time_out)


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise _NotServing("ZooKeeper closed the connection")
        data += chunk
    return bytes(data)
