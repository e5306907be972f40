"""The lossy file system's process: a FUSE pass-through over a backing directory that can
lose what was not fsynced (real_io.lossy_disk keeps the books), and a control socket.

Run by real_io.lossy_mount, one process per mount, never inside the broker: a kill -9 of
the broker must leave the mount and its undo information alone, as a crashed process
leaves the machine's page cache. ``python -m real_io.lossy_fs BACKING MOUNT_POINT
--control SOCKET`` mounts in the foreground until SIGTERM (or its parent's death, with
``--parent-pid``); then it unmounts, and everything becomes durable (a clean shutdown).

The control socket answers one line with one line of JSON: ``ping``, ``status`` and
``power-loss [TIMEOUT_S]``. A power loss waits until no file is open on the mount (the
kernel releases a killed process's files shortly after its death) and is refused, with
the count, if one still is: the fault is kill -9 first, then the loss.

fusepy over libfuse 2 (ctypes: nothing to compile, Debian's libfuse2 is all it needs).
Mount options, and why: ``hard_remove`` (an unlinked file still open is not renamed to
``.fuse_hidden*``, which the broker would list as a file of its own; the open handle goes
on reading by descriptor), ``attr_timeout=0``, ``entry_timeout=0`` and
``negative_timeout=0`` (after a power loss the kernel must not answer from sizes or names
it cached before it), ``big_writes`` with ``max_write=131072`` (libfuse 2 otherwise
splits writes into 4 KiB requests). Files are opened without ``keep_cache``, so the
kernel drops a file's cached pages at each open: a restarted broker reads what the loss
left. fallocate is not implemented (fusepy has no such operation): the kernel answers
EOPNOTSUPP, and real_io.files stops reserving blocks.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import signal
import socket
import sys
import threading
import time

from fuse import FUSE, FuseOSError

from real_io.lossy_disk import PENDING_DIR, LossyDisk

_HIDDEN = "/" + PENDING_DIR
_STAT_FIELDS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_blksize")
_STATVFS_FIELDS = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                   "f_favail", "f_flag", "f_namemax")
MOUNT_OPTIONS = {"foreground": True, "nothreads": False, "big_writes": True, "max_write": 131072,
                 "hard_remove": True, "attr_timeout": 0, "entry_timeout": 0, "negative_timeout": 0,
                 "fsname": "lossyfs", "subtype": "lossyfs"}


def _is_hidden(path: object) -> bool:
    return isinstance(path, str) and (path == _HIDDEN or path.startswith(_HIDDEN + "/"))


def _backing_flags(flags: int) -> int:
    """The backing file opened read-write whenever the caller may write (a change is
    undone through a copy of this descriptor), without O_APPEND (the kernel already gives
    the end of the file as the position, and Linux's pwrite would ignore it) and without
    O_TRUNC and O_CREAT (the kernel sends those as their own operations)."""
    access = os.O_RDONLY if flags & os.O_ACCMODE == os.O_RDONLY else os.O_RDWR
    return access | (flags & ~(os.O_ACCMODE | os.O_APPEND | os.O_TRUNC | os.O_CREAT | os.O_EXCL))


class LossyOperations:
    """fusepy's operations: each is the system call on the backing directory, changes
    through LossyDisk. fusepy turns an OSError into its errno for the kernel."""
    use_ns = True
    flag_nullpath_ok = 1  # operations on an open, unlinked file get no path: they use the descriptor

    def __init__(self, disk: LossyDisk):
        self.disk = disk
        self._handles_lock = threading.Lock()
        self.open_handles = 0

    def __call__(self, operation: str, *args):
        if any(_is_hidden(arg) for arg in args):
            raise FuseOSError(errno.ENOENT)
        return getattr(self, operation)(*args)

    def _opened(self, fd: int) -> int:
        with self._handles_lock:
            self.open_handles += 1
        return fd

    # -- reading ------------------------------------------------------------------------
    def getattr(self, path, fh=None):
        info = os.fstat(fh) if fh is not None else os.lstat(self.disk.full(path))
        attributes = {name: getattr(info, name) for name in _STAT_FIELDS}
        attributes.update(st_atime=info.st_atime_ns, st_mtime=info.st_mtime_ns, st_ctime=info.st_ctime_ns)
        return attributes

    def readdir(self, path, fh):
        names = os.listdir(self.disk.full(path))
        return [".", ".."] + [name for name in names if not (path == "/" and name == PENDING_DIR)]

    def statfs(self, path):
        info = os.statvfs(self.disk.full(path))
        return {name: getattr(info, name) for name in _STATVFS_FIELDS}

    def open(self, path, flags):
        return self._opened(os.open(self.disk.full(path), _backing_flags(flags)))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        with self._handles_lock:
            self.open_handles -= 1
        return 0

    # -- changing -----------------------------------------------------------------------
    def create(self, path, mode, fi=None):
        return self._opened(self.disk.create(path, os.O_RDWR, mode))

    def write(self, path, data, offset, fh):
        return self.disk.write(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            self.disk.truncate(fh, length)
            return 0
        fd = os.open(self.disk.full(path), os.O_RDWR)
        try:
            self.disk.truncate(fd, length)
        finally:
            os.close(fd)
        return 0

    def fsync(self, path, datasync, fh):
        self.disk.synced(fh)
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        if path is None:
            return 0  # a directory removed meanwhile: nothing of it to make durable
        self.disk.synced_directory(path)
        fd = os.open(self.disk.full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def mkdir(self, path, mode):
        self.disk.mkdir(path, mode)
        return 0

    def rmdir(self, path):
        self.disk.rmdir(path)
        return 0

    def unlink(self, path):
        self.disk.unlink(path)
        return 0

    def rename(self, old, new):
        self.disk.rename(old, new)
        return 0

    # -- passed through, never reverted (not modelled: lossy_disk's docstring) ---------
    def chmod(self, path, mode):
        os.chmod(self.disk.full(path), mode)
        return 0

    def chown(self, path, uid, gid):
        os.chown(self.disk.full(path), uid, gid)
        return 0

    def utimens(self, path, times=None):
        os.utime(self.disk.full(path), ns=times)
        return 0


# -- the control socket -----------------------------------------------------------------
def _answer(operations: LossyOperations, line: str) -> dict:
    command, _, argument = line.strip().partition(" ")
    if command == "ping":
        return {"ok": True}
    if command == "status":
        return {"ok": True, "open_handles": operations.open_handles, **operations.disk.pending()}
    if command == "power-loss":
        deadline = time.monotonic() + float(argument or 10)
        while operations.open_handles and time.monotonic() < deadline:
            time.sleep(0.01)
        if operations.open_handles:
            return {"ok": False, "error": f"{operations.open_handles} file(s) still open on the mount: "
                                          "kill the processes using it first"}
        report = operations.disk.power_loss()
        return {"ok": True, "files_reverted": report.files_reverted, "bytes_dropped": report.bytes_dropped,
                "changes_undone": report.changes_undone}
    return {"ok": False, "error": f"unknown command {command!r}"}


def serve_control(listener: socket.socket, operations: LossyOperations) -> None:
    """One connection at a time: faults are rare, and a power loss must not race another."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return  # closed at exit
        with connection:
            connection.settimeout(30)
            try:
                line = connection.makefile("r").readline()
                try:
                    reply = _answer(operations, line)
                except (OSError, ValueError) as exc:
                    reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                connection.sendall((json.dumps(reply) + "\n").encode())
            except OSError:
                pass  # the asker went away: nothing to tell it


def _die_with(parent_pid: int) -> None:
    """SIGTERM (a clean unmount) when the parent dies, so that a launcher killed without
    its cleanup leaves no mount behind."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:
        sys.exit("lossyfs: the parent died before the mount")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_io.lossy_fs")
    parser.add_argument("backing")
    parser.add_argument("mount_point")
    parser.add_argument("--control", required=True, help="the control socket's path")
    parser.add_argument("--parent-pid", type=int, help="unmount when this process (the parent) dies")
    args = parser.parse_args(argv)
    if args.parent_pid:
        _die_with(args.parent_pid)
    disk = LossyDisk(args.backing)
    operations = LossyOperations(disk)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(args.control):
        os.unlink(args.control)
    listener.bind(args.control)
    listener.listen()
    threading.Thread(target=serve_control, args=(listener, operations), daemon=True, name="control").start()
    try:
        FUSE(operations, args.mount_point, **MOUNT_OPTIONS)
    finally:
        listener.close()
        try:
            os.unlink(args.control)
        except FileNotFoundError:
            pass
        disk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
