"""``isrlab sweep`` on a local Spark master against ``isrlab run --jobs N`` on the same
seeds, each compiled (the mypyc build, when it matches the sources) and interpreted.

    .venv/bin/python bench/spark_sweep.py [--seeds 200] [--scenario FILE] [--variant NAME]
                                          [--master local[2]] [--serial] [--write docs/benchmarks.md]

Four sides, each its own process, timed from its start to its exit, one after another
in this order: the sweep compiled, ``isrlab run --jobs N`` compiled, the sweep
interpreted, ``isrlab run --jobs N`` interpreted (N: the master's cores); with
``--serial`` a fifth, ``isrlab run --jobs 1`` interpreted (one process, one seed after
another: the issue-11 comparison, target a speed-up of 1.6). The sweep's own job (its
``runs in ... s`` line: from the first task to the last table written) is read from its
output too, so that the Spark session's start can be told apart. The machine is shared
and noisy: the ratios of sides measured in one run are what to compare, not the times.
Issue 23's targets: the sweep within 1.2 times ``isrlab run --jobs N`` (its job alone,
Spark's start left out), and the compiled sweep faster than the interpreted one.

Peak resident memory of each side's process tree is sampled every 0.2 s (for Spark: the
Python driver, its JVM, which in local mode also runs the executors, and the Python
workers), and so is the CPU time of each of its processes. With --write the result
replaces this benchmark's part of the file. Without a compiled build that matches the
sources (``make compiled``), only the interpreted sides run, and the output says so.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- bench/spark_sweep.py --write: from here -->"
END = "<!-- bench/spark_sweep.py --write: to here -->"
TARGET = 1.6


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:  # every thread's children: the JVM starts Python workers from other threads than its first
            for thread in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(c) for c in (thread / "children").read_text().split())
        except OSError:
            continue
    return found


def _cpu_ticks(pid: int) -> int:
    """User + system clock ticks of a process so far (its threads included)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _kind(pid: int, root: int) -> str:
    """What a process of the tree is: the command itself, Spark's JVM, a Python worker."""
    if pid == root:
        return "driver"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return ""  # gone: keep what it was
    if not command:
        return ""  # exited, not yet reaped (a zombie has no command line): keep what it was
    return "jvm" if b"java" in command.split(b" ", 1)[0] else "workers" if b"pyspark" in command else "other"


def measured(command: list[str], compiled: str) -> dict:
    """Wall seconds from start to exit; CPU seconds of the process tree (each process's
    user + system time as last sampled, every 0.2 s); peak memory of the tree and of
    the process itself (MiB). Exit 0 or 1 (some run failed its expectations) both count.
    ``compiled``: the ISRLAB_COMPILED of the side ("0", or a build directory)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ISRLAB_COMPILED": compiled})
    peak = {"tree": 0, "own": 0}
    ticks: dict[int, int] = {}
    kinds: dict[int, str] = {}

    def watch():
        while process.poll() is None:
            pids = _tree(process.pid)
            peak["tree"] = max(peak["tree"], sum(_status_kib(p, "VmRSS:") for p in pids))
            peak["own"] = max(peak["own"], _status_kib(process.pid, "VmHWM:"))
            for p in pids:
                ticks[p] = max(ticks.get(p, 0), _cpu_ticks(p))
                kinds[p] = _kind(p, process.pid) or kinds.get(p, "other")  # the last seen: spark-submit becomes java
            time.sleep(0.2)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    watcher.join()
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{out}\n{err}")
    by_kind: dict[str, float] = {}
    for p, count in ticks.items():
        by_kind[kinds[p]] = by_kind.get(kinds[p], 0.0) + count / os.sysconf("SC_CLK_TCK")
    return {"seconds": seconds, "cpu": sum(by_kind.values()), "cpu_by_kind": by_kind,
            "tree_mib": peak["tree"] // 1024, "own_mib": peak["own"] // 1024, "out": out}


def cores(master: str) -> int:
    """The cores of a local master: local (1), local[N], local[*] (this machine's)."""
    threads = (master[len("local["):-1] if master.startswith("local[") else "1").split(",")[0]
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def sweep_job_seconds(out: str) -> float:
    """The sweep's own job, as `isrlab sweep` prints it (`48 runs in 16 tasks (compiled), 40.1 s`)."""
    found = re.search(r"runs in \d+ tasks \(([^)]*)\), ([\d.]+) s", out)
    if not found:
        raise SystemExit(f"isrlab sweep printed no summary line:\n{out}")
    return float(found[2])


def sweep_code(out: str) -> str:
    found = re.search(r"runs in \d+ tasks \(([^)]*)\)", out)
    return found[1] if found else "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--scenario", default="scenarios/library/jepsen-2013.yaml")
    parser.add_argument("--variant", default="unclean")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--serial", action="store_true", help="also one process, one seed after another")
    parser.add_argument("--write", type=Path, help="replace this benchmark's part of this markdown file")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds: at least 1")
    if not args.master.startswith("local"):
        parser.error("--master: a local master (local, local[N], local[*]): the sides share this machine")
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    from isrlab.compiled import DEFAULT_DIR, usable_build
    build = DEFAULT_DIR if usable_build(DEFAULT_DIR)[0] is not None else None
    settings = ([("compiled", str(build))] if build else []) + [("interpreted", "0")]
    jobs = cores(args.master)
    folder = Path(tempfile.mkdtemp(prefix="isrlab-bench-sweep-"))
    isrlab = [sys.executable, "-m", "isrlab"]
    common = [args.scenario, "--seeds", f"1-{args.seeds}", "--variant", args.variant]
    sides: dict[str, dict] = {}
    try:
        for code, setting in settings:
            sides[f"sweep {code}"] = measured(isrlab + ["sweep", *common, "--master", args.master,
                                                        "--out", str(folder / f"sweep-{code}")], setting)
            sides[f"sweep {code}"]["job"] = sweep_job_seconds(sides[f"sweep {code}"]["out"])
            sides[f"run {code}"] = measured(isrlab + ["run", *common, "--jobs", str(jobs), "--keep", "none",
                                                      "--out", str(folder / f"run-{code}")], setting)
        if args.serial:
            sides["one"] = measured(isrlab + ["run", *common, "--jobs", "1", "--keep", "none",
                                              "--out", str(folder / "one")], "0")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    text = result_text(args, jobs, build, sides)
    print(text)
    if args.write:
        write_section(args.write, text)


def result_text(args, jobs: int, build: Path | None, sides: dict[str, dict]) -> str:
    load = os.getloadavg()
    command = (f".venv/bin/python bench/spark_sweep.py --seeds {args.seeds} --scenario {args.scenario} "
               f"--variant {args.variant} --master {args.master}{' --serial' if args.serial else ''}")
    lines = [f"#### spark_sweep, {time.strftime('%Y-%m-%d %H:%M')} UTC (CPython {platform.python_version()}, "
             f"{platform.machine()}, {os.cpu_count()} cpus)", "", f"`{command}`", "", "```",
             f"runs: {args.seeds} ({args.scenario}, variant {args.variant}); sweep on {args.master}, "
             f"isrlab run --jobs {jobs}",
             *([] if build else ["no compiled build matches the sources (make compiled): interpreted sides only"]),
             f"{'side':<34} {'wall s':>8} {'job s':>8} {'runs/s':>7} {'CPU s':>8} {'peak MiB':>9}"]
    for name, side in sides.items():
        label = {"one": "isrlab run --jobs 1, interpreted"}.get(name, name.replace("run ", f"isrlab run --jobs {jobs}, ")
                                                                 .replace("sweep ", "isrlab sweep, "))
        job = f"{side['job']:8.1f}" if "job" in side else f"{'-':>8}"
        lines.append(f"{label:<34} {side['seconds']:8.1f} {job} {args.seeds / side['seconds']:7.2f} "
                     f"{side['cpu']:8.1f} {side['tree_mib']:9,}")
    for code in ("compiled", "interpreted"):
        sweep = sides.get(f"sweep {code}")
        if sweep is None:
            continue
        lines.append(f"  sweep {code}: ran {sweep_code(sweep['out'])} on the executors; CPU "
                     + ", ".join(f"{kind} {sweep['cpu_by_kind'].get(kind, 0.0):.1f} s"
                                 for kind in ("driver", "jvm", "workers", "other"))
                     + f"; peak memory of the Python driver {sweep['own_mib']:,} MiB")
    lines.append("ratios of sides of this one run:")
    for code in ("compiled", "interpreted"):
        if f"sweep {code}" in sides:
            sweep, run = sides[f"sweep {code}"], sides[f"run {code}"]
            ratio = sweep["job"] / run["seconds"]
            lines.append(f"  sweep / isrlab run --jobs {jobs}, {code + ':':<12} {sweep['seconds'] / run['seconds']:5.2f}x "
                         f"(the sweep's job alone {ratio:5.2f}x; target <= 1.2: {'met' if ratio <= 1.2 else 'not met'})")
    if build:
        compiled, interpreted = sides["sweep compiled"], sides["sweep interpreted"]
        lines.append(f"  compiled sweep / interpreted sweep:    {compiled['seconds'] / interpreted['seconds']:5.2f}x "
                     f"(the jobs alone {compiled['job'] / interpreted['job']:5.2f}x; "
                     f"isrlab run's {sides['run compiled']['seconds'] / sides['run interpreted']['seconds']:5.2f}x)")
    if "one" in sides:
        ratio = sides["one"]["seconds"] / sides["sweep interpreted"]["seconds"]
        lines.append(f"  speed-up of the interpreted sweep over one process: {ratio:5.2f}x "
                     f"(target >= {TARGET}: {'met' if ratio >= TARGET else 'not met'})")
    lines += [f"load average at the end (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", "```"]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> None:
    current = path.read_text() if path.exists() else ""
    if BEGIN in current and END in current:
        before, rest = current.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        current = f"{before}{BEGIN}\n{text}\n{END}{after}"
    else:
        current = current.rstrip("\n") + f"\n\n{BEGIN}\n{text}\n{END}\n"
    path.write_text(current)


if __name__ == "__main__":
    main()
