"""The storage port (broker_core.storage.LogStorage) over a real data directory.

Segments hold record batches v2 exactly as clients receive them (real_io.wire_batch),
so the read side is small: list the files, read a checkpoint, decode the batch at a
position (recovery's CRC scan), and read a region's batches back. Bytes are read with
``os.pread`` on descriptors kept open per segment, and a fetch never goes through here:
the server sends a response's regions straight from the files (``open_region``).
"""
from __future__ import annotations

import os
from pathlib import Path

from broker_core.effects import DeleteFile, ReplaceFile, TruncateFile, WriteBytes
from broker_core.records import DecodeError
from broker_core.storage import FileRegion
from real_io.protocol import record_batch
from real_io.protocol.errors import ProtocolError
from real_io.wire_batch import WireBatch

TEMP_SUFFIX = ".tmp"  # a replacement being written; never part of the directory's state
_MAX_OPEN = 256


class FileLogStorage:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._fds: dict[str, int] = {}

    def _path(self, path: str) -> Path:
        if path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"{path!r} is not a path inside the data directory")
        return self.root / path

    # -- the port ----------------------------------------------------------------------
    def paths(self) -> list[str]:
        out = []
        for directory, _, names in os.walk(self.root):
            for name in names:
                if not name.endswith(TEMP_SUFFIX):
                    out.append(Path(directory, name).relative_to(self.root).as_posix())
        return sorted(out)

    def read_file(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except FileNotFoundError:
            return None

    def size(self, path: str) -> int:
        try:
            return self._path(path).stat().st_size
        except FileNotFoundError:
            return 0

    def decode_at(self, path: str, position: int) -> tuple[WireBatch, int]:
        fd = self._fd(path)
        head = os.pread(fd, record_batch.HEADER_BYTES, position)
        if not head:
            raise DecodeError("end of file")
        try:
            size = record_batch.read_header(head).size
            data = head + os.pread(fd, size - len(head), position + len(head)) if size > len(head) else head[:size]
            batch, _ = WireBatch.parse(data, 0, validate=True)
        except ProtocolError as exc:
            raise DecodeError(str(exc)) from None
        return batch, position + size

    def batches_in(self, region: FileRegion) -> tuple[WireBatch, ...]:
        data = os.pread(self._fd(region.path), region.size, region.position)
        out, position = [], 0
        while position < len(data):
            batch, position = WireBatch.parse(data, position, validate=False)
            out.append(batch)
        return tuple(out)

    # -- the write side: the core's file effects -------------------------------------------
    def carry_out(self, effect) -> bool:
        """Carry out a file effect (False for any other effect). Writes go to the page
        cache; ``ReplaceFile`` is made durable (temp file, fsync, rename, fsync of the
        directory), as the effect promises; ``Fsync`` is the caller's (it blocks)."""
        kind = type(effect)
        if kind is WriteBytes:
            target = self._path(effect.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, effect.data, effect.position)
            finally:
                os.close(fd)
        elif kind is TruncateFile:
            try:
                os.truncate(self._path(effect.path), effect.size)
            except FileNotFoundError:
                pass
        elif kind is DeleteFile:
            self.forget(effect.path)
            self._path(effect.path).unlink(missing_ok=True)
        elif kind is ReplaceFile:
            self.forget(effect.path)
            target = self._path(effect.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(target.name + TEMP_SUFFIX)
            with open(temp, "wb") as f:
                f.write(effect.data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, target)
            self.fsync_directory(target.parent)
        else:
            return False
        return True

    def fsync(self, path: str) -> None:
        """Make a file's bytes durable (blocking: a runtime calls it off its event loop)."""
        try:
            fd = os.open(self._path(path), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def fsync_directory(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- for the server and the runtime ------------------------------------------------
    def open_region(self, region: FileRegion) -> int:
        """A descriptor to send ``region`` from (owned by this storage: do not close)."""
        return self._fd(region.path)

    def forget(self, path: str) -> None:
        """The file was deleted or replaced: drop its descriptor."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self.forget(path)

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            if len(self._fds) >= _MAX_OPEN:
                self.forget(next(iter(self._fds)))
            fd = self._fds[path] = os.open(self._path(path), os.O_RDONLY)
        return fd
