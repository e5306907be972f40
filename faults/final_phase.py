"""The final phase of a run (docs/scenarios.md, "The final phase"), written once for both
bindings, so that they run its steps in one order:

1. ``workload_stopped``: the producers stop and the binding waits, until the largest
   producer ``request_timeout``, for what they have in flight; then no fault starts or
   ends on the schedule any more.
2. ``final_phase_started``: every fault is healed and every down broker restarted (with
   ``restart: all``, every broker is killed and started again).
3. Wait, up to ``max_wait``, until the cluster has settled (every partition one leader
   whose ISR holds every replica, all of them at one log end), restarting brokers that
   exited on their own; ``cluster_settled`` or ``cluster_not_settled``.
4. Every replica writes the digests of its log (``replica_log``).
5. The final read of every partition from the start, for at most another ``max_wait``.
6. The consumers poll until they reach what the read found (at most another
   ``max_wait``), then stop: ``consumers_caught_up`` or ``consumers_behind``.

:func:`final_phase_steps` decides what comes next; the binding carries it out. Whatever takes
time is a request the generator yields (:class:`Wait`, :class:`StopProducers`,
:class:`ReadEverything`): the simulation turns it into simpy events, the real binding
into blocking calls on its own clock, so neither needs the other's way of waiting.
Whatever is instantaneous is a call on ``run`` (:class:`FinalPhaseRun`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, Mapping, Protocol, Sequence, Union

SETTLE_POLL_MS = 100  # how often the waits of steps 3 and 6 look again


@dataclass(frozen=True)
class Wait:
    """Let ``ms`` pass; the answer is None."""
    ms: int


@dataclass(frozen=True)
class StopProducers:
    """Step 1: stop creating records, wait until nothing is in flight or the run's clock
    reaches ``deadline_ms``, then give up on what is left; the answer is None."""
    deadline_ms: float


@dataclass(frozen=True)
class ReadEverything:
    """Step 5: the final read, given up at ``deadline_ms``; the answer maps each partition
    read to the offset the read ended at (its high watermark), in the binding's own
    partition keys, which only the binding's ``lagging_consumers`` reads."""
    deadline_ms: float


Request = Union[Wait, StopProducers, ReadEverything]


@dataclass(frozen=True)
class Lag:
    """A consumer behind the final read on one partition; ``given_up`` when it stopped
    consuming it (an exception without a reset policy), so waiting longer cannot help."""
    consumer: str
    partition: str
    given_up: bool


class FinalPhaseRun(Protocol):
    """What the final phase asks of a binding beyond its requests."""

    def clock_ms(self) -> float:
        """The run's clock, in ms (the time the trace is written at)."""

    def trace(self, node: str, type_: str, fields: dict) -> None: ...

    def end_fault_schedule(self) -> None:
        """From now on no fault step or nemesis fault starts or ends."""

    def heal_everything(self) -> None:
        """End every fault and restart every broker that is down."""

    def restart_all(self) -> None:
        """Kill every broker and start it again (``final.restart: all``)."""

    def restart_exited(self) -> None:
        """Restart, as a supervisor would, a broker that exited on its own (at most once
        per session timeout)."""

    def is_settled(self) -> bool: ...

    def trace_replica_logs(self) -> None:
        """Step 4: one ``replica_log`` per replica."""

    def has_consumers(self) -> bool: ...

    def lagging_consumers(self, ends: dict) -> list[Lag]:
        """The consumers behind ``ends`` (the final read's answer), in a stable order."""

    def stop_consumers(self) -> None: ...


def partition_settled(states: Mapping[int, Mapping[str, Any]], replicas: Sequence[int]) -> bool:
    """The settle rule of one partition, the same in both bindings, from each hosting
    broker's own state of it (``states``: broker -> replica state, faults/triggers.py's
    fields): one leader, whose ISR holds every replica and whose high watermark has
    reached its log end (the final read stops at the high watermark), and every
    replica's log ends where the leader's does."""
    leaders = [b for b, s in states.items() if s["role"] == "leader"]
    if len(leaders) != 1:
        return False
    leader = states[leaders[0]]
    if sorted(leader["isr"]) != sorted(replicas) or leader["high_watermark"] != leader["log_end_offset"]:
        return False
    return all(b in states and states[b]["log_end_offset"] == leader["log_end_offset"] for b in replicas)


def final_phase_steps(run: FinalPhaseRun, max_wait_ms: int, restart: str,
                producer_timeout_ms: int) -> Generator[Request, Any, bool]:
    """The final phase on ``run``; returns whether the cluster settled. ``max_wait_ms``
    and ``restart`` are the scenario's ``final``; ``producer_timeout_ms`` the largest
    ``request_timeout`` of its producers."""
    run.trace("world", "workload_stopped", {})
    yield StopProducers(run.clock_ms() + producer_timeout_ms)
    run.end_fault_schedule()
    run.trace("world", "final_phase_started", {"max_wait_ms": max_wait_ms, "restart": restart})
    run.heal_everything()
    if restart == "all":  # every process restarts and recovers from its disk
        run.restart_all()
    started = run.clock_ms()
    deadline = started + max_wait_ms
    while run.clock_ms() < deadline and not run.is_settled():
        yield Wait(SETTLE_POLL_MS)
        run.restart_exited()
    settled = run.is_settled()
    run.trace("world", "cluster_settled" if settled else "cluster_not_settled",
              {"waited_ms": int(run.clock_ms() - started)})
    run.trace_replica_logs()
    ends = yield ReadEverything(run.clock_ms() + max_wait_ms)
    yield from _consumers_catch_up(run, ends, run.clock_ms() + max_wait_ms)
    return settled


def carried_out(steps: Generator[Request, Any, bool],
                carry_out: Callable[[Request], Generator[Any, Any, Any]]) -> Generator[Any, Any, bool]:
    """Drive ``steps`` (final_phase_steps) through a binding: ``carry_out(request)`` is a
    generator whose yields go to the binding's scheduler (simpy's events) and whose
    return value answers the request. Returns whether the cluster settled."""
    answer = None
    while True:
        try:
            request = steps.send(answer)
        except StopIteration as done:
            return bool(done.value)
        answer = yield from carry_out(request)


def carried_out_blocking(steps: Generator[Request, Any, bool], carry_out: Callable[[Request], Any]) -> bool:
    """``carried_out`` for a binding whose ``carry_out`` blocks and returns the answer."""
    def at_once(request: Request) -> Generator[Any, Any, Any]:
        return carry_out(request)
        yield  # never reached: makes this a generator that yields nothing

    try:
        next(carried_out(steps, at_once))
    except StopIteration as done:
        return bool(done.value)
    raise RuntimeError("a blocking final phase step yielded")


def _consumers_catch_up(run: FinalPhaseRun, ends: dict, deadline_ms: float) -> Generator[Request, Any, None]:
    """Consumers keep polling until they reach what the final read found, so that a
    record no consumer saw is a real anomaly, not the end of the workload."""
    started = run.clock_ms()
    while (run.has_consumers() and any(not lag.given_up for lag in run.lagging_consumers(ends))
           and run.clock_ms() < deadline_ms):
        yield Wait(SETTLE_POLL_MS)
    lagging = [[lag.consumer, lag.partition] for lag in run.lagging_consumers(ends)]
    run.stop_consumers()
    if run.has_consumers():
        run.trace("world", "consumers_caught_up" if not lagging else "consumers_behind",
                  {"waited_ms": int(run.clock_ms() - started), "behind": lagging[:20]})
