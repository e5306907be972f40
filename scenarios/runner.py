"""Run a scenario on a binding (the simulation for now), then judge it: the verdict file,
the scenario's expectations, and the timelines."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from analysis.summary import Summary, summarize_events
from analysis.trace import TraceWriter, read_events
from analysis.verdict import Evaluation, Verdict, check_events, evaluate
from scenarios.model import Scenario

TRACE_FILE = "trace.jsonl"
VERDICT_FILE = "verdict.json"


class SimulationFailed(Exception):
    """The simulation itself raised: a bug in isrlab, never a verdict on the scenario."""

    def __init__(self, scenario: Scenario, seed: int, out_dir: Path, cause: BaseException):
        self.replay_command = f"isrlab run {scenario.path} --seed {seed}"
        self.traceback_path = out_dir / "error.txt"
        super().__init__(f"{scenario.name} seed {seed}: {type(cause).__name__}: {cause}")


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

    @property
    def passed(self) -> bool:
        """Expectations hold; without ``expect:``, every checker must be satisfied."""
        if self.evaluations:
            return all(e.passed for e in self.evaluations)
        return self.verdict is None or self.verdict.valid

    @property
    def replay_command(self) -> str:
        return f"isrlab run {self.scenario.path} --seed {self.seed}"


def run_id(scenario: Scenario, seed: int) -> str:
    return f"{scenario.name}-seed{seed}"


def run_scenario(scenario: Scenario, seed: int, out_dir: str | Path, progress=None, judge: bool = True,
                 plot: bool = False) -> RunResult:
    from sim.world import World  # the binding is chosen here; the real one comes in step 7
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / TRACE_FILE
    started = time.perf_counter()
    with open(trace_path, "w", encoding="utf-8", buffering=1 << 20) as stream:
        writer = TraceWriter(stream, run_id(scenario, seed), seed, "sim")
        try:
            World(scenario, seed, writer, progress).run()
        except Exception as exc:  # an invariant or a crash in the simulation: name the seed
            failure = SimulationFailed(scenario, seed, out, exc)
            failure.traceback_path.write_text(traceback.format_exc(), encoding="utf-8")
            raise failure from exc
    wall = time.perf_counter() - started
    events = list(read_events(trace_path))  # parsed once for the summary and the verdict
    summary = summarize_events(events)
    if not judge:
        return RunResult(scenario, seed, trace_path, summary, wall, writer.events_written)
    verdict = check_events(events, run_id(scenario, seed), seed, "sim")
    verdict.write_json(out / VERDICT_FILE)
    evaluations = tuple(evaluate(verdict, scenario.expect)) if scenario.expect else ()
    plots: tuple[Path, ...] = ()
    if plot:
        from analysis.timeline import plot_trace
        plots = tuple(plot_trace(trace_path, out, set(summary.missing)))
    return RunResult(scenario, seed, trace_path, summary, wall, writer.events_written, verdict, evaluations, plots)
