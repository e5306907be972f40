"""``trace_high_watermarks: false`` leaves out only the leaders' high_watermark_advanced
lines: the run itself, every other line and the verdict (no checker reads those lines)
stay byte-identical."""
from pathlib import Path

import pytest

from scenarios.parse import load_scenario, parse_scenario
from scenarios.runner import run_scenario
from scenarios.source import ScenarioError

ROOT = Path(__file__).resolve().parents[2]


def test_runs_without_high_watermark_lines_differ_only_by_those_lines(tmp_path):
    base = load_scenario(ROOT / "scenarios" / "library" / "jepsen-2013.yaml", ("trace_high_watermarks=true",))
    lean = load_scenario(ROOT / "scenarios" / "library" / "jepsen-2013.yaml", ("trace_high_watermarks=false",))
    assert base.trace_high_watermarks and not lean.trace_high_watermarks
    full = run_scenario(base.variants[0], 1, tmp_path / "full")
    without = run_scenario(lean.variants[0], 1, tmp_path / "lean")
    full_lines = full.trace_path.read_text().splitlines()
    kept = [line for line in full_lines if '"type":"high_watermark_advanced"' not in line]
    assert len(kept) < len(full_lines) - 100  # the full trace has many of them
    assert without.trace_path.read_text().splitlines() == kept
    assert (tmp_path / "lean" / "verdict.json").read_bytes() == (tmp_path / "full" / "verdict.json").read_bytes()


def test_high_watermark_lines_are_on_by_default():
    text = "name: x\ncluster: {brokers: 1, topics: [{name: t}]}\nduration: 1s\n"
    assert parse_scenario(text, "x.yaml").trace_high_watermarks is True


def test_a_non_boolean_is_refused_with_its_line():
    text = "name: x\ncluster: {brokers: 1, topics: [{name: t}]}\ntrace_high_watermarks: sometimes\nduration: 1s\n"
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(text, "x.yaml")
    assert "trace_high_watermarks" in str(refused.value) and "x.yaml:3" in str(refused.value)
