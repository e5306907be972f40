"""Shrink a violating run: edit its scenario document one simplification at a time
(fewer faults, concrete targets, times instead of triggers, shorter faults, fewer
records, a shorter run, fewer brokers, the base's config), keeping a candidate only
when its run, on the same seed, still violates the property. Runs are deterministic, so
a kept candidate is a counterexample as it stands."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from faults import model as fm
from scenarios.explore.generate import duration_text
from scenarios.explore.search import Progress, is_invariant, violated
from scenarios.runner import RunResult, run_scenario_events
from scenarios.source import ScenarioError
from scenarios.explore.draw import render

TIMING = ("at", "when", "after", "delay", "for", "optional")
Candidate = tuple[str, dict]  # what the edit did, the edited document


@dataclass
class Facts:
    """What the last violating run says of each step (by its line): when its fault
    started and what its role targets resolved to."""
    started_ms: dict[int, int]
    roles: dict[int, dict[str, int | None]]
    lines: list[int | None]  # the line of each step, in order
    produced: int
    lost: Any


def facts_of(result: RunResult, events: list, prop: str) -> Facts:
    started: dict[int, int] = {}
    roles: dict[int, dict] = {}
    produced = 0
    for event in events:
        if event.type == "fault_started" and "line" in event.fields and event["line"] not in started:
            started[event["line"]] = int(round(event.t_ms))
            roles[event["line"]] = dict(event.get("roles") or {})
        elif event.type == "invoke" and event.get("f") == "send":  # what the produced checker counts
            produced += len(event.get("values") or ())
    lines = [step.line for step in result.scenario.faults]
    if result.violation is not None:  # an invariant stopped the run: there is no verdict
        return Facts(started, roles, lines, produced, f"violated at {duration_text(int(result.violation_at_ms or 0))}")
    verdict = result.verdict
    assert verdict is not None
    return Facts(started, roles, lines, int(verdict.number("produced")), verdict.value(prop))


class Shrinker:
    def __init__(self, prop: str, seed: int, filename: str, work_dir: Path, progress: Progress, max_runs: int,
                 base_config: dict):
        """``prop``: a checker, or the one invariant the search saw stop the run (a
        candidate is kept when that same invariant stops it)."""
        self.prop, self.seed, self.filename = prop, seed, filename
        self.check_invariants = is_invariant(prop)
        self.work_dir = work_dir
        self.progress = progress
        self.max_runs = max_runs
        self.base_config = base_config
        self.runs = 0
        self.steps: list[str] = []
        self.tried: set[str] = set()

    def attempt(self, document: dict) -> tuple[RunResult, Facts] | None:
        """Run the document if it is a valid scenario; its result and facts when it
        still violates the property."""
        from scenarios.parse import parse_scenario
        text = render(document)
        if text in self.tried:  # two edits can reach the same document: it failed already
            return None
        self.tried.add(text)
        try:
            scenario = parse_scenario(text, self.filename)
        except ScenarioError:
            return None
        self.runs += 1
        result, events = run_scenario_events(scenario, self.seed, self.work_dir,
                                             check_invariants=self.check_invariants)
        if not violated(result, self.prop):
            return None
        return result, facts_of(result, events, self.prop)

    def shrink(self, document: dict, facts: Facts) -> tuple[dict, Facts]:
        """Greedy: apply the first edit that keeps the violation, then look again, until
        no edit helps or the run limit is reached. Fewer records come first: every later
        run is cheaper for them."""
        passes: list[Callable[[dict, Facts], Iterator[Candidate]]] = [
            _fewer_records, _fewer_faults, _concrete, _shorter_faults, _shorter_run, _fewer_brokers,
            self._base_config, _fewer_consumers, _not_optional]
        improved = True
        while improved and self.runs < self.max_runs:
            improved = False
            for edits in passes:
                candidates = list(edits(document, facts))
                for number, (label, candidate) in enumerate(candidates, 1):
                    if self.runs >= self.max_runs:
                        return document, facts
                    self.progress.say(shrink_line(len(self.steps), self.runs, self.max_runs,
                                                  len(document.get("faults") or []), number, len(candidates), label))
                    kept = self.attempt(candidate)
                    if kept is not None:
                        document, facts = candidate, kept[1]
                        self.steps.append(label)
                        improved = True
                        break
        return document, facts

    def _base_config(self, document: dict, facts: Facts) -> Iterator[Candidate]:
        """A knob the swarm drew, back to the base's value."""
        config = (document.get("cluster") or {}).get("config") or {}
        for key in list(config):
            if self.base_config.get(key, _ABSENT) != config[key]:
                yield f"{key} back to the base's", _edit(document, lambda d: _set_knob(d, key, self.base_config))


_ABSENT = object()


def shrink_line(kept: int, runs: int, max_runs: int, faults: int, number: int, candidates: int, label: str) -> str:
    """The shrink's progress: edits kept, runs spent of the limit, the schedule's size,
    and which of this pass's candidates is being tried."""
    return (f"shrink: {kept} edits kept, {runs} of at most {max_runs} runs, {faults} faults; "
            f"trying {number} of {candidates}: {label}")


def _set_knob(document: dict, key: str, base: dict) -> None:
    config = document["cluster"]["config"]
    if key in base:
        config[key] = base[key]
    else:
        del config[key]


def _edit(document: dict, change: Callable[[dict], None]) -> dict:
    out = copy.deepcopy(document)
    change(out)
    return out


def _faults(document: dict) -> list[dict]:
    return list(document.get("faults") or [])


def _without(document: dict, drop: set[int]) -> dict:
    return {**copy.deepcopy(document), "faults": [s for i, s in enumerate(_faults(document)) if i not in drop]}


def _fewer_faults(document: dict, facts: Facts) -> Iterator[Candidate]:
    """Halves, then quarters, ... then each step alone, the last ones first."""
    n = len(_faults(document))
    size = n // 2
    while size >= 1:
        for start in range(n - size, -1, -size):
            label = f"remove fault {start + 1}" if size == 1 else f"remove faults {start + 1}-{start + size}"
            yield label, _without(document, set(range(start, start + size)))
        size //= 2


def _role_text(value: Any) -> str | None:
    """The role a raw target names, as the trace's ``roles`` keys spell it."""
    if value in (fm.CONTROLLER, fm.RANDOM):
        return value
    if isinstance(value, dict) and "coordinator" in value and "leader" not in value and "follower" not in value:
        return f"coordinator: {value['coordinator']}"
    if isinstance(value, dict) and len([k for k in ("leader", "follower") if k in value]) == 1:
        role = "leader" if "leader" in value else "follower"
        isr = value.get("isr")
        return str(fm.Role(role, str(value[role]), None if isr is None else bool(isr)))
    return None


def _replace_roles(value: Any, roles: dict) -> Any:
    text = _role_text(value)
    if text is not None:
        return roles[text] if roles.get(text) is not None else value
    if isinstance(value, list):
        return [_replace_roles(v, roles) for v in value]
    if isinstance(value, dict):
        return {k: _replace_roles(v, roles) for k, v in value.items()}
    return value


def _concrete(document: dict, facts: Facts) -> Iterator[Candidate]:
    """A trigger replaced by the time its fault started; a role by the broker it was."""
    for i, step in enumerate(_faults(document)):
        line = facts.lines[i] if i < len(facts.lines) else None
        if line not in facts.started_ms:
            continue
        if "when" in step:
            timed = {"at": duration_text(facts.started_ms[line]),
                     **{k: v for k, v in step.items() if k not in ("when", "after", "delay")}}
            yield f"fault {i + 1}'s trigger replaced by its time", _replace_step(document, i, timed)
        roles = facts.roles.get(line) or {}
        body = {k: v for k, v in step.items() if k not in TIMING}
        concrete = _replace_roles(body, roles)
        if roles and concrete != body:
            yield f"fault {i + 1}'s role targets replaced by their brokers", _replace_step(document, i,
                                                                                         {**step, **concrete})


def _replace_step(document: dict, index: int, step: dict) -> dict:
    faults = _faults(document)
    faults[index] = step
    return {**copy.deepcopy(document), "faults": copy.deepcopy(faults)}


def _ms(text: Any) -> int:
    from scenarios.source import Source, convert
    return convert(Source("", {}), (), text, "duration")


def _shorter_faults(document: dict, facts: Facts) -> Iterator[Candidate]:
    for i, step in enumerate(_faults(document)):
        if "for" in step and _ms(step["for"]) >= 200:
            half = max(100, _ms(step["for"]) // 2 // 100 * 100)
            yield f"fault {i + 1} lasts {duration_text(half)}", _replace_step(document, i, {**step, "for": duration_text(half)})


def _shorter_run(document: dict, facts: Facts) -> Iterator[Candidate]:
    """The shortest run the faults allow first (its runs are the cheapest), then half and
    three quarters of it."""
    duration = _ms(document["duration"])
    latest = max([_ms(s.get("at", s.get("after", 0))) for s in _faults(document)] + [0])
    shortest = (latest // 1000 + 2) * 1000  # whole seconds, after the last fault
    cuts = tuple(max(cut // 1000 * 1000, shortest) for cut in (shortest, duration // 2, duration * 3 // 4))
    for shorter in _smaller(duration, cuts):
        yield f"run {duration_text(shorter)}", {**copy.deepcopy(document), "duration": duration_text(shorter)}


def _smaller(current: int, values: tuple[int, ...]) -> list[int]:
    """The values below ``current``, each once, in the order given."""
    return [v for v in dict.fromkeys(values) if v < current]


def _fewer_records(document: dict, facts: Facts) -> Iterator[Candidate]:
    """A producer's rate: one record a second first, then a quarter, then half (a run's
    cost grows with its records, so the first cut that holds makes every later run cheap)."""
    producers = (document.get("workload") or {}).get("producers") or []
    for i, producer in enumerate(producers):
        rate = float(producer.get("rate", 100))
        if "records" in producer or rate < 2:
            continue
        for lower in _smaller(int(rate), (1, int(rate // 4), int(rate // 2))):
            if lower >= 1:
                def set_rate(d: dict, i: int = i, lower: int = lower) -> None:
                    d["workload"]["producers"][i]["rate"] = lower
                yield f"producer {i} at {lower} records/s", _edit(document, set_rate)


def _fewer_brokers(document: dict, facts: Facts) -> Iterator[Candidate]:
    brokers = (document.get("cluster") or {}).get("brokers")
    if isinstance(brokers, int) and brokers > 1:
        yield f"{brokers - 1} brokers", _edit(document, lambda d: d["cluster"].__setitem__("brokers", brokers - 1))


def _fewer_consumers(document: dict, facts: Facts) -> Iterator[Candidate]:
    workload = document.get("workload") or {}
    if workload.get("consumers"):
        yield "no consumers", _edit(document, lambda d: d["workload"].__setitem__("consumers", []))


def _not_optional(document: dict, facts: Facts) -> Iterator[Candidate]:
    if any("optional" in s for s in _faults(document)):
        plain = [{k: v for k, v in s.items() if k != "optional"} for s in _faults(document)]
        yield "no optional: marks", {**copy.deepcopy(document), "faults": plain}
