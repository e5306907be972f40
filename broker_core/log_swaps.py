"""Recovery of a log cleaner's swap interrupted by a crash (Kafka 2.7.0 Log.loadSegments:
removeTempFilesAndCollectSwapFiles, completeSwapOperations).

The cleaner's file steps (broker_core.log_cleaning.replace_segments) are: the new
segment written durably as ``<base>.log.cleaned``; each replaced segment renamed
``<base>.log.deleted``; ``.cleaned`` renamed ``.swap``; the ``.deleted`` files removed;
``.swap`` renamed ``.log``. A crash after any of them leaves one of three states, which
recovery finishes or undoes so that the log holds either the old segments or the new
one, never a mix:

- a ``.swap`` exists: the swap was committed. The ``.deleted`` files are removed and the
  ``.swap`` becomes the segment (completeSwapOperations).
- no ``.swap``, but ``.deleted`` files: the crash came before the commit. They are the
  replaced segments, renamed back; the ``.cleaned`` file is removed.
- otherwise a ``.cleaned`` file is a cleaning that never got further: removed (Kafka
  deletes every ``.cleaned`` file at load).

The renames are effects the runtime carries out after the node answers ``Started``;
the recovery scan reads the files before that, so it reads through ``PendingRenames``,
the storage port as it will be once they are carried out.
"""
from __future__ import annotations

from typing import Any, Iterable

from broker_core.effects import DeleteFile, Effect, RenameFile
from broker_core.storage import FileRegion, LogStorage

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIX = ".log"


def complete_swaps(paths: Iterable[str]) -> tuple[list[Effect], dict[str, str]]:
    """The effects that finish or undo an interrupted swap among one log's ``paths``,
    and the renames they make (new path -> the path the file has until then)."""
    paths = sorted(paths)
    swaps = [p for p in paths if p.endswith(SEGMENT_SUFFIX + SWAP_SUFFIX)]
    deleted = [p for p in paths if p.endswith(SEGMENT_SUFFIX + DELETED_SUFFIX)]
    cleaned = [p for p in paths if p.endswith(SEGMENT_SUFFIX + CLEANED_SUFFIX)]
    effects: list[Effect] = [DeleteFile(p) for p in cleaned]
    renames: dict[str, str] = {}
    if swaps:
        effects += [DeleteFile(p) for p in deleted]
        moved = swaps
    else:
        moved = deleted
    for path in moved:
        final = path[:path.rindex(SEGMENT_SUFFIX) + len(SEGMENT_SUFFIX)]
        effects.append(RenameFile(path, final))
        renames[final] = path
    return effects, renames


class PendingRenames:
    """A storage port with ``renames`` (new path -> current path) and the removal of
    ``gone`` already applied, for the reads of a recovery scan."""

    def __init__(self, storage: LogStorage, renames: dict[str, str], gone: Iterable[str]):
        self.storage = storage
        self.renames = renames
        self.hidden = set(gone) | set(renames.values())

    def _now(self, path: str) -> str:
        return self.renames.get(path, path)

    def paths(self) -> list[str]:
        return sorted([p for p in self.storage.paths() if p not in self.hidden] + list(self.renames))

    def read_file(self, path: str) -> bytes | None:
        return None if path in self.hidden else self.storage.read_file(self._now(path))

    def size(self, path: str) -> int:
        return 0 if path in self.hidden else self.storage.size(self._now(path))

    def decode_at(self, path: str, position: int, verify: bool = True) -> tuple[Any, int]:
        return self.storage.decode_at(self._now(path), position, verify)

    def header_at(self, path: str, position: int) -> tuple[Any, int]:
        return self.storage.header_at(self._now(path), position)

    def batches_in(self, region: FileRegion) -> tuple:
        return self.storage.batches_in(FileRegion(self._now(region.path), region.position, region.size))

    def cleanable_in(self, region: FileRegion) -> tuple:
        return self.storage.cleanable_in(FileRegion(self._now(region.path), region.position, region.size))

    def stored_bytes(self, batch: Any) -> bytes:
        return self.storage.stored_bytes(batch)

    def own_batch(self, records: Any) -> Any:
        return self.storage.own_batch(records)
