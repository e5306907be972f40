"""A simulated disk. Written bytes sit in the page cache until fsync makes them durable.
A process crash keeps the page cache (the OS still has it); a power loss keeps only
durable bytes. fsyncs queue behind each other and take ``fsync_ms`` each.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import simpy


@dataclass
class SimFile:
    data: bytearray = field(default_factory=bytearray)
    durable: bytearray | None = None  # None: the file itself is not durable yet
    dirty_from: int | None = 0  # first byte that differs from the durable copy

    def sync(self) -> None:
        if self.durable is None:
            self.durable = bytearray(self.data)
        elif self.dirty_from is not None:
            start = min(self.dirty_from, len(self.durable))
            del self.durable[start:]
            self.durable += self.data[start:]
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

    def write(self, path: str, position: int, data: bytes) -> str | None:
        """Write into the page cache; returns an errno name when the disk refuses."""
        f = self.files.get(path)
        if self.write_error == "EIO":
            return "EIO"
        if self.write_error == "ENOSPC" and position + len(data) > (len(f.data) if f else 0):
            return "ENOSPC"
        if f is None:
            f = self.files[path] = SimFile()
        end = position + len(data)
        if position > len(f.data):
            f.data.extend(b"\0" * (position - len(f.data)))
        f.data[position:end] = data
        f.mark_dirty(position)
        return None

    def truncate(self, path: str, size: int) -> None:
        f = self.files.get(path)
        if f is not None and size < len(f.data):
            del f.data[size:]
            f.mark_dirty(size)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def replace(self, path: str, data: bytes) -> str | None:
        if self.write_error is not None:
            return self.write_error
        f = self.files[path] = SimFile(bytearray(data))
        f.sync()
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
            durable = bytearray(f.durable) if f.durable is not None else None
            if self.torn_writes and self.rng is not None and f.dirty_from is not None:
                start = min(f.dirty_from, len(durable) if durable is not None else 0)
                tail = f.data[start:]
                if tail:
                    keep = self.rng.randrange(1, len(tail) + 1)
                    durable = (durable or bytearray())[:start] + tail[:keep]
            if durable is not None:
                survivors[path] = SimFile(durable, bytearray(durable), None)
        self.files = survivors

    def flip_bit(self, path: str) -> int | None:
        """Flip one random bit of a file, in the page cache and on the platter alike;
        returns the byte position, or None for an empty file."""
        f = self.files.get(path)
        if f is None or not f.data or self.rng is None:
            return None
        position = self.rng.randrange(len(f.data))
        bit = 1 << self.rng.randrange(8)
        f.data[position] ^= bit
        if f.durable is not None and position < len(f.durable):
            f.durable[position] ^= bit
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
            if f.durable is None:
                total += len(f.data)
            elif f.dirty_from is not None:
                total += max(len(f.data) - f.dirty_from, 0)
        return total
