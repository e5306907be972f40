"""What a checker answers: a number, whether it is fine, why, and a few concrete cases."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 10


@dataclass(frozen=True)
class CheckResult:
    """One named result. ``examples`` are JSON-ready dicts (time, process, partition,
    offset, value, ...) of the first offending records or operations, at most
    MAX_EXAMPLES; ``details`` holds counts and per-partition figures."""
    name: str
    value: int | float | dict  # a dict (partition -> number) for final_leader
    valid: bool
    explanation: str
    examples: tuple[dict, ...] = ()
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "valid": self.valid, "explanation": self.explanation,
                "examples": list(self.examples), "details": self.details}

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> "CheckResult":
        return cls(name, data["value"], data["valid"], data["explanation"],
                   tuple(data.get("examples", ())), dict(data.get("details", {})))


class Examples:
    """Counts every case and keeps the first MAX_EXAMPLES of them."""

    __slots__ = ("count", "items")

    def __init__(self) -> None:
        self.count = 0
        self.items: list[dict] = []

    def add(self, example: dict) -> None:
        self.count += 1
        if len(self.items) < MAX_EXAMPLES:
            self.items.append(example)


def anomaly(name: str, examples: Examples, what: str, none: str, details: dict | None = None) -> CheckResult:
    """A count of anomalies: valid when there are none."""
    count = examples.count
    text = f"{count} {what}" if count else none
    return CheckResult(name, count, count == 0, text, tuple(examples.items), details or {})
