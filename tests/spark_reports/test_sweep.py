"""isrlab sweep gives the verdicts isrlab run gives, seed by seed."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from isrlab.cli import main
from spark_reports.load import read_sweep
from spark_reports.schemas import MANIFEST_FILE
from spark_reports.sweep import run_sweep
from tests.spark_reports.conftest import JEPSEN, ROOT, SWEEP_SEEDS


def _sweep_verdicts(spark, folder: Path) -> dict:
    rows = read_sweep(spark, folder)["verdicts"].select("config", "seed", "outcome", "verdict_json", "replay").collect()
    return {(r["config"], r["seed"]): r for r in rows}


@pytest.mark.slow
def test_a_sweep_gives_exactly_the_verdicts_of_isrlab_run_seeds(spark, jepsen_sweep, tmp_path, monkeypatch):
    """Twelve seeds of both variants of jepsen-2013: every verdict.json of `isrlab run
    --seeds` equals the sweep's verdict of that seed and variant, text for text, and so
    does the outcome."""
    monkeypatch.chdir(ROOT)
    status = main(["run", str(JEPSEN.relative_to(ROOT)), "--seeds", f"1-{SWEEP_SEEDS[-1]}", "--keep", "none",
                   "--out", str(tmp_path / "run")])
    assert status in (0, 1)
    swept = _sweep_verdicts(spark, jepsen_sweep.out)
    assert sorted(swept) == sorted((v, s) for v in ("unclean", "safe") for s in SWEEP_SEEDS)
    summary = {(r["variant"], r["seed"]): r["outcome"]
               for r in json.loads((tmp_path / "run" / "summary.json").read_text())}
    for (variant, seed), row in swept.items():
        expected = (tmp_path / "run" / variant / f"seed-{seed}" / "verdict.json").read_text()
        assert row["verdict_json"] == expected, (variant, seed)
        assert row["outcome"] == summary[(variant, seed)], (variant, seed)
    assert jepsen_sweep.runs == len(swept) and jepsen_sweep.errors == []


def test_the_sweep_writes_every_table_partitioned_by_scenario_and_configuration(spark, jepsen_sweep):
    tables = read_sweep(spark, jepsen_sweep.out)
    assert sorted(p.name for p in (jepsen_sweep.out / "verdicts").iterdir() if p.is_dir()) == ["scenario=jepsen-2013"]
    assert sorted(p.name for p in (jepsen_sweep.out / "verdicts" / "scenario=jepsen-2013").iterdir()) == [
        "config=safe", "config=unclean"]
    verdicts = {(r["config"], r["seed"]): r.asDict() for r in tables["verdicts"].collect()}
    one = verdicts[("unclean", 1)]
    parsed = json.loads(one["verdict_json"])
    assert one["lost_writes"] == parsed["results"]["lost_writes"]["value"]
    assert one["final_leader"] == parsed["results"]["final_leader"]["value"]
    assert one["unavailable_per_partition_ms"] == parsed["results"]["unavailable_ms"]["details"]["per_partition_ms"]
    # operations: one row per send, poll and read, with invoke and completion times
    ops = tables["operations"].where("config = 'unclean' and seed = 1")
    acknowledged = ops.where("f = 'send' and outcome = 'ok' and offset >= 0").selectExpr("sum(`values`)").first()[0]
    assert acknowledged == one["acknowledged"]
    assert ops.where("complete_ms < invoke_ms").count() == 0
    events = tables["cluster_events"].where("config = 'unclean' and seed = 1")
    assert events.where("type = 'leader_elected' and unclean").count() == one["unclean_elections"]
    assert events.where("type = 'isr_shrunk'").count() == one["isr_shrinks"]
    assert events.where("type = 'fault_started'").count() == one["faults_applied"]
    # nothing failed, so no trace was kept (--keep failing)
    assert tables["traces"].count() == 0 and jepsen_sweep.failures == []


def test_a_failing_run_keeps_its_trace_and_replays_alone_with_the_same_verdict(spark, tmp_path, monkeypatch, capsys):
    """safe with min.insync.replicas=1 fails its expectations: the sweep keeps its whole
    trace and its replay command, run as printed, gives the same verdict (exit 1)."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "failing"
    result = run_sweep(spark, str(JEPSEN.relative_to(ROOT)), [3], out, variant="safe",
                       grid=["cluster.config.min.insync.replicas=1"])
    assert [(f["config"], f["seed"]) for f in result.failures] == [("safe|cluster.config.min.insync.replicas=1", 3)]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["failures"] == result.failures
    (row,) = _sweep_verdicts(spark, out).values()
    trace = read_sweep(spark, out)["traces"]
    command = shlex.split(row["replay"])
    assert command[1:3] == ["run", str(JEPSEN.relative_to(ROOT))]
    assert main(command[1:] + ["--out", str(tmp_path / "replay"), "--no-plot"]) == 1
    assert (tmp_path / "replay" / "verdict.json").read_text() == row["verdict_json"]
    lines = (tmp_path / "replay" / "trace.jsonl").read_text().splitlines()
    assert trace.count() == len(lines)
    first = trace.where("line = 1").first()
    assert json.loads(lines[0])["type"] == first["type"] == "run_started"
