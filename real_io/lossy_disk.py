"""What a power loss takes from a directory: the bookkeeping behind real_io.lossy_fs.

Every operation goes through to a backing directory at once, so the backing directory
always holds what a running machine's page cache would: reads see every write, and a
kill -9 of a process loses nothing. What a power loss would take is kept as undo
information instead of as a second copy (LazyFS keeps the unsynced writes in a cache of
its own; undoing costs memory only for durable bytes that are overwritten or cut):

- per file, by inode (so that renames and unlinks do not lose track of it): its size at
  its last fsync and, for each 4 KiB block of that durable prefix changed since, the
  block's durable bytes, copied before the first change. fsync or fdatasync of the file
  forgets them (its contents are durable); ``power_loss`` cuts or extends the file back
  to the durable size and writes the saved blocks back, so each file holds exactly its
  last-fsynced contents, truncations and size changes included. A file created since its
  directory entry became durable starts from an empty durable copy.
- per namespace change (create, mkdir, unlink, rmdir, rename), a journal entry saying how
  to take it back; an unlinked file, or one a rename replaced, waits in ``PENDING_DIR``
  instead of being removed, so that it can come back. An fsync of a directory commits the
  journal up to the latest entry in that directory, in order (as a journaling file
  system commits its metadata); ``power_loss`` takes the uncommitted entries back,
  newest first. A file's own fsync does not make its name durable (POSIX's rule: the
  broker fsyncs the directory after it).

Not modelled: permissions, owners and times (passed through, never reverted); hard and
symbolic links and device nodes (not implemented); torn writes (a write is lost or kept whole, per block only as
far as the blocks saved go); and the state itself lives in the process that mounts, so a
power loss after that process dies cannot be emulated any more (the backing directory
then holds the page cache's view, as after a kill -9).
"""
from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
import threading
from dataclasses import dataclass, field
from enum import Enum

BLOCK_BYTES = 4096
PENDING_DIR = ".lossyfs-pending"  # in the backing directory's root, hidden from the mount


@dataclass
class _FileUndo:
    fd: int  # a descriptor of our own: it follows the inode through renames and unlinks
    durable_size: int
    saved: dict[int, bytes] = field(default_factory=dict)  # block number -> its durable bytes


class Change(Enum):
    CREATE = "create"
    MKDIR = "mkdir"
    UNLINK = "unlink"
    RMDIR = "rmdir"
    RENAME = "rename"


@dataclass(frozen=True)
class _Entry:
    change: Change
    path: str  # the path made (create, mkdir, rename's new name) or removed (unlink, rmdir)
    directories: frozenset[str]  # whose fsync commits this entry
    old_path: str | None = None  # rename: the old name
    kept: str | None = None  # unlink, rename over an existing file: where it waits
    kept_inode: int | None = None
    mode: int = 0o755  # rmdir: the mode to make the directory again with


@dataclass(frozen=True)
class PowerLossReport:
    """What a power loss took: the files whose contents went back, the bytes those files
    lost (what was beyond each file's durable size), the namespace changes taken back."""
    files_reverted: int
    bytes_dropped: int
    changes_undone: int


class LossyDisk:
    """The backing directory with its undo information. Paths are the mount's
    (``/t-0/00000000000000000000.log``). One lock guards the bookkeeping together with
    the change it describes, since the FUSE layer calls in from several threads."""

    def __init__(self, root: str | os.PathLike):
        self.root = os.path.realpath(root)
        self.lock = threading.Lock()
        self._files: dict[int, _FileUndo] = {}  # inode -> undo
        self._journal: list[_Entry] = []
        self._pending_count = 0
        os.makedirs(self.full(PENDING_DIR), exist_ok=True)

    def full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # -- file contents ------------------------------------------------------------------
    def _undo_for(self, fd: int, new_file: bool = False) -> _FileUndo:
        info = os.fstat(fd)
        undo = self._files.get(info.st_ino)
        if undo is None:
            # first change since the last fsync: the file is as durable as it is now
            undo = _FileUndo(os.dup(fd), 0 if new_file else info.st_size)
            self._files[info.st_ino] = undo
        return undo

    def _save(self, undo: _FileUndo, start: int, end: int) -> None:
        """The durable bytes of the blocks that [start, end) touches, before they change."""
        end = min(end, undo.durable_size)
        for block in range(start // BLOCK_BYTES, (end + BLOCK_BYTES - 1) // BLOCK_BYTES):
            if block not in undo.saved:
                position = block * BLOCK_BYTES
                size = min(BLOCK_BYTES, undo.durable_size - position)
                undo.saved[block] = os.pread(undo.fd, size, position)

    def write(self, fd: int, data: bytes, position: int) -> int:
        with self.lock:
            self._save(self._undo_for(fd), position, position + len(data))
            return os.pwrite(fd, data, position)

    def truncate(self, fd: int, size: int) -> None:
        with self.lock:
            undo = self._undo_for(fd)
            self._save(undo, size, undo.durable_size)
            os.ftruncate(fd, size)

    def synced(self, fd: int) -> None:
        """The file behind ``fd`` was fsynced: its contents now are durable. Called when
        the fsync starts: a write racing with it may or may not be durable, and is
        taken as durable (a real fsync in flight at a power loss is the same gamble)."""
        with self.lock:
            undo = self._files.pop(os.fstat(fd).st_ino, None)
        if undo is not None:
            os.close(undo.fd)

    # -- the namespace ------------------------------------------------------------------
    def _log(self, entry: _Entry) -> None:
        self._journal.append(entry)

    def create(self, path: str, flags: int, mode: int) -> int:
        with self.lock:
            fd = os.open(self.full(path), flags | os.O_CREAT | os.O_EXCL, mode)
            self._undo_for(fd, new_file=True)
            self._log(_Entry(Change.CREATE, path, frozenset({posixpath.dirname(path)})))
            return fd

    def mkdir(self, path: str, mode: int) -> None:
        with self.lock:
            os.mkdir(self.full(path), mode)
            self._log(_Entry(Change.MKDIR, path, frozenset({posixpath.dirname(path)})))

    def rmdir(self, path: str) -> None:
        with self.lock:
            mode = stat.S_IMODE(os.lstat(self.full(path)).st_mode)
            os.rmdir(self.full(path))
            self._log(_Entry(Change.RMDIR, path, frozenset({posixpath.dirname(path)}), mode=mode))

    def unlink(self, path: str) -> None:
        with self.lock:
            kept, inode = self._keep(path)
            self._log(_Entry(Change.UNLINK, path, frozenset({posixpath.dirname(path)}), kept=kept, kept_inode=inode))

    def _keep(self, path: str) -> tuple[str, int]:
        """Move ``path`` aside, where it waits until its removal is durable."""
        self._pending_count += 1
        kept = f"/{PENDING_DIR}/{self._pending_count}"
        inode = os.lstat(self.full(path)).st_ino
        os.rename(self.full(path), self.full(kept))
        return kept, inode

    def rename(self, old: str, new: str) -> None:
        if old == new:
            os.lstat(self.full(old))  # rename(2) of a name to itself: nothing, if it exists
            return
        with self.lock:
            old_full, new_full = self.full(old), self.full(new)
            old_info = os.lstat(old_full)  # a missing source fails here, as rename would
            kept = inode = None
            if os.path.lexists(new_full):
                _check_replaceable(old_info, os.lstat(new_full), new_full)
                kept, inode = self._keep(new)
            try:
                os.rename(old_full, new_full)
            except OSError:
                if kept is not None:
                    os.rename(self.full(kept), new_full)
                raise
            directories = frozenset({posixpath.dirname(old), posixpath.dirname(new)})
            self._log(_Entry(Change.RENAME, new, directories, old_path=old, kept=kept, kept_inode=inode))

    def synced_directory(self, path: str) -> None:
        """An fsync of directory ``path``: the journal is durable up to its latest entry
        there (the ones before it too, in order, as a journal commits)."""
        with self.lock:
            last = max((i for i, e in enumerate(self._journal) if path in e.directories), default=-1)
            committed, self._journal = self._journal[:last + 1], self._journal[last + 1:]
            for entry in committed:
                self._forget_kept(entry)

    def _forget_kept(self, entry: _Entry) -> None:
        """A removal became durable: the file kept for it goes for good."""
        if entry.kept is None:
            return
        undo = self._files.pop(entry.kept_inode, None) if entry.kept_inode is not None else None
        if undo is not None:
            os.close(undo.fd)
        kept = self.full(entry.kept)
        if os.path.isdir(kept) and not os.path.islink(kept):
            shutil.rmtree(kept, ignore_errors=True)
        else:
            os.unlink(kept)

    # -- the fault ----------------------------------------------------------------------
    def power_loss(self) -> PowerLossReport:
        """Every file back to its last fsync, then every uncommitted namespace change
        taken back, newest first. Nothing may have a file open meanwhile (the FUSE layer
        checks): the broker is killed first."""
        with self.lock:
            dropped = 0
            for inode in sorted(self._files):
                undo = self._files[inode]
                dropped += max(0, os.fstat(undo.fd).st_size - undo.durable_size)
                os.ftruncate(undo.fd, undo.durable_size)
                for block in sorted(undo.saved):
                    os.pwrite(undo.fd, undo.saved[block], block * BLOCK_BYTES)
                os.close(undo.fd)
            report = PowerLossReport(len(self._files), dropped, len(self._journal))
            self._files.clear()
            for entry in reversed(self._journal):
                self._undo(entry)
            self._journal.clear()
            return report

    def _undo(self, entry: _Entry) -> None:
        if entry.change is Change.CREATE:
            os.unlink(self.full(entry.path))
        elif entry.change is Change.MKDIR:
            shutil.rmtree(self.full(entry.path))  # empty by now: what was made in it went first
        elif entry.change is Change.RMDIR:
            os.mkdir(self.full(entry.path), entry.mode)
        elif entry.change is Change.UNLINK:
            assert entry.kept is not None  # an unlink always keeps what it removed
            os.rename(self.full(entry.kept), self.full(entry.path))
        elif entry.change is Change.RENAME:
            assert entry.old_path is not None  # a rename always has its old name
            os.rename(self.full(entry.path), self.full(entry.old_path))
            if entry.kept is not None:
                os.rename(self.full(entry.kept), self.full(entry.path))
        else:  # pragma: no cover - every Change is handled above
            raise AssertionError(entry.change)

    def close(self) -> None:
        """A clean unmount, as a clean shutdown: everything becomes durable."""
        with self.lock:
            for undo in self._files.values():
                os.close(undo.fd)
            self._files.clear()
            for entry in self._journal:
                self._forget_kept(entry)
            self._journal.clear()
            shutil.rmtree(self.full(PENDING_DIR), ignore_errors=True)

    def pending(self) -> dict[str, int]:
        """How much a power loss would take now (files with unsynced changes, namespace
        changes not yet durable)."""
        with self.lock:
            return {"dirty_files": len(self._files), "uncommitted_changes": len(self._journal)}


def _check_replaceable(old: os.stat_result, new: os.stat_result, new_full: str) -> None:
    """rename(2)'s refusals when the target exists, checked before the target is moved
    aside (so that a refused rename leaves everything as it was)."""
    if stat.S_ISDIR(new.st_mode) and not stat.S_ISDIR(old.st_mode):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), new_full)
    if stat.S_ISDIR(old.st_mode) and not stat.S_ISDIR(new.st_mode):
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), new_full)
    if stat.S_ISDIR(new.st_mode) and os.listdir(new_full):
        raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), new_full)
