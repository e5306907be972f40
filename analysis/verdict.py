"""The verdict on one run: every checker's result with the run's identity, as a stable
JSON file and a compact terminal table, and the evaluation of a scenario's ``expect:``
against it (``lost_writes: 0``, ``unavailable_ms: "<5000"``)."""
from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

from analysis.checkers import (
    CHECKER_NAMES, GROUPS_ONLY, MAPPING_CHECKERS, CheckResult, LeadershipSamples, collector_paused, run_checkers)
from analysis.history import History, build_history
from analysis.trace import Event, read_events, read_header

VERDICT_VERSION = 1
EXPLANATION_WIDTH = 78

__all__ = ["CHECKER_NAMES", "MAPPING_CHECKERS", "Verdict", "Expectation", "MappingExpectation", "Evaluation", "check_trace", "check_events",
           "check_history", "format_table", "format_evaluation", "parse_expectation",
           "parse_expectations", "evaluate"]


@dataclass(frozen=True)
class Verdict:
    run_id: str | None
    seed: int | None
    scenario: str | None
    binding: str | None
    results: dict[str, CheckResult]

    @property
    def valid(self) -> bool:
        """Whether every result is fine on its own (expectations may still ask otherwise)."""
        return all(r.valid for r in self.results.values())

    def __getitem__(self, name: str) -> CheckResult:
        """A result by name; a groups_only result the run left out (no group consumed)
        reads as the checker's own answer for such a run: 0, valid."""
        found = self.results.get(name)
        if found is None and name in GROUPS_ONLY:
            return CheckResult(name, 0, True, "no group consumers", (), {"no_groups": True})
        if found is None:
            raise KeyError(name)
        return found

    def value(self, name: str) -> int | float | dict:
        return self[name].value

    def number(self, name: str) -> int | float:
        """A count's or a rate's value: every checker's but MAPPING_CHECKERS'."""
        value = self[name].value
        if isinstance(value, dict):
            raise TypeError(f"{name} maps partitions to numbers: Verdict.mapping reads it")
        return value

    def mapping(self, name: str) -> dict:
        """The value of one of MAPPING_CHECKERS: partition -> number."""
        value = self.results[name].value
        if not isinstance(value, dict):
            raise TypeError(f"{name} is a number, not a mapping: Verdict.number reads it")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"verdict_version": VERDICT_VERSION, "run_id": self.run_id, "seed": self.seed,
                "scenario": self.scenario, "binding": self.binding, "valid": self.valid,
                "results": {name: r.to_dict() for name, r in self.results.items()}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
        if data.get("verdict_version") != VERDICT_VERSION:
            raise ValueError(f"verdict_version {data.get('verdict_version')!r} (this isrlab reads {VERDICT_VERSION})")
        results = {name: CheckResult.from_dict(name, r) for name, r in data["results"].items()}
        ordered = {n: results[n] for n in CHECKER_NAMES if n in results}
        ordered.update((n, r) for n, r in results.items() if n not in ordered)
        return cls(data.get("run_id"), data.get("seed"), data.get("scenario"), data.get("binding"), ordered)

    @classmethod
    def from_json(cls, text: str) -> "Verdict":
        return cls.from_dict(json.loads(text))

    @classmethod
    def read_json(cls, path: str | Path) -> "Verdict":
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


def check_history(history: History, replica_states: LeadershipSamples | Iterable[Event] | None = None,
                  run_id: str | None = None, seed: int | None = None, binding: str | None = None) -> Verdict:
    """Run every checker on a history. build_history leaves replica_state events out;
    pass them (or use check_trace / check_events) for sample-based availability."""
    scenario = next((e.get("scenario") for e in history.events if e.type == "run_started"), None)
    return Verdict(run_id, seed, scenario, binding, run_checkers(history, replica_states))


def check_events(events: Iterable[Event], run_id: str | None = None, seed: int | None = None,
                 binding: str | None = None) -> Verdict:
    """One pass over a trace's events: the history, and the replica_state samples aside."""
    samples = LeadershipSamples()

    def without_samples() -> Iterator[Event]:
        for event in events:
            if event.type == "replica_state":
                samples.add(event)
            else:
                yield event
    with collector_paused():  # a trace's events are acyclic: nothing for it to find
        history = build_history(without_samples())
        return check_history(history, samples, run_id, seed, binding)


def check_trace(path: str | Path) -> Verdict:
    header = read_header(path)
    return check_events(read_events(path), header["run_id"], header["seed"], header["binding"])


def _format_value(value: int | float | dict) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _one_line(text: str, width: int = EXPLANATION_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def format_table(verdict: Verdict) -> str:
    """One line per result: name, value, ok or !!, and the explanation."""
    head = (f"run {verdict.run_id or '?'}  scenario {verdict.scenario or '?'}  seed "
            f"{'?' if verdict.seed is None else verdict.seed}  binding {verdict.binding or '?'}  "
            f"{'valid' if verdict.valid else 'ANOMALIES FOUND'}")
    width = max((len(n) for n in verdict.results), default=4)
    values = {n: _format_value(r.value) for n, r in verdict.results.items()}
    value_width = max((len(v) for v in values.values()), default=5)
    lines = [head]
    for name, result in verdict.results.items():
        mark = "ok" if result.valid else "!!"
        lines.append(f"  {name:<{width}}  {values[name]:>{value_width}}  {mark}  {_one_line(result.explanation)}")
    return "\n".join(lines)


_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le,
    ">": operator.gt, "<": operator.lt}
_EXPECTATION = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*([^\s<>=!]+)\s*$")
_FORMS = '0, ">0", ">=1", "<5", "<=0.1", "==3"'


@dataclass(frozen=True)
class Expectation:
    """A comparison of a checker's value with a number: ``> 0``, ``<= 0.1``, ``== 3``."""
    comparison: str
    number: int | float

    def matches(self, actual: int | float | dict) -> bool:
        """A mapping (a MAPPING_CHECKERS value) never matches: parse_expectation gives
        those checkers a MappingExpectation."""
        return not isinstance(actual, dict) and _COMPARISONS[self.comparison](actual, self.number)

    def __str__(self) -> str:
        return f"{self.comparison} {self.number}"


def _number(text: str) -> int | float | None:
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        return number if math.isfinite(number) else None
    return None


@dataclass(frozen=True)
class MappingExpectation:
    """An expectation on a checker whose value maps partitions to numbers
    (``final_leader: {t-0: 1}``): each listed partition's number must satisfy its own
    comparison; partitions not listed are not judged, a listed one missing fails."""
    entries: tuple[tuple[str, Expectation], ...]

    def matches(self, actual: Any) -> bool:
        if not isinstance(actual, Mapping):
            return False
        return all(key in actual and e.matches(actual[key]) for key, e in self.entries)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{key}: {e}" for key, e in self.entries) + "}"


def parse_expectation(value: Any, name: str | None = None) -> Expectation | MappingExpectation:
    """An int or float means equality; a string is a number with an optional
    comparison. For a checker in MAPPING_CHECKERS, a mapping of partition to either."""
    if isinstance(value, (Expectation, MappingExpectation)):
        return value
    if name in MAPPING_CHECKERS:
        if not isinstance(value, Mapping) or not value:
            raise ValueError(f"{name} takes a mapping of partition to expectation, such as {{t-0: 1}}, "
                             f"not {value!r}")
        return MappingExpectation(tuple((str(key), _scalar_expectation(v)) for key, v in value.items()))
    if isinstance(value, Mapping):
        raise ValueError(f"expectation {value!r} is a mapping; only {', '.join(MAPPING_CHECKERS)} take one")
    return _scalar_expectation(value)


def _scalar_expectation(value: Any) -> Expectation:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expectation {value!r} is not a number or a comparison such as {_FORMS}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"expectation {value!r} is not a finite number")
        return Expectation("==", value)
    match = _EXPECTATION.match(value)
    number = _number(match.group(2)) if match else None
    if match is None or number is None:
        raise ValueError(f"expectation {value!r} is not a number or a comparison such as {_FORMS}")
    return Expectation(match.group(1) or "==", number)


def check_name(name: Any) -> str:
    if name not in CHECKER_NAMES:
        raise ValueError(f"unknown checker {name!r}; known checkers: {', '.join(CHECKER_NAMES)}")
    return name


def parse_expectations(expectations: Mapping[str, Any]) -> dict[str, Expectation | MappingExpectation]:
    """Validate names and values up front (a scenario loader can call this at load time)."""
    return {check_name(name): parse_expectation(value, name) for name, value in expectations.items()}


class Evaluation(NamedTuple):
    name: str
    expectation: Expectation | MappingExpectation
    actual: int | float | dict
    passed: bool


def evaluate(verdict: Verdict, expectations: Mapping[str, Any]) -> list[Evaluation]:
    """(name, expectation, actual value, passed) for each expectation, in the given order."""
    out = []
    for name, expectation in parse_expectations(expectations).items():
        actual = verdict.value(name)
        out.append(Evaluation(name, expectation, actual, expectation.matches(actual)))
    return out


def format_evaluation(evaluations: Iterable[Evaluation]) -> str:
    rows = list(evaluations)
    width = max((len(e.name) for e in rows), default=4)
    return "\n".join(f"  {e.name:<{width}}  expected {str(e.expectation):<10} got {_format_value(e.actual):<10} "
                     f"{'ok' if e.passed else 'FAILED'}" for e in rows)
