"""Simulation speed: 3 brokers, one topic with 6 partitions, replication factor 3,
acks=all, 100-byte records offered at 5,000 records/s for 60 simulated seconds, trace
written. Prints simulated seconds per wall second and acknowledged records per wall
second, and, in the same run, simpy's own rate on a bare timeout loop as the reference.

    .venv/bin/python bench/sim_speed.py [--seconds 60] [--write docs/benchmarks.md]
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import simpy

from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: bench-sim-speed
cluster:
  brokers: 3
  config: {{min.insync.replicas: 2}}
  topics:
    - {{name: bench, partitions: 6, replication_factor: 3}}
workload:
  producers:
    - {{topic: bench, acks: all, rate: 5000, record_bytes: 100, linger: {linger}ms}}
duration: {seconds}s
"""


def bare_simpy_rate(events: int = 300_000) -> float:
    """Timeouts per wall second for a loop that does nothing else."""
    env = simpy.Environment()

    def loop():
        for _ in range(events):
            yield env.timeout(1)
    env.process(loop())
    started = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--linger-ms", type=int, default=10, help="producer linger (batch interval)")
    parser.add_argument("--write", help="append the result to this markdown file")
    args = parser.parse_args()
    scenario = parse_scenario(SCENARIO.format(seconds=args.seconds, linger=args.linger_ms), "bench/sim_speed.py")
    with tempfile.TemporaryDirectory() as tmp:
        result = run_scenario(scenario, 1, tmp)
        size = result.trace_path.stat().st_size
    simpy_rate = bare_simpy_rate()
    # The final phase (drain, settle, final read) adds simulated time beyond the workload.
    sim_seconds = args.seconds
    wall = result.wall_seconds
    lines = [
        f"simulated seconds (workload):      {sim_seconds}",
        f"wall seconds (whole run):          {wall:.2f}",
        f"simulated seconds per wall second: {sim_seconds / wall:.1f}   (target >= 50)",
        f"acknowledged records:              {result.summary.acknowledged}",
        f"acknowledged records per wall s:   {result.summary.acknowledged / wall:,.0f}",
        f"trace events / bytes:              {result.events:,} / {size:,}",
        f"bare simpy timeouts per wall s:    {simpy_rate:,.0f}   (reference, same process)",
        f"run events per wall s:             {result.events / wall:,.0f}",
    ]
    print("\n".join(lines))
    if args.write:
        with open(args.write, "a", encoding="utf-8") as out:
            out.write(f"\n### sim_speed, {time.strftime('%Y-%m-%d')} ({platform.python_implementation()} "
                      f"{platform.python_version()}, {platform.machine()})\n\n")
            out.write(f"`.venv/bin/python bench/sim_speed.py --seconds {args.seconds}`\n\n```\n")
            out.write("\n".join(lines) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
