"""Triggers: start a fault when a condition on the cluster holds.

A condition is judged on a cluster view, the same for both bindings::

    {"controller": 2,
     "partitions": {"t-0": {"leader": 1 | None, "leader_epoch": 3, "isr": [1, 2],
                            "high_watermark": 40,
                            "replicas": {1: {"role": "leader", "log_end_offset": 42,
                                             "high_watermark": 40}, ...}}},
     "members": {"group-0-0": {"processing": True, "consumed": 120, "generation": 2 | None}}}

The leader is the broker that believes it leads with the highest leader epoch. A group
member's part (``member_view``) is what its application is doing, so that a fault can
fall where a scenario means it to (within a batch's processing) whatever the binding's
speed: the simulation reads it from its member, the real binding from the lines its
member processes write as they go.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

_COMPARISON = re.compile(r"^\s*(==|>=|<=|!=|>|<)?\s*(-?\d+(?:\.\d+)?)\s*$")
_OPERATORS = {"==": operator.eq, ">=": operator.ge, "<=": operator.le, "!=": operator.ne,
              ">": operator.gt, "<": operator.lt}


@dataclass(frozen=True)
class Comparison:
    """``5`` or ``"5"`` means equal to 5; ``">=100"``, ``"<3"``, ``"!=0"`` compare."""
    op: str
    number: float

    def matches(self, value: float | int | None) -> bool:
        return value is not None and _OPERATORS[self.op](value, self.number)

    def __str__(self) -> str:
        number = int(self.number) if self.number == int(self.number) else self.number
        return f"{number}" if self.op == "==" else f"{self.op}{number}"


def parse_comparison(value: Any) -> Comparison:
    """Raises ValueError with a readable message for anything else."""
    if isinstance(value, bool):
        raise ValueError("must be a number or a comparison such as \">=100\"")
    if isinstance(value, (int, float)):
        return Comparison("==", float(value))
    match = _COMPARISON.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"must be a number or a comparison such as \">=100\", \"<3\", \">0\", not {value!r}")
    return Comparison(match.group(1) or "==", float(match.group(2)))


# Partition-level fields a condition may test, and broker-level ones (with ``broker:``).
PARTITION_FIELDS = ("leader", "leader_epoch", "isr", "isr_size", "high_watermark")
REPLICA_FIELDS = ("role", "log_end_offset", "high_watermark")
# A group member's fields (with ``member:``): in the middle of a batch (its ``processing``
# ms, between the batch's consume and commit steps in the policy's order), the records it
# consumed so far (all its incarnations), the generation it is in (None before it joins
# and after a crash).
MEMBER_FIELDS = ("processing", "consumed", "generation")


def member_view(alive: bool, processing: bool, consumed: int, generation: int | None) -> dict:
    """One member's entry of the view; a member whose process is gone is in no batch
    and no generation, whatever its memory said."""
    return {"processing": alive and processing, "consumed": consumed,
            "generation": generation if alive and generation is not None and generation >= 0 else None}


@dataclass(frozen=True)
class Condition:
    partition: str | None
    broker: int | None
    tests: tuple[tuple[str, Any], ...]  # (field, expected: int | None | tuple | str | Comparison)
    controller: int | None = None
    member: str | None = None  # a group member's node name: the tests are on its fields

    def holds(self, view: dict) -> bool:
        if self.controller is not None and view.get("controller") != self.controller:
            return False
        if self.member is not None:
            state = view.get("members", {}).get(self.member)
        elif self.partition is None:
            return True
        else:
            state = view["partitions"].get(self.partition)
        if state is None:
            return False
        if self.broker is not None:
            state = state["replicas"].get(self.broker)
            if state is None:
                return False
        for name, expected in self.tests:
            # The view is JSON-shaped: a field is a number, a list of ids, a role or None.
            actual: Any = len(state["isr"]) if name == "isr_size" else state.get(name)
            if isinstance(expected, Comparison):
                if not expected.matches(actual):
                    return False
            elif name == "isr":
                if actual is None or sorted(actual) != sorted(expected):
                    return False
            elif actual != expected:
                return False
        return True

    def describe(self) -> dict:
        out: dict[str, Any] = {}
        if self.controller is not None:
            out["controller"] = self.controller
        if self.member is not None:
            out["member"] = self.member
        if self.partition is not None:
            out["partition"] = self.partition
        if self.broker is not None:
            out["broker"] = self.broker
        for name, expected in self.tests:
            out[name] = str(expected) if isinstance(expected, Comparison) else (
                list(expected) if isinstance(expected, tuple) else expected)
        return out


def partition_view(replicas: dict) -> dict:
    """One partition's entry of the view from every hosting broker's own state
    (``{broker: {"role", "leader_epoch", "isr", "high_watermark", ...}}``): the leader is
    the broker that believes it leads with the highest leader epoch."""
    leaders = sorted((s["leader_epoch"], b) for b, s in replicas.items() if s["role"] == "leader")
    if not leaders:
        return {"leader": None, "leader_epoch": None, "isr": [], "high_watermark": None, "replicas": replicas}
    leader = replicas[leaders[-1][1]]
    return {"leader": leaders[-1][1], "leader_epoch": leader["leader_epoch"], "isr": leader["isr"],
            "high_watermark": leader["high_watermark"], "replicas": replicas}


def cluster_view(controller: int | None, states: dict[int, dict[str, dict]], partitions: list[str],
                 members: dict[str, dict] | None = None) -> dict:
    """The view triggers judge and roles resolve on, from each running broker's state of
    the partitions it hosts (``states``: broker -> partition -> replica state) and each
    group member's ``member_view`` (node name -> entry)."""
    return {"controller": controller,
            "partitions": {p: partition_view({b: s[p] for b, s in states.items() if p in s}) for p in partitions},
            "members": dict(members or {})}
