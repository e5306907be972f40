"""One ``isrlab serve`` child process of a real scenario run, and the signals a real
machine can send it: SIGKILL (crash), SIGTERM (a clean shutdown), SIGSTOP/SIGCONT
(pause, resume), and a start on the same port and data directory (restart).

Every incarnation writes its trace to the same file on the run's clock
(``--clock-origin``), so the broker's events and the clients' share one time axis.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

_LISTENING = re.compile(r"listening on ([\d.]+):(\d+)")


class BrokerStartFailed(Exception):
    """The broker process exited or stayed silent instead of listening."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now; every incarnation of the broker reuses it, so the
    clients' bootstrap address stays valid across restarts."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def config_argument(key: str, value) -> str:
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return f"{key}={text}"


class BrokerProcess:
    def __init__(self, broker_id: int, data_dir: Path, port: int, trace: Path, config: dict,
                 clock_origin: float, stderr_path: Path, zk: str | None = None, zk_session_file: Path | None = None,
                 peers: dict[int, str] | None = None, advertise: dict[int, str] | None = None,
                 profile: str | None = None):
        """``zk`` (HOST:PORT[/CHROOT]) runs the broker on ZooKeeper; it publishes each of
        its sessions to ``zk_session_file`` (for expire_session). ``peers`` and
        ``advertise`` (broker id -> "HOST:PORT") and ``profile`` are serve's --peer,
        --advertise and --profile: a broker of a cluster."""
        self.broker_id = broker_id
        self.port = port
        self.args = [sys.executable, "-m", "isrlab", "serve", "--broker-id", str(broker_id),
                     "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}", "--trace", str(trace),
                     "--clock-origin", repr(clock_origin)]
        for key in sorted(config):
            self.args += ["--config", config_argument(key, config[key])]
        if zk is not None:
            self.args += ["--zk", zk]
            if zk_session_file is not None:
                self.args += ["--zk-session-file", str(zk_session_file)]
                zk_session_file.unlink(missing_ok=True)
        for option, addresses in (("--peer", peers), ("--advertise", advertise)):
            for peer in sorted(addresses or {}):
                self.args += [option, f"{peer}={addresses[peer]}"]
        if profile is not None:
            self.args += ["--profile", profile]
        self.zk_session_file = zk_session_file
        self.stderr_path = stderr_path
        self.process: subprocess.Popen | None = None
        self.paused = False
        self._ready = threading.Event()
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """The process runs (possibly paused): a crash or shutdown has not ended it."""
        return self.process is not None and self.process.poll() is None

    @property
    def ready(self) -> bool:
        """Alive, not paused, and it said it listens."""
        return self.alive and not self.paused and self._ready.is_set()

    def start(self) -> None:
        """Start an incarnation; returns at once (``wait_ready`` waits for it to listen)."""
        with self._lock:
            self._ready.clear()
            self.paused = False
            with open(self.stderr_path, "ab") as stderr:
                self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
            threading.Thread(target=self._watch, args=(self.process,), daemon=True).start()

    def _watch(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            if _LISTENING.search(line):
                self._ready.set()
        process.stdout.close()

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ready.wait(0.05):
                return True
            if not self.alive:
                return False
        return False

    def last_words(self) -> str | None:
        """The last line the process wrote to stderr, once it has exited; else None."""
        if self.alive:
            return None
        try:
            lines = self.stderr_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return None
        return lines[-1].strip() if lines else None

    def kill(self) -> None:
        """SIGKILL: the process dies at once; what it wrote stays in the page cache."""
        with self._lock:
            if self.alive:
                self.process.send_signal(signal.SIGKILL)
                self.process.wait()
            self.paused = False

    def terminate(self) -> None:
        """SIGTERM: the broker's controlled shutdown; it exits by itself."""
        with self._lock:
            if self.alive:
                if self.paused:  # a stopped process handles SIGTERM only once it runs
                    self.process.send_signal(signal.SIGCONT)
                    self.paused = False
                self.process.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout_s: float) -> bool:
        if self.process is None:
            return True
        try:
            self.process.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def pause(self) -> None:
        with self._lock:
            if self.alive and not self.paused:
                self.process.send_signal(signal.SIGSTOP)
                self.paused = True

    def resume(self) -> None:
        with self._lock:
            if self.alive and self.paused:
                self.process.send_signal(signal.SIGCONT)
            self.paused = False

    def stop(self, timeout_s: float = 30.0) -> None:
        """The end of the run: a clean stop, a kill if it does not come."""
        self.terminate()
        if not self.wait_exit(timeout_s):
            self.kill()
