"""The ``swarm:`` block: swarm testing as TigerBeetle's simulator does it. The seed
chooses which fault kinds are on, their weights and rate, configuration knobs within
ranges and the producers' rates, then draws a fault schedule from them
(scenarios/explore/generate.py), so that different seeds stress different corners.

``isrlab run`` of a file with a swarm block runs, for each seed, the scenario that seed
draws (written beside its trace as ``drawn.yaml``); ``isrlab explore`` searches with the
same draws. A drawn fault the validator rejects (a crash of a broker a drawn crash
already took down) is left out, the rest of the draw unchanged.
"""
from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Any

import yaml

from broker_core.config import broker_config
from broker_core.errors import ConfigError
from scenarios.model import ClusterSpec, Scenario, SwarmSpec
from scenarios.source import Fields, ScenarioError, Source, convert

CHOOSE = ("some", "all")
DRAWN_FILE = "drawn.yaml"


def swarm_kinds() -> tuple[str, ...]:
    from scenarios.explore.generate import GENERATORS
    return tuple(GENERATORS)


def parse_swarm(source: Source, data: Any, cluster: ClusterSpec, duration_ms: int, base: dict) -> SwarmSpec:
    """The block, strictly: every problem names the file, the line and the field."""
    path = ("swarm",)
    f = Fields(source, data, path, "the swarm block")
    known = swarm_kinds()
    kinds = f.take("faults", "list", list(known), lambda v: None if v else "names no fault kind")
    for i, kind in enumerate(kinds):
        if kind not in known:
            raise source.error(path + ("faults", i), f"unknown fault kind {kind!r}; known: {', '.join(known)}")
    if len(set(kinds)) != len(kinds):
        raise source.error(path + ("faults",), "names a fault kind twice")
    choose = f.take("choose", "str", "some", lambda v: None if v in CHOOSE else "must be some or all")
    rate = _range(source, f, "rate", "number", (2.0, 8.0), 0.0)
    for_ms = _range(source, f, "for", "duration", (1000, 20000), 1)
    roles = f.take("roles", "number", 0.3, _probability)
    triggers = f.take("triggers", "number", 0.3, _probability)
    producer_rate = _range(source, f, "producer_rate", "number", (1.0, 1.0), 0.001)
    config = _knobs(source, f.take("config", "map", {}), cluster)
    start_ms = f.take("start", "duration", 1000, lambda v: None if v < duration_ms else
                      "is not before the end of the run (duration)")
    f.done()
    return SwarmSpec(tuple(kinds), choose, rate, for_ms, roles, triggers, producer_rate, config, start_ms, base)


def _probability(value: float) -> str | None:
    return None if 0 <= value <= 1 else "must be between 0 and 1"


def _range(source: Source, f: Fields, key: str, kind: str, default: tuple, minimum: float) -> tuple:
    """One value, or ``[low, high]``: the seed draws within it."""
    raw = f.take(key, "any", None)
    if raw is None:
        return default
    path = f.path_of(key)
    items = raw if isinstance(raw, list) else [raw, raw]
    if len(items) != 2:
        raise source.error(path, f"must be one value or [low, high], not a list of {len(items)}")
    low, high = (convert(source, path + ((i,) if isinstance(raw, list) else ()), v, kind) for i, v in enumerate(items))
    if low < minimum:
        raise source.error(path, f"must be at least {minimum:g}")
    if low > high:
        raise source.error(path, "low is above high: write [low, high]")
    return (low, high)


def _knobs(source: Source, data: dict, cluster: ClusterSpec) -> tuple[tuple[str, tuple], ...]:
    """``key: [v1, v2]`` (one of them) or ``key: {min: a, max: b}`` (an integer within);
    every value must be one the broker config accepts with the cluster's own config."""
    out = []
    for key, raw in data.items():
        path = ("swarm", "config", key)
        if isinstance(raw, dict):
            r = Fields(source, raw, path, "a range")
            low = r.take("min", "int")
            high = r.take("max", "int", check=lambda v: None if v >= low else "is below min")
            r.done()
            choice: tuple = ("range", low, high)
            values = [(path + ("min",), low), (path + ("max",), high)]
        elif isinstance(raw, list) and raw:
            choice = ("one_of", tuple(raw))
            values = [(path + (i,), v) for i, v in enumerate(raw)]
        else:
            raise source.error(path, "must be a list of values to choose from, or {min: a, max: b}")
        for where, value in values:
            try:
                broker_config(cluster.profile, {**cluster.config, key: value})
            except ConfigError as exc:
                raise source.error(where, exc.message) from None
        out.append((str(key), choice))
    return tuple(out)


def render(document: dict) -> str:
    """The document as YAML a person reads: sections in block style, each fault step on
    one line as scenarios are written by hand."""
    parts = []
    for key, value in document.items():
        if key == "faults" and value:
            lines = [f"  - {_flow(step)}" for step in value]
            parts.append("faults:\n" + "\n".join(lines) + "\n")
        elif isinstance(value, (dict, list)) and value:
            flat = isinstance(value, dict) and not any(isinstance(v, (dict, list)) for v in value.values())
            body = yaml.safe_dump(value, sort_keys=False, default_flow_style=False if flat else None, width=100)
            parts.append(f"{key}:\n" + textwrap.indent(body, "  "))
        else:
            parts.append(yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=100))
    return "".join(parts)


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()


def settle_document(document: dict, filename: str, keep: int) -> tuple[dict, str, Scenario]:
    """Leave out each drawn step (index ``keep`` and on) the validator rejects until the
    document is valid; its YAML text and the scenario parsed from that text."""
    from scenarios.parse import parse_scenario
    while True:
        text = render(document)
        try:
            return document, text, parse_scenario(text, filename)
        except ScenarioError as exc:
            index = _fault_index(exc.field)
            if index is None or index < keep:
                raise
            document = {**document, "faults": [s for i, s in enumerate(document["faults"]) if i != index]}


def _fault_index(field: str) -> int | None:
    if not field.startswith("faults["):
        return None
    return int(field[len("faults["):field.index("]")])


def drawn_scenario(scenario: Scenario, seed: int) -> tuple[Scenario, str]:
    """The scenario ``seed`` draws from a scenario with a swarm block, and its YAML text.
    It keeps the file's name, path, variant and overrides, so its replay command is the
    file's; its trace's fault lines point into the drawn text."""
    from scenarios.explore.generate import Context, draw_document
    spec = scenario.swarm
    assert spec is not None
    document = draw_document(spec.base, spec, Context.of(scenario), seed)
    document.setdefault("name", scenario.name)
    document["name"] = scenario.name
    _, text, drawn = settle_document(document, scenario.path, len(scenario.faults))
    return replace(drawn, name=scenario.name, variant=scenario.variant, settings=scenario.settings), text
