"""A sweep whose seeds changed nothing says so at its end, in the report's console
summary and on the HTML page; a sweep whose seeds gave one outcome but other metrics
(jepsen-2013: every seed passes, unavailable_ms moves by a few ms) says nothing of it.

single-broker-crash's seeds differ only through the network's jitter: with
``network.jitter_ms=0`` every seed gives exactly the same verdict."""
from __future__ import annotations

import html

import pytest

from analysis.seed_agreement import COMPARED
from isrlab.cli import main
from isrlab.spark_commands import _print_sweep
from spark_reports.sweep import plan_configs
from tests.spark_reports.conftest import JEPSEN, ROOT, SWEEP_SEEDS

CRASH = str((ROOT / "scenarios" / "library" / "single-broker-crash.yaml").relative_to(ROOT))
SAID = f"all 4 seeds gave the same outcome (PASS) and the same value of each of the {len(COMPARED)} verdict metrics"
RANDOM = "not estimates of anything random"


@pytest.mark.slow  # a sweep and a report of its own
def test_a_sweep_whose_seeds_changed_nothing_says_so_at_its_end_and_in_its_report(spark, tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "same"
    assert main(["sweep", CRASH, "--seeds", "1-4", "--variant", "acks1", "--set", "network.jitter_ms=0",
                 "--keep", "none", "--out", str(out)]) == 0
    swept = capsys.readouterr().out.strip().splitlines()
    assert swept[-1].startswith(f"acks1: {SAID}") and RANDOM in swept[-1], swept[-3:]
    assert main(["report", str(out)]) == 0
    reported = capsys.readouterr().out
    assert f"acks1: {SAID}" in reported
    (row,) = spark.read.parquet(str(out / "report" / "seed_agreement")).collect()
    assert (row["config"], row["runs"], row["outcomes"], row["results"], row["same_results"], row["outcome"]) == \
        ("acks1", 4, 1, 1, True, "PASS")
    page = (out / "report" / "report.html").read_text(encoding="utf-8")
    assert html.escape(f"acks1: {SAID}") in page and RANDOM in page
    assert page.index(RANDOM) < page.index("<h2>Anomaly probability")  # above what it is about


def test_seeds_with_one_outcome_but_other_metrics_get_no_note(spark, jepsen_sweep, jepsen_report, capsys):
    (unclean, safe) = rows = sorted(jepsen_report.rows["seed_agreement"], key=lambda r: r["config"], reverse=True)
    for row in rows:  # every seed passed, yet the seeds changed the metrics
        assert (row["runs"], row["outcomes"], row["outcome"], row["same_results"]) == (12, 1, "PASS", False)
        assert row["results"] > 1
    assert jepsen_sweep.same_results == () and jepsen_report.same_results == ()
    assert RANDOM not in jepsen_report.html.read_text(encoding="utf-8")
    _print_sweep(jepsen_sweep, plan_configs(str(JEPSEN.relative_to(ROOT)), None, ()), len(SWEEP_SEEDS))
    assert RANDOM not in capsys.readouterr().out
