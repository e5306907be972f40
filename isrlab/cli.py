"""The ``isrlab`` command. Exit status: 0 success, 1 an expectation failed, 2 bad input,
3 an internal error (a bug), reported with the seed that replays it."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from isrlab import cluster_commands, compiled, explore_commands, spark_commands
from isrlab.usage import (
    EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, UsageError, config_pair, config_value, parse_seeds, port_number,
    positive_int)
from scenarios.runner import BINDINGS, KEEP_CHOICES, BindingError, SimulationFailed
from scenarios.source import ScenarioError


def _progress_printer(stream, binding: str = "sim"):
    word = "simulated" if binding == "sim" else "ran"
    def progress(now_ms: float, duration_ms: int) -> None:
        if stream.isatty():
            stream.write(f"\r  {word} {now_ms / 1000:7.1f}s of {duration_ms / 1000:.1f}s")
            stream.flush()
    return progress


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container or taskset may allow fewer than exist)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} is a file, not a folder; name a folder (it is created if missing)")


def _print_run(result) -> None:
    from analysis.verdict import format_evaluation, format_table
    s = result.summary
    print(f"scenario {result.scenario.name}  seed {result.seed}  ({result.wall_seconds:.2f}s wall, {result.events} events)")
    print(f"  records acknowledged:     {s.acknowledged}")
    if result.violation is not None:  # stopped before the final read: nothing to count as missing
        _print_violation(result)
        _print_invariant_expected(result)
        print(f"\n  trace:     {result.trace_path}\n  outcome:   {'PASS' if result.passed else 'FAIL'}\n"
              f"  replay:    {result.replay_command}")
        return
    print(f"  records read back:        {s.read_back}{'' if s.final_read_complete else '  (final read incomplete)'}")
    print(f"  acknowledged but missing: {s.missing_count}")
    for value in s.missing[:5]:
        print(f"    - {value}")
    if s.missing_count > 5:
        print(f"    ... and {s.missing_count - 5} more")
    if not s.settled:
        print("  note: the cluster did not settle (full ISRs) before the final read")
    if result.verdict is not None:
        print()
        print(format_table(result.verdict))
    if result.verdict is not None:
        _print_happened(result.verdict)
    if result.evaluations:
        print("\nexpectations:")
        print(format_evaluation(result.evaluations))
    _print_invariant_expected(result)
    for reason in result.untested:
        print(f"\n  NOT TESTED: {reason}")
    print()
    out = result.trace_path.parent
    print(f"  trace:     {result.trace_path}")
    print(f"  verdict:   {out / 'verdict.json'}")
    for plot in result.plots:
        print(f"  timeline:  {plot}")
    print(f"  outcome:   {'PASS' if result.passed else 'FAIL'}")
    print(f"  replay:    {result.replay_command}")


def _print_violation(result) -> None:
    """--check-invariants stopped the run: which invariant, where, the seed, when, and
    the command that replays it (the run is not judged: its trace ends there)."""
    v = result.violation
    print(f"\n  INVARIANT VIOLATED: {v.describe()}")
    print(f"    seed {result.seed}, simulated time {int(result.violation_at_ms)} ms; the run stopped there "
          f"(not judged)")
    print(f"    replay: {result.replay_command}")


def _print_invariant_expected(result) -> None:
    """``expect: {invariant_violated: NAME}`` (a file isrlab explore wrote): did NAME stop the run?"""
    if result.invariant_expected is None:
        return
    got = result.violation.invariant if result.violation is not None else "none (the run was not stopped)"
    print(f"\nexpectations:\n  invariant_violated  expected {result.scenario.expect_invariant}  got {got}  "
          f"{'ok' if result.invariant_expected else 'FAILED'}")


def _targets(targets) -> str:
    """broker-1 | broker-2,broker-3 for groups; 1,2 for a list."""
    if isinstance(targets, list) and targets and all(isinstance(t, list) for t in targets):
        return " | ".join(",".join(map(str, group)) for group in targets)
    if isinstance(targets, list):
        return ",".join(map(str, targets))
    return str(targets)


def _role_words(expression: str) -> str:
    """``follower: t-0, isr: false`` as the console says it: follower of t-0 outside the ISR."""
    role, _, rest = expression.partition(": ")
    if not rest:
        return expression  # controller, random
    if role == "coordinator":
        return f"coordinator of group {rest}"
    partition, _, isr = rest.partition(", ")
    return f"{role} of {partition}" + {"isr: true": " in the ISR", "isr: false": " outside the ISR"}.get(isr, "")


def _roles(fault: dict) -> str:
    """What each role target resolved to: ``(leader of t-0)`` beside a single target,
    ``(2 = leader of t-0, 3 = controller)`` otherwise."""
    roles = fault.get("roles") or {}
    if not roles:
        return ""
    if len(roles) == 1 and fault.get("targets") == list(roles.values()):
        return f" ({_role_words(next(iter(roles)))})"
    return " (" + ", ".join(f"{'nothing' if b is None else b} = {_role_words(r)}" for r, b in roles.items()) + ")"


def _print_happened(verdict) -> None:
    """The faults as applied, with their resolved targets, and the workload's counts."""
    results = verdict.results
    faults = results["faults_applied"].details.get("faults", [])
    print("\nwhat happened:")
    for fault in faults[:20]:
        end = "" if fault["end_ms"] is None or fault["end_ms"] == fault["start_ms"] else f"-{fault['end_ms'] / 1000:g}s"
        targets = f"{_targets(fault.get('targets', ''))}{_roles(fault)}".strip()
        changed = f"  (changed nothing: {fault['no_effect']})" if "no_effect" in fault else ""
        print(f"  {fault['start_ms'] / 1000:g}s{end}  {fault['fault']}  {targets}{changed}".rstrip())
    if len(faults) > 20:
        print(f"  ... and {len(faults) - 20} more faults (verdict.json)")
    for never in results["triggers_never_fired"].examples:
        print(f"  trigger on line {never['line']} never fired: {never['when']}")
    groups = f", {results['group_consumed'].value} consumed by groups" if "group_consumed" in results else ""
    print(f"  records: {results['produced'].value} produced, {results['acknowledged'].value} acknowledged, "
          f"{results['consumed'].value} consumed{groups}; {results['leader_elections'].value} leader elections")


def cmd_run(args: argparse.Namespace) -> int:
    # First, before anything imports the simulation: `make compiled`'s build, if fresh
    # (isrlab/compiled.py; ISRLAB_COMPILED=0 keeps the interpreted code).
    args.compiled = args.binding == "sim" and compiled.activate()
    from scenarios.parse import load_scenario
    from scenarios.runner import run_scenario
    if args.seeds and args.seed is not None:
        raise UsageError("--seed and --seeds do not go together: give one seed with --seed, or many with --seeds")
    if args.check_invariants and args.binding != "sim":
        raise UsageError("--check-invariants runs in the simulation only (--binding sim): the real binding's "
                         "brokers run in processes of their own, where nothing reads their state after every step")
    scenario = load_scenario(args.file, tuple(args.set or ()))
    if args.out:
        _check_out(Path(args.out))
    scenarios = _chosen_variants(scenario, args.variant)
    if args.binding != "sim":
        if args.seeds:
            raise UsageError(f"--binding {args.binding} runs one seed at a time (a real run takes real time): "
                             "give --seed, not --seeds")
        from scenarios.runner import check_binding
        for chosen in scenarios:  # refuse before anything runs
            check_binding(chosen, args.binding, args.zk)
    elif args.zk:
        raise UsageError("--zk is for --binding real: the simulation has its own coordination service")
    if args.seeds:
        sweeps = []
        for chosen in scenarios:
            if len(scenarios) > 1:
                print(f"\n== variant {chosen.variant}")
            sweeps.append(_run_many(chosen, args, _out_for(args, chosen, scenarios, "seeds")))
        if len(scenarios) > 1:
            _print_variant_sweeps(sweeps, Path(args.out) if args.out else Path("runs") / f"{scenario.name}-seeds")
        _print_same_results(sweeps, len(parse_seeds(args.seeds)))
        return EXIT_OK if all(r.passed for rows in sweeps for r in rows) else EXIT_FAILED
    args.seed = 1 if args.seed is None else args.seed
    results = []
    for chosen in scenarios:
        out = _out_for(args, chosen, scenarios, f"seed{args.seed}")
        results.append(run_scenario(chosen, args.seed, out, progress=_progress_printer(sys.stderr, args.binding),
                                    plot=not args.no_plot, binding=args.binding, zk=args.zk,
                                    check_invariants=args.check_invariants))
        if sys.stderr.isatty():
            sys.stderr.write("\r" + " " * 60 + "\r")
    if len(results) == 1 or any(r.verdict is None for r in results):
        for result in results:
            _print_run(result)
    else:
        _print_side_by_side(results)
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def _chosen_variants(scenario, name: str | None) -> list:
    """The variants to run: the one named, every one, or the scenario itself."""
    if name is None:
        return list(scenario.variants) or [scenario]
    names = [v.variant for v in scenario.variants]
    if not names:
        raise UsageError(f"--variant {name}: {scenario.path} has no variants")
    if name not in names:
        raise UsageError(f"--variant {name}: no such variant in {scenario.path}; its variants: {', '.join(names)}")
    return [v for v in scenario.variants if v.variant == name]


def _out_for(args, chosen, scenarios, suffix: str) -> Path:
    """--out DIR (with several variants, DIR/VARIANT), or runs/NAME-SUFFIX."""
    if args.out:
        return Path(args.out) / chosen.variant if len(scenarios) > 1 else Path(args.out)
    return Path("runs") / f"{chosen.name}-{suffix}"


def _print_side_by_side(results) -> None:
    """Every variant's verdict in one table: a row per checker, a column per variant."""
    names = [r.scenario.variant for r in results]
    first = results[0]
    print(f"scenario {first.scenario.path}  seed {first.seed}  variants: {', '.join(names)}")
    widths = [max(len(n), 10) for n in names]
    metrics = list(first.verdict.results)
    width = max(len(m) for m in metrics)
    print(f"\n  {'':<{width}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths)))
    for metric in metrics:
        cells = []
        for r, w in zip(results, widths):
            check = r.verdict[metric]
            cells.append(f"{_fmt(check.value) + ('' if check.valid else ' !!'):>{w}}")
        print(f"  {metric:<{width}}  " + "  ".join(cells))
    print()
    for r in results:
        failed = [f"{e.name} expected {e.expectation} got {_fmt(e.actual)}" for e in r.evaluations if not e.passed]
        failed += [f"NOT TESTED: {reason}" for reason in r.untested]
        outcome = "PASS" if r.passed else "FAIL"
        print(f"  {r.scenario.variant:<{max(widths)}}  {outcome}  {'; '.join(failed)}".rstrip())
        print(f"  {'':<{max(widths)}}  files: {r.trace_path.parent}   replay: {r.replay_command}")


PER_SEED_ROWS = 50  # larger sweeps list only their failing seeds one by one


def _print_variant_sweeps(sweeps, base: Path) -> None:
    """Every variant's sweep side by side (median of each metric, and how many seeds
    passed), and one summary with a row per seed and variant."""
    import statistics
    from scenarios.runner import write_sweep_summary
    sweeps = [[r for r in rows if r.verdict is not None] for rows in sweeps]
    sweeps = [rows for rows in sweeps if rows]
    if not sweeps:
        return
    names = [rows[0].scenario.variant for rows in sweeps]
    widths = [max(len(n), 10) for n in names]
    metrics = [n for n, r in sweeps[0][0].verdict.results.items() if not isinstance(r.value, dict)]
    width = max(len(m) for m in metrics)
    print(f"\n== every variant, median over the seeds\n  {'':<{width}}  "
          + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths)))
    print(f"  {'seeds passed':<{width}}  " + "  ".join(
        f"{f'{sum(r.passed for r in rows)}/{len(rows)}':>{w}}" for rows, w in zip(sweeps, widths)))
    for metric in metrics:
        print(f"  {metric:<{width}}  " + "  ".join(
            f"{_fmt(statistics.median(r.verdict.value(metric) for r in rows)):>{w}}" for rows, w in zip(sweeps, widths)))
    base.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = write_sweep_summary([r for rows in sweeps for r in rows], base)
    print(f"  summary of every seed and variant: {json_path}, {csv_path}")


def _print_same_results(sweeps, seeds: int) -> None:
    """Last: each variant whose seeds all ran and gave one result (analysis.seed_agreement)."""
    from analysis.seed_agreement import all_the_same, same_results_note, verdict_signature
    for rows in sweeps:
        outcomes = ["PASS" if r.passed else "FAIL" for r in rows]
        if len(rows) == seeds and all_the_same(verdict_signature(o, r.verdict) for o, r in zip(outcomes, rows)):
            print(f"\n{same_results_note(len(rows), outcomes[0], rows[0].scenario.variant or '')}")


def _run_many(scenario, args, base: Path) -> list:
    from scenarios.runner import run_seeds, write_sweep_summary
    seeds = parse_seeds(args.seeds)
    jobs = args.jobs if args.jobs is not None else min(len(seeds), _usable_cpus())
    _bar(0, len(seeds), f"{jobs} at once" if jobs > 1 else "")
    rows = run_seeds(scenario, seeds, base, jobs=jobs, plots=args.plots, keep=args.keep, fail_fast=args.fail_fast,
                     on_done=lambda seed, finished: _bar(finished, len(seeds), f"seed {seed}"),
                     worker_setup=compiled.activate if args.compiled else None,
                     check_invariants=args.check_invariants)
    failed = [r for r in rows if not r.passed]
    _bar(len(rows), len(seeds), "done" if len(rows) == len(seeds) else "stopped at a failing seed")
    sys.stderr.write("\n")
    names = list(scenario.expect) or ["lost_writes", "divergence", "inconsistent_offsets", "duplicates"]
    widths = [max(len(n), 8) for n in names]
    header = f"{'seed':>6}  {'outcome':<7}  {'acked':>7}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths))
    print(header)
    for r in rows if len(rows) <= PER_SEED_ROWS else failed:
        if r.verdict is None:  # --check-invariants stopped it
            print(f"{r.seed:>6}  {'FAIL':<7}  {r.summary.acknowledged:>7}  invariant {r.violation.describe()}")
            continue
        values = "  ".join(f"{_fmt(r.verdict.value(n)):>{w}}" for n, w in zip(names, widths))
        print(f"{r.seed:>6}  {'PASS' if r.passed else 'FAIL':<7}  {r.summary.acknowledged:>7}  {values}")
    print()
    _print_metric_ranges([r for r in rows if r.verdict is not None])
    summary_json, summary_csv = write_sweep_summary(rows, base)
    skipped = len(seeds) - len(rows)
    print(f"\n{len(rows) - len(failed)} of {len(rows)} seeds passed"
          + (f" ({skipped} not run: --fail-fast)" if skipped else "")
          + f"; verdicts under {base}, traces kept for {args.keep} seeds")
    print(f"  summary: {summary_json}, {summary_csv}")
    if failed:
        print(f"  failed seeds: {', '.join(str(r.seed) for r in failed)}")
    for r in failed:
        print(f"  replay seed {r.seed}: {r.replay_command}")
    return rows


def _print_metric_ranges(rows) -> None:
    """min / median / max of every numeric verdict metric over the seeds."""
    import statistics
    if not rows or rows[0].verdict is None:
        return
    names = [n for n, r in rows[0].verdict.results.items() if not isinstance(r.value, dict)]
    width = max(len(n) for n in names)
    print(f"  {'metric':<{width}}  {'min':>10}  {'median':>10}  {'max':>10}")
    for name in names:
        values = [r.verdict.value(name) for r in rows]
        print(f"  {name:<{width}}  {_fmt(min(values)):>10}  {_fmt(statistics.median(values)):>10}  "
              f"{_fmt(max(values)):>10}")


def _fmt(value) -> str:
    if isinstance(value, dict):  # final_leader: partition -> broker
        return ",".join(f"{k}:{_fmt(v)}" for k, v in value.items())
    return f"{value:.3f}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"


def _bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<12}")
    sys.stderr.flush()


def cmd_validate(args: argparse.Namespace) -> int:
    from scenarios.parse import load_scenario
    status = EXIT_OK
    for file in args.files:
        try:
            scenario = load_scenario(file)
        except ScenarioError as exc:
            print(f"isrlab: {exc}", file=sys.stderr)
            status = EXIT_BAD_INPUT
            continue
        print(f"ok  {file}  ({scenario.name}: {len(scenario.cluster.brokers)} brokers, "
              f"{len(scenario.faults)} faults{', nemesis' if scenario.nemesis else ''}"
              f"{', swarm' if scenario.swarm else ''}, "
              f"{len(scenario.expect)} expectations)")
    return status


def cmd_plot(args: argparse.Namespace) -> int:
    from analysis.summary import summarize
    from analysis.timeline import plot_trace
    from analysis.trace import TraceError
    trace = Path(args.trace)
    if not trace.is_file():
        raise UsageError(f"{trace}: no such trace file")
    if trace.stat().st_size == 0:
        raise UsageError(f"{trace}: the trace is empty: nothing to draw")
    try:
        lost = set(summarize(trace).missing)
        plots = plot_trace(trace, Path(args.out) if args.out else trace.parent, lost)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    if not plots:
        raise UsageError(f"{trace}: the trace has no partition to draw (no broker or client event names one)")
    for plot in plots:
        print(plot)
    return EXIT_OK


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("isrlab")
    except PackageNotFoundError:
        return "(not installed)"


def cmd_zk(args: argparse.Namespace) -> int:
    from real_io import zk_server
    try:
        if args.action == "start":
            server = zk_server.start(args.dir, args.port, tick_time_ms=args.tick_ms)
            print(f"ZooKeeper listening on {server.hosts} (pid {server.pid}); files in {server.directory}")
            print(f"  stop it with: isrlab zk stop --dir {args.dir}")
        else:
            server = zk_server.stop(args.dir)
            print(f"ZooKeeper on {server.hosts} (pid {server.pid}) stopped")
    except zk_server.ZooKeeperError as exc:
        raise UsageError(f"zk {args.action}: {exc}") from None
    return EXIT_OK


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, 0 if port == "0" else port_number(port)


def _broker_address(text: str) -> tuple[int, tuple[str, int]]:
    """ID=HOST:PORT (--peer, --advertise)."""
    broker, sep, address = text.partition("=")
    try:
        broker_id = int(broker)
    except ValueError:
        broker_id = -1
    if not sep or broker_id < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not ID=HOST:PORT (a broker id from 0)")
    host, colon, port = address.rpartition(":")
    if not colon or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not ID=HOST:PORT")
    return broker_id, (host, port_number(port))


def _broker_addresses(pairs, option: str) -> dict[int, tuple[str, int]]:
    addresses: dict[int, tuple[str, int]] = {}
    for broker_id, address in pairs or []:
        if broker_id in addresses and addresses[broker_id] != address:
            raise UsageError(f"serve: {option} names broker {broker_id} twice")
        addresses[broker_id] = address
    return addresses


def cmd_serve(args: argparse.Namespace) -> int:
    from broker_core.config import PROFILES, broker_config
    from broker_core.errors import ConfigError
    from real_io import serve
    if args.profile not in PROFILES:
        raise UsageError(f"serve: --profile {args.profile!r} is not one of {', '.join(sorted(PROFILES))}")
    overrides = {key: config_value(value) for key, value in args.config or []}
    host, port = args.listen
    if args.broker_id < 0:
        raise UsageError("serve: --broker-id must not be negative")
    peers = _broker_addresses(args.peer, "--peer")
    if args.broker_id in peers:
        raise UsageError(f"serve: --peer names this broker ({args.broker_id}); it reaches itself without a connection")
    options = serve.ServeOptions(args.broker_id, Path(args.data_dir), host, port, args.zk,
                                 Path(args.trace) if args.trace else None, overrides, args.max_request_bytes,
                                 args.connections_max_idle_ms, args.clock_origin,
                                 Path(args.zk_session_file) if args.zk_session_file else None,
                                 peers, _broker_addresses(args.advertise, "--advertise"), args.profile,
                                 args.sample_interval_ms)
    try:  # the listener's keys (queued.max.request.bytes, max.connections...) are the binding's
        core_overrides, _ = serve.listener_limits(options)
        broker_config(args.profile, core_overrides)
    except ConfigError as exc:
        raise UsageError(f"serve: {exc}") from None
    except serve.ServeError as exc:
        raise UsageError(f"serve: {exc}") from None
    if options.zk_session_file is not None and options.zk is None:
        raise UsageError("serve: --zk-session-file needs --zk (the embedded store has no session to take over)")
    if args.sample_interval_ms < 0:
        raise UsageError("serve: --sample-interval-ms must not be negative")
    if peers and options.zk is None:
        raise UsageError("serve: --peer needs --zk (brokers of one cluster share their metadata in ZooKeeper; "
                         "the embedded store is one broker's)")
    return serve.run(options)


def cmd_build(args: argparse.Namespace) -> int:
    built = compiled.build(args.out, jobs=args.jobs or _usable_cpus(), force=args.force,
                           say=lambda text: print(text, file=sys.stderr))
    return EXIT_OK if built else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="isrlab", description="A simulation-first testbed for Kafka-style replicated logs.")
    parser.add_argument("--version", action="version", version=f"isrlab {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run a scenario and judge it",
                         description="Run a scenario in the simulated cluster (or, with --binding real, a "
                                     "one-broker scenario on a real broker process with real clients), write its "
                                     "trace, verdict and timelines, and check its expectations. Exit 1 when one "
                                     "fails.")
    run.add_argument("file", help="a scenario YAML file (see docs/scenarios.md)")
    run.add_argument("--seed", type=int, help="the run's seed: the same seed gives the same trace (default 1)")
    run.add_argument("--seeds", help="run many seeds, e.g. 1-200 or 1,5,9-12, and print a table of outcomes")
    run.add_argument("--out", help="output directory (default runs/NAME-seedN, or runs/NAME-seeds)")
    run.add_argument("--no-plot", action="store_true", help="skip the timeline PNGs of a single run")
    run.add_argument("--jobs", type=positive_int, metavar="N",
                     help="with --seeds: run N seeds at once in worker processes (default: one per CPU); "
                          "each seed's trace is the same whatever N is")
    run.add_argument("--plots", action="store_true",
                     help="with --seeds: draw timelines for every seed (failing seeds always get them)")
    run.add_argument("--keep", choices=KEEP_CHOICES, default="failing",
                     help="with --seeds: whose trace and timelines stay on disk (default failing); every seed's "
                          "verdict and the summary always do")
    run.add_argument("--fail-fast", action="store_true", help="with --seeds: stop at the first seed that fails")
    run.add_argument("--variant", metavar="NAME", help="run only this variant of the file (default: every variant)")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a setting, e.g. cluster.config.min.insync.replicas=2 or "
                          "workload.producers.0.acks=1 (repeatable; applies to every variant)")
    run.add_argument("--binding", choices=BINDINGS, default="sim",
                     help="sim (default): simulate the cluster; real: run a one-broker scenario on an isrlab serve "
                          "process with real clients (confluent-kafka) and signals as faults (one --seed at a time)")
    run.add_argument("--zk", metavar="HOST:PORT",
                     help="with --binding real: keep the broker's metadata in this ZooKeeper (each run in a chroot "
                          "of its own, removed afterwards) instead of its embedded store; expire_session faults "
                          "need it")
    run.add_argument("--check-invariants", action="store_true",
                     help="simulation only: check the replication invariants (docs/invariants.md) after every "
                          "step; the first violation stops the run and prints it, the seed, the simulated time "
                          "and the command that replays it")
    run.set_defaults(func=cmd_run)
    validate = sub.add_parser("validate", help="check scenario files without running them",
                              description="Check scenario files strictly; problems name file, line and field. Exit 2 on any.")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=cmd_validate)
    plot = sub.add_parser("plot", help="draw the timelines of an existing trace",
                          description="Draw one timeline PNG per partition from a trace.jsonl, and one per "
                                      "consumer group (timeline-group-<group>.png) when the run had group consumers.")
    plot.add_argument("trace", help="a trace.jsonl written by isrlab run")
    plot.add_argument("--out", help="directory for the PNGs (default: beside the trace)")
    plot.set_defaults(func=cmd_plot)
    zk = sub.add_parser("zk", help="start or stop a local ZooKeeper for the real-I/O binding",
                        description="Run a standalone ZooKeeper (Debian's zookeeper package) on 127.0.0.1, "
                                    "with its config, data, log and pid file in --dir.")
    zk.add_argument("action", choices=("start", "stop"))
    zk.add_argument("--dir", default="runs/zookeeper", help="the server's directory (default runs/zookeeper)")
    zk.add_argument("--port", type=port_number, default=2181, help="client port on 127.0.0.1 (default 2181; start only)")
    zk.add_argument("--tick-ms", type=positive_int, default=2000,
                    help="ZooKeeper's tickTime (default 2000, as ZooKeeper's own); it grants session timeouts of "
                         "2 to 20 ticks only, so scenarios with a short zookeeper.session.timeout.ms need a "
                         "smaller tick (start only)")
    zk.set_defaults(func=cmd_zk)
    srv = sub.add_parser("serve", help="run one broker that real Kafka clients use",
                         description="Run one broker of the real-I/O binding: the Kafka wire protocol on a socket, "
                                     "its log in --data-dir, its metadata in an embedded store (default) or in "
                                     "ZooKeeper (--zk). SIGTERM stops it cleanly.")
    srv.add_argument("--broker-id", type=int, required=True, help="the broker's id (broker.id)")
    srv.add_argument("--data-dir", required=True, help="the broker's data directory (log.dirs), created if missing")
    srv.add_argument("--listen", type=_listen, default=("127.0.0.1", 9092), metavar="HOST:PORT",
                     help="where to accept clients (default 127.0.0.1:9092; port 0 picks a free one)")
    srv.add_argument("--zk", metavar="HOST:PORT[/CHROOT]", help="use this ZooKeeper instead of the embedded store")
    srv.add_argument("--trace", metavar="FILE", help="append the broker's trace events (JSONL) to FILE")
    srv.add_argument("--config", type=config_pair, action="append", metavar="KEY=VALUE",
                     help="a broker config override with Kafka's name, e.g. num.partitions=3 (repeatable); "
                          "also the listener's queued.max.request.bytes (default: --max-request-bytes; -1: "
                          "no pool), max.connections and max.connections.per.ip (default 2147483647)")
    srv.add_argument("--max-request-bytes", type=positive_int, default=104857600, metavar="N",
                     help="socket.request.max.bytes: larger frames close the connection (default 104857600)")
    srv.add_argument("--connections-max-idle-ms", type=positive_int, default=600000, metavar="MS",
                     help="connections.max.idle.ms: a connection without a whole request for this long is "
                          "closed (default 600000)")
    srv.add_argument("--clock-origin", type=float, metavar="SECONDS",
                     help="the CLOCK_MONOTONIC time (time.monotonic()) that is 0 ms on the broker's clock and in "
                          "its trace (default: when it starts); isrlab run --binding real passes its own start")
    srv.add_argument("--zk-session-file", metavar="FILE",
                     help="with --zk: write each ZooKeeper session's id and password to FILE (mode 0600), so a "
                          "fault injector can expire the session; isrlab run --binding real --zk uses it")
    srv.add_argument("--peer", type=_broker_address, action="append", metavar="ID=HOST:PORT",
                     help="where this broker connects to reach broker ID (repeatable; needs --zk): the core's "
                          "replica fetches and controller requests to ID go there")
    srv.add_argument("--advertise", type=_broker_address, action="append", metavar="ID=HOST:PORT",
                     help="the address Metadata answers name for broker ID (repeatable; default: its --peer "
                          "address, and the --listen address for this broker)")
    # checked in cmd_serve: importing broker_core while the parser is built would keep
    # `isrlab run` from switching the compiled build on (isrlab/compiled.py)
    srv.add_argument("--profile", default="kafka-2.7", metavar="PROFILE",
                     help="the Kafka behaviour profile of the broker's core: kafka-0.8, kafka-2.7 or kafka-3.0 "
                          "(default kafka-2.7)")
    srv.add_argument("--sample-interval-ms", type=int, default=0, metavar="MS",
                     help="with --trace: write every replica's state (replica_state, as the simulation's sampler) "
                          "every MS milliseconds; isrlab run --binding real reads the cluster's state from them "
                          "(default 0: none)")
    srv.set_defaults(func=cmd_serve)
    bld = sub.add_parser("build", help="compile the simulation's hot modules with mypyc (optional, faster runs)",
                         description="Compile broker_core and the simulation's hot modules with mypyc into "
                                     "build/mypyc (docs/compiled.md). isrlab run then uses the build while it "
                                     "matches the sources; without it, or when compiling fails, everything runs "
                                     "interpreted, with the same traces. Exit 1 when compiling fails.")
    bld.add_argument("--out", type=Path, default=compiled.DEFAULT_DIR, help="build directory (default build/mypyc; "
                     "another one is used with ISRLAB_COMPILED=DIR)")
    bld.add_argument("--force", action="store_true", help="compile even when the build is up to date")
    bld.add_argument("--jobs", type=positive_int, metavar="N", help="C compilers at once (default: one per CPU)")
    bld.set_defaults(func=cmd_build)
    explore_commands.add_parsers(sub)
    spark_commands.add_parsers(sub)
    cluster_commands.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return args.func(args)
    except (ScenarioError, UsageError, BindingError) as exc:
        print(f"isrlab: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SimulationFailed as exc:
        print(f"isrlab: internal error (a bug in isrlab, please report it): {exc}\n"
              f"  traceback: {exc.traceback_path}\n  replay:    {exc.replay_command}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        return 130
