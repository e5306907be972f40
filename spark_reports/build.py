"""``isrlab report``: the report tables as Parquet and the HTML page, from a sweep folder."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spark_reports.html import MAX_FAILING_ROWS, render, same_results_notes
from spark_reports.load import read_manifest, read_sweep
from spark_reports.report import all_reports

REPORT_FOLDER = "report"
HTML_FILE = "report.html"


@dataclass(frozen=True)
class Report:
    folder: Path
    html: Path
    tables: tuple[str, ...]
    rows: dict  # name -> collected rows (aggregated), for the console summary
    same_results: tuple[str, ...] = ()  # the notes on configurations whose seeds changed nothing, as the page says


def build_report(spark, sweep: Path, out: Path | None = None) -> Report:
    manifest = read_manifest(sweep)
    reports = all_reports(read_sweep(spark, sweep))
    out = out or sweep / REPORT_FOLDER
    collected: dict[str, list[dict]] = {}
    for name, frame in reports.items():
        frame = frame.cache()
        frame.coalesce(1).write.mode("overwrite").parquet(str(out / name))
        limited = frame.limit(MAX_FAILING_ROWS) if name == "failing_runs" else frame
        collected[name] = [row.asDict() for row in limited.collect()]
        frame.unpersist()
    failing_total = reports["failing_runs"].count() if len(collected["failing_runs"]) >= MAX_FAILING_ROWS \
        else len(collected["failing_runs"])
    page = out / HTML_FILE
    page.write_text(render(manifest, collected, failing_total), encoding="utf-8")
    notes = tuple(same_results_notes(collected["seed_agreement"], manifest))
    return Report(out, page, tuple(reports), collected, notes)
