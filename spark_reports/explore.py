"""``isrlab explore --master``: the search's seeds as Spark tasks, on the session of
``isrlab sweep`` (spark_reports.session: local[N] or a standalone cluster, the project
shipped to its executors).

The search goes in batches, one Spark job each: a few seeds per core, one seed per
task, so that the budget is looked at between jobs (a job takes about two runs' time)
and ``--max-runs`` caps the last batch. A batch whose runs include a violation ends the
search with its lowest violating seed: every lower seed ran in this batch or an
earlier one and did not violate, so the seed is the one the local search with
``--jobs 1`` finds, and the explorer's shrink and file are the same. Each task sends
back only its verdict and drawn scenario as text (a few kilobytes), which the driver
writes to the search folder as the local search does. Shrinking is sequential (each
edit depends on the last kept one) and stays on the driver.

The tasks run the simulation as the sweep's do (spark_reports.executor): the task's
function comes from a module that imports none of the simulation, the setup (the
switch to the compiled build, isrlab/compiled.py) runs first, and the workers are the
pool of that setup (``worker_pool``), so a search runs compiled wherever a sweep would.
"""
from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Callable

from scenarios.explore.search import Progress, SearchOutcome, search_line
from scenarios.model import Scenario
from scenarios.runner import _rebuild_failure
from spark_reports.executor import explore_task, worker_pool

SEEDS_PER_CORE = 2  # seeds of a batch per core: a job lasts about two runs


def spark_searcher(spark, executor_setup: Callable[[], object] | None = None) -> Callable[..., SearchOutcome]:
    """A searcher for scenarios.explore.explorer.Options: the search on ``spark``, each
    Python worker calling ``executor_setup`` (isrlab.compiled.executor_setup's) before it
    imports the simulation. ``jobs`` and ``worker_setup`` are the local search's; the
    master decides here."""
    def searcher(scenario: Scenario, prop: str, first_seed: int, budget_s: float, max_runs: int | None, jobs: int,
                 work_dir: Path, progress: Progress, worker_setup=None) -> SearchOutcome:
        return spark_search(spark, scenario, prop, first_seed, budget_s, max_runs, work_dir, progress,
                            executor_setup)
    return searcher


def spark_search(spark, scenario: Scenario, prop: str, first_seed: int, budget_s: float, max_runs: int | None,
                 work_dir: Path, progress: Progress,
                 executor_setup: Callable[[], object] | None = None) -> SearchOutcome:
    """Seeds ``first_seed``, ``first_seed + 1``, ... in batches of Spark jobs until a
    violation, ``budget_s`` seconds or ``max_runs`` runs. The outcome's ``loaded_from``
    says, per task, where its worker loaded the simulation from."""
    sc = spark.sparkContext
    batch = max(1, SEEDS_PER_CORE * sc.defaultParallelism)
    started = time.monotonic()
    runs, next_seed = 0, first_seed
    loaded_from: list[str] = []
    shipped = sc.broadcast(scenario)
    task = partial(explore_task, executor_setup, shipped, prop)

    def outcome(seed: int | None = None, invariant: str | None = None) -> SearchOutcome:
        return SearchOutcome(runs, time.monotonic() - started, seed, invariant, tuple(loaded_from))
    # every Python function of the search is wrapped inside worker_pool: the setup's workers
    with worker_pool(sc, executor_setup):
        try:
            while True:
                left = None if max_runs is None else max_runs - runs
                if left is not None and left <= 0 or time.monotonic() - started >= budget_s:
                    return outcome()
                seeds = list(range(next_seed, next_seed + (batch if left is None else min(batch, left))))
                sc.setJobGroup(f"isrlab-explore-{time.time_ns()}", f"explore seeds {seeds[0]}-{seeds[-1]}")
                judged = sc.parallelize(seeds, len(seeds)).map(task).collect()
                runs += len(seeds)
                next_seed += len(seeds)
                loaded_from.extend(row[-1] for row in judged)
                _keep([row[:-1] for row in judged], work_dir, scenario)
                progress.say(search_line(runs, time.monotonic() - started, budget_s, max_runs))
                violating = sorted((seed, invariant) for seed, bad, invariant, *_ in judged if bad)
                if violating:
                    return outcome(*violating[0])
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            shipped.destroy()


def _keep(judged: list[tuple], work_dir: Path, scenario: Scenario) -> None:
    """Each seed's verdict and drawn scenario in ``work_dir/seed-N/`` (what the local
    search keeps); a run whose simulation raised stops the search as it does there."""
    from scenarios.explore.draw import DRAWN_FILE
    from scenarios.runner import VERDICT_FILE, replay_command
    for seed, _, _, verdict, drawn, error in sorted(judged):
        folder = work_dir / f"seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in ((VERDICT_FILE, verdict), (DRAWN_FILE, drawn)):
            if text is not None:
                (folder / name).write_text(text, encoding="utf-8")
        if error is not None:
            (folder / "error.txt").write_text(error[1], encoding="utf-8")
            raise _rebuild_failure(error[0], seed, replay_command(scenario.path, seed, folder, scenario.variant,
                                                                  scenario.settings), folder / "error.txt")
