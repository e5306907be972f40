"""The ``swarm:`` block: swarm testing as TigerBeetle's simulator does it. The seed
chooses which fault kinds are on, their weights and rate, configuration knobs within
ranges and the producers' rates, then draws a fault schedule from them
(scenarios/explore/generate.py), so that different seeds stress different corners.

This module reads the block; scenarios/explore/draw.py makes the scenario a seed draws.
"""
from __future__ import annotations

from typing import Any

from broker_core.config import broker_config
from broker_core.errors import ConfigError
from scenarios.explore.generate import GENERATORS, OPT_IN
from scenarios.model import ClusterSpec, SwarmSpec
from scenarios.source import Fields, Source, convert

CHOOSE = ("some", "all")


def swarm_kinds() -> tuple[str, ...]:
    return tuple(GENERATORS)


def parse_swarm(source: Source, data: Any, cluster: ClusterSpec, duration_ms: int, base: dict) -> SwarmSpec:
    """The block, strictly: every problem names the file, the line and the field."""
    path = ("swarm",)
    f = Fields(source, data, path, "the swarm block")
    known = swarm_kinds()
    default = [kind for kind in known if kind not in OPT_IN]
    kinds = f.take("faults", "list", default, lambda v: None if v else "names no fault kind")
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
            values: list[tuple[tuple, Any]] = [(path + ("min",), low), (path + ("max",), high)]
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
