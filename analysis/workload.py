"""The workload both bindings generate: how many records a producer creates per tick,
and what their values are.

Values are ``producer-<i>:<seq>``, ``seq`` counting from 1 per producer, so every value
in a run is unique: the checkers (lost writes, duplicates, inconsistent offsets) find a
record by its value alone. A producer with ``rate`` records per second creates records
every ``linger_ms``; the fraction left over carries to the next tick, so over time the
count is ``rate`` per second whatever the tick.
"""
from __future__ import annotations


def record_value(producer: str, seq: int) -> str:
    return f"{producer}:{seq}"


def record_key(seq: int, keys: int) -> str:
    """A keyed workload's key of record ``seq``: ``keys`` distinct keys in turn."""
    return f"k{seq % keys}"


def record_values(producer: str, first: int, stop: int, step: int = 1) -> list[str]:
    """The values of sequence numbers ``range(first, stop, step)``."""
    prefix = producer + ":"  # one concatenation per value (compiled, a little faster than the f-string)
    return [prefix + str(seq) for seq in range(first, stop, step)]


class RecordCredit:
    """Records due per tick of ``linger_ms`` at ``rate`` records per second."""

    def __init__(self, rate: float, linger_ms: int):
        self.per_tick = rate * linger_ms / 1000.0
        self._credit = 0.0

    def take(self) -> int:
        """The records due at the next tick."""
        self._credit += self.per_tick
        count = int(self._credit)
        self._credit -= count
        return count
