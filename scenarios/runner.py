"""Run a scenario on a binding (only the simulation for now) and summarise the trace."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from analysis.summary import Summary, summarize
from analysis.trace import TraceWriter
from scenarios.model import Scenario

TRACE_FILE = "trace.jsonl"


@dataclass(frozen=True)
class RunResult:
    scenario: Scenario
    seed: int
    trace_path: Path
    summary: Summary
    wall_seconds: float
    events: int


def run_id(scenario: Scenario, seed: int) -> str:
    return f"{scenario.name}-seed{seed}"


def run_scenario(scenario: Scenario, seed: int, out_dir: str | Path, progress=None) -> RunResult:
    from sim.world import World  # the binding is chosen here; more come in later steps
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / TRACE_FILE
    started = time.perf_counter()
    with open(trace_path, "w", encoding="utf-8", buffering=1 << 20) as stream:
        writer = TraceWriter(stream, run_id(scenario, seed), seed, "sim")
        world = World(scenario, seed, writer, progress)
        world.run()
    wall = time.perf_counter() - started
    return RunResult(scenario, seed, trace_path, summarize(trace_path), wall, writer.events_written)
