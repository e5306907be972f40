"""Which process a pid names, so that a launcher signals only what it started.

A pid alone is not an identity: once a process is gone and reaped, the kernel hands its
pid to the next process. A file that outlives the launcher (``cluster.json``) therefore
records each pid with the process's start time (``/proc/<pid>/stat`` field 22, clock
ticks since boot), and a signal is sent only when both still match. A zombie (exited,
not yet reaped) counts as gone: a signal would do nothing.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_STOPPED_STATES = ("T", "t")  # SIGSTOP (or a tracer's stop)
_GONE_STATES = ("Z", "X")


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    start_time: int  # /proc/<pid>/stat starttime: fixed for the process's whole life

    def to_data(self) -> dict:
        return {"pid": self.pid, "start_time": self.start_time}

    @classmethod
    def from_data(cls, data: dict) -> "ProcessIdentity":
        return cls(int(data["pid"]), int(data["start_time"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of ``pid``, or None when no such process exists."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': the
    # fields that follow start after the last ')'.
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[19])


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of the running process ``pid`` (None when it is gone)."""
    stat = _stat(pid)
    if stat is None or stat[0] in _GONE_STATES:
        return None
    return ProcessIdentity(pid, stat[1])


def state(identity: ProcessIdentity) -> str:
    """``running``, ``paused`` (stopped by SIGSTOP), or ``gone`` (exited, or its pid now
    names another process)."""
    stat = _stat(identity.pid)
    if stat is None or stat[1] != identity.start_time:
        return "gone"
    if stat[0] in _GONE_STATES:
        _reap(identity.pid)  # our own child's zombie: collect it, so the pid is free again
        return "gone"
    return "paused" if stat[0] in _STOPPED_STATES else "running"


def is_running(identity: ProcessIdentity) -> bool:
    """The very process recorded still exists (possibly paused)."""
    return state(identity) != "gone"


def send(identity: ProcessIdentity, signum: int) -> bool:
    """Signal the process if it is still the one recorded; False when it is not."""
    if not is_running(identity):
        return False
    try:
        os.kill(identity.pid, signum)
    except ProcessLookupError:
        return False
    return True


def stop(identity: ProcessIdentity, timeout_s: float) -> str:
    """SIGTERM (after a SIGCONT, since a stopped process acts on SIGTERM only once it
    runs), then SIGKILL if it is still there after ``timeout_s``. Returns what happened:
    ``stopped``, ``killed`` or ``not running`` (gone before, or the pid was reused)."""
    if not send(identity, signal.SIGCONT):
        return "not running"
    send(identity, signal.SIGTERM)
    if wait_gone(identity, timeout_s):
        return "stopped"
    send(identity, signal.SIGKILL)
    wait_gone(identity, 10.0)
    return "killed"


def wait_gone(identity: ProcessIdentity, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while is_running(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status of our own child, so its zombie goes away."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
