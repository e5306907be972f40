"""The client of the fault proxy's control port (real_io/fault_proxy.py), and the proxy
process a cluster launcher starts and stops.

Blocking and thread-safe (one lock around each request and its answer), because the
callers are the launcher and the real fault executor, which run on plain threads.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Hashable, Iterable

_READY = re.compile(r"fault proxy control on ([\d.]+):(\d+)")


class FaultProxyError(Exception):
    """The proxy answered a command with an error, or could not be reached or started."""


class FaultProxyClient:
    """One connection to the control port; each method is one command."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0):
        self.address = (host, port)
        self._lock = threading.Lock()
        try:
            self._sock = socket.create_connection(self.address, timeout=timeout_s)
        except OSError as error:
            raise FaultProxyError(f"cannot reach the fault proxy at {host}:{port}: {error}") from error
        self._lines = self._sock.makefile("rb")

    def call(self, op: str, **fields) -> dict:
        """Send one command; its answer without ``ok``. Raises FaultProxyError on an error answer."""
        line = json.dumps({"op": op, **fields}).encode() + b"\n"
        with self._lock:
            try:
                self._sock.sendall(line)
                reply = self._lines.readline()
            except OSError as error:
                raise FaultProxyError(f"fault proxy connection failed during {op}: {error}") from error
        if not reply:
            raise FaultProxyError(f"the fault proxy closed the control connection during {op}")
        answer = json.loads(reply)
        if not answer.pop("ok", False):
            raise FaultProxyError(f"{op}: {answer.get('error')}")
        return answer

    def add_link(self, src: str, dst: str, target: str, port: int = 0) -> int:
        """Listen for the (src, dst) link, forwarding to ``target`` (HOST:PORT); the port
        it listens on (on 127.0.0.1), which ``src`` must connect to instead of ``target``."""
        return self.call("add_link", src=src, dst=dst, target=target, port=port)["port"]

    def remove_link(self, src: str, dst: str) -> None:
        self.call("remove_link", src=src, dst=dst)

    def state(self) -> dict:
        """Links (port, target, connections, held bytes), cuts and delays by fault id."""
        return self.call("state")

    def block(self, src: str, dst: str) -> None:
        self.call("block", src=src, dst=dst)

    def unblock(self, src: str, dst: str) -> None:
        self.call("unblock", src=src, dst=dst)

    def delay(self, src: str, dst: str, ms: float) -> None:
        """Hold each chunk from src to dst ``ms`` before forwarding it (0 ends the delay)."""
        self.call("delay", src=src, dst=dst, ms=ms)

    def reset(self, src: str, dst: str) -> int:
        """Reset every connection between the two nodes now; how many there were."""
        return self.call("reset", src=src, dst=dst)["connections"]

    def set_cuts(self, fault_id: Hashable, links: Iterable[tuple[str, str]]) -> None:
        """The fault's blocked directions, all at once (replacing what it had)."""
        self.call("set_cuts", fault_id=fault_id, links=[list(link) for link in links])

    def set_delays(self, fault_id: Hashable, links: Iterable[tuple[str, str]], ms: float) -> None:
        self.call("set_delays", fault_id=fault_id, links=[list(link) for link in links], ms=ms)

    def clear(self, fault_id: Hashable) -> bool:
        """End one fault's cuts and delays (the others' stay); whether it had any."""
        return self.call("clear", fault_id=fault_id)["had"]

    def heal(self) -> list:
        """End every cut and delay; the fault ids that had one."""
        return self.call("heal")["ended"]

    def close(self) -> None:
        self._lines.close()
        self._sock.close()

    def __enter__(self) -> FaultProxyClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FaultProxyProcess:
    """``python -m real_io.fault_proxy`` as a child of this process: it exits when this
    process dies, even by SIGKILL, and on ``stop``."""

    def __init__(self, control_port: int = 0, stderr_path: Path | None = None, with_parent: bool = True):
        """``with_parent``: the proxy exits when this process dies (a run's proxy); False
        for a cluster that outlives its launcher (``isrlab cluster up``), which
        ``isrlab cluster down`` stops by the pid the launcher recorded."""
        self.control_port = control_port
        self.stderr_path = stderr_path
        self.with_parent = with_parent
        self.process: subprocess.Popen | None = None
        self.client: FaultProxyClient | None = None

    def start(self, timeout_s: float = 10.0) -> FaultProxyClient:
        """Start the proxy, wait for its control address and connect to it."""
        args = [sys.executable, "-m", "real_io.fault_proxy", "--control-port", str(self.control_port)]
        args += ["--parent-pid", str(os.getpid())] if self.with_parent else ["--outlive-parent"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # A proxy that outlives its launcher is in a session of its own: a Ctrl-C in the
        # launcher's terminal does not reach it.
        detached = not self.with_parent
        if self.stderr_path is None:
            self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                            start_new_session=detached)
        else:
            with open(self.stderr_path, "ab") as stderr:
                self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                                start_new_session=detached)
        ready = _first_line(self.process, timeout_s)
        found = _READY.search(ready or "")
        if found is None:
            self.stop()
            raise FaultProxyError(f"the fault proxy did not start (it said {ready!r})")
        self.client = FaultProxyClient(found.group(1), int(found.group(2)))
        return self.client

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (every listener and connection closed), SIGKILL if it lingers."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _first_line(process: subprocess.Popen, timeout_s: float) -> str | None:
    """The process's first stdout line, or None if none comes in time (a reader thread,
    since a pipe's readline cannot time out)."""
    lines: list[str] = []
    stdout = process.stdout
    assert stdout is not None  # started with stdout=PIPE
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return lines[0] if lines else None
