"""Reading YAML with the line of every field, and errors that name file, line and field."""
from __future__ import annotations

import re
from typing import Any, Callable

import yaml

MISSING = object()


class ScenarioError(Exception):
    def __init__(self, filename: str, line: int | None, field: str, message: str):
        self.filename = filename
        self.line = line
        self.field = field
        self.message = message
        where = f"{filename}:{line}" if line else filename
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


def load_yaml(text: str, filename: str) -> tuple[Any, dict[tuple, int]]:
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:  # a NUL or another control character
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        raise ScenarioError(filename, line, "", f"column {column}: the file holds the control character "
                                                f"U+{code:04X}, which a scenario may not contain") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise ScenarioError(filename, 1, "", "the file is empty")
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ScenarioError(filename, mark.line + 1 if mark else None, "", f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(filename, None, "", f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    lines: dict[tuple, int] = {}
    _record_lines(node, (), lines, filename)
    return data, lines


def _record_lines(node: yaml.Node, path: tuple, lines: dict, filename: str) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node)
            key = _scalar_key(key_node, key)
            if key in seen:
                raise ScenarioError(filename, key_node.start_mark.line + 1, _dotted(path + (key,)), "duplicate key")
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _record_lines(value_node, path + (key,), lines, filename)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, path + (index,), lines, filename)


def _scalar_key(node: yaml.Node, raw: str) -> Any:
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int"):
        try:
            return int(raw)
        except ValueError:
            return raw
    return raw


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, None: 1}


class Source:
    """One file being validated: its name, its data's line numbers."""

    def __init__(self, filename: str, lines: dict[tuple, int]):
        self.filename = filename
        self.lines = lines

    def line(self, path: tuple) -> int | None:
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)

    def error(self, path: tuple, message: str) -> ScenarioError:
        return ScenarioError(self.filename, self.line(path), _dotted(path), message)


class Fields:
    """A mapping under validation: take() each known key, then done() rejects the rest."""

    def __init__(self, source: Source, data: Any, path: tuple, what: str = "this section"):
        if not isinstance(data, dict):
            raise source.error(path, f"{what} must be a mapping, not {_kind(data)}")
        self.source = source
        self.data = data
        self.path = path
        self._taken: set = set()

    def has(self, key: str) -> bool:
        return key in self.data

    def path_of(self, key: Any) -> tuple:
        return self.path + (key,)

    def take(self, key: str, kind: str, default: Any = MISSING, check: Callable[[Any], str | None] | None = None) -> Any:
        self._taken.add(key)
        if key not in self.data or self.data[key] is None and default is not MISSING:
            if default is MISSING:
                raise self.source.error(self.path_of(key), "is required")
            return default
        value = convert(self.source, self.path_of(key), self.data[key], kind)
        if check is not None:
            problem = check(value)
            if problem:
                raise self.source.error(self.path_of(key), problem)
        return value

    def done(self) -> None:
        unknown = [k for k in self.data if k not in self._taken]
        if unknown:
            key = unknown[0]
            known = ", ".join(sorted(str(k) for k in self._taken))
            raise self.source.error(self.path_of(key), f"unknown key {key!r}; expected one of: {known}")


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


def convert(source: Source, path: tuple, value: Any, kind: str) -> Any:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise source.error(path, f"must be an integer, not {_kind(value)}")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise source.error(path, f"must be a number, not {_kind(value)}")
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise source.error(path, f"must be a string, not {_kind(value)}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise source.error(path, f"must be true or false, not {_kind(value)}")
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise source.error(path, f"must be a list, not {_kind(value)}")
        return value
    if kind == "map":
        if not isinstance(value, dict):
            raise source.error(path, f"must be a mapping, not {_kind(value)}")
        return value
    if kind == "duration":
        if isinstance(value, bool):
            raise source.error(path, "must be a duration such as 500ms, 10s or 2m")
        if isinstance(value, (int, float)):
            if value < 0:
                raise source.error(path, "must not be negative")
            if value == 0:
                return 0
            raise source.error(path, f"{value} needs a unit: {value}s or {value}ms? (durations are written "
                                     "500ms, 10s, 2m or 1h)")
        match = _DURATION.match(value) if isinstance(value, str) else None
        if not match:
            raise source.error(path, f"must be a duration such as 500ms, 10s or 2m, not {value!r}")
        if match.group(2) is None and float(match.group(1)) != 0:
            number = match.group(1)
            raise source.error(path, f"{number} needs a unit: {number}s or {number}ms? (durations are written "
                                     "500ms, 10s, 2m or 1h)")
        return int(round(float(match.group(1)) * _UNIT_MS[match.group(2)]))
    if kind == "any":
        return value
    raise ValueError(kind)
