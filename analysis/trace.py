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


def dumps_compact(value: Any) -> str:
    """A value's JSON as a trace line writes it: compact, keys sorted, ASCII only."""
    return _dumps(value)


try:  # CPython's C encoder
    # typeshed leaves out the C encoder json.encoder exports (it may be None): Any here
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
    from json.encoder import encode_basestring_ascii as _encode_string
except ImportError:  # pragma: no cover - other interpreters
    _c_make_encoder = None


class RawJson:
    """A field value that is already compact, sorted, ASCII JSON text, in parts whose
    concatenation is the text (the final read's hundreds of thousands of ``[offset,
    value]`` pairs, a batch per part): TraceWriter.write writes the parts into the line as
    they are instead of encoding the objects they stand for, and without joining them into
    one large string first. The line is the one the decoded value would give."""
    __slots__ = ("parts",)

    def __init__(self, *parts: str):
        self.parts = parts

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _HoldsRawJson(Exception):
    """Raised by the encoder at a RawJson: write() then takes the splicing path."""


def _unserializable(obj: Any) -> Any:
    if isinstance(obj, RawJson):
        raise _HoldsRawJson
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


# Where a RawJson's text goes: the encoder writes this string in its place and the text is
# put in after. A NUL never appears in a trace's strings unescaped; should a field's string
# hold this very text, the splice sees too many places and encodes the decoded value instead.
_PLACEHOLDER = "\x00isrlab-raw-json\x00"
_PLACEHOLDER_JSON = _encode_string(_PLACEHOLDER) if _c_make_encoder is not None else json.dumps(_PLACEHOLDER)


def _decoded_raw(obj: Any) -> Any:
    if isinstance(obj, RawJson):
        return json.loads(obj.text)
    return _unserializable(obj)


def _encoder(default):
    if _c_make_encoder is not None:
        encode = _c_make_encoder(None, default, _encode_string, None, ":", ",", True, False, True)
        return lambda fields: "".join(encode(fields, 0))
    return json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,  # pragma: no cover
                            default=default).encode


if _c_make_encoder is not None:
    _c_encoder = _c_make_encoder(None, _unserializable, _encode_string, None, ":", ",", True, False, True)

    def _dumps_fields(fields: Mapping[str, Any]) -> str:  # the encoder built once, not per call as json's
        return "".join(_c_encoder(fields, 0))
else:  # pragma: no cover
    _dumps_fields = _encoder(_unserializable)


def _split_at_raw(fields: Mapping[str, Any]) -> tuple[list[str], list[RawJson]] | None:
    """The fields' JSON cut where each RawJson goes, and those RawJson in order; None
    when a string of the fields holds the placeholder itself."""
    raws: list[RawJson] = []

    def placeholder(obj: Any) -> Any:
        if isinstance(obj, RawJson):
            raws.append(obj)
            return _PLACEHOLDER
        return _unserializable(obj)
    pieces = _encoder(placeholder)(fields).split(_PLACEHOLDER_JSON)
    return (pieces, raws) if len(pieces) == len(raws) + 1 else None


class TraceError(ValueError):
    pass


class TraceWriter:
    def __init__(self, stream: IO[str], run_id: str, seed: int, binding: str):
        if binding not in ("sim", "real"):
            raise ValueError(f"binding must be sim or real, not {binding!r}")
        self._stream = stream
        self._prefix = '{"schema_version":%d,"run_id":%s,"seed":%d,"binding":"%s","t_ms":' % (
            SCHEMA_VERSION, _dumps(run_id), seed, binding)
        self._tails: dict[tuple[str, str], str] = {}  # ',"node":...,"type":...' per pair
        self.events_written = 0

    def write(self, t_ms: int, node: str, type_: str, fields: Mapping[str, Any]) -> None:
        tail = self._tails.get((node, type_))
        if tail is None:
            tail = self._tails[(node, type_)] = ',"node":%s,"type":%s' % (_dumps(node), _dumps(type_))
        if fields:
            try:
                line = "%s%d%s,%s\n" % (self._prefix, t_ms, tail, _dumps_fields(fields)[1:])
            except _HoldsRawJson:
                self._write_with_raw("%s%d%s," % (self._prefix, t_ms, tail), fields)
                self.events_written += 1
                return
        else:
            line = "%s%d%s}\n" % (self._prefix, t_ms, tail)
        self._stream.write(line)
        self.events_written += 1

    def _write_with_raw(self, head: str, fields: Mapping[str, Any]) -> None:
        """A line whose fields hold RawJson: the encoded fields around them, and each
        one's parts, written one after the other."""
        split = _split_at_raw(fields)
        if split is None:  # the placeholder is ambiguous: encode the decoded values
            self._stream.write("%s%s\n" % (head, _encoder(_decoded_raw)(fields)[1:]))
            return
        pieces, raws = split
        write = self._stream.write
        write(head + pieces[0][1:])
        for raw, piece in zip(raws, pieces[1:]):
            for part in raw.parts:
                write(part)
            write(piece)
        write("\n")

    def write_json(self, t_ms: int, node: str, type_: str, fields_json: str) -> None:
        """write() for a caller that has its fields' JSON object already, written as
        write() would (compact, keys sorted, ASCII): the sampler's replica_state lines."""
        tail = self._tails.get((node, type_))
        if tail is None:
            tail = self._tails[(node, type_)] = ',"node":%s,"type":%s' % (_dumps(node), _dumps(type_))
        if fields_json == "{}":
            self._stream.write("%s%d%s}\n" % (self._prefix, t_ms, tail))
        else:
            self._stream.write("%s%d%s,%s\n" % (self._prefix, t_ms, tail, fields_json[1:]))
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


def client_ids(scenario) -> dict[str, str]:
    """Each client process's client.id (``producer-0`` -> ``noisy``): the broker's quota
    events name the client id and, in the real binding, a connection of its own, so a
    checker needs this to know which process a throttle was for."""
    # Imported here: analysis.workload is compiled (docs/compiled.md), and a Spark task's
    # module imports this one before its executor switches to the build.
    from analysis.workload import client_id
    return {**{f"producer-{i}": client_id(w, "producer", i) for i, w in enumerate(scenario.producers)},
            **{f"consumer-{i}": client_id(w, "consumer", i) for i, w in enumerate(scenario.consumers)}}


def run_started_fields(scenario) -> dict:
    """The ``run_started`` event's fields for a scenario (scenarios.model.Scenario, the
    layer above: used, not imported), the same whichever binding runs it."""
    cluster = scenario.cluster
    return {
        "scenario": scenario.name, "duration_ms": scenario.duration_ms, "profile": cluster.profile,
        "brokers": list(cluster.brokers), "config": {k: cluster.config[k] for k in sorted(cluster.config)},
        "topics": [{"name": t.name, "partitions": t.partitions, "replication_factor": t.replication_factor,
                    "config": t.config, "assignment": {str(p): list(r) for p, r in sorted(t.assignment.items())}}
                   for t in cluster.topics],
        "clients": client_ids(scenario)}
