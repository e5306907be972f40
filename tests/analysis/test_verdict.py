"""Verdicts: from a trace file, as JSON and as a table; expectations and their evaluation."""
import json

import pytest

from analysis.trace import TraceWriter
from analysis.checkers import GROUPS_ONLY
from analysis.verdict import (
    CHECKER_NAMES, Evaluation, Expectation, Verdict, check_history, check_trace, evaluate, format_evaluation,
    format_table, parse_expectation, parse_expectations)

from tests.analysis.builders import HistoryBuilder, records


def lossy_trace(path):
    """A tiny trace with one lost acks=all write, a leaderless second and a duplicate."""
    with open(path, "w", encoding="utf-8") as stream:
        w = TraceWriter(stream, "tiny-seed7", 7, "sim")
        w.write(0, "world", "run_started", {"scenario": "tiny", "duration_ms": 2000, "brokers": [1, 2],
                                            "topics": [{"name": "t", "partitions": 1, "replication_factor": 2}]})
        w.write(10, "producer-0", "invoke", {"f": "send", "op": 1, "partition": "t-0", "values": ["a", "b"], "acks": -1})
        w.write(12, "producer-0", "ok", {"f": "send", "op": 1, "partition": "t-0", "offset": 0})
        for t in (100, 200, 300):
            w.write(t, "broker-1", "replica_state", {"partitions": {"t-0": {"role": "leader"}}})
        for t in (400, 500, 600, 700):
            w.write(t, "broker-1", "replica_state", {"partitions": {"t-0": {"role": "follower"}}})
        w.write(800, "broker-2", "replica_state", {"partitions": {"t-0": {"role": "leader"}}})
        w.write(2000, "world", "workload_stopped", {})
        w.write(3000, "reader", "invoke", {"f": "read", "op": 1, "partition": "t-0"})
        w.write(3005, "reader", "ok", {"f": "read", "op": 1, "partition": "t-0",
                                       "records": [[0, "a"], [1, "a"]], "high_watermark": 2})
        w.write(3010, "world", "run_finished", {"settled": True})
    return path


def test_check_trace_reads_identity_and_judges(tmp_path):
    verdict = check_trace(lossy_trace(tmp_path / "trace.jsonl"))
    assert (verdict.run_id, verdict.seed, verdict.scenario, verdict.binding) == ("tiny-seed7", 7, "tiny", "sim")
    assert tuple(verdict.results) == tuple(n for n in CHECKER_NAMES if n not in GROUPS_ONLY)  # no group here
    assert verdict.value("lost_writes") == 1 and verdict.value("lost_writes_acks_all") == 1
    assert verdict.value("duplicates") == 1
    assert verdict.value("inconsistent_offsets") == 1  # the ack put "b" at 1; the read has "a"
    assert verdict.value("unavailable_ms") == 400  # [400, 800): replica_state is read from the file
    assert not verdict.valid


def test_check_history_without_samples_has_no_sample_based_availability():
    h = HistoryBuilder()
    h.add(0, "world", "run_started", scenario="s")
    h.state(100, 1, {"t-0": "follower"})
    verdict = check_history(h.history())
    assert verdict.scenario == "s" and verdict.run_id is None
    assert verdict.value("unavailable_ms") == 0
    assert check_history(h.history(), h.events).value("unavailable_ms") == 0  # its one sample is the end of the run


def test_json_round_trip_is_exact_and_stable(tmp_path):
    verdict = check_trace(lossy_trace(tmp_path / "trace.jsonl"))
    text = verdict.to_json()
    assert Verdict.from_json(text) == verdict
    assert Verdict.from_json(text).to_json() == text
    path = tmp_path / "verdict.json"
    verdict.write_json(path)
    assert Verdict.read_json(path) == verdict
    data = json.loads(path.read_text())
    assert list(data) == sorted(data) and list(data["results"]) == sorted(data["results"])
    assert data["valid"] is False and data["seed"] == 7
    assert data["results"]["lost_writes"]["examples"][0]["value"] == "b"
    assert "\n  " in text  # indented for people


def test_a_verdict_of_another_version_is_refused():
    with pytest.raises(ValueError, match="verdict_version"):
        Verdict.from_json('{"verdict_version": 99, "results": {}}')


def test_table_has_a_line_per_result_with_marks(tmp_path):
    table = format_table(check_trace(lossy_trace(tmp_path / "trace.jsonl")))
    lines = table.splitlines()
    assert "tiny-seed7" in lines[0] and "ANOMALIES" in lines[0]
    assert len(lines) == 1 + len(CHECKER_NAMES) - len(GROUPS_ONLY)
    by_name = {line.split()[0]: line.split() for line in lines[1:]}
    assert by_name["lost_writes"][1:3] == ["1", "!!"]
    assert by_name["divergence"][1:3] == ["0", "ok"]
    assert by_name["unavailable_ms"][1:3] == ["400", "ok"]
    assert all(len(line) < 140 for line in lines)


def test_a_clean_history_reads_valid():
    h = HistoryBuilder()
    h.send(10, ["a"], offset=0)
    h.poll(20, {"t-0": records(["a"])}, {"t-0": 1})
    h.read(100, records(["a"]))
    verdict = check_history(h.history())
    assert verdict.valid
    assert "valid" in format_table(verdict).splitlines()[0]


# -- expectations --------------------------------------------------------------------

@pytest.mark.parametrize("text, comparison, number", [
    (0, "==", 0), (2.5, "==", 2.5), ("0", "==", 0), (">0", ">", 0), (">=1", ">=", 1), ("<5", "<", 5),
    ("<=0.1", "<=", 0.1), ("==3", "==", 3), (" > 2 ", ">", 2), ("!=0", "!=", 0), ("< 1e3", "<", 1000.0)])
def test_expectations_parse(text, comparison, number):
    expectation = parse_expectation(text)
    assert (expectation.comparison, expectation.number) == (comparison, number)


@pytest.mark.parametrize("expectation, yes, no", [
    ("0", [0, 0.0], [1]), (">0", [1, 0.5], [0, -1]), (">=1", [1, 2], [0.99]), ("<5", [4.9], [5, 6]),
    ("<=0.1", [0.1, 0], [0.11]), ("==3", [3], [2, 4]), (7, [7], [6])])
def test_expectations_match(expectation, yes, no):
    parsed = parse_expectation(expectation)
    assert all(parsed.matches(v) for v in yes)
    assert not any(parsed.matches(v) for v in no)


@pytest.mark.parametrize("bad", ["", "abc", ">", "=>1", ">>1", "= 1", "1 2", "nan", "inf", ">0x", True, None,
                                 [1], {"a": 1}, float("nan")])
def test_malformed_expectations_are_refused_clearly(bad):
    with pytest.raises(ValueError, match="expectation"):
        parse_expectation(bad)


def test_expectations_read_back_as_written():
    assert str(parse_expectation(">0")) == "> 0"
    assert str(parse_expectation("<=0.1")) == "<= 0.1"
    assert str(parse_expectation(3)) == "== 3"


def test_evaluate_compares_each_expectation_in_order(tmp_path):
    verdict = check_trace(lossy_trace(tmp_path / "trace.jsonl"))
    rows = evaluate(verdict, {"lost_writes": ">0", "divergence": 0, "unavailable_ms": "<300",
                              "produce_error_rate": Expectation("<=", 0.1)})
    assert rows == [
        Evaluation("lost_writes", Expectation(">", 0), 1, True),
        Evaluation("divergence", Expectation("==", 0), 0, True),
        Evaluation("unavailable_ms", Expectation("<", 300), 400, False),
        Evaluation("produce_error_rate", Expectation("<=", 0.1), 0.0, True),
    ]
    name, expectation, actual, passed = rows[2]
    assert (name, actual, passed) == ("unavailable_ms", 400, False)
    text = format_evaluation(rows)
    assert "FAILED" in text.splitlines()[2] and "ok" in text.splitlines()[0]


def test_unknown_checker_names_are_refused_with_the_known_ones():
    verdict = check_history(HistoryBuilder().history())
    with pytest.raises(ValueError, match="unknown checker 'lost_write'.*lost_writes"):
        evaluate(verdict, {"lost_write": 0})
    with pytest.raises(ValueError, match="unknown checker"):
        parse_expectations({"nope": ">0"})
    with pytest.raises(ValueError, match="expectation"):
        evaluate(verdict, {"lost_writes": "lots"})
