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
from analysis.verdict import Verdict
from scenarios.model import Scenario
from scenarios.runner import RunResult, run_seeds

# The results that count anomalies (a violation is a count above 0): the timed anomalies,
# the lost writes by acks, records no consumer saw, and the compaction checkers (which
# are invalid also when they had nothing to judge: only their judged anomalies count).
PROPERTIES: tuple[str, ...] = TIMED_ANOMALIES[:1] + ("lost_writes_acks_all", "lost_writes_acks_1") + \
    TIMED_ANOMALIES[1:] + ("unseen", "compacted_final_values", "resurrected_keys", "compacted_replicas_converge",
                           "offsets_unchanged", "keeping_up_consumer_sees_all")
CHUNK_PER_JOB = 50  # seeds handed to run_seeds at once, per worker


def violated(verdict: Verdict | None, prop: str) -> bool:
    """Whether the run broke the property: its result is invalid, and for a checker that
    is also invalid when it judged nothing, it judged something."""
    if verdict is None:
        return False
    result = verdict.results[prop]
    return not result.valid and (prop not in UNTESTED_NAMES or result.details.get("tested") is True)


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
    found: RunResult | None  # the lowest violating seed among the runs that ended


def search(scenario: Scenario, prop: str, first_seed: int, budget_s: float, max_runs: int | None, jobs: int,
           work_dir: Path, progress: Progress, worker_setup: Callable[[], object] | None = None) -> SearchOutcome:
    """Seeds ``first_seed``, ``first_seed + 1``, ... until a violation, ``budget_s``
    seconds or ``max_runs`` runs. Only verdicts stay in ``work_dir``."""
    started = time.monotonic()
    runs, next_seed = 0, first_seed
    while True:
        left = None if max_runs is None else max_runs - runs
        if left is not None and left <= 0 or time.monotonic() - started >= budget_s:
            return SearchOutcome(runs, time.monotonic() - started, None)
        count = min(CHUNK_PER_JOB * jobs, left) if left is not None else CHUNK_PER_JOB * jobs
        seeds = list(range(next_seed, next_seed + count))
        finished = [runs]

        def on_done(seed: int, done: int) -> None:
            finished[0] = runs + done
            elapsed = time.monotonic() - started
            progress.say(f"explore: {finished[0]} runs ({finished[0] / max(elapsed, 1e-9):.1f}/s), "
                         f"0 violations, {elapsed:.0f}s of {budget_s:.0f}s")

        def stop_when(result: RunResult) -> bool:
            return violated(result.verdict, prop) or time.monotonic() - started >= budget_s

        results = run_seeds(scenario, seeds, work_dir, jobs=jobs, keep="none", on_done=on_done,
                            worker_setup=worker_setup, stop_when=stop_when, plot_failing=False)
        runs += len(results)
        next_seed += count
        found = [r for r in results if violated(r.verdict, prop)]
        if found:
            return SearchOutcome(runs, time.monotonic() - started, min(found, key=lambda r: r.seed))
