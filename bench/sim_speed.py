"""Simulation speed: 3 brokers, one topic with 6 partitions, replication factor 3,
acks=all, 100-byte records offered at 5,000 records/s for 60 simulated seconds, trace
written; once with each keyless partitioner (round-robin, and the sticky partitioner of
Kafka 2.4+). Prints simulated seconds per wall second and acknowledged records per wall
second, and, in the same run, two references: simpy's own rate on a bare timeout loop,
and the floor (bench/sim_floor.py): the same messages and trace lines with no broker
logic, which bounds what any implementation on CPython and simpy can reach. Each real
run is followed by its floor (same partitioner, same linger) in the same process, and
the table prints real / floor: the measure of the simulation's cost that does not
depend on the machine (the target: at most 2.5 at 10 ms linger).

When `make compiled` has built the mypyc build (isrlab/compiled.py, docs/compiled.md),
each real run is also made compiled, in a child process (a process holds one copy of
each module), between the interpreted run and the floor; the table then has a row for
each, both against the same interpreted floor.

The producer's linger (how long it gathers records into a batch) sets how many produce
requests, and so replication messages, a simulated second holds; the benchmark runs
each partitioner and linger given, one after another in the same process.

It then reports what users feel when they sweep: seeds per minute of the library's
``nemesis-safe`` scenario with one worker and with one worker per usable CPU (as
``isrlab run --seeds --jobs`` runs them), and the peak memory (maximum resident set) of
a fresh process running one benchmark run and one nemesis-safe seed.

    .venv/bin/python bench/sim_speed.py [--seconds 60] [--linger-ms 10] [--partitioner round_robin,sticky]
        [--sweep-seeds 6] [--repeat 1] [--no-high-watermark-lines] [--compiled auto|off|DIR]
        [--write docs/benchmarks.md]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simpy

# Measure the code of this checkout, not whichever copy of the project is installed
# (bench/ is what Python puts on the path for a script).
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from isrlab.compiled import DEFAULT_DIR as COMPILED_DIR
from isrlab.compiled import usable_build
from analysis.summary import summarize_events
from analysis.trace import TraceWriter, read_events
from analysis.verdict import check_events
from sim_floor import floor_run  # bench/ is on the path when this file runs
from broker_core.partitioner import PARTITIONERS
from scenarios.parse import load_scenario, parse_scenario
from scenarios.runner import run_seeds
from sim.world import World

ROOT = Path(__file__).resolve().parent.parent
NEMESIS = ROOT / "scenarios" / "library" / "nemesis-safe.yaml"
TARGET_RATIO = 2.5  # the target: the real run at most 2.5 times slower than its floor

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


def bench_scenario(seconds: int, linger_ms: int, partitioner: str, high_watermark_lines: bool = True):
    """The benchmark's scenario (tests/update_trace_digests.py stores digests of it too)."""
    text = SCENARIO.format(seconds=seconds, linger=linger_ms, partitioner=partitioner)
    if not high_watermark_lines:
        text += "trace_high_watermarks: false\n"
    return parse_scenario(text, "bench/sim_speed.py")


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


def run_once(seconds: int, linger_ms: int, partitioner: str = "sticky", high_watermark_lines: bool = True) -> dict:
    """One benchmark run; wall time covers the simulation and writing its trace."""
    scenario = bench_scenario(seconds, linger_ms, partitioner, high_watermark_lines)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        started, cpu = time.perf_counter(), time.process_time()
        with open(trace, "w", encoding="utf-8", buffering=1 << 20) as stream:
            writer = TraceWriter(stream, "bench", 1, "sim")
            world = World(scenario, 1, writer)
            world.run()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        size = trace.stat().st_size
        started = time.perf_counter()
        events = list(read_events(trace))
        parse_s = time.perf_counter() - started
        summary = summarize_events(events)
        started = time.perf_counter()
        check_events(events, "bench", 1, "sim")
        check_s = time.perf_counter() - started
    return {"partitioner": partitioner, "linger_ms": linger_ms, "wall": wall, "cpu": cpu, "simulated_s": world.env.now / 1000,
            "acknowledged": summary.acknowledged, "events": writer.events_written, "bytes": size,
            "produce_requests_per_s": sum(p.produce_requests for p in world.producers) / seconds,
            "parse_s": parse_s, "check_s": check_s}


# A child that switches the compiled build on before anything imports the simulation,
# runs ``body`` and prints its result as JSON.
COMPILED_CHILD = """
import json, sys
sys.path[:0] = [{root!r}, {bench!r}]
from isrlab import compiled
if not compiled.activate({build!r}, say=lambda text: sys.exit(text)):
    sys.exit("the compiled build was not used")
{setup}
print(json.dumps({body}))
"""


def in_compiled_child(build: Path, body: str, setup: str = "import sim_speed"):
    code = COMPILED_CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"), build=str(build), setup=setup, body=body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the compiled run failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.splitlines()[-1])


def compiled_run_once(build: Path, seconds: int, linger_ms: int, partitioner: str, high_watermark_lines: bool) -> dict:
    """run_once with the compiled build, in a child process."""
    return in_compiled_child(build, f"sim_speed.run_once({seconds}, {linger_ms}, {partitioner!r}, {high_watermark_lines})")


def measured_pair(args, partitioner: str, linger: int) -> list[dict]:
    """The real run (interpreted, then compiled when ``args.build`` is set) and right
    after it its floor, so all see the same machine; ``--repeat`` N alternates N of
    each and keeps the fastest of each (the least disturbed by the machine's other load)."""
    best: dict[str, dict] = {}
    floor_cpu = floor_speed = None
    for _ in range(args.repeat):
        runs = {"interpreted": run_once(args.seconds, linger, partitioner, args.high_watermark_lines)}
        if args.build is not None:
            runs["compiled"] = compiled_run_once(args.build, args.seconds, linger, partitioner,
                                                 args.high_watermark_lines)
        floor = floor_run(args.seconds, linger, partitioner=partitioner, high_watermark_lines=args.high_watermark_lines)
        for code, run in runs.items():
            if code not in best or run["cpu"] < best[code]["cpu"]:
                best[code] = dict(run, code=code)
        floor_cpu = floor["cpu"] if floor_cpu is None else min(floor_cpu, floor["cpu"])
        speed = floor["simulated_s"] / floor["wall"]
        floor_speed = speed if floor_speed is None else max(floor_speed, speed)
    for run in best.values():
        run["floor"], run["floor_cpu"] = floor_speed, floor_cpu
    return list(best.values())


def usable_cpus() -> int:
    """The CPUs this process may run on (as ``isrlab run --jobs`` counts them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def nemesis_seeds_per_minute(seeds: int, jobs: int, worker_setup=None) -> float:
    """Seeds of nemesis-safe per wall minute, traces and verdicts written and then
    dropped (``--keep none``), in ``jobs`` worker processes."""
    scenario = load_scenario(NEMESIS)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        run_seeds(scenario, list(range(1, seeds + 1)), tmp, jobs=jobs, keep="none", worker_setup=worker_setup)
        wall = time.perf_counter() - started
    return seeds / wall * 60


def compiled_seeds_per_minute(build: Path, seeds: int, jobs: int) -> float:
    """nemesis_seeds_per_minute in a child process with the compiled build, as
    ``isrlab run --seeds`` runs it (its workers switch the build on first)."""
    return in_compiled_child(build, f"sim_speed.nemesis_seeds_per_minute({seeds}, {jobs}, "
                                    f"functools.partial(compiled.activate, {str(build)!r}))",
                             setup="import functools, sim_speed")


# The child reads its own high-water mark. Linux's VmHWM belongs to the process image;
# ru_maxrss would also count the parent's size, which a forked child inherits across exec.
PEAK_CHILD = """
import re, resource, sys, tempfile
sys.path[:0] = [{root!r}, {bench!r}]
{body}
try:
    with open("/proc/self/status") as status:
        print(re.search(r"VmHWM:\\s+(\\d+) kB", status.read())[1])
except OSError:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
PEAK_BENCH = "import sim_speed; sim_speed.run_once({seconds}, {linger}, {partitioner!r})"
PEAK_NEMESIS = ("from scenarios.parse import load_scenario; from scenarios.runner import run_scenario\n"
                "run_scenario(load_scenario({path!r}), 1, tempfile.mkdtemp())")


def peak_memory_mb(body: str) -> float:
    """Maximum resident set, in MB, of a fresh Python process that runs ``body`` (the
    interpreter and the project's imports included)."""
    code = PEAK_CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"), body=body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1]) / 1024  # kilobytes, as Linux reports both


def speed_rows(runs: list[dict]) -> list[str]:
    lines = ["partitioner  linger  code         produce requests/s  wall s  simulated s per wall s  floor  "
             "real / floor: cpu (target)  wall  acked records per wall s  trace events / MB    parse + check s"]
    for r in runs:
        speed = r["simulated_s"] / r["wall"]
        ratio = r["cpu"] / r["floor_cpu"]
        verdict = "meets" if ratio <= TARGET_RATIO else "above"
        lines.append(
            f"{r['partitioner']:<11}  {r['linger_ms']:>3} ms  {r['code']:<11}  "
            f"{r['produce_requests_per_s']:>18,.0f}  {r['wall']:>6.2f}  "
            f"{speed:>22.1f}  {r['floor']:>5.1f}  {ratio:>12.2f} ({verdict} {TARGET_RATIO})  "
            f"{r['floor'] / speed:>4.2f}  "
            f"{r['acknowledged'] / r['wall']:>24,.0f}  "
            f"{r['events']:>9,} / {r['bytes'] / 1e6:>5.1f}  {r['parse_s']:>6.2f} + {r['check_s']:.2f}")
    return lines


def sweep_lines(args, lingers: list[int], partitioners: list[str]) -> list[str]:
    if not args.sweep_seeds:
        return []
    cpus = usable_cpus()
    one = nemesis_seeds_per_minute(args.sweep_seeds, 1)
    many = nemesis_seeds_per_minute(max(args.sweep_seeds, cpus), cpus)
    lines = ["", f"nemesis-safe seeds per wall minute: {one:.1f} with one worker ({args.sweep_seeds} seeds), "
                 f"{many:.1f} with --jobs {cpus} (all usable CPUs, {max(args.sweep_seeds, cpus)} seeds)"]
    if args.build is not None:
        one = compiled_seeds_per_minute(args.build, args.sweep_seeds, 1)
        many = compiled_seeds_per_minute(args.build, max(args.sweep_seeds, cpus), cpus)
        lines.append(f"  compiled: {one:.1f} with one worker, {many:.1f} with --jobs {cpus}")
    bench = PEAK_BENCH.format(seconds=args.seconds, linger=lingers[0], partitioner=partitioners[-1])
    bench_mb = peak_memory_mb(bench)
    nemesis_mb = peak_memory_mb(PEAK_NEMESIS.format(path=str(NEMESIS)))
    return [*lines,
            f"peak memory (max resident set of a fresh process, interpreter included; simulation, then the "
            f"trace parsed and checked): {bench_mb:.0f} MB for one benchmark run ({partitioners[-1]}, "
            f"{lingers[0]} ms), {nemesis_mb:.0f} MB for one nemesis-safe seed"]


def write_markdown(path: str, argv: list[str], lines: list[str]) -> None:
    new_file = not Path(path).exists()
    with open(path, "a", encoding="utf-8") as out:
        if new_file:
            out.write("# Benchmarks\n")
        out.write(f"\n### sim_speed, {time.strftime('%Y-%m-%d')} ({platform.python_implementation()} "
                  f"{platform.python_version()}, {platform.machine()}, {usable_cpus()} usable CPUs)\n\n")
        out.write(f"`.venv/bin/python bench/sim_speed.py {' '.join(argv)}`\n\n```\n")
        out.write("\n".join(lines) + "\n```\n")


def parse_args(argv: list[str]):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--linger-ms", default="10",
                        help="producer linger (batch interval) in ms; a comma-separated list runs each in turn")
    parser.add_argument("--partitioner", default=",".join(PARTITIONERS),
                        help="keyless records' partitioner; a comma-separated list runs each in turn")
    parser.add_argument("--sweep-seeds", type=int, default=6,
                        help="nemesis-safe seeds for the seeds-per-minute figures (0: skip them and the memory)")
    parser.add_argument("--no-high-watermark-lines", dest="high_watermark_lines", action="store_false",
                        help="leave out the per-batch high_watermark_advanced lines, in the real run "
                             "(trace_high_watermarks: false) and in its floor")
    parser.add_argument("--repeat", type=int, default=1,
                        help="alternate this many real runs and floors per row and keep the fastest of each")
    parser.add_argument("--compiled", default="auto", metavar="auto|off|DIR",
                        help="also run the real simulation compiled with this mypyc build (auto: build/mypyc when "
                             "it matches the sources; off: interpreted only)")
    parser.add_argument("--write", help="append the result to this markdown file")
    args = parser.parse_args(argv)
    partitioners = args.partitioner.split(",")
    if any(p not in PARTITIONERS for p in partitioners):
        parser.error(f"--partitioner: known ones are {', '.join(PARTITIONERS)}")
    try:
        lingers = [int(x) for x in args.linger_ms.split(",")]
    except ValueError:
        parser.error(f"--linger-ms: {args.linger_ms!r} is not a comma-separated list of integers")
    if args.seconds < 1 or args.repeat < 1 or args.sweep_seeds < 0 or any(x < 1 for x in lingers):
        parser.error("--seconds, --repeat and each linger must be positive, --sweep-seeds not negative")
    args.build, args.compiled_note = chosen_build(args.compiled)
    if args.build is None and args.compiled not in ("auto", "off"):
        parser.error(f"--compiled: {args.compiled_note}")
    return args, partitioners, lingers


def chosen_build(setting: str) -> tuple[Path | None, str]:
    """The mypyc build to run compiled with, or None and why not."""
    if setting == "off":
        return None, "compiled runs: off (--compiled off)"
    build = COMPILED_DIR if setting == "auto" else Path(setting)
    extensions, why = usable_build(build)
    if extensions is None:
        return None, f"compiled runs: none ({why})"
    return build, f"compiled runs: the mypyc build in {build} (make compiled), each in a child process"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, partitioners, lingers = parse_args(argv)
    simpy_before = bare_simpy_rate()
    runs = []
    for partitioner in partitioners:
        for linger in lingers:
            runs.extend(measured_pair(args, partitioner, linger))
    simpy_rate = (simpy_before + bare_simpy_rate()) / 2
    lines = [
        f"offered load: 5,000 records/s of 100 bytes, acks=all, {args.seconds} simulated s of workload "
        "plus the final phase; trace written",
        f"bare simpy timeouts per wall s: {simpy_rate:,.0f}   (reference, same process, before and after)",
        args.compiled_note,
        "", *speed_rows(runs),
        "", "produce requests/s: counted (every request the producer sent, over the simulated seconds of workload); "
        "the sticky partitioner sends one request per linger tick, round-robin one per broker",
        "floor: bench/sim_floor.py, the same messages and trace lines with no broker logic, interpreted, run right "
        "after each real run (interpreted, then compiled) with the same partitioner; no interpreted implementation "
        "on CPython and simpy that writes this trace runs "
        f"faster. real / floor: how many times slower the real run is than its floor (target <= {TARGET_RATIO}), "
        "in CPU seconds of the process that ran each (which the machine's other load disturbs less) and in wall "
        "seconds",
        *sweep_lines(args, lingers, partitioners)]
    print("\n".join(lines))
    if args.write:
        write_markdown(args.write, argv, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
