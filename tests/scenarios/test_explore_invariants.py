"""The replication invariants as properties of ``isrlab explore``, and the expectation
its written files use for them (``expect: {invariant_violated: NAME}``); the search's
and the shrink's progress lines say what is true."""
import hashlib
import io
import re
from pathlib import Path

import pytest

from broker_core.invariants import ACKNOWLEDGED_NEVER_TRUNCATED, INVARIANTS, STRONG_ISR
from isrlab.cli import main
from scenarios.explore.explorer import Options, explore
from scenarios.explore.search import PROPERTIES, Progress, search
from scenarios.parse import load_scenario, parse_scenario
from scenarios.source import ScenarioError

ROOT = Path(__file__).resolve().parents[2]
JEPSEN = ROOT / "scenarios" / "library" / "jepsen-2013.yaml"
KIP101 = ROOT / "scenarios" / "library" / "kip-101-scenario-1.yaml"
SMALL = """\
name: small
cluster:
  brokers: 3
  profile: kafka-2.7
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 10}]
duration: 8s
"""


def kip101_expecting(invariant: str, extra_config: str = "") -> str:
    """KIP-101 scenario 1 (its hw variant is the base) expecting ``invariant``'s violation."""
    text = KIP101.read_text(encoding="utf-8")
    text = text[:text.index("\nvariants:")] + f"\nexpect:\n  invariant_violated: {invariant}\n"
    return text.replace("  profile: kafka-0.8\n", "  profile: kafka-0.8\n" + extra_config)


def run_file(tmp_path, capsys, text: str, *flags: str) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    status = main(["run", str(path), "--seed", "1", "--out", str(tmp_path / "out"), "--no-plot", *flags])
    return status, capsys.readouterr().out


def test_every_invariant_and_invariants_are_properties():
    assert set(INVARIANTS) < set(PROPERTIES) and "invariants" in PROPERTIES and "lost_writes" in PROPERTIES


def test_a_file_expecting_the_invariant_that_stops_it_passes_without_the_flag(tmp_path, capsys):
    status, out = run_file(tmp_path, capsys, kip101_expecting(ACKNOWLEDGED_NEVER_TRUNCATED))
    assert status == 0, out
    assert "INVARIANT VIOLATED: AcknowledgedNeverTruncated" in out
    assert "invariant_violated  expected AcknowledgedNeverTruncated  got AcknowledgedNeverTruncated  ok" in out
    assert "outcome:   PASS" in out


def test_a_file_expecting_another_invariant_fails(tmp_path, capsys):
    status, out = run_file(tmp_path, capsys, kip101_expecting(STRONG_ISR), "--check-invariants")
    assert status == 1
    assert "expected StrongIsr  got AcknowledgedNeverTruncated  FAILED" in out and "outcome:   FAIL" in out


def test_a_file_expecting_an_invariant_that_holds_fails(tmp_path, capsys):
    # truncation by leader epoch: the same faults break nothing, so the run is judged and fails the expectation
    status, out = run_file(tmp_path, capsys, kip101_expecting(ACKNOWLEDGED_NEVER_TRUNCATED,
                                                             "  config: {truncation: leader_epoch}\n"))
    assert status == 1
    assert "INVARIANT VIOLATED" not in out
    assert "expected AcknowledgedNeverTruncated  got none (the run was not stopped)  FAILED" in out


@pytest.mark.parametrize("expect, words", [
    ("invariant_violated: StrongISR", "bad.yaml:10: expect.invariant_violated: unknown invariant 'StrongISR'; "
                                      "invariants: LeaderInIsr, StrongIsr"),
    ("invariant_violated: StrongIsr\n  lost_writes: '>0'",
     "bad.yaml:11: expect.lost_writes: invariant_violated goes alone: a run an invariant stops is not judged"),
    ("invariant_violated: [StrongIsr]", "bad.yaml:10: expect.invariant_violated:"),
])
def test_a_bad_invariant_expectation_names_its_line(expect, words):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(SMALL + f"expect:\n  {expect}\n", "bad.yaml")
    assert words in str(info.value)


def test_the_real_binding_refuses_a_file_that_expects_an_invariant(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SMALL.replace("brokers: 3", "brokers: 1").replace("replication_factor: 3", "replication_factor: 1")
                    + "expect:\n  invariant_violated: StrongIsr\n", encoding="utf-8")
    assert main(["run", str(path), "--binding", "real", "--out", str(tmp_path / "o")]) == 2
    assert (f"{path}:10: expect.invariant_violated: --binding real: the invariants are checked in the simulation "
            "only") in capsys.readouterr().err


def test_the_search_progress_counts_the_runs_that_ended_and_no_violations(tmp_path):
    stream = io.StringIO()
    document = SMALL + "swarm:\n  faults: [crash]\n  rate: [0, 0]\n"  # no faults: nothing can violate
    scenario = parse_scenario(document, str(tmp_path / "s.yaml"))
    outcome = search(scenario, "invariants", 5, 300.0, 2, 1, tmp_path / "search", Progress(stream, 0.0))
    assert (outcome.runs, outcome.seed) == (2, None)
    lines = stream.getvalue().splitlines()
    assert [re.match(r"explore: (\d) of 2 runs, none violating yet \([0-9.]+ runs/s\), \d+s of 300s$", line)
            .group(1) for line in lines] == ["1", "2"]
    assert "violations" not in stream.getvalue()
    assert sorted(p.name for p in (tmp_path / "search").iterdir()) == ["seed-5", "seed-6"]


@pytest.mark.slow
def test_explore_finds_an_invariant_violation_and_its_file_replays_it(tmp_path, capsys):
    stream = io.StringIO()
    options = Options(JEPSEN, "invariants", 300.0, tmp_path / "x", max_runs=6, variant="unclean", shrink_runs=8)
    report = explore(options, Progress(stream, 0.0))
    assert report.prop == STRONG_ISR and report.file is not None and report.found_after == report.seed == 3
    found = load_scenario(report.file)
    assert found.expect_invariant == STRONG_ISR and found.expect == {} and report.file.name.endswith("-StrongIsr.yaml")
    text = report.file.read_text(encoding="utf-8")
    assert text.startswith("# Found by isrlab explore: a run that violates the invariant StrongIsr")
    # the shrink's lines: edits kept never go down and end at the steps kept; runs stay within the limit
    shrink = [tuple(map(int, m.groups())) for m in re.finditer(
        r"shrink: (\d+) edits kept, (\d+) of at most 8 runs, \d+ faults; trying (\d+) of (\d+): ", stream.getvalue())]
    assert shrink and [k for k, *_ in shrink] == sorted(k for k, *_ in shrink)
    assert shrink[-1][0] <= len(report.shrink_steps) and all(r < 8 and 1 <= n <= c for _, r, n, c in shrink)
    # isrlab run of the file, without the flag: the same trace, and it passes (it expects the violation)
    assert main(["run", str(report.file), "--seed", str(report.seed), "--out", str(tmp_path / "r"), "--no-plot"]) == 0
    assert "got StrongIsr  ok" in capsys.readouterr().out
    assert hashlib.sha256((tmp_path / "r" / "trace.jsonl").read_bytes()).hexdigest() == report.digest
