"""``isrlab sweep``: the seeds of a scenario, its variants and a grid of settings, run as
Spark tasks (each task a range of seeds of one configuration), written as Parquet tables
partitioned by scenario and configuration (spark_reports.schemas, docs/spark.md)."""
from __future__ import annotations

import importlib.util
import itertools
import json
import math
import shutil
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

from analysis.seed_agreement import run_signature
from scenarios.model import Scenario
from scenarios.parse import load_scenario
from scenarios.runner import KEEP_CHOICES, replay_command
from spark_reports.executor import Tally, is_compiled, part_task, sweep_task, worker_pool
from spark_reports.schemas import MANIFEST_FILE, PARTITION_COLUMNS, SWEEP_FORMAT_VERSION, TABLES, TRACE_SCHEMA_VERSION

MAX_SEEDS_PER_TASK = 25
# A task takes this share of what is left per core: 1/2, then less and less, down to
# one seed (guided scheduling).
GUIDED_SHARE = 2

class SweepError(Exception):
    """Bad input to a sweep (a grid, an output folder): one line for the user."""


@dataclass(frozen=True)
class Config:
    """One configuration of a sweep: a variant (or the base scenario) at one grid point."""
    label: str
    variant: str | None
    grid: str  # "key=value;key=value", "" without --grid
    settings: tuple[str, ...]  # every --set and grid assignment, in order
    scenario: Scenario
    replay_parts: tuple[str, str]  # the replay command around its seed


@dataclass(frozen=True)
class SweepResult:
    out: Path
    runs: int
    failures: list[dict]  # seed, config, replay of every failing run
    errors: list[dict]  # seed, config, message, replay of every run whose simulation raised
    wall_seconds: float
    tasks: int
    same_results: tuple[dict, ...] = ()  # config, runs, outcome of each configuration whose seeds changed nothing
    tasks_compiled: int = 0  # tasks whose executor ran the compiled simulation (docs/compiled.md)
    simulation_files: tuple[str, ...] = ()  # where the executors loaded it from (broker_core.log's __file__)


def parse_grid(items: Sequence[str]) -> list[list[str]]:
    """``key=v1,v2`` per item -> their product as lists of ``key=value`` assignments."""
    axes = []
    for item in items:
        key, sep, values = item.partition("=")
        choices = [v.strip() for v in values.split(",")] if sep else []
        if not key.strip() or not choices or any(not c for c in choices):
            raise SweepError(f"--grid {item!r}: expected key=value1,value2,... e.g. "
                             "cluster.config.min.insync.replicas=1,2")
        axes.append([f"{key.strip()}={c}" for c in choices])
    return [list(point) for point in itertools.product(*axes)]


def plan_configs(file: str, variant: str | None, grid: Sequence[str], settings: Sequence[str] = ()) -> list[Config]:
    configs = []
    for point in parse_grid(grid):
        all_settings = tuple(settings) + tuple(point)
        scenario = load_scenario(file, all_settings)
        chosen = list(scenario.variants) or [scenario]
        if variant is not None:
            chosen = [v for v in scenario.variants if v.variant == variant]
            if not chosen:
                names = ", ".join(str(v.variant) for v in scenario.variants) or "none"  # a variant is always named
                raise SweepError(f"--variant {variant}: no such variant in {file}; its variants: {names}")
        grid_label = ";".join(point)
        for one in chosen:
            label = "|".join(x for x in (one.variant or "base", grid_label) if x)
            command = replay_command(file, 0, None, one.variant, all_settings)
            before, _, after = command.partition(" --seed 0")
            configs.append(Config(label, one.variant, grid_label, all_settings, one, (before, after)))
    return configs


def plan_tasks(n_configs: int, seeds: Sequence[int], parallelism: int) -> list[tuple[int, tuple[int, ...]]]:
    """(config index, seeds) per task, in the order Spark starts them: each takes about
    half of the runs left per core (at most MAX_SEEDS_PER_TASK), so the tasks shrink to
    one seed at the end (guided scheduling). Each task costs Spark and its Python worker
    some 0.1 to 0.5 s between two tasks on the loaded 2-core machine, so few tasks are
    wanted; and the last ones must be short, or one core runs a long task alone while
    the other waits (equal tasks of 3 seeds left a core idle for 1.8 s of a 60 s job)."""
    runs = [(c, seed) for c in range(n_configs) for seed in seeds]
    tasks, start = [], 0
    while start < len(runs):
        left = len(runs) - start
        size = max(1, min(MAX_SEEDS_PER_TASK, math.ceil(left / (GUIDED_SHARE * max(parallelism, 1)))))
        config = runs[start][0]
        chunk = [seed for c, seed in runs[start:start + size] if c == config]  # never two configurations
        tasks.append((config, tuple(chunk)))
        start += len(chunk)
    return tasks


def has_pyarrow() -> bool:
    """pyarrow importable here: what the tasks need to write their own Parquet files."""
    return importlib.util.find_spec("pyarrow") is not None


def pyarrow_on_executors(sc) -> bool:
    """Whether the tasks can write their tables' files themselves: the driver and the
    executors have pyarrow. Local executors run the driver's own Python; a cluster's
    are asked with one small task (its workers may have Python and pyspark alone)."""
    if not has_pyarrow():
        return False
    if sc.master.startswith("local"):
        return True
    return bool(sc.parallelize([0], 1).map(lambda _: has_pyarrow()).first())


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out: {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
        raise SweepError(f"--out: {out} holds other files; name an empty or new folder (or an earlier sweep's, "
                         "which is replaced)")


def run_sweep(spark, file: str, seeds: Sequence[int], out: Path, variant: str | None = None,
              grid: Sequence[str] = (), settings: Sequence[str] = (), keep: str = "failing",
              progress: Callable[[dict], None] | None = None, configs: Sequence[Config] | None = None,
              arrow: bool | None = None, executor_setup: Callable[[], object] | None = None) -> SweepResult:
    """``configs``: the configurations to run, when planned already (by default
    plan_configs of the file, variant, grid and settings). ``arrow``: whether the tasks
    write their tables' Parquet files themselves with pyarrow (by default: when the
    driver and the executors have it), or hand Spark their rows to write.
    ``executor_setup``: a picklable callable each Python worker of the sweep calls before
    it imports the simulation (isrlab's switch to the compiled build); the sweep's
    workers are its own, apart from other jobs'."""
    if keep not in KEEP_CHOICES:
        raise SweepError(f"--keep {keep}: one of {', '.join(KEEP_CHOICES)}")
    check_out(out)
    configs = list(configs) if configs is not None else plan_configs(file, variant, grid, settings)
    sc = spark.sparkContext
    tasks = plan_tasks(len(configs), list(seeds), sc.defaultParallelism)
    started = time.perf_counter()
    tally = Tally(sc)
    shipped = sc.broadcast(configs)
    arrow = pyarrow_on_executors(sc) if arrow is None else arrow
    if out.exists():
        shutil.rmtree(out)
    group = f"isrlab-sweep-{time.time_ns()}"  # this sweep's simulations (the progress counts their tasks)
    watcher = _Watcher(sc, group, len(tasks), tally.runs, tally.failed, started, progress)
    # The task's module imports none of the simulation, so that the setup comes first.
    # Every Python function of the sweep is wrapped inside worker_pool: workers of its own.
    with worker_pool(sc, executor_setup):
        try:
            watcher.start()
            sc.setJobGroup(group, f"sweep of {file}")
            if arrow:
                _run_writing_parts(sc, tasks, partial(part_task, executor_setup, shipped, keep, tally,
                                                      str(out.resolve()), str(uuid.uuid4())), out)
            else:
                _run_then_write(spark, sc, tasks, partial(sweep_task, executor_setup, shipped, keep, tally), out)
        finally:
            watcher.stop()
            sc.setLocalProperty("spark.jobGroup.id", None)
    shipped.destroy()
    failures = [dict(zip(("config", "seed", "replay"), f)) for f in sorted(tally.failing.value)]
    errors = [dict(zip(("config", "seed", "message", "replay"), e)) for e in sorted(tally.raising.value)]
    loaded_from = tally.loaded_from.value
    result = SweepResult(out, tally.runs.value, failures, errors, time.perf_counter() - started, len(tasks),
                         same_results(configs, len(seeds), tally.signatures.value, errors),
                         sum(1 for f in loaded_from if is_compiled(f)), tuple(sorted(set(loaded_from))))
    _write_manifest(out, file, seeds, configs, keep, result)
    return result


def _run_writing_parts(sc, tasks, task_function, out: Path) -> None:
    """Every simulation, a task per core at once, each task writing its runs' tables as
    Parquet part files (spark_reports.parts): no DataFrame, no Spark SQL, and only the
    list of files written comes back. Then the tables' folders, as Spark's writer leaves
    them."""
    from spark_reports.parts import mark_tables_done
    sc.parallelize(list(enumerate(tasks)), len(tasks)).map(task_function).collect()
    mark_tables_done(out)


def _run_then_write(spark, sc, tasks, task_function, out: Path) -> None:
    """Without pyarrow on the executors: every simulation runs in one plain action, a
    task per core at once (a DataFrame write of a Python RDD ran its tasks one after
    another: measured on local[2], 8 one-second tasks took 8 s), each leaving its rows in
    Spark's cache; then Spark writes each table from them, row by row, pickled. The count
    is the JVM's (of the RDD's pickled batches): a count in Python would hold a second
    Python worker per task."""
    from pyspark import StorageLevel
    payloads = (sc.parallelize(tasks, len(tasks)).flatMap(task_function).persist(StorageLevel.MEMORY_AND_DISK))
    payloads._jrdd.count()
    sc.setJobGroup("isrlab-sweep-write", "the sweep's tables")
    for name in TABLES:
        # the rows are built to the schema by spark_reports.rows: Spark need not check them again
        rows = payloads.filter(lambda pair, n=name: pair[0] == n).flatMap(lambda pair: pair[1])
        frame = spark.createDataFrame(rows, TABLES[name], verifySchema=False)
        frame.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(out / name))
    payloads.unpersist()


def _write_manifest(out: Path, file: str, seeds, configs: Sequence[Config], keep: str, result: SweepResult) -> None:
    manifest = {"sweep_format_version": SWEEP_FORMAT_VERSION, "trace_schema_version": TRACE_SCHEMA_VERSION,
                "scenario_file": str(file), "seeds": [min(seeds), max(seeds)] if seeds else [], "runs": result.runs,
                "seed_count": len(seeds), "keep": keep, "tables": sorted(TABLES),
                "configs": [{"config": c.label, "variant": c.variant, "grid": c.grid, "settings": list(c.settings)}
                            for c in configs],
                "failures": result.failures, "errors": result.errors}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def same_results(configs: Sequence[Config], seeds: int, signatures: set, errors: list[dict]) -> tuple[dict, ...]:
    """The configurations whose every seed ran and gave one result (the same outcome and
    metrics, analysis.seed_agreement), from the tasks' (config, outcome, signature)."""
    raised = {e["config"] for e in errors}
    found = []
    for config in configs:
        mine = {(outcome, signature) for label, outcome, signature in signatures if label == config.label}
        if seeds >= 2 and len(mine) == 1 and config.label not in raised:
            found.append({"config": config.label, "runs": seeds, "outcome": next(iter(mine))[0]})
    return tuple(found)


class _Watcher:
    """Reports progress from the driver while the tasks run: tasks done (Spark's status
    tracker), runs and failures so far (accumulators, updated as each task ends)."""

    def __init__(self, sc, group: str, total_tasks: int, runs, failed, started: float, progress):
        self._sc, self._group, self._total, self._runs, self._failed = sc, group, total_tasks, runs, failed
        self._started, self._progress = started, progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        if self._progress:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._progress:
            self._thread.join()
            self._report()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self._report()

    def _report(self) -> None:
        tracker = self._sc.statusTracker()
        done = 0
        for job in tracker.getJobIdsForGroup(self._group):
            info = tracker.getJobInfo(job)
            for stage in (info.stageIds if info else ()):
                stage_info = tracker.getStageInfo(stage)
                done += stage_info.numCompletedTasks if stage_info else 0
        elapsed = time.perf_counter() - self._started
        runs = self._runs.value
        self._progress({"tasks_done": min(done, self._total), "tasks": self._total, "runs": runs,
                        "failures": self._failed.value, "runs_per_second": runs / elapsed if elapsed else 0.0})


def print_progress(state: dict) -> None:
    sys.stderr.write(f"\r  tasks {state['tasks_done']}/{state['tasks']}  runs {state['runs']}  "
                     f"{state['runs_per_second']:.1f} runs/s  failures so far {state['failures']}   ")
    sys.stderr.flush()
