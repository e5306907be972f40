"""isrlab report over a sweep of at least 10,000,000 trace events, against the same
tables computed by DuckDB in one process over the same Parquet files; wall time and
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


DUCKDB_SQL = {
    "anomaly_probabilities": """
        with v as (select * from read_parquet('{d}/verdicts/*/*/*.parquet', hive_partitioning=true)),
        a as (select scenario, config, 'lost_writes' as anomaly, (lost_writes > 0)::int as hit from v
              union all select scenario, config, 'divergence', (divergence > 0)::int from v
              union all select scenario, config, 'duplicates', (duplicates > 0)::int from v
              union all select scenario, config, 'consumer_anomalies',
                 (consumer_non_monotonic + consumer_skips + consumer_truncated_reads > 0)::int from v
              union all select scenario, config, 'inconsistent_offsets', (inconsistent_offsets > 0)::int from v
              union all select scenario, config, 'failed_run', (outcome = 'FAIL')::int from v),
        c as (select scenario, config, anomaly, count(*) as runs, sum(hit) as runs_with from a group by all),
        z as (select *, runs_with / runs as p, 1.959963984540054 as z from c)
        select scenario, config, anomaly, runs, runs_with, p as probability,
          case when runs_with = 0 then 0.0 else greatest(0.0, ((p + z*z/(2*runs)) - z*sqrt(p*(1-p)/runs + z*z/(4*runs*runs))) / (1 + z*z/runs)) end as ci_low,
          case when runs_with = runs then 1.0 else least(1.0, ((p + z*z/(2*runs)) + z*sqrt(p*(1-p)/runs + z*z/(4*runs*runs))) / (1 + z*z/runs)) end as ci_high
        from z order by all""",
    "produce_latency": """
        select scenario, config, count(*) as acknowledged_sends, avg(complete_ms - invoke_ms) as mean_ms,
          quantile_cont(complete_ms - invoke_ms, 0.5) as p50_ms, quantile_cont(complete_ms - invoke_ms, 0.99) as p99_ms,
          quantile_cont(complete_ms - invoke_ms, 0.999) as p999_ms, max(complete_ms - invoke_ms) as max_ms
        from read_parquet('{d}/operations/*/*/*.parquet', hive_partitioning=true)
        where f = 'send' and outcome = 'ok' and "offset" >= 0 group by all order by all""",
    "produce_outcomes": """
        select scenario, config, count(*) as sends, sum((outcome = 'fail')::int) as failed,
          sum((outcome = 'info')::int) as unknown
        from read_parquet('{d}/operations/*/*/*.parquet', hive_partitioning=true)
        where f = 'send' and acks <> 0 group by all order by all""",
    "availability": """
        select scenario, config, e.key as partition, count(*) as runs, avg(e.value) as mean_unavailable_ms,
          quantile_cont(e.value, 0.99) as p99_unavailable_ms, max(e.value) as max_unavailable_ms
        from (select scenario, config, unnest(map_entries(unavailable_per_partition_ms)) as e
              from read_parquet('{d}/verdicts/*/*/*.parquet', hive_partitioning=true)) group by all order by all""",
    "cluster_changes": """
        select scenario, config, sum((type = 'isr_shrunk')::int) as isr_shrinks,
          sum((type = 'isr_expanded')::int) as isr_expansions,
          sum((type = 'leader_elected' and coalesce(unclean, false))::int) as unclean_elections
        from read_parquet('{d}/cluster_events/*/*/*.parquet', hive_partitioning=true) group by all order by all""",
    "fault_latency": """
        with e as (select * from read_parquet('{d}/cluster_events/*/*/*.parquet', hive_partitioning=true)),
        i as (select s.scenario, s.config, s.seed, s.run_id, s.fault, s.t_ms as start_ms,
                coalesce(min(f.t_ms), 4611686018427387904) as end_ms
              from e s left join e f on f.type = 'fault_ended' and f.run_id = s.run_id and f.config = s.config
                and f.seed = s.seed and f.fault_id = s.fault_id
              where s.type = 'fault_started' and json_extract(s.fields, '$.no_effect') is null group by all),
        k as (select distinct scenario, config, fault from i),
        s as (select scenario, config, seed, run_id, process, op, invoke_ms, complete_ms - invoke_ms as latency_ms
              from read_parquet('{d}/operations/*/*/*.parquet', hive_partitioning=true)
              where f = 'send' and outcome = 'ok' and "offset" >= 0),
        flagged as (select s.*, k.fault, exists (select 1 from i where i.run_id = s.run_id and i.config = s.config
                      and i.seed = s.seed and i.fault = k.fault and s.invoke_ms between i.start_ms and i.end_ms) as during
                    from s join k using (scenario, config))
        select scenario, config, fault, during, count(*) as acknowledged_sends,
          quantile_cont(latency_ms, 0.5) as p50_ms, quantile_cont(latency_ms, 0.99) as p99_ms
        from flagged group by all order by all""",
}


def duckdb_report(folder: str) -> None:
    import duckdb
    connection = duckdb.connect()
    connection.execute("set threads to 1")  # one process, one thread: the plain single-process baseline
    for name, sql in DUCKDB_SQL.items():
        rows = connection.execute(sql.format(d=folder)).fetchall()
        print(json.dumps({"table": name, "rows": rows}, default=str))


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
          f"({len(DUCKDB_SQL)} of the tables: {', '.join(DUCKDB_SQL)})")
    print(f"the two agree on those tables:     {agree}")
    load = os.getloadavg()
    print(f"load average at the end (1/5/15 min): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n```")


def _agree(report: Path, duck_out: str) -> str:
    """Compare p99 latency and lost-writes probability of Spark's tables with DuckDB's."""
    from spark_reports.session import spark_session
    duck = {json.loads(line)["table"]: json.loads(line)["rows"] for line in duck_out.splitlines()
            if line.startswith("{")}
    with spark_session("local[2]", "isrlab bench compare") as spark:
        latency = {(r["config"]): r["p99_ms"] for r in spark.read.parquet(str(report / "produce_latency")).collect()}
        anomalies = {(r["config"], r["anomaly"]): r["ci_high"]
                     for r in spark.read.parquet(str(report / "anomaly_probabilities")).collect()}
    same_latency = all(abs(latency[row[1]] - row[5]) < 1e-6 for row in duck["produce_latency"])
    same_anomalies = all(abs(anomalies[(row[1], row[2])] - row[7]) < 1e-9 for row in duck["anomaly_probabilities"])
    return "yes" if same_latency and same_anomalies else f"NO (latency {same_latency}, anomalies {same_anomalies})"


if __name__ == "__main__":
    main()
