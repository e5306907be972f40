"""Small shared value types."""
from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "TopicPartition":
        topic, _, partition = text.rpartition("-")
        return cls(topic, int(partition))


NO_LEADER = -1
