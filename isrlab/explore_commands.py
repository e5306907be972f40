"""``isrlab explore``: find, shrink and save a counterexample (docs/explore.md)."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from isrlab import compiled
from isrlab.usage import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, UsageError, positive_int
from scenarios.source import ScenarioError, Source, convert


def _budget(text: str) -> float:
    """A duration with its unit (30s, 5m, 1h): how long the search may run."""
    try:
        ms = convert(Source("--budget", {}), (), text, "duration")
    except ScenarioError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    if ms <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return ms / 1000.0


def add_parsers(sub) -> None:
    explore = sub.add_parser(
        "explore", help="search drawn fault schedules for a violation, shrink it, save it as a scenario",
        description="Draw fault schedules (every fault kind, role targets and triggers) around a base scenario "
                    "(its cluster, topics, config and workload; its own faults and expectations are left out), "
                    "run them in the simulation until one violates the property, shrink that run, and write it "
                    "as a scenario file that isrlab run replays (docs/explore.md). Exit 0 when nothing was found "
                    "within the budget, 1 when a violation was found and written.")
    _properties_in_help(explore)
    explore.add_argument("file", help="the base scenario YAML file")
    explore.add_argument("--property", required=True, metavar="NAME",
                         help="the checker or invariant whose violation to find, or invariants for any invariant "
                              "(the properties below)")
    explore.add_argument("--budget", type=_budget, default=300.0, metavar="DURATION",
                         help="how long the search may run, e.g. 30s or 5m (default 5m; shrinking comes after)")
    explore.add_argument("--max-runs", type=positive_int, metavar="N",
                         help="also stop the search after N runs (with --jobs 1 the search is then the same "
                              "on every machine)")
    explore.add_argument("--jobs", type=positive_int, metavar="N",
                         help="runs at once in worker processes (default 1; not with --master)")
    explore.add_argument("--master", metavar="URL",
                         help="search as Spark tasks on this master: local[N], local[*] or spark://HOST:PORT "
                              "(the shrink runs here)")
    explore.add_argument("--seed", type=int, default=1, help="the first seed; the search runs seed, seed+1, ... "
                                                              "(default 1)")
    explore.add_argument("--swarm", action="store_true",
                         help="swarm testing: each seed also chooses which fault kinds are on and their weights "
                              "(a base without a swarm: block; one with it uses its own)")
    explore.add_argument("--variant", metavar="NAME", help="the base's variant to explore around (required when "
                                                           "the base has variants)")
    explore.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a setting of the base")
    explore.add_argument("--shrink-runs", type=positive_int, default=300, metavar="N",
                         help="at most N runs to shrink a violation (default 300)")
    explore.add_argument("--out", help="output folder (default runs/explore-NAME)")
    explore.set_defaults(func=cmd_explore)


def _properties_in_help(parser: argparse.ArgumentParser) -> None:
    """The properties, listed after the options in --help, looked up only when the help is
    shown: importing them (the checkers, the invariants) while the parsers are built
    would import the simulation's modules before any command can switch the compiled
    build on (isrlab/compiled.py), and every command would then run interpreted."""
    plain = parser.format_help

    def format_help() -> str:
        from scenarios.explore.search import PROPERTIES
        parser.epilog = "properties: " + ", ".join(PROPERTIES)
        return plain()
    parser.format_help = format_help  # type: ignore[method-assign]


def _command(args: argparse.Namespace) -> str:
    """The search's own command (for the written file's header), the options that
    decide what it finds first."""
    words = ["isrlab", "explore", args.file]
    words += ["--variant", args.variant] if args.variant else []
    for setting in args.set or ():
        words += ["--set", setting]
    words += ["--property", args.property, "--seed", str(args.seed)]
    words += ["--swarm"] if args.swarm else []
    return " ".join(shlex.quote(w) for w in words)


def cmd_explore(args: argparse.Namespace) -> int:
    active = compiled.activate()  # before anything imports the simulation (isrlab/compiled.py)
    from scenarios.explore.explorer import ExploreError, Options, explore
    from scenarios.explore.search import Progress
    base = Path(args.file)
    out = Path(args.out) if args.out else Path("runs") / f"explore-{base.stem}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} is a file, not a folder")
    if args.master is not None and args.jobs is not None:
        raise UsageError("--jobs and --master do not go together: with --master, Spark's cores run the seeds")
    command = _command(args)
    options = Options(base, args.property, args.budget, out, args.jobs or 1, args.seed, args.max_runs, args.swarm,
                      args.variant, tuple(args.set or ()), args.shrink_runs, command)
    try:
        if args.master is None:
            report = explore(options, Progress(sys.stderr), compiled.activate if active else None)
        else:
            report = _explore_on_spark(options, args.master)
    except ExploreError as exc:
        raise UsageError(str(exc)) from None
    if report is None:  # Spark could not run the search (said on stderr)
        return EXIT_BAD_INPUT
    rate = report.runs / max(report.seconds, 1e-9)
    if args.master is not None:
        print(_spark_tasks(report.loaded_from))
    if report.file is None:
        print(f"no violation of {args.property} in {report.runs} runs ({report.seconds:.0f}s, {rate:.1f} runs/s)")
        return EXIT_OK
    shown = args.property if report.prop == args.property else f"{args.property} ({report.prop})"
    print(f"violation of {shown} found: seed {report.seed}, the search's seed number {report.found_after}, "
          f"after {report.runs} runs ({report.seconds:.0f}s, {rate:.1f} runs/s)")
    print(f"  first violating run: {report.first}")
    print(f"  shrunk in {len(report.shrink_steps)} steps ({report.shrink_runs} runs): {report.final}")
    print(f"  written:   {report.file}")
    print(f"  trace:     {report.trace}  (sha256 {report.digest})")
    print(f"  replay:    {report.replay}")
    return EXIT_FAILED


def _explore_on_spark(options, master: str):
    """The explore with its search as Spark tasks (spark_reports/explore.py), on the
    session and with the build a sweep's tasks get (session_with_build: compiled when the
    build matches the sources); None when Spark could not start or run it (one line on
    stderr, as isrlab sweep does)."""
    from dataclasses import replace
    from isrlab.spark_commands import _on_spark, session_with_build
    from scenarios.explore.explorer import ExploreError, explore
    from scenarios.explore.search import Progress
    from spark_reports.explore import spark_searcher
    from spark_reports.session import check_master

    def job():
        check_master(master)
        with session_with_build(master, "isrlab explore") as (spark, setup):
            return explore(replace(options, searcher=spark_searcher(spark, setup)), Progress(sys.stderr))
    return _on_spark(job, ExploreError)


def _spark_tasks(loaded_from: tuple[str, ...]) -> str:
    """The search's Spark tasks and which simulation they ran, as isrlab sweep says it."""
    from isrlab.spark_commands import tasks_code
    from spark_reports.executor import is_compiled
    compiled_tasks = sum(1 for file in loaded_from if is_compiled(file))
    return f"searched in {len(loaded_from)} Spark tasks ({tasks_code(compiled_tasks, len(loaded_from))})"
