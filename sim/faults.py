"""The simulated executor of the fault vocabulary (faults/model.py)."""
from __future__ import annotations

from faults import model as fm


class SimFaultExecutor:
    def __init__(self, world):
        self.world = world

    def apply(self, fault: fm.Fault) -> None:
        world = self.world
        world.trace("nemesis", "fault_started", {"fault": fm.kind_of(fault), **fm.describe(fault)})
        if isinstance(fault, fm.Crash):
            for broker in fault.brokers:
                world.hosts[broker].crash()
        elif isinstance(fault, fm.PowerLoss):
            for broker in fault.brokers:
                world.hosts[broker].power_loss()
        elif isinstance(fault, fm.Restart):
            for broker in fault.brokers:
                world.hosts[broker].start()
        elif isinstance(fault, fm.Isolate):
            for node in fault.nodes:
                world.network.isolate(node)
        elif isinstance(fault, fm.Split):
            world.network.split([list(g) for g in fault.groups])
        elif isinstance(fault, fm.Heal):
            world.network.heal()
        else:
            raise TypeError(f"no simulated executor for {type(fault).__name__}")
