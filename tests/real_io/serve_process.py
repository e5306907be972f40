"""Run ``isrlab serve`` as a child process for a test, and stop it."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"listening on ([\d.]+):(\d+)")


class ServeProcess:
    def __init__(self, data_dir: Path, broker_id: int = 1, zk: str | None = None, trace: Path | None = None,
                 config: dict | None = None, extra: tuple[str, ...] = ()):
        self.data_dir = data_dir
        self.args = [sys.executable, "-m", "isrlab", "serve", "--broker-id", str(broker_id),
                     "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *extra]
        if zk:
            self.args += ["--zk", zk]
        if trace:
            self.args += ["--trace", str(trace)]
        for key, value in sorted((config or {}).items()):
            self.args += ["--config", f"{key}={value}"]
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.stderr_path = data_dir.parent / f"{data_dir.name}.stderr"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "ServeProcess":
        self.stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(self.args, cwd=ROOT, stdout=subprocess.PIPE, stderr=self.stderr,
                                        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout_s
        line = self.process.stdout.readline()  # the first line says where it listens
        match = _LISTENING.search(line)
        if not match or time.monotonic() > deadline:
            self.kill()
            raise AssertionError(f"serve did not start: {line!r}; stderr: {self.stderr_path.read_text()}")
        self.port = int(match.group(2))
        return self

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait: the exit code."""
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        finally:
            self._close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close()

    def _close(self) -> None:
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()
        self.stderr.close()
