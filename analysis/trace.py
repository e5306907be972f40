"""The trace format: one JSON event per line, written by both bindings.

Every event carries ``schema_version``, ``run_id``, ``seed``, ``binding``, ``t_ms``,
``node`` and ``type``, then its own fields in sorted order, so that the same run gives
byte-identical files. docs/trace-schema.md describes every event type.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

SCHEMA_VERSION = 1
COMMON_FIELDS = ("schema_version", "run_id", "seed", "binding", "t_ms", "node", "type")
_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode


class TraceError(ValueError):
    pass


class TraceWriter:
    def __init__(self, stream: IO[str], run_id: str, seed: int, binding: str):
        if binding not in ("sim", "real"):
            raise ValueError(f"binding must be sim or real, not {binding!r}")
        self._stream = stream
        self._prefix = '{"schema_version":%d,"run_id":%s,"seed":%d,"binding":"%s",' % (
            SCHEMA_VERSION, _dumps(run_id), seed, binding)
        self.events_written = 0

    def write(self, t_ms: int, node: str, type_: str, fields: Mapping[str, Any]) -> None:
        line = '%s"t_ms":%d,"node":%s,"type":"%s"' % (self._prefix, t_ms, _dumps(node), type_)
        if fields:
            body = _dumps(fields)
            line = line + "," + body[1:] + "\n"
        else:
            line = line + "}\n"
        self._stream.write(line)
        self.events_written += 1


@dataclass(frozen=True)
class Event:
    t_ms: int
    node: str
    type: str
    fields: dict

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


def read_events(path: str | Path) -> Iterator[Event]:
    """Events of a JSONL trace in file order; a malformed line raises TraceError naming it."""
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path}:{number}: not JSON ({exc.msg})") from None
            missing = [k for k in COMMON_FIELDS if k not in raw]
            if missing:
                raise TraceError(f"{path}:{number}: missing {', '.join(missing)}")
            if raw["schema_version"] != SCHEMA_VERSION:
                raise TraceError(f"{path}:{number}: schema_version {raw['schema_version']} (this isrlab reads {SCHEMA_VERSION})")
            fields = {k: v for k, v in raw.items() if k not in COMMON_FIELDS}
            yield Event(raw["t_ms"], raw["node"], raw["type"], fields)


def read_header(path: str | Path) -> dict:
    """run_id, seed and binding of a trace, from its first event."""
    with open(path, encoding="utf-8") as stream:
        first = stream.readline()
    if not first:
        raise TraceError(f"{path}: empty trace")
    raw = json.loads(first)
    return {k: raw[k] for k in ("run_id", "seed", "binding")}
