"""``isrlab sweep`` on Spark (local[2], the session's start counted) against the same
seeds run one after another in one process (``isrlab run --seeds``, one worker).

    .venv/bin/python bench/spark_sweep.py [--seeds 1000] [--scenario FILE] [--variant NAME]
                                          [--master local[2]] [--write docs/benchmarks.md]

Each side is its own process, timed from its start to its exit, with the peak resident
memory of its process tree sampled every 0.2 s (for Spark: the Python driver, its JVM,
which in local mode also runs the executors, and the Python workers) and the peak of
the Python driver alone. The issue asks for Spark at least 1.6 times faster on a
2-core machine. With --write the result replaces this benchmark's part of the file.

Both sides run the interpreted simulation (ISRLAB_COMPILED=0): Spark's executors do
not load the mypyc build (docs/compiled.md), so the one process must not either, or
the comparison would be of two different programs.
"""
from __future__ import annotations

import argparse
import os
import platform
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


def measured(command: list[str]) -> dict:
    """Wall seconds from start to exit; CPU seconds of the process tree (each process's
    user + system time as last sampled, every 0.2 s); peak memory of the tree and of
    the process itself (MiB). Exit 0 or 1 (some run failed its expectations) both count."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "ISRLAB_COMPILED": "0"})
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--scenario", default="scenarios/library/jepsen-2013.yaml")
    parser.add_argument("--variant", default="unclean")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--write", type=Path, help="replace this benchmark's part of this markdown file")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds: at least 1")
    os.chdir(ROOT)
    seeds = f"1-{args.seeds}"
    folder = Path(tempfile.mkdtemp(prefix="isrlab-bench-sweep-"))
    isrlab = [sys.executable, "-m", "isrlab"]
    try:
        spark = measured(isrlab + ["sweep", args.scenario, "--seeds", seeds, "--variant", args.variant,
                                   "--master", args.master, "--out", str(folder / "spark")])
        one = measured(isrlab + ["run", args.scenario, "--seeds", seeds, "--variant", args.variant, "--jobs", "1",
                                 "--keep", "none", "--out", str(folder / "one")])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    text = result_text(args, spark, one)
    print(text)
    if args.write:
        write_section(args.write, text)


def result_text(args, spark: dict, one: dict) -> str:
    load = os.getloadavg()
    ratio = one["seconds"] / spark["seconds"]
    command = (f".venv/bin/python bench/spark_sweep.py --seeds {args.seeds} --scenario {args.scenario} "
               f"--variant {args.variant} --master {args.master}")
    return "\n".join([
        f"#### spark_sweep, {time.strftime('%Y-%m-%d %H:%M')} UTC (CPython {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} cpus)", "", f"`{command}`", "", "```",
        f"runs:                                {args.seeds} ({args.scenario}, variant {args.variant})",
        f"one process, one seed after another: {one['seconds']:8.1f} s  ({args.seeds / one['seconds']:.2f} runs/s)"
        f"  peak memory {one['own_mib']:,} MiB, CPU {one['cpu']:.1f} s",
        f"isrlab sweep on {args.master:<20} {spark['seconds']:8.1f} s  ({args.seeds / spark['seconds']:.2f} runs/s,"
        f" the Spark session's start included)",
        f"  peak memory: Python driver {spark['own_mib']:,} MiB; driver, JVM and Python workers {spark['tree_mib']:,} MiB",
        f"  CPU {spark['cpu']:.1f} s ({spark['cpu'] / one['cpu']:.2f} times the one process's): "
        + ", ".join(f"{kind} {spark['cpu_by_kind'].get(kind, 0.0):.1f} s" for kind in ("driver", "jvm", "workers", "other")),
        f"speed-up:                            {ratio:8.2f}x  (target >= {TARGET}: "
        f"{'met' if ratio >= TARGET else 'not met'})",
        f"load average at the end (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", "```"])


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
