"""Hypothesis strategies that build message values from the codec's own tables."""
from __future__ import annotations

from hypothesis import strategies as st

from real_io.protocol.schema import F, Message, in_range

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_text = st.text(st.characters(codec="utf-8"), max_size=8)


def _primitive(kind: str, nullable: bool) -> st.SearchStrategy:
    if kind in _INTS:
        bits = _INTS[kind]
        base: st.SearchStrategy = st.integers(-2**bits, 2**bits - 1)
    elif kind == "uint16":
        base = st.integers(0, 2**16 - 1)
    elif kind == "bool":
        base = st.booleans()
    elif kind == "float64":
        base = st.floats(allow_nan=False)
    elif kind == "string":
        base = _text
    else:  # bytes, records
        base = st.binary(max_size=12)
    return st.none() | base if nullable else base


def field_value(f: F, version: int) -> st.SearchStrategy:
    if not in_range(version, f.versions):
        return st.just(f.default_value(version))
    nullable = in_range(version, f.nullable)
    if f.type == "[]struct":
        base = st.lists(struct_value(f.fields, version), max_size=3)
    elif f.type == "struct":
        base = struct_value(f.fields, version)
    elif f.type.startswith("[]"):
        base = st.lists(_primitive(f.type[2:], False), max_size=3)
    else:
        return _primitive(f.type, nullable)
    return st.none() | base if nullable else base


def struct_value(fields: tuple[F, ...], version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries({f.name: field_value(f, version) for f in fields})


def message_value(message: Message, version: int) -> st.SearchStrategy:
    return struct_value(message.fields, version)
