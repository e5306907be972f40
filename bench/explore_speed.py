"""The explorer's speed (issue 23's benchmark): its throughput, and how long it takes to
find and to shrink the known losses of unsafe configurations.

    .venv/bin/python bench/explore_speed.py [--throughput-runs 8] [--shrink-runs 300] [--cases N]
        [--write docs/benchmarks.md]

Throughput: runs per wall second (and per CPU second) of the search alone, on the
canonical 3-broker scenario (jepsen-2013's cluster and workload: 3 brokers, t-0 with
3 replicas, acks=all at 100 records/s, one consumer, 45 s) in its safe variant, where
nothing is found and every run is searched, with ``--jobs 1`` and ``--jobs 2``.

Counterexamples: ``isrlab explore`` (the Python API, ``--jobs 1``, ``--seed 1``, no
``--max-runs``) around each library base, whose own faults the explorer strips (only
the cluster and the workload are kept): jepsen-2013 variant unclean (lost_writes, and
any invariant), kip-101-scenario-1 variant hw (lost_writes_acks_all) and
kip-101-scenario-2 variant hw (divergence). For each: the seed found, the time to the
first counterexample (the search), the time to the shrunk file (search, shrink and the
replay of the written file), the shrink's runs and what is left. Target: the
Jepsen 2013 loss found and shrunk in under 60 s.

The runs use the compiled build when it is fresh (as isrlab explore does; the table
says which). The machine may be shared: the load average is printed, and CPU seconds
(this process and its worker processes) are the steadier figure.
"""
from __future__ import annotations

import argparse
import io
import os
import platform
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Measure the code of this checkout (bench/ is what Python puts on the path for a script).
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from isrlab import compiled  # noqa: E402

LIBRARY = ROOT / "scenarios" / "library"
SECTION = "## Explorer speed (issue 23)"
TARGET_S = 60.0
# (label, base file, variant, property)
CASES = (
    ("Jepsen 2013, unclean", "jepsen-2013.yaml", "unclean", "lost_writes"),
    ("Jepsen 2013, unclean", "jepsen-2013.yaml", "unclean", "invariants"),
    ("KIP-101 scenario 1, hw", "kip-101-scenario-1.yaml", "hw", "lost_writes_acks_all"),
    ("KIP-101 scenario 2, hw", "kip-101-scenario-2.yaml", "hw", "divergence"),
)


@dataclass
class Measured:
    wall: float
    cpu: float
    report: object


def cpu_seconds() -> float:
    """User and system time of this process and its (finished) worker processes."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def explore_once(base: str, variant: str, prop: str, out: Path, max_runs: int | None = None, jobs: int = 1,
                 budget_s: float = 600.0, setup=None, shrink_runs: int = 300) -> Measured:
    from scenarios.explore.explorer import Options, explore
    from scenarios.explore.search import Progress
    options = Options(LIBRARY / base, prop, budget_s, out, jobs=jobs, max_runs=max_runs, variant=variant,
                      shrink_runs=shrink_runs,
                      command=f"isrlab explore scenarios/library/{base} --variant {variant} --property {prop}")
    started, cpu = time.perf_counter(), cpu_seconds()
    report = explore(options, Progress(io.StringIO()), setup)
    return Measured(time.perf_counter() - started, cpu_seconds() - cpu, report)


def throughput(runs: int, folder: Path, setup) -> list[str]:
    lines = []
    for jobs in (1, 2):
        m = explore_once("jepsen-2013.yaml", "safe", "lost_writes", folder / f"throughput-{jobs}", runs, jobs,
                         setup=setup)
        assert m.report.file is None, "the safe configuration lost data: the benchmark's premise is wrong"
        lines.append(f"| search, `--jobs {jobs}` | {m.report.runs} | {m.report.runs / m.wall:.2f} | "
                     f"{m.report.runs / max(m.cpu, 1e-9):.2f} |")
    return ["| jepsen-2013 safe, lost_writes (nothing to find) | runs | runs per wall second | runs per CPU second |",
            "| --- | ---: | ---: | ---: |", *lines]


def counterexamples(folder: Path, setup, cases: int, shrink_runs: int) -> tuple[list[str], float | None]:
    rows = ["| base | property | seed (search runs) | to the first counterexample | to the shrunk file "
            "(CPU) | shrink runs | written |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    jepsen = None
    for i, (label, base, variant, prop) in enumerate(CASES[:cases]):
        m = explore_once(base, variant, prop, folder / f"case-{i}", setup=setup, shrink_runs=shrink_runs)
        r = m.report
        if r.file is None:
            rows.append(f"| {label} | {prop} | none in {r.runs} runs | - | - | - | - |")
            continue
        if i == 0:
            jepsen = m.wall
        shown = prop if r.prop == prop else f"{prop} ({r.prop})"
        rows.append(f"| {label} | {shown} | {r.seed} ({r.runs}) | {r.seconds:.1f} s | {m.wall:.1f} s "
                    f"({m.cpu:.1f} s) | {r.shrink_runs} | {r.final} |")
    return rows, jepsen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--throughput-runs", type=int, default=8, help="runs of each throughput search")
    parser.add_argument("--shrink-runs", type=int, default=300, help="at most this many runs per shrink")
    parser.add_argument("--cases", type=int, default=len(CASES), help=f"only the first N of the {len(CASES)} "
                                                                      "counterexample searches")
    parser.add_argument("--write", type=Path, help="put the tables in this markdown file's own section")
    args = parser.parse_args(argv)
    if min(args.throughput_runs, args.shrink_runs, args.cases) < 1:
        parser.error("--throughput-runs, --shrink-runs and --cases must be positive")
    active = compiled.activate()
    setup = compiled.activate if active else None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="isrlab-explore-bench-") as folder:
        found, jepsen = counterexamples(Path(folder), setup, args.cases, args.shrink_runs)
        speed = throughput(args.throughput_runs, Path(folder), setup)
    load_after = os.getloadavg()
    verdict = ("not found" if jepsen is None else
               f"{jepsen:.1f} s: {'met' if jepsen < TARGET_S else 'not met'} (target under {TARGET_S:.0f} s)")
    load = (f"1-minute load average {load_before[0]:.1f} before and {load_after[0]:.1f} after, on "
            f"{os.cpu_count()} cores; {'compiled' if active else 'interpreted'} simulation; "
            f"CPython {platform.python_version()}, {platform.machine()}")
    text = "\n".join([*found, "", f"Jepsen 2013 loss found and shrunk in {verdict}.", "", *speed])
    print(text)
    print(f"\n({load})")
    if args.write:
        import broker_throughput as bt
        command = " ".join([".venv/bin/python bench/explore_speed.py", *(argv if argv is not None else sys.argv[1:])])
        body = (f"{SECTION}\n\nCommand: `{command}` (one run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
                f"{load}).\n\n{text}\n\n{NOTES}\n")
        bt.replace_section(args.write, SECTION, body)
    return 0


NOTES = ("Each search starts at seed 1 with `--jobs 1`, so the seeds, the shrink steps and the written files are "
         "the same on every machine; only the times depend on it. The time to the shrunk file includes the "
         "search, the shrink (at most 300 runs) and the run of the written file. CPU seconds count this process "
         "and its worker processes; on a shared machine they are the steadier figure, the wall times are what a "
         "user waits. The throughput searches run the safe variant, where nothing is found, so every run of "
         "the search is counted; `--jobs 2` starts two worker processes, whose start (imports, the compiled "
         "build switched on) is part of its time; with other load on the two cores its gain varies from run "
         "to run (1.37 against 1.59 runs a second in one run, 2.44 against 1.79 in the next). The shrink tries fewer "
         "records first, one record a second before halves, and the shortest run before halves: measured "
         "interpreted on 2026-11-26 at a load near 10, jepsen-2013 unclean's search and shrink took 62 shrink "
         "runs and 23.8 CPU seconds (84 s of wall time) with the earlier order (halving the rate after the faults), "
         "and 52 shrink runs and 8.5 CPU seconds (25 s) with this one, for the same 3-fault file.")


if __name__ == "__main__":
    sys.exit(main())
