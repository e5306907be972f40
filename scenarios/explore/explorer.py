"""``isrlab explore``: search the runs a swarm block draws around a base scenario for one
that violates a property, shrink it, and write it as a scenario file that ``isrlab run``
replays byte-identically (its run is the one this module makes of the written file)."""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from scenarios.explore.generate import Context, draw_document
from scenarios.explore.search import ANY_INVARIANT, PROPERTIES, Progress, SearchOutcome, is_invariant, search, violated
from scenarios.explore.shrink import Facts, Shrinker
from scenarios.model import Scenario
from scenarios.parse import load_scenario, parse_scenario
from scenarios.runner import RunResult, replay_command, run_scenario
from scenarios.source import ScenarioError, Source, load_yaml
from scenarios.explore.draw import render, settle_document
from scenarios.variants import apply_set, variant_data

# What the explorer replaces: it draws the faults, and judges by the property alone.
DROPPED = ("faults", "nemesis", "expect", "variants")


class ExploreError(Exception):
    """The base cannot be explored (a usage problem, not a bug)."""


@dataclass
class Options:
    base: Path
    prop: str
    budget_s: float
    out: Path
    jobs: int = 1
    seed: int = 1
    max_runs: int | None = None
    swarm: bool = False
    variant: str | None = None
    settings: tuple[str, ...] = ()
    shrink_runs: int = 300
    command: str = ""  # the command line, for the written file's header
    # how the seeds are searched: search() in local worker processes (the default), or
    # spark_reports.explore's as Spark tasks (--master); called like search()
    searcher: Callable[..., SearchOutcome] | None = None


@dataclass
class Report:
    runs: int
    seconds: float
    file: Path | None = None
    seed: int | None = None
    trace: Path | None = None
    digest: str | None = None
    shrink_steps: list[str] = field(default_factory=list)
    shrink_runs: int = 0
    prop: str = ""  # the property found violated (for ``invariants``: the invariant)
    found_after: int = 0  # the violating seed's place in the search's order (1: the first seed)
    first: str = ""  # the first violating run, in a few words
    final: str = ""  # the written one
    replay: str = ""
    loaded_from: tuple[str, ...] = ()  # the search's Spark tasks: where each loaded the simulation from


def base_document(options: Options) -> tuple[dict, Scenario]:
    """The base's document (its chosen variant, with --set applied), without what the
    explorer replaces, and with the swarm block the search draws from."""
    scenario = load_scenario(options.base, options.settings)  # every error names file, line and field
    names = [str(v.variant) for v in scenario.variants]
    if names and options.variant is None:
        raise ExploreError(f"{options.base} has variants ({', '.join(names)}): name the one to explore around "
                           f"with --variant")
    if options.variant is not None and options.variant not in names:
        raise ExploreError(f"--variant {options.variant}: no such variant in {options.base}"
                           + (f"; its variants: {', '.join(names)}" if names else " (it has none)"))
    chosen = next((v for v in scenario.variants if v.variant == options.variant), scenario)
    if not chosen.producers:
        raise ExploreError(f"{options.base}: the base has no producers: there is nothing for a fault to lose")
    data, lines = load_yaml(options.base.read_text(encoding="utf-8"), str(options.base))
    documents = variant_data(Source(str(options.base), lines), data)
    document = documents[options.variant] if options.variant else {k: v for k, v in data.items() if k != "variants"}
    for assignment in options.settings:
        apply_set(document, assignment, str(options.base))
    document = {k: v for k, v in document.items() if k not in DROPPED}
    swarm = document.pop("swarm", None) or {}
    swarm.setdefault("choose", "some" if options.swarm else "all")
    document["name"] = f"{chosen.name}-{options.prop}"
    document["description"] = _description(options.prop)
    return {**document, "swarm": swarm}, chosen


def _description(prop: str) -> str:
    what = "the invariant " if is_invariant(prop) and prop != ANY_INVARIANT else ""
    return f"found by isrlab explore: a run that violates {what}{prop}"


def explore(options: Options, progress: Progress, worker_setup: Callable[[], object] | None = None) -> Report:
    if options.prop not in PROPERTIES:
        raise ExploreError(f"--property {options.prop}: unknown property; known: {', '.join(PROPERTIES)}")
    document, chosen = base_document(options)
    target = options.out / f"{document['name']}.yaml"
    try:
        searched = parse_scenario(render(document), str(target))
    except ScenarioError as exc:  # the swarm block of the base: name the base's line
        raise ScenarioError(str(options.base), None, exc.field, exc.message) from None
    options.out.mkdir(parents=True, exist_ok=True)
    outcome = (options.searcher or search)(searched, options.prop, options.seed, options.budget_s, options.max_runs,
                                           options.jobs, options.out / "search", progress, worker_setup)
    report = Report(outcome.runs, outcome.seconds, prop=options.prop, loaded_from=outcome.loaded_from)
    if outcome.seed is None:
        progress.done()
        return report
    seed = outcome.seed
    # ``invariants`` (any of them): from here on, the one the search saw stop the run
    prop = outcome.invariant if options.prop == ANY_INVARIANT and outcome.invariant else options.prop
    spec = searched.swarm
    assert spec is not None
    drawn, text, _ = settle_document(draw_document(spec.base, spec, Context.of(searched), seed), str(target), 0)
    if prop != options.prop:
        drawn = {**drawn, "name": f"{chosen.name}-{prop}", "description": _description(prop)}
        target = options.out / f"{drawn['name']}.yaml"
    (options.out / "first-violation.yaml").write_text(text, encoding="utf-8")
    shrinker = Shrinker(prop, seed, str(target), options.out / "shrink", progress, options.shrink_runs,
                        dict(chosen.cluster.config))
    first = shrinker.attempt(drawn)
    if first is None:
        raise RuntimeError(f"seed {seed} violated {prop} in the search but not when run again: "
                           "a run that is not deterministic (a bug in isrlab)")
    report.first = _size(drawn, first[1], prop)
    report.seed, report.found_after, report.prop = seed, seed - options.seed + 1, prop
    document, facts = shrinker.shrink(drawn, first[1])
    report.shrink_steps, report.shrink_runs = shrinker.steps, shrinker.runs
    report.final = _size(document, facts, prop)
    _write(options, prop, report, document, target, seed)
    shutil.rmtree(options.out / "shrink", ignore_errors=True)
    progress.done()
    return report


def _size(document: dict, facts: Facts, prop: str) -> str:
    faults = len(document.get("faults") or [])
    brokers = (document.get("cluster") or {}).get("brokers")
    return (f"{faults} fault{'s' if faults != 1 else ''}, {brokers} brokers, {document['duration']} run, "
            f"{facts.produced} records produced, {prop} = {facts.lost}")


def _header(options: Options, prop: str, report: Report) -> str:
    steps = report.shrink_steps
    invariant = is_invariant(prop)
    what = f"the invariant {prop} (checked after every step, as isrlab run --check-invariants does)" if invariant \
        else prop
    lines = [
        f"Found by isrlab explore: a run that violates {what}.",
        f"  {options.command}" if options.command else "",
        # the seed's place in the search, not the runs that ended: the same with any --jobs or --master
        f"First violating run (seed {report.seed}, the search's seed number {report.found_after}): {report.first}.",
        f"Shrunk in {len(steps)} steps ({report.shrink_runs} runs), each kept only while the run still "
        f"violated {prop}:",
        *[f"  - {step}" for step in steps],
        f"Now: {report.final}.",
        f"Replay: isrlab run {report.file} --seed {report.seed}",
        f"(expect: invariant_violated turns the invariant checks on and passes when {prop} stops the run)"
        if invariant else "",
    ]
    return "".join(f"# {line}\n" for line in lines if line)


def _write(options: Options, prop: str, report: Report, document: dict, target: Path, seed: int) -> None:
    """Write the file, run it as ``isrlab run`` would, and keep that run: its trace is
    the one a replay must reproduce byte for byte. Results that would make the replay
    say "not tested" (a fault that changed nothing) are named in ``expect:``. An
    invariant is expected as ``invariant_violated: NAME``: the file then checks the
    invariants itself, and passes when NAME stops the run."""
    report.file = target
    expect: dict = {"invariant_violated": prop} if is_invariant(prop) else {prop: ">0"}
    for _ in range(2):
        text = _header(options, prop, report) + render({**document, "expect": expect})
        target.write_text(text, encoding="utf-8")
        result = run_scenario(load_scenario(target), seed, options.out / "replay")
        if not violated(result, prop):
            raise RuntimeError(f"{target} no longer violates {prop} when run from the file (a bug in isrlab)")
        untested = _untested(result)
        if not untested:
            break
        expect = {**expect, **untested}
    report.trace = result.trace_path
    report.digest = hashlib.sha256(result.trace_path.read_bytes()).hexdigest()
    report.replay = replay_command(target, seed)


def _untested(result: RunResult) -> dict:
    from analysis.checkers import UNTESTED_NAMES
    if not result.untested or result.verdict is None:
        return {}
    return {name: result.verdict.value(name) for name in UNTESTED_NAMES
            if not result.verdict.results[name].valid and result.verdict.results[name].details.get("tested") is not True}

