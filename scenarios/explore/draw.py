"""The scenario a seed draws from a scenario with a ``swarm:`` block (scenarios/swarm.py).

``isrlab run`` of such a file runs, for each seed, the scenario that seed draws (written
beside its trace as ``drawn.yaml``); ``isrlab explore`` searches with the same draws. A
drawn fault the validator rejects (a crash of a broker a drawn crash already took down)
is left out, the rest of the draw unchanged.
"""
from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Any

import yaml

from scenarios.explore.generate import Context, draw_document
from scenarios.model import Scenario
from scenarios.parse import parse_scenario
from scenarios.source import ScenarioError

DRAWN_FILE = "drawn.yaml"


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
    spec = scenario.swarm
    assert spec is not None
    document = draw_document(spec.base, spec, Context.of(scenario), seed)
    document.setdefault("name", scenario.name)
    document["name"] = scenario.name
    _, text, drawn = settle_document(document, scenario.path, len(scenario.faults))
    return replace(drawn, name=scenario.name, variant=scenario.variant, settings=scenario.settings), text
