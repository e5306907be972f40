"""Logs for tests that drive a PartitionLog directly, without a runtime."""
from __future__ import annotations

from broker_core.log import PartitionLog
from broker_core.storage import MemoryFiles
from broker_core.types import TopicPartition


class AppliedLog(PartitionLog):
    """A log whose file effects are carried out at once on its own in-memory files, as
    a runtime carries them out after each input; so the log's stored batches can be read
    back through its storage port (``records()``, truncation traces)."""

    def __init__(self, tp: TopicPartition, segment_bytes: int):
        self.disk = MemoryFiles()
        super().__init__(tp, segment_bytes, self.disk.storage)

    def _append(self, batch) -> list:
        effects = super()._append(batch)
        self.disk.apply_all(effects)
        return effects

    def truncate_to(self, offset: int) -> list:
        effects = super().truncate_to(offset)
        self.disk.apply_all(effects)
        return effects


def recover(tp: TopicPartition, files: dict, segment_bytes: int):
    """PartitionLog.recover over files given as a dict of bytes."""
    return PartitionLog.recover(tp, MemoryFiles(files).storage, segment_bytes)
