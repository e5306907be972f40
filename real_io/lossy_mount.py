"""Power loss for real files: mount a lossy file system over a broker's data directory,
lose what was not fsynced, unmount. What the cluster launcher uses, per broker:

    reason = available()               # None, or why this machine cannot (refuse the fault)
    fs = mount(backing_dir, data_dir)  # its own process: a kill -9 of the broker leaves it be
    ...                                # the broker runs with --data-dir data_dir
    broker.kill()                      # kill -9 first: a power loss takes the whole machine
    fs.power_loss()                    # every file back to its last fsync (real_io.lossy_disk)
    ...                                # restart the broker on data_dir: it recovers
    fs.unmount()                       # clean: what is in the backing directory stays

The file system itself is real_io.lossy_fs (FUSE, through fusepy and libfuse 2).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MNT_DETACH = 2
_probed: dict[str, str | None] = {}


class LossyFsError(Exception):
    """The lossy file system could not do what was asked (mount, lose power, unmount)."""


def available(probe: bool = False) -> str | None:
    """None when power loss can be emulated here, else the reason it cannot, for a fault
    to be refused with (never skipped silently). ``probe`` mounts and unmounts a scratch
    file system once per process, which catches what the static checks cannot (a
    container without the right to mount)."""
    reason = _static_reason()
    if reason is not None or not probe:
        return reason
    if "probe" not in _probed:
        _probed["probe"] = _probe()
    return _probed["probe"]


def _static_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"power loss needs FUSE on Linux; this is {sys.platform}"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine (a container needs --device /dev/fuse)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if ctypes.util.find_library("fuse") is None:
        return "libfuse 2 is not installed (make lossyfs; Debian: apt-get install libfuse2)"
    try:
        import fuse  # noqa: F401
    except ImportError:
        return "fusepy is not installed (pip install fusepy; make lossyfs)"
    except OSError as exc:  # fusepy raises EnvironmentError when it cannot load libfuse
        return f"fusepy cannot load libfuse: {exc}"
    if os.geteuid() != 0 and shutil.which("fusermount") is None:
        return "mounting without root needs fusermount (Debian's fuse package)"
    return None


def _probe() -> str | None:
    with tempfile.TemporaryDirectory(prefix="lossyfs-probe-") as scratch:
        backing, mount_point = Path(scratch, "backing"), Path(scratch, "mount")
        backing.mkdir()
        mount_point.mkdir()
        try:
            mount(backing, mount_point, timeout_s=10).unmount()
        except LossyFsError as exc:
            return str(exc)
    return None


def is_mounted(mount_point: str | os.PathLike) -> bool:
    """Whether /proc/mounts lists ``mount_point`` (a stale mount whose process died too)."""
    target = os.path.realpath(mount_point)
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 1 and _unescape(fields[1]) == target:
                return True
    return False


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    for escaped, character in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, character)
    return field


def mount(backing_dir: str | os.PathLike, mount_point: str | os.PathLike, *, log_path: str | os.PathLike | None = None,
          die_with_parent: bool = True, timeout_s: float = 10.0) -> "LossyMount":
    """Mount ``backing_dir`` at ``mount_point`` in a process of its own; returns when the
    mount answers. ``log_path`` takes that process's output (by default a file beside
    the mount point); with ``die_with_parent`` it unmounts when this process dies."""
    backing, target = Path(backing_dir).resolve(), Path(mount_point).resolve()
    reason = _static_reason()
    if reason is not None:
        raise LossyFsError(f"cannot emulate power loss: {reason}")
    if is_mounted(target):
        raise LossyFsError(f"{target} is already a mount point")
    backing.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    control = target.with_name(f".{target.name}.lossyfs.sock")
    log = Path(log_path) if log_path is not None else target.with_name(f"{target.name}.lossyfs.log")
    args = [sys.executable, "-m", "real_io.lossy_fs", str(backing), str(target), "--control", str(control)]
    if die_with_parent:
        args += ["--parent-pid", str(os.getpid())]
    with open(log, "ab") as output:
        process = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                   start_new_session=True)  # the broker's signals and Ctrl-C never reach it
    handle = LossyMount(backing, target, control, process.pid, process)
    deadline = time.monotonic() + timeout_s
    while not (is_mounted(target) and handle._ping()):
        if process.poll() is not None or time.monotonic() > deadline:
            handle.unmount()
            raise LossyFsError(f"mounting {target} failed: {_tail(log)}")
        time.sleep(0.02)
    return handle


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(the mount process said nothing)"


class LossyMount:
    """One mounted lossy file system. Built by ``mount``; another process can build one
    from the same four facts (the process id is what ``unmount`` signals)."""

    def __init__(self, backing_dir: Path, mount_point: Path, control_path: Path, pid: int,
                 process: subprocess.Popen | None = None):
        self.backing_dir = backing_dir
        self.mount_point = mount_point
        self.control_path = control_path
        self.pid = pid
        self._process = process

    def _request(self, line: str, timeout_s: float) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout_s)
            connection.connect(str(self.control_path))
            connection.sendall(line.encode() + b"\n")
            reply = connection.makefile("r").readline()
        if not reply:
            raise LossyFsError(f"the lossy file system at {self.mount_point} did not answer {line!r}")
        return json.loads(reply)

    def _ping(self) -> bool:
        try:
            return bool(self._request("ping", 1.0).get("ok"))
        except OSError:
            return False

    def status(self) -> dict:
        """Open files, files with unsynced changes, namespace changes not yet durable."""
        return self._checked("status", 10.0)

    def power_loss(self, timeout_s: float = 10.0) -> dict:
        """Lose what was not fsynced. The processes using the mount must be dead (kill -9):
        refused (LossyFsError) while a file stays open after ``timeout_s``. Returns what
        was lost: files_reverted, bytes_dropped, changes_undone."""
        return self._checked(f"power-loss {timeout_s}", timeout_s + 30.0)

    def _checked(self, line: str, timeout_s: float) -> dict:
        try:
            reply = self._request(line, timeout_s)
        except OSError as exc:
            raise LossyFsError(f"the lossy file system at {self.mount_point} is gone: {exc}") from None
        if not reply.get("ok"):
            raise LossyFsError(f"{line.split()[0]} refused at {self.mount_point}: {reply.get('error')}")
        return {key: value for key, value in reply.items() if key != "ok"}

    def unmount(self, timeout_s: float = 10.0) -> None:
        """SIGTERM: the process unmounts, and what the backing directory holds stays. A
        process that does not go in time is killed and its mount detached, so that no
        stale mount is left in /proc/mounts either way."""
        if self._alive():
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while self._alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self._alive():
                os.kill(self.pid, signal.SIGKILL)
                self._wait(5.0)
        if is_mounted(self.mount_point):
            _detach(self.mount_point)
        if is_mounted(self.mount_point):
            raise LossyFsError(f"{self.mount_point} is still mounted")

    def _alive(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def _wait(self, timeout_s: float) -> None:
        if self._process is not None:
            self._process.wait(timeout_s)

    def __enter__(self) -> "LossyMount":
        return self

    def __exit__(self, *exc_info) -> None:
        self.unmount()


def _detach(mount_point: Path) -> None:
    """A lazy unmount (a mount whose process died answers ENOTCONN to everything)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(str(mount_point).encode(), MNT_DETACH) == 0:
            return
    fusermount = shutil.which("fusermount")
    if fusermount:
        subprocess.run([fusermount, "-u", "-z", str(mount_point)], check=False, capture_output=True, timeout=10)
