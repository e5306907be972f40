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
        """OffsetsForLeaderEpoch with KIP-279: the largest epoch <= requested and its end.

        The end offset of an epoch is the start offset of the next larger epoch, or the
        log end offset for the latest one. An epoch below every entry gives UNDEFINED.
        """
        if not self.entries or requested_epoch < self.entries[0][0]:
            return UNDEFINED, UNDEFINED
        epochs = [e for e, _ in self.entries]
        index = bisect_right(epochs, requested_epoch) - 1
        epoch = self.entries[index][0]
        if index + 1 < len(self.entries):
            return epoch, self.entries[index + 1][1]
        return epoch, log_end_offset

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the epochs that start at or after ``end_offset`` (after log truncation)."""
        before = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        return len(self.entries) != before

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
