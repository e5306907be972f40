"""Multi-seed runs whose seeds changed nothing say so (issue 23, "Sweeps that mean
something"); when only the outcome is the same but a metric differs, nothing is said.

single-broker-crash's seeds differ only through the network's jitter: with
``network.jitter_ms=0`` every seed gives exactly the same verdict, with the default
jitter the same outcome (PASS) but other counts (records produced and acknowledged)."""
from __future__ import annotations

import json

from analysis.seed_agreement import COMPARED, all_the_same, run_signature
from analysis.checkers import CHECKER_NAMES
from tests.test_cli import ROOT, isrlab

SCENARIO = str(ROOT / "scenarios" / "library" / "single-broker-crash.yaml")
NOTE = "seeds gave the same outcome (PASS) and the same value of each of the 40 verdict metrics"


def test_the_compared_metrics_are_every_checker_result():
    assert COMPARED == CHECKER_NAMES and len(COMPARED) == 40  # the note names the count


def test_equal_means_equal_numbers_and_mappings_and_a_single_run_proves_nothing():
    metrics = {name: 0 for name in COMPARED} | {"final_leader": {"t-0": 1, "t-1": 2}}
    same = metrics | {"produce_error_rate": 0.0, "final_leader": {"t-1": 2, "t-0": 1}}
    assert run_signature("PASS", metrics) == run_signature("PASS", same)
    assert run_signature("PASS", metrics) != run_signature("FAIL", metrics)
    assert run_signature("PASS", metrics) != run_signature("PASS", metrics | {"unavailable_ms": 1})
    assert run_signature("PASS", metrics) != run_signature("PASS", metrics | {"final_leader": {"t-0": 1, "t-1": 3}})
    assert all_the_same(["a", "a"]) and not all_the_same(["a"]) and not all_the_same(["a", "b"])


def test_seeds_that_changed_nothing_are_said_to_have_changed_nothing(tmp_path):
    result = isrlab("run", SCENARIO, "--variant", "acks1", "--seeds", "1-3", "--set", "network.jitter_ms=0",
                    "--jobs", "1", "--keep", "none", "--out", str(tmp_path / "same"))
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "same" / "summary.json").read_text())
    assert len({json.dumps({k: v for k, v in r.items() if k not in ("seed", "replay")}) for r in rows}) == 1
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("acks1: all 3 seeds gave the same outcome (PASS)") and NOTE in last
    assert "not estimates of anything random" in last


def test_seeds_with_one_outcome_but_other_metrics_get_no_note(tmp_path):
    result = isrlab("run", SCENARIO, "--variant", "acks1", "--seeds", "1-3", "--jobs", "1", "--keep", "none",
                    "--out", str(tmp_path / "jitter"))
    assert result.returncode == 0 and "3 of 3 seeds passed" in result.stdout, result.stderr
    rows = json.loads((tmp_path / "jitter" / "summary.json").read_text())
    assert {r["outcome"] for r in rows} == {"PASS"} and len({r["acknowledged"] for r in rows}) > 1
    assert "not estimates" not in result.stdout and NOTE not in result.stdout


def test_every_variant_that_changed_nothing_is_named_at_the_end(tmp_path):
    result = isrlab("run", SCENARIO, "--seeds", "1-2", "--set", "network.jitter_ms=0", "--jobs", "1", "--keep", "none",
                    "--out", str(tmp_path / "both"))
    assert result.returncode == 0, result.stderr
    tail = result.stdout.split("== every variant")[1]
    assert "acks1: all 2 seeds gave the same outcome (PASS)" in tail
    assert "acks-all: all 2 seeds gave the same outcome (PASS)" in tail
