"""The faults a scenario, a property test or the explorer can ask for.

Faults are plain frozen data naming their targets (broker ids, node names); the
simulated executor (sim/faults.py) applies them to the simpy world, and the real
executor (step 7) to processes and connections.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Crash:
    """Kill the process: memory is lost, the OS page cache survives."""
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class PowerLoss:
    """Lose power: memory and every byte not fsynced are lost."""
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class Restart:
    """Start the process again (it recovers from what its disk kept)."""
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class Isolate:
    """Cut every link to and from these nodes (brokers, ``zk`` or clients)."""
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """Keep only links within each group; nodes in no group keep all their links."""
    groups: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Heal:
    """Restore every network link."""


Fault = Crash | PowerLoss | Restart | Isolate | Split | Heal

KINDS = {
    "crash": Crash,
    "power_loss": PowerLoss,
    "restart": Restart,
    "isolate": Isolate,
    "partition": Split,
    "heal": Heal,
}


def describe(fault: Fault) -> dict:
    """The fields a fault event carries in the trace."""
    if isinstance(fault, (Crash, PowerLoss, Restart)):
        return {"brokers": list(fault.brokers)}
    if isinstance(fault, Isolate):
        return {"nodes": list(fault.nodes)}
    if isinstance(fault, Split):
        return {"groups": [list(g) for g in fault.groups]}
    return {}


def kind_of(fault: Fault) -> str:
    for name, cls in KINDS.items():
        if isinstance(fault, cls):
            return name
    raise TypeError(type(fault).__name__)
