"""One generic encoder and decoder driven by message tables (``schemas.py``).

A table lists a message's fields as Kafka's JSON definitions do: name, type, the
versions that carry the field, the versions where it may be null, and for flexible
versions an optional tag (tagged fields are written only when they differ from their
default). A decoded message is a dict keyed by the fields' snake_case names; fields the
version does not carry hold their defaults, so callers read every version alike, and
the encoder drops them (as Kafka's generated code does for ignorable fields).

Types: int8/16/32/64, uint16, float64, bool, string, bytes, records (raw bytes: the
record batches are decoded apart, by record_batch.py), uuid, ``[]<primitive>``,
``struct`` and ``[]struct``. Bytes and records decode as memoryviews of the frame, not
copies (Kafka 2.7.0 types a produce request's batches ``bytes``). In flexible versions strings, bytes and arrays use the
compact (varint length + 1) forms and every struct ends with its tagged fields.
Trailing bytes after a message are ignored, as Kafka's parser ignores them.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from real_io.protocol.errors import ProtocolError
from real_io.protocol.primitives import Reader, Writer

Range = tuple[int, int | None]


def in_range(version: int, versions: Range | None) -> bool:
    return versions is not None and versions[0] <= version and (versions[1] is None or version <= versions[1])


@dataclass(frozen=True)
class F:
    """One field of a message table."""
    name: str
    type: str
    versions: Range
    nullable: Range | None = None
    tag: int | None = None
    flexible: Range | None | tuple[()] = ()  # () = as the message; None = never flexible (the header's client id)
    default: str | None = None
    fields: tuple[F, ...] = ()

    def default_value(self, version: int) -> Any:
        kind, text = self.type, self.default
        if kind.startswith("[]"):
            return None if text == "null" else []
        if kind == "struct":
            return {f.name: f.default_value(version) for f in self.fields}
        if text == "null":
            return None
        if kind in _INT_TYPES:
            return int(text, 0) if text else 0
        if kind == "bool":
            return text == "true"
        if kind == "float64":
            return float(text) if text else 0.0
        if kind == "string":
            return text or ""
        if kind == "uuid":
            return uuid.UUID(int=0)
        return b""  # bytes, records


@dataclass(frozen=True)
class Message:
    api_key: int
    name: str
    valid: Range
    flexible: Range | None
    fields: tuple[F, ...]
    _defaults: dict = field(default_factory=dict, compare=False, repr=False)

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible)

    def check_version(self, version: int) -> None:
        if not in_range(version, self.valid):
            raise ProtocolError(f"{self.name} has no version {version}")

    def encode(self, version: int, value: dict) -> bytes:
        writer = self.encode_into(Writer(), version, value)
        if writer.splices:
            raise ProtocolError("a spliced field needs encode_into")
        return writer.getvalue()

    def encode_into(self, writer: Writer, version: int, value: dict) -> Writer:
        self.check_version(version)
        _write_struct(writer, self.fields, version, self.is_flexible(version), value)
        return writer

    def decode(self, version: int, data: bytes | bytearray | memoryview | Reader) -> dict:
        self.check_version(version)
        reader = data if isinstance(data, Reader) else Reader(data)
        return _read_struct(reader, self.fields, version, self.is_flexible(version))

    def default(self, version: int) -> dict:
        return {f.name: f.default_value(version) for f in self.fields}


_INT_TYPES = {"int8", "int16", "int32", "int64", "uint16"}
_METHOD = {"bool": "boolean"}
_FIXED = {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "uuid"}


def _flexible_for(f: F, flexible: bool, version: int) -> bool:
    if f.flexible == ():
        return flexible
    return in_range(version, f.flexible or None)  # () is falsy: only a Range or None is left


def _nullable(f: F, version: int) -> bool:
    return in_range(version, f.nullable)


# A struct's fields at one version, flexibility and all, are resolved once into a plan
# (a tuple of steps) and the plan is cached: resolving them for every field of every
# request was most of a produce request's decoding and its response's encoding. The
# tables are module constants, so a fields tuple's id names it for the process's life.
_DEFAULT, _TAGGED, _VALUE = 0, 1, 2
_read_plans: dict[tuple[int, int, bool], tuple] = {}
_write_plans: dict[tuple[int, int, bool], tuple] = {}


def _plan(fields: tuple[F, ...], version: int, flexible: bool) -> tuple:
    """Per field: (name, field, step, whether its value is flexible, whether it may be null)."""
    steps = []
    for f in fields:
        if not in_range(version, f.versions):
            steps.append((f.name, f, _DEFAULT, flexible, False))
        elif f.tag is not None:
            steps.append((f.name, f, _TAGGED, flexible, _nullable(f, version)))
        else:
            steps.append((f.name, f, _VALUE, _flexible_for(f, flexible, version), _nullable(f, version)))
    return tuple(steps)


def _read_struct(reader: Reader, fields: tuple[F, ...], version: int, flexible: bool) -> dict:
    key = (id(fields), version, flexible)
    plan = _read_plans.get(key)
    if plan is None:
        plan = _read_plans[key] = _plan(fields, version, flexible)
    value: dict = {}
    tagged: dict[int, F] = {}
    for name, f, step, inner_flexible, nullable in plan:
        if step == _VALUE:
            value[name] = _read_value(reader, f, version, inner_flexible, nullable)
        else:
            if step == _TAGGED:
                tagged[f.tag] = f
            value[name] = f.default_value(version)
    if flexible:
        for tag, raw in reader.tagged_fields().items():
            if tag in tagged:  # unknown tags are skipped, as the spec allows
                f = tagged[tag]
                value[f.name] = _read_value(Reader(raw), f, version, True, _nullable(f, version))
    elif tagged:
        raise ProtocolError("a tagged field in a non-flexible version")  # a table error
    return value


def _read_value(reader: Reader, f: F, version: int, flexible: bool, nullable: bool) -> Any:
    kind = f.type
    if kind[0] == "[":
        count = reader.array_length(flexible, nullable)
        if count is None:
            return None
        if kind == "[]struct":
            return [_read_struct(reader, f.fields, version, flexible) for _ in range(count)]
        item = kind[2:]
        return [_read_primitive(reader, item, False, flexible) for _ in range(count)]
    if kind == "struct":
        return _read_struct(reader, f.fields, version, flexible)
    return _read_primitive(reader, kind, nullable, flexible)


def _read_primitive(reader: Reader, kind: str, nullable: bool, flexible: bool) -> Any:
    if kind in _FIXED:
        return getattr(reader, _METHOD.get(kind, kind))()
    if kind == "string":
        return reader.compact_string(nullable) if flexible else reader.string(nullable)
    if kind in ("bytes", "records"):  # views, not copies: a produce request's batches go to disk as they are
        return reader.compact_bytes(nullable, True) if flexible else reader.bytes32(nullable, True)
    raise ProtocolError(f"unknown field type {kind}")


def _write_struct(writer: Writer, fields: tuple[F, ...], version: int, flexible: bool, value: dict) -> None:
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a dict of fields, got {type(value).__name__}")
    key = (id(fields), version, flexible)
    plan = _write_plans.get(key)
    if plan is None:
        plan = _write_plans[key] = (_names(fields), _plan(fields, version, flexible))
    names, steps = plan
    if not value.keys() <= names:
        unknown = sorted(set(value) - names)
        raise ProtocolError(f"unknown fields {unknown}: a misspelt field would silently be its default")
    tagged: dict[int, bytes] = {}
    for name, f, step, inner_flexible, nullable in steps:
        if step == _DEFAULT:
            continue
        item = value[name] if name in value else f.default_value(version)
        if step == _TAGGED:
            if flexible and item != f.default_value(version):
                inner = Writer()
                _write_value(inner, f, version, True, item, nullable)
                tagged[f.tag] = inner.getvalue()
            continue
        _write_value(writer, f, version, inner_flexible, item, nullable)
    if flexible:
        writer.tagged_fields(tagged)


def _names(fields: tuple[F, ...]) -> set[str]:
    return {f.name for f in fields}


def _write_value(writer: Writer, f: F, version: int, flexible: bool, item: Any, nullable: bool) -> None:
    kind = f.type
    if item is None and not nullable:
        raise ProtocolError(f"field {f.name} is not nullable in version {version}")
    if kind[0] == "[":
        writer.array_length(None if item is None else len(item), flexible)
        for element in item or ():
            if kind == "[]struct":
                _write_struct(writer, f.fields, version, flexible, element)
            else:
                _write_primitive(writer, kind[2:], flexible, element)
    elif kind == "struct":
        _write_struct(writer, f.fields, version, flexible, item)
    else:
        _write_primitive(writer, kind, flexible, item)


def _write_primitive(writer: Writer, kind: str, flexible: bool, item: Any) -> None:
    try:
        if kind in _FIXED:
            getattr(writer, _METHOD.get(kind, kind))(item)
        elif kind == "string":
            (writer.compact_string if flexible else writer.string)(item)
        elif kind in ("bytes", "records"):
            (writer.compact_bytes if flexible else writer.bytes32)(item)
        else:
            raise ProtocolError(f"unknown field type {kind}")
    except (TypeError, AttributeError) as exc:
        raise ProtocolError(f"cannot encode {item!r} as {kind}: {exc}") from None
