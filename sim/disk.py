"""A simulated disk. Written bytes sit in the page cache until fsync makes them durable.
A process crash keeps the page cache (the OS still has it); a power loss keeps only
durable bytes. fsyncs queue behind each other and take ``fsync_ms`` each.
"""
from __future__ import annotations

from typing import Callable

import simpy

from broker_core.records import RecordBatch
from broker_core.segment_format import BatchBytes, materialize, stored_bytes


class SimFile:
    """One file: its bytes in the page cache (``data``), what of it is durable, and the
    first byte that differs from the durable copy (``dirty_from``; None: none does).

    Nothing is copied or encoded until it must be. Batches appended at the file's end
    are kept unencoded until something reads ``data`` (a recovery, a torn write, a bit
    flip): as the RecordBatch itself, not the ``BatchBytes`` that carried it. The batch
    lives on anyway (the storage port keeps it to resolve fetches), while a BatchBytes
    kept per replica and batch was a third of the objects a run leaves for the cyclic
    collector to scan (bench/sim_speed.py). The durable copy is the first
    ``durable_size`` bytes of ``data`` itself, until a write or truncation below that
    size would change them: only then is it copied out (``_durable_copy``). A run that
    only appends and fsyncs therefore never encodes a batch nor copies a file."""
    __slots__ = ("_data", "_pending", "size", "durable_size", "_durable_copy", "dirty_from")

    def __init__(self, data: bytearray | None = None, durable: bool = False) -> None:
        self._data = bytearray() if data is None else data
        self._pending: list[RecordBatch] = []  # written after _data, in order
        self.size = len(self._data)  # with the pending batches
        self.durable_size: int | None = None  # None: the file itself is not durable yet
        self._durable_copy: bytearray | None = None
        self.dirty_from: int | None = 0
        if durable:
            self.sync()

    @property
    def data(self) -> bytearray:
        """The bytes, pending batches encoded first. Changes go through the methods
        below, which keep ``size`` and the durable copy with them."""
        if self._pending:
            for pending in self._pending:
                self._data += stored_bytes(pending).materialize()  # checks the length counted
            self._pending.clear()
        return self._data

    @property
    def durable(self) -> bytearray | None:
        """The durable copy's bytes (None when the file is not durable)."""
        if self.durable_size is None:
            return None
        if self._durable_copy is not None:
            return self._durable_copy
        return self.data[:self.durable_size]

    def _detach_durable(self, position: int) -> None:
        """Copy the durable bytes out before ``data`` changes from ``position`` on."""
        if self._durable_copy is None and self.durable_size is not None and position < self.durable_size:
            self._durable_copy = self.data[:self.durable_size]

    def append_batch(self, data: BatchBytes) -> None:
        self._pending.append(data.batch)
        self.size += data.size

    def write(self, position: int, data: bytes) -> None:
        """Bytes at ``position`` (past the end: the gap zero-filled)."""
        self._detach_durable(position)
        content = self.data
        if position > len(content):
            content.extend(b"\0" * (position - len(content)))
        content[position:position + len(data)] = data
        self.size = len(content)

    def truncate(self, size: int) -> None:
        self._detach_durable(size)
        del self.data[size:]
        self.size = size

    def flip(self, position: int, bit: int) -> None:
        """Flip a bit in the page cache and on the platter alike."""
        self.data[position] ^= bit
        if self._durable_copy is not None and position < len(self._durable_copy):
            self._durable_copy[position] ^= bit

    def sync(self) -> None:
        """Everything written is durable: the durable copy is ``data`` again."""
        self.durable_size = self.size
        self._durable_copy = None
        self.dirty_from = None

    def mark_dirty(self, position: int) -> None:
        self.dirty_from = position if self.dirty_from is None else min(self.dirty_from, position)


class SimDisk:
    def __init__(self, env: simpy.Environment, fsync_ms: float = 2.0, rng=None):
        self.env = env
        self.fsync_ms = fsync_ms
        self.base_fsync_ms = fsync_ms
        self.rng = rng
        self.write_error: str | None = None  # "EIO" (write errors) or "ENOSPC" (full disk)
        self.torn_writes = False
        self.files: dict[str, SimFile] = {}
        self._fsync_free_at = 0.0
        self.generation = 0  # bumped on power loss: pending fsyncs of the old power cycle are void

    def write(self, path: str, position: int, data: bytes | BatchBytes) -> str | None:
        """Write into the page cache; returns an errno name when the disk refuses. A
        batch appended at the end of the file stays unencoded (SimFile)."""
        f = self.files.get(path)
        if self.write_error is not None:
            if self.write_error == "EIO":
                return "EIO"
            if self.write_error == "ENOSPC" and position + len(data) > (f.size if f else 0):
                return "ENOSPC"
        if f is None:
            f = self.files[path] = SimFile()
        if type(data) is BatchBytes and position == f.size:
            f.append_batch(data)
        else:
            f.write(position, materialize(data))
        f.mark_dirty(position)
        return None

    def truncate(self, path: str, size: int) -> None:
        f = self.files.get(path)
        if f is not None and size < f.size:
            f.truncate(size)
            f.mark_dirty(size)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def rename(self, path: str, new_path: str) -> None:
        """An atomic rename, durable at once (a directory entry: the file's bytes keep
        their own durability)."""
        f = self.files.pop(path, None)
        if f is not None:
            self.files[new_path] = f

    def replace(self, path: str, data: bytes) -> str | None:
        if self.write_error is not None:
            return self.write_error
        self.files[path] = SimFile(bytearray(data), durable=True)
        return None

    def fsync(self, path: str, on_done: Callable[[], None]) -> None:
        start = max(self.env.now, self._fsync_free_at)
        done_at = start + self.fsync_ms
        self._fsync_free_at = done_at
        generation = self.generation
        event = self.env.timeout(done_at - self.env.now)

        def complete(_event):
            if generation != self.generation:
                return
            f = self.files.get(path)
            if f is not None:
                f.sync()
            on_done()
        event.callbacks.append(complete)

    def sync_all(self) -> None:
        """The OS writing back dirty pages on its own (Linux: dirty_expire_centisecs)."""
        for path in sorted(self.files):
            self.files[path].sync()

    def power_loss(self) -> None:
        """Keep only durable bytes; with torn writes on, part of each unsynced tail
        survives too, cut at a random byte (a torn write)."""
        self.generation += 1
        self._fsync_free_at = self.env.now
        survivors = {}
        for path in sorted(self.files):
            f = self.files[path]
            kept = f.durable
            durable = bytearray(kept) if kept is not None else None
            if self.torn_writes and self.rng is not None and f.dirty_from is not None:
                start = min(f.dirty_from, len(durable) if durable is not None else 0)
                tail = f.data[start:]
                if tail:
                    keep = self.rng.randrange(1, len(tail) + 1)
                    durable = (durable or bytearray())[:start] + tail[:keep]
            if durable is not None:
                survivors[path] = SimFile(durable, durable=True)
        self.files = survivors

    def flip_bit(self, path: str) -> int | None:
        """Flip one random bit of a file, in the page cache and on the platter alike;
        returns the byte position, or None for an empty file."""
        f = self.files.get(path)
        if f is None or not f.data or self.rng is None:
            return None
        position = self.rng.randrange(len(f.data))
        bit = 1 << self.rng.randrange(8)
        f.flip(position, bit)
        return position

    def restore(self) -> None:
        """End every disk fault."""
        self.write_error = None
        self.torn_writes = False
        self.fsync_ms = self.base_fsync_ms

    def contents(self) -> dict[str, bytes]:
        """What a starting process reads: the page cache (which a power loss reset)."""
        return {path: bytes(self.files[path].data) for path in sorted(self.files)}

    def unsynced_bytes(self) -> int:
        total = 0
        for f in self.files.values():
            if f.durable_size is None:
                total += f.size
            elif f.dirty_from is not None:
                total += max(f.size - f.dirty_from, 0)
        return total
