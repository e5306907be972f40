"""One ``isrlab serve`` child process of a real scenario run, and the signals a real
machine can send it: SIGKILL (crash), SIGTERM (a clean shutdown), SIGSTOP/SIGCONT
(pause, resume), and a start on the same port and data directory (restart). The
launcher of a local cluster (real_io/cluster.py) starts its brokers through it too.

Every incarnation writes its trace to the same file on the run's clock
(``--clock-origin``), so the broker's events and the clients' share one time axis.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping

from real_io.process_identity import ProcessIdentity, identify

_LISTENING = re.compile(r"listening on ([\d.]+):(\d+)")


class BrokerStartFailed(Exception):
    """The broker process exited or stayed silent instead of listening."""


def config_argument(key: str, value) -> str:
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return f"{key}={text}"


def serve_arguments(broker_id: int, data_dir: Path, port: int, trace: Path, config: dict, clock_origin: float,
                    zk: str | None = None, zk_session_file: Path | None = None, *,
                    peers: Mapping[int, str] | None = None, advertise: Mapping[int, str] | None = None,
                    profile: str | None = None, sample_interval_ms: int | None = None) -> list[str]:
    """The ``isrlab serve`` command line of one broker (see ``BrokerProcess``)."""
    args = [sys.executable, "-m", "isrlab", "serve", "--broker-id", str(broker_id), "--data-dir", str(data_dir),
            "--listen", f"127.0.0.1:{port}", "--trace", str(trace), "--clock-origin", repr(clock_origin)]
    for key in sorted(config):
        args += ["--config", config_argument(key, config[key])]
    if zk is not None:
        args += ["--zk", zk]
        if zk_session_file is not None:
            args += ["--zk-session-file", str(zk_session_file)]
    for option, addresses in (("--peer", peers or {}), ("--advertise", advertise or {})):
        args += [word for other in sorted(addresses) for word in (option, f"{other}={addresses[other]}")]
    if profile is not None:
        args += ["--profile", profile]
    if sample_interval_ms is not None:
        args += ["--sample-interval-ms", str(sample_interval_ms)]
    return args


class BrokerProcess:
    def __init__(self, broker_id: int, data_dir: Path, port: int, trace: Path, config: dict,
                 clock_origin: float, stderr_path: Path, zk: str | None = None, zk_session_file: Path | None = None,
                 *, peers: Mapping[int, str] | None = None, advertise: Mapping[int, str] | None = None,
                 profile: str | None = None, new_session: bool = False, stdout_path: Path | None = None,
                 sample_interval_ms: int | None = None):
        """``zk`` (HOST:PORT[/CHROOT]) runs the broker on ZooKeeper; it publishes each of
        its sessions to ``zk_session_file`` (for expire_session). ``peers`` (broker id ->
        HOST:PORT where this broker reaches it), ``advertise`` (broker id -> what
        Metadata names) and ``profile`` are passed only when given, so a one-broker run
        needs no option an older ``serve`` lacks. ``new_session`` puts the process in a
        session of its own: a Ctrl-C in the launcher's terminal does not reach it, and it
        outlives a launcher that exits (``isrlab cluster up``). Its standard output goes to
        ``stdout_path`` (default: beside ``stderr_path``), where ``ready`` looks for the
        line saying it listens; a pipe would break once a detached launcher is gone."""
        self.broker_id = broker_id
        self.port = port
        self.args = serve_arguments(broker_id, data_dir, port, trace, config, clock_origin, zk, zk_session_file,
                                    peers=peers, advertise=advertise, profile=profile,
                                    sample_interval_ms=sample_interval_ms)
        self.zk_session_file = zk_session_file
        self.stderr_path = stderr_path
        self.stdout_path = stdout_path if stdout_path is not None else stderr_path.with_suffix(".stdout")
        self.new_session = new_session
        self.process: subprocess.Popen | None = None
        self.identity: ProcessIdentity | None = None
        self.paused = False
        self.started_at: float | None = None  # when the running (or last) process was started, monotonic
        self._stdout_offset = 0  # where this incarnation's output begins
        self._listening = False
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """The process runs (possibly paused): a crash or shutdown has not ended it."""
        return self._running() is not None

    def _running(self) -> subprocess.Popen | None:
        """The current incarnation while it runs (possibly paused); None once it has
        ended or before the first start. The signals go to it only then: a process that
        has exited and been reaped may have handed its pid on."""
        process = self.process
        return process if process is not None and process.poll() is None else None

    @property
    def ready(self) -> bool:
        """Alive, not paused, and it said it listens."""
        return self.alive and not self.paused and self._said_listening()

    def start(self) -> None:
        """Start an incarnation; returns at once (``wait_ready`` waits for it to listen)."""
        with self._lock:
            self._listening = False
            self.paused = False
            if self.zk_session_file is not None:  # an earlier incarnation's session is not this one's
                self.zk_session_file.unlink(missing_ok=True)
            self.stdout_path.parent.mkdir(parents=True, exist_ok=True)
            self.started_at = time.monotonic()
            with open(self.stderr_path, "ab") as stderr, open(self.stdout_path, "ab") as stdout:
                self._stdout_offset = stdout.tell()
                self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                                start_new_session=self.new_session)
            self.identity = identify(self.process.pid)

    def _said_listening(self) -> bool:
        """This incarnation wrote its "listening on" line (read once more until it has)."""
        if not self._listening:
            try:
                with open(self.stdout_path, "rb") as stdout:
                    stdout.seek(self._stdout_offset)
                    said = stdout.read(1 << 16).decode(errors="replace")
            except OSError:
                return False
            self._listening = _LISTENING.search(said) is not None
        return self._listening

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._said_listening():
                return True
            if not self.alive:
                return False
            time.sleep(0.05)
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
            process = self._running()
            if process is not None:
                process.send_signal(signal.SIGKILL)
                process.wait()
            self.paused = False

    def terminate(self) -> None:
        """SIGTERM: the broker's controlled shutdown; it exits by itself."""
        with self._lock:
            process = self._running()
            if process is not None:
                if self.paused:  # a stopped process handles SIGTERM only once it runs
                    process.send_signal(signal.SIGCONT)
                    self.paused = False
                process.send_signal(signal.SIGTERM)

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
            process = self._running()
            if process is not None and not self.paused:
                process.send_signal(signal.SIGSTOP)
                self.paused = True

    def resume(self) -> None:
        with self._lock:
            process = self._running()
            if process is not None and self.paused:
                process.send_signal(signal.SIGCONT)
            self.paused = False

    def stop(self, timeout_s: float = 30.0) -> None:
        """The end of the run: a clean stop, a kill if it does not come."""
        self.terminate()
        if not self.wait_exit(timeout_s):
            self.kill()
