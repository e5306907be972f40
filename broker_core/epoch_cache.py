"""The leader-epoch cache: for every leader epoch, the first offset written in it.

This is Kafka's LeaderEpochFileCache (KIP-101): a follower asks the leader for the end
offset of its latest epoch and truncates to it, instead of to its high watermark.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

UNDEFINED = -1


@dataclass
class LeaderEpochCache:
    entries: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start_offset)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether it changed."""
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        # An epoch that begins before existing entries supersedes them (a truncated log).
        while self.entries and self.entries[-1][1] > start_offset:
            self.entries.pop()
        if self.entries and self.entries[-1][1] == start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch with KIP-279 (Kafka 2.7 LeaderEpochFileCache.endOffsetFor):
        the largest epoch <= requested and its end offset, the start offset of the next
        larger epoch (the log end offset for the latest epoch).

        An epoch below every entry answers the requested epoch with the first entry's
        start offset: what came before was removed from this log, so the asker should
        start from here. An epoch above the latest, UNDEFINED_EPOCH itself or an empty
        cache answers (UNDEFINED, UNDEFINED): the asker falls back to its high watermark.
        """
        if requested_epoch == UNDEFINED or not self.entries or requested_epoch > self.entries[-1][0]:
            return UNDEFINED, UNDEFINED
        if requested_epoch == self.entries[-1][0]:
            return requested_epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        index = bisect_right(epochs, requested_epoch) - 1
        if index < 0:
            return requested_epoch, self.entries[0][1]
        return self.entries[index][0], self.entries[index + 1][1]

    def end_offset_for_kip101(self, requested_epoch: int, log_end_offset: int) -> int:
        """The answer before KIP-279 (Kafka 0.11 to 1.1 LeaderEpochFileCache.endOffsetFor):
        an offset only, and UNDEFINED for an epoch below the first entry or above every
        entry, so the asker falls back to its high watermark."""
        if self.entries and requested_epoch == self.entries[-1][0]:
            return log_end_offset
        if not self.entries or requested_epoch < self.entries[0][0] or requested_epoch > self.entries[-1][0]:
            return UNDEFINED
        return next(start for epoch, start in self.entries if epoch > requested_epoch)

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the epochs that start at or after ``end_offset`` (after log truncation)."""
        before = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        return len(self.entries) != before

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the epochs that end at or before ``start_offset``, the last of those
        before it kept as starting there (2.7.0 LeaderEpochFileCache.truncateFromStart,
        when the log start offset moves up)."""
        before = list(self.entries)
        while len(self.entries) > 1 and self.entries[1][1] <= start_offset:
            self.entries.pop(0)
        if self.entries and self.entries[0][1] < start_offset:
            self.entries[0] = (self.entries[0][0], start_offset)
        return self.entries != before

    def encode(self) -> bytes:
        lines = ["0", str(len(self.entries))] + [f"{e} {o}" for e, o in self.entries]
        return ("\n".join(lines) + "\n").encode()

    @classmethod
    def decode(cls, data: bytes) -> "LeaderEpochCache":
        """Parse a checkpoint; an unreadable one gives an empty cache (safe: HW fallback)."""
        try:
            lines = data.decode().split("\n")
            count = int(lines[1])
            entries = []
            for line in lines[2:2 + count]:
                epoch, offset = line.split()
                entries.append((int(epoch), int(offset)))
            if len(entries) != count:
                return cls()
            return cls(entries)
        except (ValueError, IndexError, UnicodeDecodeError):
            return cls()
