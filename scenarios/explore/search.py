"""The search of ``isrlab explore``: run seed after seed of a scenario whose swarm block
draws each seed's faults (scenarios/swarm.py), in worker processes through the runner's
run_seeds (the machinery of ``isrlab run --seeds --jobs``), until one violates the
property or the budget is spent."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from analysis.checkers import TIMED_ANOMALIES, UNTESTED_NAMES
from broker_core.invariants import INVARIANTS
from scenarios.model import Scenario
from scenarios.runner import RunResult, run_seeds

# The results that count anomalies (a violation is a count above 0): the timed anomalies,
# the lost writes by acks, records no consumer saw, and the compaction checkers (which
# are invalid also when they had nothing to judge: only their judged anomalies count).
CHECKER_PROPERTIES: tuple[str, ...] = TIMED_ANOMALIES[:1] + ("lost_writes_acks_all", "lost_writes_acks_1") + \
    TIMED_ANOMALIES[1:] + ("unseen", "compacted_final_values", "resurrected_keys", "compacted_replicas_converge",
                           "offsets_unchanged", "keeping_up_consumer_sees_all")
# The replication invariants (docs/invariants.md), checked after every step of a run
# (--check-invariants): a run violates one when it stops the run. ``invariants``: any of them.
ANY_INVARIANT = "invariants"
PROPERTIES: tuple[str, ...] = CHECKER_PROPERTIES + INVARIANTS + (ANY_INVARIANT,)
CHUNK_PER_JOB = 50  # seeds handed to run_seeds at once, per worker


def is_invariant(prop: str) -> bool:
    """Whether the property is an invariant (the runs check them after every step)."""
    return prop in INVARIANTS or prop == ANY_INVARIANT


def violated(result: RunResult, prop: str) -> bool:
    """Whether the run broke the property. An invariant: it stopped the run (any of them
    for ``invariants``). A checker: its result is invalid, and for a checker that is also
    invalid when it judged nothing, it judged something."""
    if is_invariant(prop):
        return result.violation is not None and prop in (ANY_INVARIANT, result.violation.invariant)
    verdict = result.verdict
    if verdict is None:
        return False
    outcome = verdict[prop]
    return not outcome.valid and (prop not in UNTESTED_NAMES or outcome.details.get("tested") is True)


class Progress:
    """At most a line a second on stderr (one line rewritten in place on a terminal)."""

    def __init__(self, stream: TextIO = sys.stderr, interval_s: float = 1.0):
        self.stream = stream
        self.interval_s = interval_s
        self.last = 0.0
        self.tty = stream.isatty()

    def say(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.interval_s:
            return
        self.last = now
        if self.tty:
            self.stream.write(f"\r{text:<78}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class SearchOutcome:
    runs: int
    seconds: float
    seed: int | None = None  # the lowest violating seed among the runs that ended
    invariant: str | None = None  # the invariant that stopped it (an invariant property)
    # where each task's simulation was loaded from, when the runs were Spark tasks
    # (spark_reports.explore): a .py file interpreted, an extension module compiled
    loaded_from: tuple[str, ...] = ()


def found(results: list[RunResult], prop: str) -> tuple[int, str | None] | None:
    """The lowest violating seed of the results, and the invariant that stopped it."""
    violating = [r for r in results if violated(r, prop)]
    if not violating:
        return None
    first = min(violating, key=lambda r: r.seed)
    return first.seed, first.violation.invariant if first.violation is not None else None


def search(scenario: Scenario, prop: str, first_seed: int, budget_s: float, max_runs: int | None, jobs: int,
           work_dir: Path, progress: Progress, worker_setup: Callable[[], object] | None = None) -> SearchOutcome:
    """Seeds ``first_seed``, ``first_seed + 1``, ... until a violation, ``budget_s``
    seconds or ``max_runs`` runs. Only verdicts stay in ``work_dir``."""
    started = time.monotonic()
    runs, next_seed = 0, first_seed
    while True:
        left = None if max_runs is None else max_runs - runs
        if left is not None and left <= 0 or time.monotonic() - started >= budget_s:
            return SearchOutcome(runs, time.monotonic() - started)
        count = min(CHUNK_PER_JOB * jobs, left) if left is not None else CHUNK_PER_JOB * jobs
        seeds = list(range(next_seed, next_seed + count))
        before = runs

        def on_done(seed: int, done: int) -> None:
            progress.say(search_line(before + done, time.monotonic() - started, budget_s, max_runs))

        def stop_when(result: RunResult) -> bool:
            return violated(result, prop) or time.monotonic() - started >= budget_s

        results = run_seeds(scenario, seeds, work_dir, jobs=jobs, keep="none", on_done=on_done,
                            worker_setup=worker_setup, stop_when=stop_when, plot_failing=False,
                            check_invariants=is_invariant(prop))
        runs += len(results)
        next_seed += count
        first = found(results, prop)
        if first is not None:
            return SearchOutcome(runs, time.monotonic() - started, *first)


def search_line(runs: int, elapsed_s: float, budget_s: float, max_runs: int | None) -> str:
    """The search's progress: what is known while it runs (it stops at the first
    violation, so there is never a count of them to show)."""
    limit = f" of {max_runs}" if max_runs is not None else ""
    return (f"explore: {runs}{limit} runs, none violating yet ({runs / max(elapsed_s, 1e-9):.1f} runs/s), "
            f"{elapsed_s:.0f}s of {budget_s:.0f}s")
