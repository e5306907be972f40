"""The ``isrlab`` command. Exit status: 0 success, 1 an expectation failed, 2 bad input."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scenarios.source import ScenarioError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _progress_printer(stream):
    def progress(now_ms: float, duration_ms: int) -> None:
        if stream.isatty():
            stream.write(f"\r  simulated {now_ms / 1000:7.1f}s of {duration_ms / 1000:.1f}s")
            stream.flush()
    return progress


def cmd_run(args: argparse.Namespace) -> int:
    from scenarios.parse import load_scenario
    from scenarios.runner import run_scenario
    scenario = load_scenario(args.file)
    out = Path(args.out) if args.out else Path("runs") / f"{scenario.name}-seed{args.seed}"
    result = run_scenario(scenario, args.seed, out, progress=_progress_printer(sys.stderr))
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 60 + "\r")
    s = result.summary
    print(f"scenario {scenario.name}  seed {args.seed}  ({result.wall_seconds:.2f}s wall, {result.events} events)")
    print(f"  trace:                    {result.trace_path}")
    print(f"  records acknowledged:     {s.acknowledged}")
    print(f"  records read back:        {s.read_back}{'' if s.final_read_complete else '  (final read incomplete)'}")
    print(f"  acknowledged but missing: {s.missing_count}")
    for value in s.missing[:10]:
        print(f"    - {value}")
    if s.missing_count > 10:
        print(f"    ... and {s.missing_count - 10} more")
    if not s.settled:
        print("  note: the cluster did not settle (full ISRs) before the final read")
    print(f"  replay: isrlab run {args.file} --seed {args.seed}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="isrlab", description="A simulation-first testbed for Kafka-style replicated logs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run a scenario file and summarise what survived",
                         description="Run a scenario in the simulated cluster, write its trace and print a summary.")
    run.add_argument("file", help="a scenario YAML file (see docs/scenarios.md)")
    run.add_argument("--seed", type=int, default=1, help="the run's seed: the same seed gives the same trace (default 1)")
    run.add_argument("--out", help="directory for trace.jsonl (default runs/NAME-seedN)")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return args.func(args)
    except ScenarioError as exc:
        print(f"isrlab: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
