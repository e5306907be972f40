"""``isrlab sweep`` and ``isrlab report``: the Spark commands (docs/spark.md)."""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from isrlab import compiled
from isrlab.usage import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, UsageError, parse_seeds
from scenarios.runner import KEEP_CHOICES

DEFAULT_MASTER = "local[*]"


def add_parsers(sub) -> None:
    sweep = sub.add_parser("sweep", help="run many seeds, variants and settings as Spark tasks",
                           description="Run the seeds of a scenario for each variant and grid point as Spark tasks "
                                       "and write verdicts, client operations, cluster events and traces as Parquet "
                                       "(docs/spark.md). Exit 1 when a run fails.")
    sweep.add_argument("file", help="a scenario YAML file")
    sweep.add_argument("--seeds", required=True, help="the seeds, e.g. 1-10000 or 1,5,9-12")
    sweep.add_argument("--variant", metavar="NAME", help="only this variant (default: every variant)")
    sweep.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                       help="run every value of a setting (repeatable: the product of all), e.g. "
                            "cluster.config.min.insync.replicas=1,2")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting everywhere")
    sweep.add_argument("--keep", choices=KEEP_CHOICES, default="failing",
                       help="whose full trace goes into the traces table (default failing)")
    sweep.add_argument("--master", default=DEFAULT_MASTER, help="Spark master: local[*] (default), local[N] "
                                                                "or spark://HOST:PORT")
    sweep.add_argument("--out", required=True, help="the sweep folder (new, empty, or an earlier sweep's)")
    sweep.set_defaults(func=cmd_sweep)
    report = sub.add_parser("report", help="the Spark report of a sweep folder: Parquet tables and an HTML page",
                            description="Compute anomaly probabilities, availability, latency and fault effects "
                                        "over a sweep folder, and write them as Parquet and one HTML page.")
    report.add_argument("folder", help="a folder written by isrlab sweep")
    report.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default local[*])")
    report.add_argument("--out", help="where the report goes (default FOLDER/report)")
    report.set_defaults(func=cmd_report)


def _on_spark(job, bad_input: type[Exception]):
    """``job()``'s result, or None after one line on stderr when Spark could not run it
    (the caller exits 2); ``bad_input`` (the command's own error) becomes a UsageError."""
    from spark_reports.session import SparkUnavailable, one_line, spark_errors
    try:
        return job()
    except bad_input as exc:
        raise UsageError(str(exc)) from None
    except SparkUnavailable as exc:
        print(f"isrlab: {exc}", file=sys.stderr)
    except spark_errors() as exc:
        print(f"isrlab: the Spark job failed: {one_line(exc)}", file=sys.stderr)
    return None


@contextmanager
def session_with_build(master: str, app_name: str) -> Iterator[tuple]:
    """The Spark session of a command whose tasks run the simulation (``isrlab sweep``,
    ``isrlab explore --master``), and the setup its Python workers call before they
    import it: the switch to the compiled build when the build matches the sources
    (isrlab/compiled.py), else None (interpreted). The executors switch themselves;
    this driver only plans. A local master's workers load the build from this machine's
    folder; a cluster's get it with the job (a ShippedBuild, shipped here)."""
    from spark_reports.session import spark_session
    setup = compiled.executor_setup(master)
    with spark_session(master, app_name) as spark:
        if isinstance(setup, compiled.ShippedBuild):
            setup.ship(spark.sparkContext)
        yield spark, setup


def cmd_sweep(args: argparse.Namespace) -> int:
    from spark_reports.session import check_master
    from spark_reports.sweep import SweepError, check_out, plan_configs, print_progress, run_sweep
    seeds = parse_seeds(args.seeds)
    out = Path(args.out)

    def job():
        check_out(out)
        check_master(args.master)
        configs = plan_configs(args.file, args.variant, args.grid or (), args.set or ())  # bad input before Spark starts
        print(f"sweep of {args.file}: {len(configs)} configuration(s) x {len(seeds)} seeds = "
              f"{len(configs) * len(seeds)} runs on {args.master}")
        with session_with_build(args.master, "isrlab sweep") as (spark, setup):
            return configs, run_sweep(spark, args.file, seeds, out, args.variant, args.grid or (), args.set or (),
                                      args.keep, progress=print_progress, configs=configs, executor_setup=setup)
    done = _on_spark(job, SweepError)
    if done is None:
        return EXIT_BAD_INPUT
    configs, result = done
    sys.stderr.write("\n")
    _print_sweep(result, configs, len(seeds))
    if result.errors:
        return EXIT_INTERNAL
    return EXIT_FAILED if result.failures else EXIT_OK


def _print_sweep(result, configs, seeds: int) -> None:
    width = max(len("configuration"), *(len(c.label) for c in configs))
    print(f"  {'configuration':<{width}}  {'runs':>6}  {'passed':>6}  {'failed':>6}")
    for config in configs:
        failed = sum(1 for f in result.failures if f["config"] == config.label)
        errors = sum(1 for e in result.errors if e["config"] == config.label)
        print(f"  {config.label:<{width}}  {seeds:>6}  {seeds - failed - errors:>6}  {failed + errors:>6}")
    rate = result.runs / result.wall_seconds if result.wall_seconds else 0.0
    code = tasks_code(result.tasks_compiled, result.tasks)
    print(f"{result.runs} runs in {result.tasks} tasks ({code}), {result.wall_seconds:.1f} s ({rate:.1f} runs/s); "
          f"tables under {result.out}: verdicts, operations, cluster_events, traces")
    print(f"  report: isrlab report {result.out}")
    for failure in result.failures:
        print(f"  replay {failure['config']} seed {failure['seed']}: {failure['replay']}")
    for error in result.errors:
        print(f"  internal error (a bug in isrlab) {error['config']} seed {error['seed']}: {error['message']}\n"
              f"    replay: {error['replay']}")
    from analysis.seed_agreement import same_results_note
    for same in result.same_results:
        print(same_results_note(same["runs"], same["outcome"], same["config"]))


def tasks_code(compiled_tasks: int, tasks: int) -> str:
    """Which simulation the Spark tasks ran, in a word or a few (``compiled in 3 of 4 tasks``)."""
    if compiled_tasks == tasks:
        return "compiled"
    return "interpreted" if not compiled_tasks else f"compiled in {compiled_tasks} of {tasks} tasks"


def cmd_report(args: argparse.Namespace) -> int:
    from spark_reports.load import ReportError, read_manifest
    from spark_reports.session import spark_session
    folder = Path(args.folder)

    def job():
        read_manifest(folder)  # a wrong folder is refused before Spark starts
        from spark_reports.build import build_report
        with spark_session(args.master, "isrlab report") as spark:
            return build_report(spark, folder, Path(args.out) if args.out else None)
    report = _on_spark(job, ReportError)
    if report is None:
        return EXIT_BAD_INPUT
    _print_report(report)
    return EXIT_OK


def _print_report(report) -> None:
    print("anomaly probability per run (95% Wilson interval):")
    for row in report.rows["anomaly_probabilities"]:
        if row["anomaly"] in ("lost_writes", "divergence", "duplicates", "consumer_anomalies"):
            print(f"  {row['config']:<20} {row['anomaly']:<20} {row['runs_with']:>5}/{row['runs']:<5} "
                  f"{row['probability']:.3f}  [{row['ci_low']:.3f}, {row['ci_high']:.3f}]")
    print("produce latency of acknowledged sends (ms):")
    for row in report.rows["produce_latency"]:
        print(f"  {row['config']:<20} p50 {row['p50_ms']:.1f}  p99 {row['p99_ms']:.1f}  p99.9 {row['p999_ms']:.1f}"
              f"  ({row['acknowledged_sends']} sends)")
    print(f"tables: {report.folder} ({', '.join(report.tables)})")
    for line in report.same_results:
        print(line)
    print(f"HTML report: {report.html}")
