"""What a sweep's Spark task runs on an executor, kept apart from the simulation.

Unpickling a task's function imports the modules it names. This module imports the
standard library, pyspark and the tables' schemas only, so that unpickling the sweep's
task imports none of the simulation: the task's ``setup`` (the caller's, e.g. isrlab's
switch to the mypyc build, docs/compiled.md) runs first, and only then are the
simulation's modules imported, compiled or not. The sweep's tasks also get Python
workers of their own (``worker_pool``): a worker that another job had left with the
interpreted modules imported could no longer switch.
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from pyspark.accumulators import AccumulatorParam
from pyspark.serializers import CloudPickleSerializer

from spark_reports.schemas import TABLES  # imports none of the compiled modules (tests/spark_reports/test_sweep_compiled.py)

if TYPE_CHECKING:
    from spark_reports.sweep import Config

# The environment variable that keys the sweep's own Python workers (Spark keeps one pool
# of workers per distinct environment); its value names the setup.
POOL_ENV = "ISRLAB_SWEEP_WORKERS"
# A compiled module of the simulation: where it was loaded from tells which code ran.
PROBE_MODULE = "broker_core.log"


def sweep_task(setup: Callable[[], object] | None, configs, keep: str, tally: "Tally",
               task: tuple[int, tuple[int, ...]]) -> list[tuple[str, list[tuple]]]:
    """One task of a sweep whose executors lack pyarrow: the setup, then its seeds' rows,
    a list per table, for Spark to write (spark_reports.sweep's run_sweep)."""
    if setup is not None:
        setup()
    payloads = task_rows(tally.counted(run_task(configs.value, keep, task)))
    tally.loaded_from.add([simulation_file()])
    return payloads


def part_task(setup: Callable[[], object] | None, configs, keep: str, tally: "Tally", out: str, sweep_id: str,
              indexed: tuple[int, tuple[int, tuple[int, ...]]]) -> list[tuple]:
    """One task of a sweep, on an executor with pyarrow: the setup, then its seeds' runs,
    their rows written as Parquet part files under ``out`` (spark_reports.parts); the
    driver gets (table, file, rows) of each file written, nothing more."""
    if setup is not None:
        setup()
    from pathlib import Path

    from spark_reports.parts import write_parts
    index, task = indexed
    written = write_parts(tally.counted(run_task(configs.value, keep, task)), Path(out), index, sweep_id)
    tally.loaded_from.add([simulation_file()])
    return written


def explore_task(setup: Callable[[], object] | None, scenario, prop: str, seed: int) -> tuple:
    """One seed of ``isrlab explore --master`` (spark_reports.explore), on an executor:
    the setup, then the seed judged as the local search judges it, and where this
    worker loaded the simulation from (so the driver can say whether the search ran
    compiled). ``scenario`` is the broadcast searched scenario."""
    if setup is not None:
        setup()
    return (*judge_seed(scenario.value, prop, seed), simulation_file())  # imports the simulation: after the setup


def judge_seed(scenario, prop: str, seed: int) -> tuple:
    """On an executor: run one seed as the local search does (the invariants checked for
    an invariant property) in a temporary folder; (seed, violated, the invariant that
    stopped it, verdict.json, drawn.yaml, error) with the files' texts or None."""
    from pathlib import Path

    from scenarios.explore.draw import DRAWN_FILE
    from scenarios.explore.search import is_invariant, violated
    from scenarios.runner import VERDICT_FILE, SimulationFailed, run_scenario
    with tempfile.TemporaryDirectory(prefix="isrlab-explore-") as folder:
        out = Path(folder)
        try:
            result = run_scenario(scenario, seed, out, check_invariants=is_invariant(prop))
        except SimulationFailed as exc:
            return seed, False, None, None, None, (str(exc), exc.traceback_path.read_text(encoding="utf-8"))
        texts = [(out / name).read_text(encoding="utf-8") if (out / name).exists() else None
                 for name in (VERDICT_FILE, DRAWN_FILE)]
        invariant = result.violation.invariant if result.violation is not None else None
        return seed, violated(result, prop), invariant, texts[0], texts[1], None


def run_task(configs: Sequence["Config"], keep: str, task: tuple[int, tuple[int, ...]]) -> Iterator[tuple[str, tuple]]:
    """On an executor: run each seed of the task and yield (table, row) pairs; a run
    whose simulation raised yields one ("errors", (config, seed, message, replay))."""
    from scenarios.runner import SimulationFailed, run_scenario_events
    from spark_reports import rows
    config = configs[task[0]]
    base = config.scenario
    scenario_name = base.name[: -len(f"-{base.variant}")] if base.variant else base.name
    for seed in task[1]:
        replay = f"{config.replay_parts[0]} --seed {seed}{config.replay_parts[1]}"
        with tempfile.TemporaryDirectory(prefix="isrlab-sweep-") as folder:
            try:
                result, events = run_scenario_events(base, seed, folder, plot=False)
            except SimulationFailed as exc:
                yield "errors", (config.label, seed, str(exc), replay)
                continue
        key = {"scenario": scenario_name, "config": config.label, "seed": seed,
               "run_id": f"{base.name}-seed{seed}"}
        yield "verdicts", rows.verdict_row(key, result, config.variant, config.grid, replay)
        yield from (("operations", r) for r in rows.operation_rows(key, events))
        yield from (("cluster_events", r) for r in rows.cluster_event_rows(key, events))
        if keep == "all" or (keep == "failing" and not result.passed):
            yield from (("traces", r) for r in rows.trace_rows(scenario_name, config.label, result, events))


def task_rows(pairs: Iterable[tuple[str, tuple]]) -> list[tuple[str, list[tuple]]]:
    """A task's (table, row) pairs as one list of rows per table that has rows."""
    by_table: dict[str, list[tuple]] = {name: [] for name in TABLES}
    for table, row in pairs:
        if table in by_table:
            by_table[table].append(row)
    return [(name, table_rows) for name, table_rows in by_table.items() if table_rows]


def simulation_file() -> str:
    """Where this process loaded the simulation from: a .py file (interpreted) or an
    extension module of the compiled build; "" before the simulation was imported."""
    return getattr(sys.modules.get(PROBE_MODULE), "__file__", None) or ""


def shipped_file(name: str) -> str:
    """On an executor: where a file or archive the job shipped (``SparkContext.addFile``,
    ``addArchive``: unpacked) is."""
    from pyspark import SparkFiles
    return SparkFiles.get(name)


def is_compiled(file: str) -> bool:
    return file != "" and not file.endswith(".py")


@contextmanager
def worker_pool(sc, setup: Callable[[], object] | None) -> Iterator[None]:
    """Python functions wrapped inside this block (an RDD's, when it is first used; a
    DataFrame's, when it is built) run in Spark's pool of Python workers for ``setup``:
    Spark starts and reuses workers per environment, and this sets variables of it (the
    pool's name) for the functions wrapped here only."""
    wanted = {POOL_ENV: pool_name(setup)}
    before = {name: sc.environment.get(name) for name in wanted}
    sc.environment.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                sc.environment.pop(name, None)
            else:
                sc.environment[name] = value


def pool_name(setup: Callable[[], object] | None) -> str:
    """The name of the Python workers that run a sweep with this setup: one pool per
    setup, so that a worker never has to switch from one build to another."""
    if setup is None:
        return "plain"
    return hashlib.sha256(CloudPickleSerializer().dumps(setup)).hexdigest()[:16]


class Tally:
    """Runs and failures, the failing and the raising runs (a few small tuples), and where
    each task's simulation was loaded from, counted on the executors and gathered by the
    driver as each task ends."""

    def __init__(self, sc):
        self.runs, self.failed = sc.accumulator(0), sc.accumulator(0)
        self.failing, self.raising = sc.accumulator([], ListParam()), sc.accumulator([], ListParam())
        self.loaded_from = sc.accumulator([], ListParam())
        self.signatures = sc.accumulator(set(), SetParam())

    def counted(self, pairs: Iterable[tuple[str, tuple]]) -> Iterator[tuple[str, tuple]]:
        """Of the runs' signatures (analysis.seed_agreement) a task sends at most two per
        configuration: a second one already says the seeds changed something."""
        # imported here, on the executor once its setup ran: analysis is the simulation's layer
        from analysis.seed_agreement import run_signature
        outcome, replay = VERDICT_COLUMNS
        names = TABLES["verdicts"].fieldNames()
        seen: dict[str, set] = {}
        for table, row in pairs:
            if table == "verdicts":
                signature = run_signature(row[outcome], dict(zip(names, row)))
                mine = seen.setdefault(row[1], set())
                if signature not in mine and len(mine) < 2:
                    mine.add(signature)
                    self.signatures.add({(row[1], row[outcome], signature)})
                self.runs.add(1)
                if row[outcome] == "FAIL":
                    self.failed.add(1)
                    self.failing.add([(row[1], row[2], row[replay])])
            elif table == "errors":
                self.runs.add(1)
                self.failed.add(1)
                self.raising.add([row])
            yield table, row


class SetParam(AccumulatorParam):
    def zero(self, value):
        return set()

    def addInPlace(self, first, second):
        first |= second
        return first


class ListParam(AccumulatorParam):
    def zero(self, value):
        return []

    def addInPlace(self, first, second):
        first.extend(second)
        return first


VERDICT_COLUMNS = tuple(TABLES["verdicts"].fieldNames().index(name) for name in ("outcome", "replay"))
