"""isrlab report over a sweep of at least 10,000,000 trace events, against the same
tables (all ten, bench/report_duckdb.py, checked equal row by row here and by
tests/spark_reports/test_report_duckdb.py) computed by DuckDB in one process over the
same Parquet files; wall time and
peak memory (resident set of the process and its children: for Spark, the Python
driver and its JVM, which in local mode also runs the executors).

    .venv/bin/python bench/spark_report.py [--events 10000000] [--base SWEEP] [--work DIR]

Without --base it first sweeps jepsen-2013 (both variants, 24 seeds), then copies that
sweep's rows with new seeds until the runs it describes hold --events trace events.
"""
from __future__ import annotations

import argparse
import json
import math
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SEED_STRIDE = 1_000_000


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (KiB)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        stack.extend(int(c) for c in children)
    return total


def measured(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak resident memory of the process tree (MiB), stdout."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    peak = [0]

    def watch():
        while process.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kib(process.pid))
            time.sleep(0.2)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, _ = process.communicate()
    watcher.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{out}")
    return time.perf_counter() - started, peak[0] // 1024, out


def grow(base: Path, big: Path, events: int) -> dict:
    """Copy the base sweep's rows with new seeds until they describe ``events`` events."""
    from pyspark.sql import functions as F
    from spark_reports.load import read_sweep
    from spark_reports.schemas import MANIFEST_FILE, PARTITION_COLUMNS, TABLES
    from spark_reports.session import spark_session
    with spark_session("local[2]", "isrlab bench grow") as spark:
        tables = read_sweep(spark, base)
        base_events = tables["verdicts"].agg(F.sum("events")).first()[0]
        copies = math.ceil(events / base_events)
        factor = spark.range(copies).withColumnRenamed("id", "copy")
        for name, schema in TABLES.items():
            frame = tables[name].crossJoin(factor).withColumn("seed", F.col("seed") + F.col("copy") * SEED_STRIDE)
            if "run_id" in schema.fieldNames():
                frame = frame.withColumn("run_id", F.concat(F.col("run_id"), F.lit("-copy"), F.col("copy")))
            frame.select(*schema.fieldNames()).write.mode("overwrite").partitionBy(*PARTITION_COLUMNS) \
                .parquet(str(big / name))
        manifest = json.loads((base / MANIFEST_FILE).read_text())
        manifest["runs"] = manifest["runs"] * copies
        (big / MANIFEST_FILE).write_text(json.dumps(manifest))
        verdicts = spark.read.parquet(str(big / "verdicts"))
        return {"runs": verdicts.count(), "events": verdicts.agg(F.sum("events")).first()[0],
                "operations": spark.read.parquet(str(big / "operations")).count(),
                "cluster_events": spark.read.parquet(str(big / "cluster_events")).count()}


def duckdb_report(folder: str) -> None:
    """The baseline, as its own process (its memory measured alone): every report table."""
    from report_duckdb import duckdb_tables
    for name, (columns, rows) in duckdb_tables(folder).items():
        print(json.dumps({"table": name, "columns": columns, "rows": rows}, default=str))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--base", help="an existing sweep folder to grow from")
    parser.add_argument("--work", help="where the grown sweep goes (default: a temporary folder, removed)")
    parser.add_argument("--duckdb", help=argparse.SUPPRESS)  # the DuckDB side, run as its own process
    args = parser.parse_args()
    if args.duckdb:
        duckdb_report(args.duckdb)
        return
    os.chdir(ROOT)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="isrlab-bench-report-"))
    try:
        base = Path(args.base) if args.base else work / "base"
        if not args.base:
            subprocess.run([sys.executable, "-m", "isrlab", "sweep", "scenarios/library/jepsen-2013.yaml", "--seeds",
                            "1-24", "--master", "local[2]", "--out", str(base)], check=True, cwd=ROOT,
                           stdout=subprocess.DEVNULL)
        size = grow(base, work / "big", args.events)
        spark_s, spark_mib, _ = measured([sys.executable, "-m", "isrlab", "report", str(work / "big"), "--master",
                                          "local[2]", "--out", str(work / "report")])
        duck_s, duck_mib, duck_out = measured([sys.executable, "bench/spark_report.py", "--duckdb", str(work / "big")])
        agree = _agree(work / "report", duck_out)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"### spark_report, {time.strftime('%Y-%m-%d')} (CPython {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus)\n")
    print(f"`.venv/bin/python bench/spark_report.py --events {args.events}`\n\n```")
    print(f"runs / trace events they hold:     {size['runs']:,} / {size['events']:,}")
    print(f"rows read: operations / cluster events: {size['operations']:,} / {size['cluster_events']:,}")
    print(f"isrlab report, local[2]:           {spark_s:7.1f} s   peak memory {spark_mib:,} MiB "
          "(Python driver + JVM; every report table, Parquet and HTML)")
    print(f"DuckDB, one process, one thread:   {duck_s:7.1f} s   peak memory {duck_mib:,} MiB "
          "(every report table, Parquet not written, no HTML)")
    print(f"the two agree on every table:      {agree}")
    load = os.getloadavg()
    print(f"load average at the end (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n```")


def _agree(report: Path, duck_out: str) -> str:
    """Every table of Spark's report against DuckDB's, row by row (report_duckdb.differences)."""
    from report_duckdb import differences
    from spark_reports.session import spark_session
    duck = {}
    for line in duck_out.splitlines():
        if line.startswith("{"):
            table = json.loads(line)
            duck[table["table"]] = (table["columns"], [tuple(row) for row in table["rows"]])
    problems = []
    with spark_session("local[2]", "isrlab bench compare") as spark:
        for name, result in sorted(duck.items()):
            frame = spark.read.parquet(str(report / name)).select(*result[0])
            problems += differences(name, (result[0], [tuple(r) for r in frame.collect()]), result, 1e-6)
    return "yes" if not problems else "NO: " + "; ".join(problems)


if __name__ == "__main__":
    main()
