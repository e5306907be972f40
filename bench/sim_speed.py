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

from analysis.summary import summarize_events
from analysis.trace import TraceWriter, read_events
from analysis.verdict import check_events
from scenarios.parse import parse_scenario
from sim.world import World

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
    simpy_before = bare_simpy_rate()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        started = time.perf_counter()
        with open(trace, "w", encoding="utf-8", buffering=1 << 20) as stream:
            writer = TraceWriter(stream, "bench", 1, "sim")
            world = World(scenario, 1, writer)
            world.run()
        wall = time.perf_counter() - started
        simulated_s = world.env.now / 1000  # workload plus final phase (drain, settle, final read)
        size = trace.stat().st_size
        started = time.perf_counter()
        events = list(read_events(trace))
        parse_s = time.perf_counter() - started
        summary = summarize_events(events)
        started = time.perf_counter()
        check_events(events, "bench", 1, "sim")
        check_s = time.perf_counter() - started
    simpy_rate = (simpy_before + bare_simpy_rate()) / 2
    lines = [
        f"offered load:                      5,000 records/s, 100-byte records, linger {args.linger_ms} ms, acks=all",
        f"simulated seconds (whole run):     {simulated_s:.1f}  (workload {args.seconds} s + final phase)",
        f"wall seconds (simulation + trace): {wall:.2f}",
        f"simulated seconds per wall second: {simulated_s / wall:.1f}   (target >= 50)",
        f"acknowledged records:              {summary.acknowledged:,}",
        f"acknowledged records per wall s:   {summary.acknowledged / wall:,.0f}",
        f"trace events / bytes:              {writer.events_written:,} / {size:,}",
        f"run events per wall s:             {writer.events_written / wall:,.0f}",
        f"bare simpy timeouts per wall s:    {simpy_rate:,.0f}   (reference, same process, before and after)",
        f"afterwards: parse trace {parse_s:.2f} s, all checkers {check_s:.2f} s",
    ]
    print("\n".join(lines))
    if args.write:
        new_file = not Path(args.write).exists()
        with open(args.write, "a", encoding="utf-8") as out:
            if new_file:
                out.write("# Benchmarks\n")
            out.write(f"\n### sim_speed, {time.strftime('%Y-%m-%d')} ({platform.python_implementation()} "
                      f"{platform.python_version()}, {platform.machine()})\n\n")
            out.write(f"`.venv/bin/python bench/sim_speed.py --seconds {args.seconds} --linger-ms {args.linger_ms}`\n\n```\n")
            out.write("\n".join(lines) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
