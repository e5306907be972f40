"""The benchmark's baseline computes the same tables: every table of ``isrlab report``,
computed by DuckDB in one process (bench/report_duckdb.py), equals Spark's, row by row,
on a real sweep. Without this, bench/spark_report.py would time two different things."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from spark_reports.load import read_sweep
from spark_reports.report import all_reports

ROOT = Path(__file__).resolve().parents[2]


def _baseline():
    spec = importlib.util.spec_from_file_location("report_duckdb", ROOT / "bench" / "report_duckdb.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_duckdb_computes_every_report_table_as_spark_does(spark, jepsen_sweep):
    baseline = _baseline()
    reports = all_reports(read_sweep(spark, jepsen_sweep.out))
    duck = baseline.duckdb_tables(str(jepsen_sweep.out))
    assert sorted(duck) == sorted(reports)
    problems = []
    for name, frame in reports.items():
        rows = [tuple(row) for row in frame.collect()]
        assert rows or name == "failing_runs", f"{name} is empty: the comparison would prove nothing"
        problems += baseline.differences(name, (frame.columns, rows), duck[name])
    assert not problems, "\n".join(problems)
    # the comparison sees a difference when there is one
    columns, rows = duck["produce_latency"]
    changed = [row[:3] + (row[3] + 1,) + row[4:] for row in rows]
    assert baseline.differences("produce_latency", (columns, rows), (columns, changed))
