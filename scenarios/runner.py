"""Run a scenario on a binding, then judge it: the verdict file, the scenario's
expectations, and the timelines. ``sim`` (the default) simulates the cluster; ``real``
runs a one-broker scenario on an ``isrlab serve`` process with real clients
(real_io/scenario_run.py), after refusing what that binding cannot do."""
from __future__ import annotations

import multiprocessing
import os
import shlex
import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from analysis.checkers import GROUPS_ONLY, UNTESTED_NAMES
from analysis.summary import Summary, summarize_events
from analysis.trace import TraceWriter, read_events
from analysis.verdict import Evaluation, Verdict, check_events, evaluate
from scenarios.model import Scenario
from scenarios.source import ScenarioError, Source, _dotted, load_yaml
from scenarios.variants import variant_lines

TRACE_FILE = "trace.jsonl"
VERDICT_FILE = "verdict.json"


def replay_command(scenario_path: str | Path, seed: int, out_dir: str | Path | None = None,
                   variant: str | None = None, settings: Sequence[str] = (), binding: str = "sim",
                   zk: str | None = None, check_invariants: bool = False) -> str:
    """The command that runs ``seed`` again, pasteable in a fresh shell from where this one
    runs: the isrlab script beside this Python (a virtual environment's bin/), by the
    shortest path, and the same output folder."""
    script = Path(sys.executable).parent / "isrlab"
    if script.exists():
        relative = os.path.relpath(script)
        program = shlex.quote(relative if os.sep in relative else f".{os.sep}{relative}")
    else:
        program = f"{shlex.quote(sys.executable)} -m isrlab"
    command = f"{program} run {shlex.quote(str(scenario_path))} --seed {seed}"
    if binding != "sim":
        command += f" --binding {binding}"
    if zk is not None:
        command += f" --zk {shlex.quote(zk)}"
    if variant is not None:
        command += f" --variant {shlex.quote(variant)}"
    command += "".join(f" --set {shlex.quote(s)}" for s in settings)
    if check_invariants:
        command += " --check-invariants"
    if out_dir is not None:
        command += f" --out {shlex.quote(str(out_dir))}"
    return command


BINDINGS = ("sim", "real")


class BindingError(Exception):
    """The real binding could not run (its broker did not start): not a verdict."""


def check_binding(scenario: Scenario, binding: str, zk: str | None = None) -> None:
    """Raise ScenarioError (file, line, field, why) for the first thing in the scenario
    the binding cannot do (the real one on ZooKeeper ``zk``, or on its embedded store);
    the simulation can do everything else."""
    if binding == "sim":
        return
    if scenario.expect_invariant is not None:
        raise ScenarioError(scenario.path, scenario.expect_lines.get("invariant_violated"), "expect.invariant_violated",
                            f"--binding {binding}: the invariants are checked in the simulation only (the real "
                            "binding's brokers run in processes of their own)")
    from real_io.scenario_run import refusals
    found = refusals(scenario, zk is not None)
    if not found:
        return
    path, line, message = found[0]
    if line is None:
        line = _line_of(scenario, path)
    more = f" (and {len(found) - 1} more: {'; '.join(_dotted(p) for p, _, _ in found[1:])})" if len(found) > 1 else ""
    raise ScenarioError(scenario.path, line, _dotted(path), f"--binding {binding}: {message}{more}")


def _line_of(scenario: Scenario, path: tuple) -> int | None:
    try:
        _, lines = load_yaml(Path(scenario.path).read_text(encoding="utf-8"), scenario.path)
    except (OSError, UnicodeDecodeError, ScenarioError):
        return None
    if scenario.variant is not None:
        lines = variant_lines(lines, scenario.variant)
    return Source(scenario.path, lines).line(path)


class SimulationFailed(Exception):
    """The simulation itself raised: a bug in isrlab, never a verdict on the scenario."""

    def __init__(self, scenario: Scenario, seed: int, out_dir: Path, cause: BaseException):
        self.seed = seed
        self.replay_command = replay_command(scenario.path, seed, out_dir, scenario.variant, scenario.settings)
        self.traceback_path = out_dir / "error.txt"
        super().__init__(f"{scenario.name} seed {seed}: {type(cause).__name__}: {cause}")

    def __reduce__(self):  # crosses from a worker process of run_seeds as it is
        return _rebuild_failure, (str(self), self.seed, self.replay_command, self.traceback_path)


def _rebuild_failure(message: str, seed: int, replay_command: str, traceback_path: Path) -> SimulationFailed:
    failure = SimulationFailed.__new__(SimulationFailed)
    Exception.__init__(failure, message)
    failure.seed, failure.replay_command, failure.traceback_path = seed, replay_command, traceback_path
    return failure


@dataclass(frozen=True)
class RunResult:
    scenario: Scenario
    seed: int
    trace_path: Path
    summary: Summary
    wall_seconds: float
    events: int
    verdict: Verdict | None = None
    evaluations: tuple[Evaluation, ...] = ()
    plots: tuple[Path, ...] = field(default_factory=tuple)
    binding: str = "sim"
    zk: str | None = None  # the real binding's ZooKeeper, when it ran on one
    check_invariants: bool = False
    # --check-invariants: the first violation (broker_core.invariants.Violation), which
    # stopped the run at simulated time violation_at_ms; the run is then not judged
    violation: Any = None
    violation_at_ms: float | None = None

    @property
    def untested(self) -> list[str]:
        """Why the run tested nothing (a trigger never fired, nothing acknowledged), unless
        the scenario expects exactly that."""
        if self.verdict is None:
            return []
        named = {e.name for e in self.evaluations}
        results = self.verdict.results
        # A compaction checker that judged and found an anomaly says tested: true; that
        # is a failure, not a run that tested nothing.
        untested = [results[n].explanation for n in UNTESTED_NAMES
                    if n not in named and not results[n].valid and results[n].details.get("tested") is not True]
        return untested + self._groups_untested()

    def _groups_untested(self) -> list[str]:
        """A scenario with group consumers whose members consumed nothing, or wrote no
        group event at all (none ever joined: the verdict has no group result), tested
        nothing of its groups, whatever its ``expect:`` names (``group_duplicates: 0``
        would hold vacuously)."""
        assert self.verdict is not None
        if not self.scenario.group_consumers:
            return []
        results = self.verdict.results
        if not any(name in results for name in GROUPS_ONLY):
            return ["tested nothing: the scenario's group consumers wrote no group event (no member joined its group)"]
        return [results[n].explanation for n in GROUPS_ONLY
                if n in results and not results[n].valid and results[n].details.get("tested") is False]

    @property
    def invariant_expected(self) -> bool | None:
        """With ``expect: {invariant_violated: NAME}``: whether NAME stopped the run."""
        expected = self.scenario.expect_invariant
        if expected is None:
            return None
        return self.violation is not None and self.violation.invariant == expected

    @property
    def passed(self) -> bool:
        """Expectations hold and the run tested something; without ``expect:``, every
        checker must be satisfied. A scenario that expects an invariant's violation
        passes when that invariant stopped the run."""
        if self.invariant_expected is not None:
            return self.invariant_expected
        if self.violation is not None or self.untested:
            return False
        if self.evaluations:
            return all(e.passed for e in self.evaluations)
        return self.verdict is None or self.verdict.valid

    @property
    def replay_command(self) -> str:
        return replay_command(self.scenario.path, self.seed, self.trace_path.parent, self.scenario.variant,
                              self.scenario.settings, self.binding, self.zk, self.check_invariants)


def run_id(scenario: Scenario, seed: int) -> str:
    return f"{scenario.name}-seed{seed}"


def run_scenario(scenario: Scenario, seed: int, out_dir: str | Path, progress=None, judge: bool = True,
                 plot: bool = False, binding: str = "sim", zk: str | None = None,
                 check_invariants: bool = False) -> RunResult:
    """``binding`` ``real`` runs the scenario for real (one broker, its metadata in the
    ZooKeeper ``zk`` or in its embedded store); its trace is judged exactly as a
    simulated one. A real run's working files (the broker's data directory, its own
    trace and stderr) stay in ``out_dir/real``. ``check_invariants`` (simulation only):
    the replication invariants after every step; the first violation stops the run,
    which is then not judged (``RunResult.violation``)."""
    return run_scenario_events(scenario, seed, out_dir, progress, judge, plot, binding, zk, check_invariants)[0]


def run_scenario_events(scenario: Scenario, seed: int, out_dir: str | Path, progress=None, judge: bool = True,
                        plot: bool = False, binding: str = "sim", zk: str | None = None,
                        check_invariants: bool = False) -> tuple[RunResult, list]:
    """run_scenario, and the trace's events as it parsed them for the verdict: a Spark
    sweep turns them into table rows without reading the trace file a second time."""
    if zk is not None and binding == "sim":
        raise ValueError("zk is for the real binding; the simulation has its own coordination service")
    if check_invariants and binding != "sim":
        raise ValueError("check_invariants runs in the simulation only: the real binding's cores run in other "
                         "processes, where nothing reads their state after every step")
    out = Path(out_dir)
    if scenario.swarm is not None:  # the seed draws the faults, knobs and rates it runs
        from scenarios.explore.draw import DRAWN_FILE, drawn_scenario
        scenario, text = drawn_scenario(scenario, seed)
        out.mkdir(parents=True, exist_ok=True)
        (out / DRAWN_FILE).write_text(text, encoding="utf-8")
    check_binding(scenario, binding, zk)
    checked = check_invariants or scenario.expect_invariant is not None  # the file asks for them
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / TRACE_FILE
    started = time.perf_counter()
    with open(trace_path, "w", encoding="utf-8", buffering=1 << 20) as stream:
        writer = TraceWriter(stream, run_id(scenario, seed), seed, binding)
        try:
            violation = _run_binding(scenario, seed, writer, out, progress, binding, zk, checked)
        except BindingError:
            raise
        except Exception as exc:  # an invariant or a crash in the run: name the seed
            failure = SimulationFailed(scenario, seed, out, exc)
            failure.traceback_path.write_text(traceback.format_exc(), encoding="utf-8")
            raise failure from exc
    wall = time.perf_counter() - started
    events = list(read_events(trace_path))  # parsed once for the summary and the verdict
    summary = summarize_events(events)
    if violation is not None:  # the run stopped early: a partial trace is not judged
        return RunResult(scenario, seed, trace_path, summary, wall, writer.events_written, binding=binding,
                         check_invariants=check_invariants, violation=violation[0],
                         violation_at_ms=violation[1]), events
    if not judge:
        return RunResult(scenario, seed, trace_path, summary, wall, writer.events_written, binding=binding,
                         zk=zk), events
    verdict = check_events(events, run_id(scenario, seed), seed, binding)
    verdict.write_json(out / VERDICT_FILE)
    evaluations = tuple(evaluate(verdict, scenario.expect)) if scenario.expect else ()
    plots: tuple[Path, ...] = ()
    if plot:
        from analysis.timeline import plot_trace
        plots = tuple(plot_trace(trace_path, out, set(summary.missing)))
    return RunResult(scenario, seed, trace_path, summary, wall, writer.events_written, verdict, evaluations, plots,
                     binding, zk, check_invariants), events


def _run_binding(scenario: Scenario, seed: int, writer: TraceWriter, out: Path, progress, binding: str,
                 zk: str | None, check_invariants: bool = False) -> tuple[Any, float] | None:
    """Run the scenario; with ``check_invariants``, the violation that stopped it and when."""
    if binding == "sim":
        from sim.world import World
        world = World(scenario, seed, writer, progress, check_invariants=check_invariants)
        world.run()
        if world.violation is None or world.violation_at_ms is None:
            return None
        return world.violation, world.violation_at_ms
    from real_io.scenario_run import RealRunError, run_real
    try:
        run_real(scenario, seed, writer, out / "real", progress, zk)
    except RealRunError as exc:
        raise BindingError(f"{scenario.path}: --binding real: {exc}") from None
    return None


KEEP_CHOICES = ("failing", "all", "none")


def _run_seed(scenario: Scenario, seed: int, out_dir: Path, plots: bool, keep: str = "all",
              plot_failing: bool = True, check_invariants: bool = False) -> RunResult:
    """One seed of a sweep; a failing seed gets its timelines unless ``plot_failing`` is
    false. ``keep`` says whose trace and timelines stay on disk (``failing``, ``all``,
    ``none``); the verdict stays."""
    result = run_scenario(scenario, seed, out_dir, plot=plots, check_invariants=check_invariants)
    if plot_failing and not result.passed and not result.plots:
        from analysis.timeline import plot_trace
        result = replace(result, plots=tuple(plot_trace(result.trace_path, out_dir, set(result.summary.missing))))
    if keep == "none" or (keep == "failing" and result.passed):
        for path in (result.trace_path, *result.plots):
            path.unlink(missing_ok=True)
        result = replace(result, plots=())
    return result


def run_seeds(scenario: Scenario, seeds: Sequence[int], base_dir: str | Path, jobs: int = 1, plots: bool = False,
              on_done: Callable[[int, int], None] | None = None, keep: str = "all",
              fail_fast: bool = False, worker_setup: Callable[[], object] | None = None,
              stop_when: Callable[[RunResult], bool] | None = None, plot_failing: bool = True,
              check_invariants: bool = False) -> list[RunResult]:
    """Run each seed into ``base_dir/seed-N``, in ``jobs`` worker processes at once.

    Results come back in the order of ``seeds``. Every seed's run is independent, so
    its trace is byte-identical whatever ``jobs`` is. ``on_done(seed, finished)`` is
    called as each seed ends. A SimulationFailed stops the sweep: the seeds not yet
    started are dropped, and the failure of the lowest seed is raised. With
    ``fail_fast`` the first seed that does not pass stops it the same way (the results
    of the seeds that ended are returned), and so does the first result for which
    ``stop_when`` is true (isrlab explore: a violation, or its budget spent).
    ``plot_failing`` false draws no timelines for failing seeds (a search runs many).
    """
    base = Path(base_dir)
    def stops(result: RunResult) -> bool:
        return (fail_fast and not result.passed) or (stop_when is not None and stop_when(result))
    if jobs <= 1 or len(seeds) <= 1:
        results = []
        for seed in seeds:
            results.append(_run_seed(scenario, seed, base / f"seed-{seed}", plots, keep, plot_failing,
                                     check_invariants))
            if on_done:
                on_done(seed, len(results))
            if stops(results[-1]):
                break
        return results
    # spawn: workers import the project afresh instead of inheriting this process's state
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=worker_setup) as pool:
        futures = {pool.submit(_run_seed, scenario, seed, base / f"seed-{seed}", plots, keep, plot_failing,
                               check_invariants): seed
                   for seed in seeds}
        pending, finished = set(futures), 0
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)  # on_done and stops as each ends
            for future in sorted(done, key=futures.__getitem__):
                finished += 1
                if on_done:
                    on_done(futures[future], finished)
            stop = any(f.exception() is not None for f in done) or any(stops(f.result()) for f in done)
            if stop:
                for future in pending:
                    future.cancel()
                wait(pending)
                break
    failures = sorted((f for f in futures if f.done() and not f.cancelled() and f.exception() is not None),
                      key=futures.__getitem__)
    if failures:
        raise failures[0].exception()  # type: ignore[misc]
    return [future.result() for future in futures if future.done() and not future.cancelled()]


def sweep_rows(results: Sequence[RunResult]) -> list[dict]:
    """One row per seed: outcome, every verdict metric and the replay command."""
    rows = []
    for r in results:
        row: dict[str, Any] = {"seed": r.seed, "outcome": "PASS" if r.passed else "FAIL"}  # a metric may be a dict
        if r.scenario.variant is not None:
            row = {"variant": r.scenario.variant, **row}
        if r.verdict is not None:
            row.update({name: result.value for name, result in r.verdict.results.items()})
        if r.violation is not None:
            row["invariant_violated"] = r.violation.invariant
        row["replay"] = r.replay_command
        rows.append(row)
    return rows


def write_sweep_summary(results: Sequence[RunResult], base_dir: str | Path) -> tuple[Path, Path]:
    """``summary.json`` and ``summary.csv`` in ``base_dir`` (a mapping value, such as
    final_leader, is a JSON string in the CSV)."""
    import csv
    import json
    base = Path(base_dir)
    rows = sweep_rows(results)
    json_path, csv_path = base / "summary.json", base / "summary.csv"
    json_path.write_text(json.dumps(rows, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    with open(csv_path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]) if rows else ["seed"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for k, v in row.items()})
    return json_path, csv_path
