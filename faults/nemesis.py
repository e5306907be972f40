"""The nemesis's draw: one random fault of the scenario's kinds on random targets, from
the run's seeded generator. Both bindings draw with it, so the same seed asks both for
the same faults (each binding's executor then applies what it can)."""
from __future__ import annotations

from typing import Callable

from faults import model as fm
from faults.nodes import SERVICE_NODE, broker_node


def nemesis_fault(rng, spec) -> fm.Fault:
    """One random fault of the nemesis's kinds, on random targets."""
    kind = spec.kinds[rng.randrange(len(spec.kinds))]
    target = spec.targets[rng.randrange(len(spec.targets))]
    node = broker_node(target)
    simple: dict[str, Callable[[tuple[fm.BrokerRef, ...]], fm.Fault]] = {
        "crash": fm.Crash, "power_loss": fm.PowerLoss, "pause": fm.Pause, "shutdown": fm.Shutdown,
        "expire_session": fm.ExpireSession}
    if kind in simple:
        return simple[kind]((target,))
    if kind == "isolate":
        return fm.Isolate((node,))
    if kind == "random_halves":
        return fm.RandomHalves()
    if kind == "bridge":
        others = [broker_node(b) for b in spec.targets if b != target]
        rng.shuffle(others)
        half = len(others) // 2
        return fm.Bridge((tuple(others[:half]) + (node,), tuple(others[half:]) + (node, SERVICE_NODE)), node)
    if kind == "reset":  # the nemesis knows no client's name: the target's links to brokers and zk
        peers = tuple(broker_node(b) for b in spec.targets if b != target)
        return fm.Reset(((node,), peers + (SERVICE_NODE,)))
    if kind == "slow_fsync":
        return fm.SlowFsync((target,), float(rng.choice((50, 200, 1000))))
    if kind == "clock":
        return fm.ClockJump((target,), rng.choice((-1, 1)) * rng.randrange(1000, 60000))
    if kind == "crash_controller":
        return fm.Crash((fm.CONTROLLER,))
    if kind == "isolate_controller":
        return fm.Isolate((fm.CONTROLLER,))
    other = broker_node(spec.targets[rng.randrange(len(spec.targets))])
    return fm.LinkFault((node,), (other,), True, latency_ms=float(rng.choice((20, 100, 500))),
                        loss=rng.choice((0.0, 0.1, 0.3)))
