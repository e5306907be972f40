"""The report as one self-contained HTML file: figures as embedded PNGs (matplotlib),
tables as HTML, no script, no link to anything outside the file. Only aggregated rows
reach the driver (and at most MAX_FAILING_ROWS failing runs)."""
from __future__ import annotations

import base64
import html
import io
from typing import Sequence

from analysis.seed_agreement import COMPARED, same_results_note

MAX_FAILING_ROWS = 500


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt
    return plt


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _img(data: str, alt: str) -> str:
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def _table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    columns = list(columns or rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def anomaly_figure(rows: Sequence[dict]):
    plt = _pyplot()
    configs = sorted({r["config"] for r in rows})
    anomalies = sorted({r["anomaly"] for r in rows})
    figure, axes = plt.subplots(figsize=(max(6, 1.6 * len(configs) * max(1, len(anomalies)) / 3), 4))
    width = 0.8 / max(len(anomalies), 1)
    for i, anomaly in enumerate(anomalies):
        by_config = {r["config"]: r for r in rows if r["anomaly"] == anomaly}
        xs = [c + i * width for c in range(len(configs))]
        ps = [by_config[c]["probability"] if c in by_config else 0.0 for c in configs]
        # max(0, ...): the interval's ends are computed apart from p and may miss it by a rounding
        low = [max(0.0, p - by_config[c]["ci_low"]) if c in by_config else 0.0 for p, c in zip(ps, configs)]
        high = [max(0.0, by_config[c]["ci_high"] - p) if c in by_config else 0.0 for p, c in zip(ps, configs)]
        axes.bar(xs, ps, width, yerr=[low, high], capsize=3, label=anomaly)
    axes.set_xticks([c + 0.4 - width / 2 for c in range(len(configs))], configs, rotation=20, ha="right")
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("probability per run (95% Wilson interval)")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure


def latency_figure(histogram: Sequence[dict]):
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4))
    for config in sorted({r["config"] for r in histogram}):
        points = sorted((r["bucket_ms"], r["sends"]) for r in histogram if r["config"] == config)
        total = sum(n for _, n in points) or 1
        cumulative, running = [], 0
        for _, n in points:
            running += n
            cumulative.append(running / total)
        # cumulative: a step between two distant buckets then reads true (nothing in between)
        axes.step([b for b, _ in points], cumulative, where="post", label=config)
    axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("produce latency of acknowledged sends (ms, buckets of a tenth of a decade)")
    axes.set_ylabel("share of sends in this bucket or below")
    axes.legend(fontsize="small")
    return figure


def availability_figure(rows: Sequence[dict]):
    plt = _pyplot()
    labels = [f"{r['config']} {r['partition']}" for r in rows]
    figure, axes = plt.subplots(figsize=(max(6, 0.8 * len(labels)), 4))
    axes.bar(range(len(rows)), [r["mean_unavailable_ms"] for r in rows], label="mean")
    axes.plot(range(len(rows)), [r["max_unavailable_ms"] for r in rows], "v", color="black", label="max")
    axes.set_xticks(range(len(rows)), labels, rotation=20, ha="right")
    axes.set_ylabel("time without a leader (ms)")
    axes.legend(fontsize="small")
    return figure


RESULT_WORDS = ("its outcome and the value of every one of the verdict metrics: " + ", ".join(COMPARED))


def same_results_notes(rows: Sequence[dict], manifest: dict) -> list[str]:
    """The note for each configuration whose seeds all ran and gave one result (the
    seed_agreement rows; a run that raised is not in the verdicts table, so a
    configuration with one is left out)."""
    raised = {e.get("config") for e in manifest.get("errors", [])}
    return [same_results_note(r["runs"], r["outcome"], r["config"]) for r in rows
            if r["same_results"] and r["config"] not in raised]


def _same_results(rows: Sequence[dict], manifest: dict) -> list[str]:
    """The notes, above the probabilities they are about."""
    return [f'<p class="note">{html.escape(note)}.</p>' for note in same_results_notes(rows, manifest)]


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0;
font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}
td:last-child{text-align:left;font-family:monospace}figure{margin:1em 0}img{max-width:100%}
.note{border-left:4px solid #c80;background:#fff6e0;padding:0.5em 1em}"""


def render(manifest: dict, reports: dict[str, list[dict]], failing_total: int) -> str:
    """The page from the collected (aggregated) report rows."""
    title = f"isrlab sweep report: {manifest.get('scenario_file', '')}"
    runs = manifest.get("runs", 0)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>{runs} runs, seeds {html.escape(str(manifest.get('seeds')))}, configurations: "
             f"{html.escape(', '.join(c['config'] for c in manifest.get('configs', [])))}</p>",
             *_same_results(reports["seed_agreement"], manifest),
             "<h2>Anomaly probability by configuration</h2>", _img(_png(anomaly_figure(reports["anomaly_probabilities"])),
                                                                    "anomaly probability by configuration"),
             _table(reports["anomaly_probabilities"]),
             "<h2>Produce latency (acknowledged sends)</h2>",
             _img(_png(latency_figure(reports["latency_histogram"])), "latency distribution by configuration"),
             _table(reports["produce_latency"]), "<h3>Errors and unknown outcomes</h3>",
             _table(reports["produce_outcomes"]),
             "<h2>Availability: time without a leader per partition</h2>",
             _img(_png(availability_figure(reports["availability"])), "time without a leader"),
             _table(reports["availability"]),
             "<h2>ISR changes, elections and truncations</h2>", _table(reports["cluster_changes"]),
             "<h2>Compaction and quotas</h2>", _table(reports["compaction_and_quotas"]),
             "<h2>Faults</h2><h3>Active when an anomaly happened</h3>", _table(reports["fault_anomalies"]),
             "<h3>Latency during and outside each kind</h3>", _table(reports["fault_latency"]),
             "<h3>Availability of runs with and without each kind</h3>", _table(reports["fault_availability"]),
             "<h2>Did the seeds change anything?</h2>",
             f"<p>A run's result: {html.escape(RESULT_WORDS)}. <code>results</code> counts the distinct ones.</p>",
             _table(reports["seed_agreement"]),
             f"<h2>Failing runs ({failing_total})</h2>"]
    if failing_total > len(reports["failing_runs"]):
        parts.append(f"<p>the first {len(reports['failing_runs'])} are listed; the failing_runs table has all</p>")
    parts.append(_table(reports["failing_runs"], ["config", "seed", "why_failed", "replay"]))
    parts.append("</body></html>\n")
    return "\n".join(parts)
