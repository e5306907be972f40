"""One broken invariant, as a value (broker_core/invariants.py and the checks beside it
build them; the simulation, the tests and the explorer read them). In a module of its
own so that invariant modules beside invariants.py can build one without importing it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Violation:
    """One invariant broken: which, where, and what was seen (plain values)."""
    invariant: str
    partition: str | None
    brokers: tuple[int, ...]
    seen: Mapping[str, Any] = field(default_factory=dict)
    allowed_by: tuple[str, ...] = ()  # the unsafe settings in force under which Kafka breaks it too

    def __reduce__(self) -> tuple[Any, tuple]:
        """Pickled by its fields (a run's result crosses from a worker process): compiled
        by mypyc, a frozen dataclass refuses the attribute writes of plain unpickling."""
        return Violation, (self.invariant, self.partition, self.brokers, dict(self.seen), self.allowed_by)

    def describe(self) -> str:
        where = f" {self.partition}" if self.partition else ""
        brokers = ",".join(str(b) for b in self.brokers)
        seen = ", ".join(f"{k}={v}" for k, v in self.seen.items())
        text = f"{self.invariant}{where} at broker(s) {brokers}: {seen}"
        if self.allowed_by:
            text += f" (Kafka itself breaks it under: {'; '.join(self.allowed_by)})"
        return text

    def to_fields(self) -> dict:
        """The trace's ``invariant_violated`` fields."""
        return {"invariant": self.invariant, "partition": self.partition, "brokers": list(self.brokers),
                "seen": dict(self.seen), "allowed_by": list(self.allowed_by)}
