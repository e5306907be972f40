"""The life of a scenario's fault step and of the nemesis, written once for both
bindings. Each is a generator that yields how many milliseconds to wait next; the
binding drives it on its own clock (the simulation with simpy timeouts, the real
binding with one scheduler thread) and the generator acts through ``run``:

- ``run.now_ms()``: the time since the run's schedule started, in ms;
- ``run.final_phase``: true once the final phase began (nothing starts or ends then);
- ``run.cluster_view()``: the view triggers judge (faults/triggers.py);
- ``run.faults.apply(fault, step=None)`` -> a fault id when it lasts, and ``run.faults.undo(id)``;
- ``run.trace(node, type, fields)``.
"""
from __future__ import annotations

from typing import Iterator

from faults.events import trigger_fields
from faults.nemesis import nemesis_fault


def step_life(step, duration_ms: int, run, poll_ms: float) -> Iterator[float]:
    """A scheduled or triggered fault (a scenarios.model.FaultStep), undone after ``for``
    when it has one. A ``when:`` condition is tested every ``poll_ms`` from ``at`` until
    it holds or ``duration`` passes."""
    yield step.at_ms
    if step.when is not None:
        while not step.when.holds(run.cluster_view()):
            if run.now_ms() >= duration_ms:
                run.trace("nemesis", "trigger_never_fired", trigger_fields(step, fired=False))
                return
            yield poll_ms
        run.trace("nemesis", "trigger_fired", trigger_fields(step, fired=True))
    if step.delay_ms:
        yield step.delay_ms
    if run.now_ms() > duration_ms or run.final_phase:
        return
    fault_id = run.faults.apply(step.fault, step)
    if step.for_ms is not None and fault_id is not None:
        yield step.for_ms
        if not run.final_phase:
            run.faults.undo(fault_id)


def nemesis_life(spec, rng, run) -> Iterator[float]:
    """Random faults from ``rng`` (the run's ``nemesis`` stream): wait an exponential gap,
    stop if the fault would end after ``stop``, draw and apply it, hold, undo, repeat."""
    yield spec.start_ms
    while True:
        gap = rng.expovariate(1.0 / spec.interval_ms)
        yield gap
        if run.now_ms() + spec.duration_ms > spec.stop_ms or run.final_phase:
            return
        fault_id = run.faults.apply(nemesis_fault(rng, spec))
        yield spec.duration_ms
        if run.final_phase:
            return
        run.faults.undo(fault_id)
