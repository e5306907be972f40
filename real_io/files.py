"""The broker's data directory: the core's file effects carried out on real files.

The core names files by relative paths (``t-0/00000000000000000000.log``,
``replication-offset-checkpoint``); they live under one directory. ``WriteBytes`` writes
at a position (the page cache holds it until an fsync), ``TruncateFile`` and
``DeleteFile`` do what they say, ``ReplaceFile`` replaces a small file atomically and
durably (write a temporary file, fsync it, rename it over the old one, fsync the
directory), and ``fsync`` (run on a worker thread by the runtime, which hands the core
``FsyncCompleted``) makes a file's bytes durable. A path that leaves the directory is
refused: the core never names one, and a bug must not write elsewhere.

It is also the core's storage port (broker_core.storage.LogStorage) over the same
files: segments hold record batches v2 exactly as clients receive them
(real_io.wire_batch), so the read side lists files, reads a checkpoint, decodes the
batch at a position (recovery's CRC scan), reads a batch's header alone (a fetch from a
sealed segment, after its offset index gave the position to start from), and reads a
region's batches back. A fetch never decodes records: the server sends a response's
regions straight from the files (``pin``).

A file that grows past ``RESERVE_FROM`` bytes has disk blocks reserved ahead of its
writes, ``RESERVE_STEP`` at a time, with fallocate's FALLOC_FL_KEEP_SIZE: the file's
length and bytes stay exactly what was written (what recovery after a kill -9 reads,
what ``size`` answers), only blocks past its end are allocated early, so that a write
lands in allocated space instead of reserving delayed-allocation blocks page by page
(on ext4 that was a third of the broker's cost of a write). This is not Kafka's
``log.preallocate``, which sets the file's length to ``segment.bytes`` and trims it at
roll and close: nothing here is visible but ``du``. The blocks past the end are given
back when the file is truncated, when a file is first written in the same directory
(a log's roll) and when the data directory is closed; a process killed meanwhile
leaves at most one step per growing file, which the file's next truncation or
deletion frees.
"""
from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from broker_core.effects import (
    DeleteFile, FileEffect, RenameFile, ReplaceFile, TruncateFile, WriteBytes, unhandled_effect)
from broker_core.cleaned_batch import CleanedBatch
from broker_core.records import RecordBatch, Records
from broker_core.segment_format import DecodeError, materialize
from broker_core.storage import FileRegion
from real_io.protocol import record_batch
from real_io.protocol.errors import ProtocolError
from real_io.wire_batch import WireBatch, WireBatchHeader

TEMP_SUFFIX = ".tmp"
# Files the binding itself keeps in the data directory, which are not the core's.
PRIVATE_FILES = frozenset({".lock", "embedded-coordination.json", "embedded-coordination.json" + TEMP_SUFFIX})
RESERVE_FROM = 4 << 20  # smaller files (checkpoints, indexes, small segments) are never reserved for
RESERVE_STEP = 16 << 20
FALLOC_FL_KEEP_SIZE = 1


def _load_fallocate():
    """glibc's fallocate(2) wrapper (Python has only posix_fallocate, which grows the
    file's length); None where there is none."""
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


class DataDir:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._handles: dict[str, int] = {}  # path -> open descriptor, kept for appends
        self.reserved: dict[str, int] = {}  # path -> end of the blocks reserved for it past its length
        self._reserve = _fallocate is not None

    def _resolve(self, path: str) -> Path:
        full = (self.root / path).resolve()
        if full == self.root or self.root not in full.parents:
            raise ValueError(f"path {path!r} leaves the data directory")
        return full

    # -- the storage port (read side) ---------------------------------------------------
    def paths(self) -> list[str]:
        """Every file by relative path (what a restarted process finds), without leftover
        temporary files of an interrupted replace and the binding's own files."""
        out = []
        for full in sorted(self.root.rglob("*")):
            if full.is_file():
                relative = full.relative_to(self.root).as_posix()
                if relative not in PRIVATE_FILES and not relative.endswith(TEMP_SUFFIX):
                    out.append(relative)
        return out

    def read_file(self, path: str) -> bytes | None:
        try:
            return self._resolve(path).read_bytes()
        except FileNotFoundError:
            return None

    def size(self, path: str) -> int:
        try:
            return self._resolve(path).stat().st_size
        except FileNotFoundError:
            return 0

    def decode_at(self, path: str, position: int, verify: bool = True) -> tuple[WireBatch, int]:
        fd = self._descriptor(path)
        head = os.pread(fd, record_batch.HEADER_BYTES, position)
        if not head:
            raise DecodeError("end of file")
        try:
            size = record_batch.read_header(head).size
            data = head + os.pread(fd, size - len(head), position + len(head))
            batch, _ = WireBatch.parse(data, 0, validate=verify, stored=True)
        except ProtocolError as exc:
            raise DecodeError(str(exc)) from None
        return batch, position + size

    def header_at(self, path: str, position: int) -> tuple[WireBatchHeader, int]:
        """The header of the batch at ``position`` (its 61 bytes read, not the records)."""
        head = os.pread(self._descriptor(path), record_batch.HEADER_BYTES, position)
        if not head:
            raise DecodeError("end of file")
        try:
            header = record_batch.read_header(head)
        except ProtocolError as exc:
            raise DecodeError(str(exc)) from None
        return WireBatchHeader(header), position + header.size

    def batches_in(self, region: FileRegion) -> tuple[WireBatch, ...]:
        data = self.read_region(region)
        out, position = [], 0
        while position < len(data):
            batch, position = WireBatch.parse(data, position, validate=False, stored=True)
            out.append(batch)
        return tuple(out)

    def cleanable_in(self, region: FileRegion) -> tuple:
        """The region's batches decoded for the log cleaner (RecordBatch, or CleanedBatch
        where an earlier cleaning left gaps)."""
        data = self.read_region(region)
        out, position = [], 0
        while position < len(data):
            batch, position = record_batch.decode_stored_batch(data, position)
            out.append(batch)
        return tuple(out)

    @staticmethod
    def stored_bytes(batch) -> bytes:
        """The v2 bytes of a batch the cleaner keeps or rewrote."""
        if isinstance(batch, CleanedBatch):
            return record_batch.encode_cleaned_batch(batch)
        if isinstance(batch, WireBatch):
            return bytes(batch.data)
        return record_batch.encode_batch(batch)

    @staticmethod
    def own_batch(records: Records) -> WireBatch:
        """Records the broker appends itself, as a v2 batch (offsets and epoch stamped
        when the leader appends it): the segment files hold nothing else."""
        return WireBatch.parse(record_batch.encode_batch(RecordBatch(0, -1, records)))[0]

    def read_region(self, region: FileRegion) -> bytes:
        return os.pread(self._descriptor(region.path), region.size, region.position)

    def pin(self, region: FileRegion) -> "PinnedRegion":
        """``region`` held by a descriptor of its own, so that it can be sent later even
        if the segment is deleted meanwhile (the server sends it with sendfile)."""
        return PinnedRegion(os.dup(self._descriptor(region.path)), region.position, region.size)

    # -- the write side ------------------------------------------------------------------
    def carry_out(self, effect: FileEffect) -> None:
        """One of the core's file effects; OSError when the disk refuses."""
        if type(effect) is WriteBytes:
            # the core's own batches arrive as BatchBytes (their bytes made when read)
            self.write(effect.path, effect.position, materialize(effect.data))
        elif type(effect) is TruncateFile:
            self.truncate(effect.path, effect.size)
        elif type(effect) is DeleteFile:
            self.delete(effect.path)
        elif type(effect) is ReplaceFile:
            self.replace(effect.path, effect.data)
        elif type(effect) is RenameFile:
            self.rename(effect.path, effect.new_path)
        else:
            unhandled_effect(effect)

    def _descriptor(self, path: str) -> int:
        fd = self._handles.get(path)
        if fd is None:
            full = self._resolve(path)
            full.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(full, os.O_RDWR | os.O_CREAT, 0o644)
            self._handles[path] = fd
        return fd

    def write(self, path: str, position: int, data: bytes) -> None:
        fd = self._descriptor(path)
        end = position + len(data)
        if position == 0:
            self._release_directory(path)
        elif end > RESERVE_FROM and self._reserve and end > self.reserved.get(path, 0):
            self._reserve_blocks(path, fd, position, end)
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def _reserve_blocks(self, path: str, fd: int, position: int, end: int) -> None:
        """Blocks up to a step past ``end`` allocated, the file's length unchanged. A file
        system that cannot (EOPNOTSUPP) or a full disk (ENOSPC) just is not reserved
        for: the write itself then says whether there is room."""
        start = max(self.reserved.get(path, 0), position)
        target = end + RESERVE_STEP
        if _fallocate(fd, FALLOC_FL_KEEP_SIZE, start, target - start) != 0:
            if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOSYS):
                self._reserve = False
            return
        self.reserved[path] = target

    def _release(self, path: str) -> None:
        """The blocks reserved past ``path``'s end given back: a truncation to its own
        length frees them and changes nothing else."""
        if self.reserved.pop(path, None) is not None:
            fd = self._handles.get(path)
            if fd is not None:
                os.ftruncate(fd, os.fstat(fd).st_size)

    def _release_directory(self, path: str) -> None:
        """A file begun in a directory (a log's new segment): the other files there
        stop growing, so what was reserved for them goes back."""
        directory = path.rpartition("/")[0]
        for other in [p for p in self.reserved if p.rpartition("/")[0] == directory and p != path]:
            self._release(other)

    def truncate(self, path: str, size: int) -> None:
        os.ftruncate(self._descriptor(path), size)  # frees the reserved blocks too
        self.reserved.pop(path, None)

    def delete(self, path: str) -> None:
        self.reserved.pop(path, None)
        fd = self._handles.pop(path, None)
        if fd is not None:
            os.close(fd)
        full = self._resolve(path)
        try:
            os.remove(full)
        except FileNotFoundError:
            pass
        self._remove_if_empty(full.parent)

    def _remove_if_empty(self, directory: Path) -> None:
        """A partition directory whose last file went (a deleted replica) goes too, as
        Kafka's LogManager.asyncDelete removes the whole directory; the data directory
        itself stays."""
        if directory.parent != self.root:
            return
        try:
            directory.rmdir()
        except OSError:
            pass  # not empty (or already gone)

    def replace(self, path: str, data: bytes) -> None:
        full = self._resolve(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        replace_durably(full, data)
        self.reserved.pop(path, None)  # (the replaced file's blocks went with it)
        fd = self._handles.pop(path, None)
        if fd is not None:  # the old descriptor names the replaced file
            os.close(fd)

    def rename(self, path: str, new_path: str) -> None:
        """os.replace, then the directory fsynced so that the rename survives a power
        loss too (the cleaner's swap steps, Kafka's Utils.atomicMoveWithFallback)."""
        full, new_full = self._resolve(path), self._resolve(new_path)
        for name in (path, new_path):
            self.reserved.pop(name, None)
            fd = self._handles.pop(name, None)
            if fd is not None:  # a descriptor names the inode, not the name: reopened on use
                os.close(fd)
        os.replace(full, new_full)
        fsync_directory(new_full.parent)

    def fsync(self, path: str) -> None:
        """Make ``path``'s bytes durable (and its directory entry, for a new file).
        Safe on a worker thread: it opens its own descriptor."""
        full = self._resolve(path)
        try:
            fd = os.open(full, os.O_RDONLY)
        except FileNotFoundError:
            return  # deleted meanwhile: nothing left to make durable
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(full.parent)

    def close(self) -> None:
        for path in sorted(self.reserved):
            try:
                self._release(path)
            except OSError:
                pass  # a disk gone bad at exit: the blocks go with the file's next truncation
        for fd in self._handles.values():
            os.close(fd)
        self._handles.clear()


class PinnedRegion:
    """A file region with its own descriptor; ``close`` (or, failing that, garbage
    collection) gives the descriptor back."""
    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int):
        self.fd = fd
        self.position = position
        self.size = size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


def replace_durably(full: Path, data: bytes) -> None:
    temp = full.with_name(full.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, full)
    fsync_directory(full.parent)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
