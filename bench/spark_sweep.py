"""A sweep of N seeds on Spark (local[2], the session's start counted) against the same
seeds run one after another in one process (scenarios.runner.run_seeds, jobs=1).

    .venv/bin/python bench/spark_sweep.py [--seeds 1000] [--scenario FILE] [--variant NAME]

The issue asks for at least 1.6 times faster on a 2-core machine. Prints one block for
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sequential(scenario_file: str, variant: str, seeds: list[int], folder: Path) -> float:
    from scenarios.parse import load_scenario
    from scenarios.runner import run_seeds
    scenario = next(v for v in load_scenario(scenario_file).variants if v.variant == variant)
    started = time.perf_counter()
    results = run_seeds(scenario, seeds, folder, jobs=1, keep="none")
    assert len(results) == len(seeds)
    return time.perf_counter() - started


def on_spark(scenario_file: str, variant: str, seeds: list[int], folder: Path, master: str) -> tuple[float, float]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_reports.session import spark_session
    from spark_reports.sweep import run_sweep
    started = time.perf_counter()
    with spark_session(master, "isrlab bench") as spark:
        session_s = time.perf_counter() - started
        result = run_sweep(spark, scenario_file, seeds, folder, variant=variant)
    assert result.runs == len(seeds) and not result.errors
    return time.perf_counter() - started, session_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--scenario", default="scenarios/library/jepsen-2013.yaml")
    parser.add_argument("--variant", default="unclean")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    os.chdir(ROOT)
    seeds = list(range(1, args.seeds + 1))
    folder = Path(tempfile.mkdtemp(prefix="isrlab-bench-sweep-"))
    try:
        spark_s, session_s = on_spark(args.scenario, args.variant, seeds, folder / "spark", args.master)
        one_s = sequential(args.scenario, args.variant, seeds, folder / "one")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"### spark_sweep, {time.strftime('%Y-%m-%d')} (CPython {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus)\n")
    print(f"`.venv/bin/python bench/spark_sweep.py --seeds {args.seeds} --scenario {args.scenario} "
          f"--variant {args.variant}`\n\n```")
    print(f"runs:                              {len(seeds)} ({args.scenario}, variant {args.variant})")
    print(f"one process, one seed after another: {one_s:8.1f} s  ({len(seeds) / one_s:.2f} runs/s)")
    print(f"isrlab sweep on {args.master:<18} {spark_s:8.1f} s  ({len(seeds) / spark_s:.2f} runs/s; "
          f"session start {session_s:.1f} s included)")
    print(f"speed-up:                          {one_s / spark_s:8.2f}x  (target >= 1.6)")
    print(f"load average at the end (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n```")


if __name__ == "__main__":
    main()
