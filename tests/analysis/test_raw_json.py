"""TraceWriter's RawJson: pre-encoded JSON text spliced into a line gives the very line
the decoded value gives, whatever the fields hold."""
import io
import json

import pytest
from hypothesis import given, strategies as st

from analysis.trace import RawJson, TraceWriter, dumps_compact

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


def line(fields: dict) -> str:
    out = io.StringIO()
    TraceWriter(out, "run", 7, "sim").write(12, "reader", "ok", fields)
    return out.getvalue()


@given(st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=5), st.data())
def test_a_raw_value_gives_the_line_its_decoded_value_gives(fields, data):
    raw_keys = data.draw(st.sets(st.sampled_from(sorted(fields))))
    spliced = {k: RawJson(dumps_compact(v)) if k in raw_keys else v for k, v in fields.items()}
    assert line(spliced) == line(fields)


@given(st.lists(json_values, max_size=6), st.data())
def test_a_raw_value_in_parts_is_written_part_by_part(items, data):
    text = dumps_compact(items)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=5)))
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert line({"a": 1, "records": RawJson(*parts), "z": "end"}) == line({"a": 1, "records": items, "z": "end"})


def test_raw_values_nested_in_lists_and_dicts_are_spliced_too():
    fields = {"a": [1, {"b": RawJson('[[0,"x"],[1,null]]')}], "c": RawJson('{"d":"\\u00e9"}')}
    assert line(fields) == line({"a": [1, {"b": [[0, "x"], [1, None]]}], "c": {"d": "\u00e9"}})


def test_a_string_holding_the_placeholder_text_falls_back_to_encoding_the_decoded_value():
    # the splice marks a RawJson's place with this string; a field holding it too makes
    # the places ambiguous, and the writer then decodes the raw text and encodes it
    placeholder = "\x00isrlab-raw-json\x00"
    fields = {"a": placeholder, "b": RawJson("[1,2]"), "z": [placeholder]}
    assert line(fields) == line({"a": placeholder, "b": [1, 2], "z": [placeholder]})
    assert json.loads(line(fields))["b"] == [1, 2]


def test_what_json_cannot_write_is_still_refused():
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        line({"a": object()})
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        line({"a": object(), "b": RawJson("1")})


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_write_json_writes_the_line_write_writes(fields):
    out = io.StringIO()
    TraceWriter(out, "run", 7, "sim").write_json(12, "reader", "ok", dumps_compact(fields))
    assert out.getvalue() == line(fields)
