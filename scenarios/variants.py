"""Variants (one file for a bug and its fix) and command-line overrides.

A scenario's ``variants:`` maps names to partial scenarios that are merged over the
base: mappings merge key by key, anything else (a list, a number) replaces what the base
had, and a variant's ``expect:`` replaces the base's whole. Every variant runs on the same
seeds and therefore the same fault schedule and nemesis draws. ``--set key=value`` sets
one value in the base and in every variant, after the merge.
"""
from __future__ import annotations

import copy
from typing import Any

import yaml

from scenarios.source import ScenarioError, Source

REPLACED_WHOLE = ("expect",)


def merge(base: Any, override: Any, key: Any = None) -> Any:
    if isinstance(base, dict) and isinstance(override, dict) and key not in REPLACED_WHOLE:
        out = dict(base)
        for k, v in override.items():
            out[k] = merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(override)


def variant_lines(lines: dict[tuple, int], name: str) -> dict[tuple, int]:
    """The base's line numbers, with every path the variant sets pointing into the
    variant's own section (so an error names the line the user wrote)."""
    prefix = ("variants", name)
    out = {path: line for path, line in lines.items() if path[:1] != ("variants",)}
    for path, line in lines.items():
        if path[:2] == prefix and len(path) > 2:
            out[path[2:]] = line
    return out


def apply_set(data: dict, assignment: str, filename: str) -> None:
    """``a.b.c=value``: walk mappings by key and lists by index; below a mapping named
    ``config`` the rest is one key (Kafka's dotted names). The value is YAML."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ScenarioError(filename, None, "--set", f"{assignment!r} is not key=value")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    node: Any = data
    i = 0
    while i < len(parts) - 1:
        part = parts[i]
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError(filename, None, "--set", f"{key}: {part!r} is not an index of that list")
            node = node[int(part)]
        elif isinstance(node, dict):
            if part == "config":
                node = node.setdefault("config", {})
                parts[i + 1:] = [".".join(parts[i + 1:])]
            else:
                node = node.setdefault(part, {})
        else:
            raise ScenarioError(filename, None, "--set", f"{key}: {part!r} is inside a value, not a mapping")
        i += 1
    last = parts[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ScenarioError(filename, None, "--set", f"{key}: cannot set {last!r} there")


def variant_data(source: Source, data: dict) -> dict[str, dict]:
    """name -> the variant's merged document (without ``variants``)."""
    raw = data.get("variants")
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise source.error(("variants",), "must be a mapping of names to partial scenarios, e.g. "
                                          "{safe: {cluster: {config: {min.insync.replicas: 2}}}}")
    base = {k: v for k, v in data.items() if k != "variants"}
    out = {}
    for name, override in raw.items():
        if not isinstance(name, str) or not name or "/" in name or " " in name:
            raise source.error(("variants", name), "a variant's name is a word without / or spaces")
        if not isinstance(override, dict):
            raise source.error(("variants", name), "must be a mapping: the settings this variant changes")
        if "variants" in override or "name" in override:
            bad = "variants" if "variants" in override else "name"
            raise source.error(("variants", name, bad), f"a variant cannot set {bad}")
        out[name] = merge(base, override)
    return out
