"""How the core refers to stored bytes it does not hold (the storage seam).

A partition's log keeps, per batch, only its header (``StoredBatch``: offsets, leader
epoch, producer fields, size and where it sits) -- never the records. Bytes reach the
disk as effects (``WriteBytes``, ``TruncateFile``, ...), as before. Bytes leave it in
two ways, both through the runtime:

- **By reference.** A fetch response carries ``FileRegion``s (path, position, size) in
  place of batches. The runtime resolves them when it carries out the ``Send``: the real
  binding hands the file range to ``os.sendfile``; the simulation and the test router
  look up the batch objects written there (``resolve_message``). Effects are carried out
  in order, so a region always refers to bytes whose ``WriteBytes`` came before it.
- **Through a port.** ``Started`` hands the node a ``LogStorage``: the read-only view of
  the data directory that recovery scans (``decode_at``, in the binding's own batch
  format) and that the rare reads of record values go through (``batches_in``: the
  values a truncation removes, for its trace). Reads are synchronous: they come from
  the page cache of a process that just wrote them or from a recovery scan.

``BytesLogStorage`` is the port over bytes held in memory, in the core's own segment
format (``broker_core.segment_format``); the simulation (over its simulated disk) and the
in-test router use it, keeping the batch objects written so that resolving a region
costs a lookup, not a decode. The real binding implements the same port over files in
Kafka's record batch v2 format (``real_io``).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

from broker_core.effects import DeleteFile, Effect, RenameFile, ReplaceFile, TruncateFile, WriteBytes
from broker_core.messages import FetchResponse
from broker_core.records import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, ClientBatch, RecordBatch, Records, last_sequence)
from broker_core.cleaned_batch import CleanableBatch, CleanedBatch
from broker_core.segment_format import DecodeError, decode_batch, encode_batch, encode_cleaned_batch, materialize


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@dataclass(slots=True, init=False)
class FileRegion:
    """``size`` bytes of whole stored batches at ``position`` of the segment ``path``."""
    path: str
    position: int
    size: int

    def __init__(self, path: str, position: int, size: int) -> None:
        self.path = path
        self.position = position
        self.size = size


class StoredBatch:
    """What a log keeps of one stored batch: its header and where it lies."""
    __slots__ = ("base_offset", "next_offset", "leader_epoch", "producer_id", "producer_epoch",
                 "base_sequence", "size_bytes", "segment", "position", "end")

    def __init__(self, batch: Any, segment: int, position: int, size_bytes: int, end: int):
        if isinstance(batch, RecordBatch):  # the simulation's every append: read as fields, not by name
            self.base_offset: int = batch.base_offset
            self.next_offset: int = batch.next_offset
            self.leader_epoch: int = batch.leader_epoch
            self.producer_id: int = batch.producer_id
            self.producer_epoch: int = batch.producer_epoch
            self.base_sequence: int = batch.base_sequence
        else:
            self.base_offset = batch.base_offset
            self.next_offset = batch.next_offset
            self.leader_epoch = batch.leader_epoch
            self.producer_id = getattr(batch, "producer_id", NO_PRODUCER_ID)
            self.producer_epoch = getattr(batch, "producer_epoch", NO_PRODUCER_EPOCH)
            self.base_sequence = getattr(batch, "base_sequence", NO_SEQUENCE)
        self.size_bytes = size_bytes
        self.segment = segment
        self.position = position
        self.end = end  # the position after it in its segment file

    @property
    def record_count(self) -> int:
        return self.next_offset - self.base_offset

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.record_count)

    def __repr__(self) -> str:
        return (f"StoredBatch({self.base_offset}..{self.next_offset - 1}, epoch {self.leader_epoch}, "
                f"{self.size_bytes} bytes at {self.segment}:{self.position})")


class LogStorage(Protocol):
    """The read side of a broker's data directory, as the runtime offers it."""

    def paths(self) -> Iterable[str]:
        """Every file, as a path relative to the data directory."""

    def read_file(self, path: str) -> bytes | None:
        """A small file's whole content (checkpoints), or None if there is none."""

    def size(self, path: str) -> int:
        """A file's size in bytes (0 if there is none)."""

    def decode_at(self, path: str, position: int, verify: bool = True) -> tuple[Any, int]:
        """The batch stored at ``position`` and the position after it; DecodeError for a
        torn or garbled batch, for one failing its CRC (only with ``verify``: without,
        the bytes are trusted as flushed ones), or for the end of the file."""

    def header_at(self, path: str, position: int) -> tuple[Any, int]:
        """The header of the batch stored at ``position`` (an object with a batch's
        header fields and ``size_bytes``; its records need not be readable) and the
        position after it, unverified; DecodeError as ``decode_at``. Reads of sealed
        segments go through it: the log keeps no headers of theirs."""

    def batches_in(self, region: FileRegion) -> tuple:
        """The batch objects stored in a region (their records readable)."""

    def cleanable_in(self, region: FileRegion) -> tuple[CleanableBatch, ...]:
        """The batches stored in a region as the log cleaner reads them: RecordBatch, or
        CleanedBatch where an earlier cleaning left gaps between the records' offsets."""

    def stored_bytes(self, batch: CleanableBatch) -> bytes:
        """The bytes this binding stores for a batch the cleaner keeps or rewrote (one it
        read through ``cleanable_in``), so that the cleaner can build a segment."""

    def own_batch(self, records: Records) -> Records | ClientBatch:
        """Records the broker appends itself (the group coordinator's), as a leader's log
        appends them: the records (the core's own batch, in its segment format) or a
        client's batch in this binding's format (offsets assigned by ``with_offsets``)."""


class WrittenBatches:
    """The batch objects of one file by position, ascending: what a dict from position
    to (batch, end) would hold, as three lists. Writes append at the end, so keeping
    one is three list appends (no hashing, no tuple), and a region's batches are found
    by one bisection and read off in order."""
    __slots__ = ("positions", "batches", "ends")

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.batches: list[Any] = []
        self.ends: list[int] = []

    def put(self, position: int, batch: Any, end: int) -> None:
        """The batch at ``position`` (replacing the one kept there)."""
        positions = self.positions
        if not positions or position > positions[-1]:
            positions.append(position)
            self.batches.append(batch)
            self.ends.append(end)
            return
        i = bisect_left(positions, position)
        if positions[i] == position:
            self.batches[i] = batch
            self.ends[i] = end
        else:
            positions.insert(i, position)
            self.batches.insert(i, batch)
            self.ends.insert(i, end)

    def find(self, position: int, start: int = 0) -> int:
        """The index of the batch kept at ``position`` (looked for from ``start`` on), or -1."""
        positions = self.positions
        count = len(positions)
        if start < count and positions[start] == position:
            return start
        if count and positions[count - 1] == position:
            return count - 1  # the newest batch: what a caught-up follower fetches
        i = bisect_left(positions, position, start)
        return i if i < count and positions[i] == position else -1


class BytesLogStorage:
    """The port over files held as bytes (``read``: path -> bytes or None; ``list``:
    the paths), in the core's segment format. ``remember`` keeps the object a
    ``WriteBytes`` wrote, so that a region resolves to the very objects written."""

    def __init__(self, read: Callable[[str], bytes | bytearray | None], list_paths: Callable[[], Iterable[str]]):
        self._read = read
        self._list = list_paths
        self._written: dict[str, WrittenBatches] = {}  # per path

    # -- the port ----------------------------------------------------------------------
    def paths(self) -> list[str]:
        return sorted(self._list())

    def read_file(self, path: str) -> bytes | None:
        data = self._read(path)
        return None if data is None else bytes(data)

    def size(self, path: str) -> int:
        data = self._read(path)
        return 0 if data is None else len(data)

    def decode_at(self, path: str, position: int, verify: bool = True) -> tuple[Any, int]:
        data = self._read(path)
        if data is None or position >= len(data):
            raise DecodeError("end of file")
        batch, end = decode_batch(data, position, verify)
        self._keep(path, position, batch, end)
        return batch, end

    def header_at(self, path: str, position: int) -> tuple[Any, int]:
        written = self._written.get(path)
        i = written.find(position) if written is not None else -1
        if i < 0:
            return self.decode_at(path, position, verify=False)
        assert written is not None
        return written.batches[i], written.ends[i]

    def batches_in(self, region: FileRegion) -> tuple:
        path = region.path
        position, end = region.position, region.position + region.size
        out = []
        written = self._written.get(path)
        i = 0
        while position < end:
            i = written.find(position, i) if written is not None else -1
            if i < 0:
                batch, position = self.decode_at(path, position)
                written = self._written.get(path)  # decode_at keeps what it decoded
                i = 0
            else:
                assert written is not None
                batch, position = written.batches[i], written.ends[i]
                i += 1
            out.append(batch)
        return tuple(out)

    def cleanable_in(self, region: FileRegion) -> tuple[CleanableBatch, ...]:
        return self.batches_in(region)  # this format stores RecordBatch and CleanedBatch as they are

    def stored_bytes(self, batch: CleanableBatch) -> bytes:
        return encode_cleaned_batch(batch) if type(batch) is CleanedBatch else encode_batch(batch)  # type: ignore[arg-type]

    def own_batch(self, records: Records) -> Records | ClientBatch:
        """The records themselves: the log stores them in the core's segment format."""
        return records

    # -- what the runtime tells it -----------------------------------------------------
    def remember(self, effect: WriteBytes) -> None:
        if effect.batch is not None:
            self._keep(effect.path, effect.position, effect.batch, effect.position + len(effect.data))

    def _keep(self, path: str, position: int, batch: Any, end: int) -> None:
        written = self._written.get(path)
        if written is None:
            written = self._written[path] = WrittenBatches()
        written.put(position, batch, end)

    def forget(self, path: str) -> None:
        self._written.pop(path, None)

    def renamed(self, path: str, new_path: str) -> None:
        """The objects written to ``path`` are now ``new_path``'s (a cleaner's swap)."""
        self._written.pop(new_path, None)
        written = self._written.pop(path, None)
        if written is not None:
            self._written[new_path] = written


class MemoryFiles:
    """A directory of files held in memory, with the port over it: what the in-test
    router uses as a broker's disk (every write durable at once)."""

    def __init__(self, files: Mapping[str, bytes] | None = None):
        self.files: dict[str, bytearray] = {p: bytearray(d) for p, d in (files or {}).items()}
        self.storage = BytesLogStorage(self.files.get, self.files.keys)

    def apply(self, effect: Effect) -> bool:
        """Carry out a file effect; False for any other effect."""
        if type(effect) is WriteBytes:
            data = self.files.setdefault(effect.path, bytearray())
            if effect.position > len(data):
                data.extend(b"\0" * (effect.position - len(data)))
            written = materialize(effect.data)
            data[effect.position:effect.position + len(written)] = written
            self.storage.remember(effect)
        elif type(effect) is TruncateFile:
            if effect.path in self.files:
                del self.files[effect.path][effect.size:]
        elif type(effect) is DeleteFile:
            self.files.pop(effect.path, None)
            self.storage.forget(effect.path)
        elif type(effect) is ReplaceFile:
            self.files[effect.path] = bytearray(effect.data)
            self.storage.forget(effect.path)
        elif type(effect) is RenameFile:
            if effect.path in self.files:
                self.files[effect.new_path] = self.files.pop(effect.path)
                self.storage.renamed(effect.path, effect.new_path)
        else:
            return False
        return True

    def apply_all(self, effects: Iterable[Effect]) -> None:
        for effect in effects:
            self.apply(effect)


def resolve_message(message: Any, storage: LogStorage) -> Any:
    """A message as a runtime that delivers objects sends it: a fetch response's
    regions replaced by the batches stored there (any other message as it is). The
    response is the core's fresh answer to one request, sent once, so its results are
    resolved in place rather than copied (the simulation sends thousands a second)."""
    if type(message) is not FetchResponse:
        return message
    for result in message.partitions.values():
        regions = result.batches
        if regions and type(regions[0]) is FileRegion:
            if len(regions) == 1:
                result.batches = storage.batches_in(regions[0])
            else:
                result.batches = tuple(b for region in regions for b in storage.batches_in(region))
    return message
