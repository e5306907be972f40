"""Simulation speed: 3 brokers, one topic with 6 partitions, replication factor 3,
acks=all, 100-byte records offered at 5,000 records/s for 60 simulated seconds, trace
written. Prints simulated seconds per wall second and acknowledged records per wall
second, and, in the same run, two references: simpy's own rate on a bare timeout loop,
and the floor (bench/sim_floor.py): the same messages and trace lines with no broker
logic, which bounds what any implementation on CPython and simpy can reach.

The producer's linger (how long it gathers records into a batch) sets how many produce
requests, and so replication messages, a simulated second holds; the benchmark runs
each linger given, one after another in the same process.

    .venv/bin/python bench/sim_speed.py [--seconds 60] [--linger-ms 10,25,50,100] [--write docs/benchmarks.md]
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import simpy

# Measure the code of this checkout, not whichever copy of the project is installed
# (bench/ is what Python puts on the path for a script).
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from analysis.summary import summarize_events
from analysis.trace import TraceWriter, read_events
from analysis.verdict import check_events
from sim_floor import floor_run  # bench/ is on the path when this file runs
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
    - {{topic: bench, acks: all, rate: 5000, record_bytes: 100, linger: {linger}ms, partitioner: {partitioner}}}
duration: {seconds}s
"""
PARTITIONERS = ("round_robin", "sticky")


def bench_scenario(seconds: int, linger_ms: int, partitioner: str):
    """The benchmark's scenario (tests/update_trace_digests.py stores digests of it too)."""
    return parse_scenario(SCENARIO.format(seconds=seconds, linger=linger_ms, partitioner=partitioner),
                          "bench/sim_speed.py")


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


def run_once(seconds: int, linger_ms: int, partitioner: str = "sticky") -> dict:
    """One benchmark run; wall time covers the simulation and writing its trace."""
    scenario = bench_scenario(seconds, linger_ms, partitioner)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        started = time.perf_counter()
        with open(trace, "w", encoding="utf-8", buffering=1 << 20) as stream:
            writer = TraceWriter(stream, "bench", 1, "sim")
            world = World(scenario, 1, writer)
            world.run()
        wall = time.perf_counter() - started
        size = trace.stat().st_size
        started = time.perf_counter()
        events = list(read_events(trace))
        parse_s = time.perf_counter() - started
        summary = summarize_events(events)
        started = time.perf_counter()
        check_events(events, "bench", 1, "sim")
        check_s = time.perf_counter() - started
    return {"linger_ms": linger_ms, "wall": wall, "simulated_s": world.env.now / 1000,
            "acknowledged": summary.acknowledged, "events": writer.events_written, "bytes": size,
            "produce_requests_per_s": sum(p.produce_requests for p in world.producers) / seconds,
            "parse_s": parse_s, "check_s": check_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--linger-ms", default="10,25,50,100",
                        help="producer linger (batch interval) in ms; a comma-separated list runs each in turn")
    parser.add_argument("--write", help="append the result to this markdown file")
    args = parser.parse_args()
    lingers = [int(x) for x in args.linger_ms.split(",")]
    simpy_before = bare_simpy_rate()
    runs = []
    for linger in lingers:  # each run next to its floor, so both see the same machine
        run = run_once(args.seconds, linger)
        floor = floor_run(args.seconds, linger)
        run["floor"] = floor["simulated_s"] / floor["wall"]
        runs.append(run)
    simpy_rate = (simpy_before + bare_simpy_rate()) / 2
    lines = [
        f"offered load: 5,000 records/s of 100 bytes, acks=all, {args.seconds} simulated s of workload "
        "plus the final phase; trace written",
        f"bare simpy timeouts per wall s: {simpy_rate:,.0f}   (reference, same process, before and after)",
        "",
        "linger  produce requests/s  wall s  simulated s per wall s  floor  acked records per wall s  "
        "trace events / MB    parse + check s",
    ]
    for r in runs:
        verdict = "meets" if r["simulated_s"] / r["wall"] >= 50 else "below"
        lines.append(
            f"{r['linger_ms']:>3} ms  {r['produce_requests_per_s']:>18,.0f}  {r['wall']:>6.2f}  "
            f"{r['simulated_s'] / r['wall']:>11.1f} ({verdict} 50)  {r['floor']:>5.0f}  "
            f"{r['acknowledged'] / r['wall']:>24,.0f}  "
            f"{r['events']:>9,} / {r['bytes'] / 1e6:>5.1f}  {r['parse_s']:>6.2f} + {r['check_s']:.2f}")
    lines += ["", "produce requests/s: counted (every request the producer sent, over the simulated seconds of "
              "workload); the sticky partitioner (kafka-2.7) sends one request per linger tick",
              "floor: bench/sim_floor.py, the same messages and trace lines with no broker logic, "
              "run right after each real run; no implementation on CPython and simpy that writes this trace "
              "runs faster"]
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
