"""isrlab report on a real sweep, and the bad input both Spark commands refuse (a clear
line, exit 2, never a Java stack trace)."""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from isrlab.cli import main
from spark_reports.load import read_sweep
from spark_reports.schemas import MANIFEST_FILE, PARTITION_COLUMNS, TABLES
from tests.spark_reports.conftest import JEPSEN, ROOT


def test_the_report_counts_what_the_verdicts_say(spark, jepsen_sweep, jepsen_report):
    verdicts = [json.loads(r["verdict_json"]) for r in read_sweep(spark, jepsen_sweep.out)["verdicts"].collect()]
    for variant in ("unclean", "safe"):
        mine = [v for v in verdicts if v["run_id"].startswith(f"jepsen-2013-{variant}-")]
        (row,) = [r for r in jepsen_report.rows["anomaly_probabilities"]
                  if r["config"] == variant and r["anomaly"] == "lost_writes"]
        assert row["runs"] == len(mine) == 12
        assert row["runs_with"] == sum(v["results"]["lost_writes"]["value"] > 0 for v in mine)
        (changes,) = [r for r in jepsen_report.rows["cluster_changes"] if r["config"] == variant]
        assert changes["unclean_elections"] == sum(v["results"]["unclean_elections"]["value"] for v in mine)
        assert changes["isr_shrinks"] == sum(v["results"]["isr_shrinks"]["value"] for v in mine)
    unclean_lost = [r for r in jepsen_report.rows["anomaly_probabilities"]
                    if r["config"] == "unclean" and r["anomaly"] == "lost_writes"][0]
    assert unclean_lost["runs_with"] > 0  # Kafka 0.8's defaults lose acknowledged writes
    for name in jepsen_report.tables:  # every table also as Parquet
        assert list((jepsen_report.folder / name).glob("*.parquet")), name
    assert spark.read.parquet(str(jepsen_report.folder / "produce_latency")).count() == 2


@pytest.mark.slow
def test_the_report_command_prints_where_the_html_is(jepsen_sweep, tmp_path, capsys):
    assert main(["report", str(jepsen_sweep.out), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert f"HTML report: {tmp_path / 'r' / 'report.html'}" in out
    assert "lost_writes" in out and "p99.9" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _refused(argv, capsys, *expected) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "\tat " not in err and "java." not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    return err


def _copy(sweep: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(sweep, copy, ignore=shutil.ignore_patterns("report"))
    return copy


def test_a_sweep_of_an_older_format_version_is_refused(jepsen_sweep, tmp_path, capsys):
    copy = _copy(jepsen_sweep.out, tmp_path)
    manifest = json.loads((copy / MANIFEST_FILE).read_text())
    (copy / MANIFEST_FILE).write_text(json.dumps({**manifest, "sweep_format_version": 0}))
    _refused(["report", str(copy)], capsys, "sweep format version 0", "this isrlab reads version 1")


def test_a_table_missing_a_column_is_refused(spark, jepsen_sweep, tmp_path, capsys):
    copy = _copy(jepsen_sweep.out, tmp_path)
    shutil.rmtree(copy / "verdicts")
    (spark.read.parquet(str(jepsen_sweep.out / "verdicts")).drop("lost_writes")
     .write.partitionBy(*PARTITION_COLUMNS).parquet(str(copy / "verdicts")))
    _refused(["report", str(copy)], capsys, "column lost_writes missing")


def test_an_empty_sweep_is_refused(spark, tmp_path, capsys):
    folder = tmp_path / "empty"
    for name, schema in TABLES.items():
        spark.createDataFrame([], schema).write.partitionBy(*PARTITION_COLUMNS).parquet(str(folder / name))
    (folder / MANIFEST_FILE).write_text(json.dumps({"sweep_format_version": 1, "trace_schema_version": 1}))
    _refused(["report", str(folder)], capsys, "the sweep is empty")


def test_a_folder_that_is_no_sweep_is_refused(tmp_path, capsys):
    _refused(["report", str(tmp_path)], capsys, "not a sweep folder")
    _refused(["report", str(tmp_path / "nowhere")], capsys, "no such folder")


def test_a_corrupt_parquet_file_is_one_line_not_a_java_stack(jepsen_sweep, tmp_path, capsys):
    copy = _copy(jepsen_sweep.out, tmp_path)
    victim = sorted((copy / "operations").rglob("*.parquet"))[0]
    victim.write_bytes(b"not parquet at all")
    _refused(["report", str(copy)], capsys, "isrlab: ")


def test_a_master_nobody_answers_at_is_refused(jepsen_sweep, tmp_path, capsys):
    master = f"spark://127.0.0.1:{_free_port()}"
    _refused(["report", str(jepsen_sweep.out), "--master", master], capsys, "cannot reach the Spark master")
    _refused(["sweep", str(JEPSEN), "--seeds", "1-2", "--out", str(tmp_path / "s"), "--master", master], capsys,
             "cannot reach the Spark master")
    _refused(["sweep", str(JEPSEN), "--seeds", "1", "--out", str(tmp_path / "s"), "--master", "yarn"], capsys,
             "expected local, local[N], local[*] or spark://HOST:PORT")


@pytest.mark.parametrize("argv, expected", [
    (["--grid", "cluster.config.min.insync.replicas="], "expected key=value1,value2"),
    (["--variant", "nosuch"], "no such variant"),
    (["--set", "cluster.nosuch=1"], "nosuch"),
])
def test_bad_sweep_arguments_are_refused_before_spark_starts(argv, expected, tmp_path, capsys):
    _refused(["sweep", str(JEPSEN), "--seeds", "1", "--out", str(tmp_path / "s"), *argv], capsys, expected)


def test_an_out_folder_holding_other_files_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    (tmp_path / "mine.txt").write_text("keep me")
    _refused(["sweep", str(JEPSEN), "--seeds", "1", "--out", str(tmp_path)], capsys, "holds other files")
    assert (tmp_path / "mine.txt").exists()
