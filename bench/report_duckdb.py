"""Every table of ``isrlab report`` (spark_reports/report.py) computed by DuckDB in one
process over the sweep's Parquet files: the plain single-process baseline of
bench/spark_report.py. The same columns, in the same order, with the same rules
(exact percentiles by linear interpolation, Wilson intervals, a fault never ended
lasting to the end of the run); tests/spark_reports/test_report_duckdb.py checks that
both give the same rows on a real sweep.
"""
from __future__ import annotations

import math

from analysis.checkers import MAPPING_CHECKERS
from analysis.seed_agreement import COMPARED

_V = "read_parquet('{d}/verdicts/*/*/*.parquet', hive_partitioning=true)"
_O = "read_parquet('{d}/operations/*/*/*.parquet', hive_partitioning=true)"
_E = "read_parquet('{d}/cluster_events/*/*/*.parquet', hive_partitioning=true)"
_LATENCY = """count(*) as acknowledged_sends, avg(latency_ms) as mean_ms, quantile_cont(latency_ms, 0.5) as p50_ms,
  quantile_cont(latency_ms, 0.99) as p99_ms, quantile_cont(latency_ms, 0.999) as p999_ms, max(latency_ms) as max_ms"""
_ACKNOWLEDGED = f"""acked as (select scenario, config, seed, run_id, process, op, invoke_ms,
  complete_ms - invoke_ms as latency_ms from {_O} where f = 'send' and outcome = 'ok' and "offset" >= 0)"""
_INTERVALS = f"""e as (select * from {_E}),
  i as (select s.scenario, s.config, s.seed, s.run_id, s.fault_id, s.fault, s.t_ms as start_ms,
          coalesce((select min(f.t_ms) from e f where f.type = 'fault_ended' and f.scenario = s.scenario
                    and f.config = s.config and f.seed = s.seed and f.run_id = s.run_id and f.fault_id = s.fault_id),
                   4611686018427387904) as end_ms
        from e s where s.type = 'fault_started' and json_extract(s.fields, '$.no_effect') is null),
  k as (select distinct scenario, config, fault from i)"""
# One run's result as spark_reports.report.seed_agreement compares it.
_RESULT = "row(outcome, " + ", ".join(f'list_sort(map_entries("{n}"))' if n in MAPPING_CHECKERS else f'"{n}"::double'
                                      for n in COMPARED) + ")"

SQL = {
    "anomaly_probabilities": f"""
        with v as (select * from {_V}),
        a as (select scenario, config, 'lost_writes' as anomaly, (lost_writes > 0)::bigint as hit from v
              union all select scenario, config, 'divergence', (divergence > 0)::bigint from v
              union all select scenario, config, 'duplicates', (duplicates > 0)::bigint from v
              union all select scenario, config, 'consumer_anomalies',
                 (consumer_non_monotonic + consumer_skips + consumer_truncated_reads > 0)::bigint from v
              union all select scenario, config, 'inconsistent_offsets', (inconsistent_offsets > 0)::bigint from v
              union all select scenario, config, 'failed_run', (outcome = 'FAIL')::bigint from v),
        c as (select scenario, config, anomaly, count(*) as runs, sum(hit) as runs_with from a group by all),
        z as (select *, runs_with / runs as p, 1.959963984540054 as z from c),
        w as (select *, (p + z*z/(2*runs)) / (1 + z*z/runs) as centre,
                     z*sqrt(p*(1-p)/runs + z*z/(4*runs*runs)) / (1 + z*z/runs) as half from z)
        select scenario, config, anomaly, runs, runs_with, p as probability,
          case when runs_with = 0 then 0.0 else greatest(0.0, centre - half) end as ci_low,
          case when runs_with = runs then 1.0 else least(1.0, centre + half) end as ci_high
        from w""",
    "availability": f"""
        select scenario, config, e.key as partition, count(*) as runs, avg(e.value) as mean_unavailable_ms,
          quantile_cont(e.value, 0.5) as p50_unavailable_ms, quantile_cont(e.value, 0.99) as p99_unavailable_ms,
          max(e.value) as max_unavailable_ms, avg(e.value / until_ms) as mean_unavailable_share
        from (select scenario, config, until_ms, unnest(map_entries(unavailable_per_partition_ms)) as e from {_V})
        group by all""",
    "produce_latency": f"""
        with {_ACKNOWLEDGED} select scenario, config, {_LATENCY} from acked group by all""",
    "latency_histogram": f"""
        with {_ACKNOWLEDGED}
        select scenario, config, pow(10.0, floor(log10(greatest(latency_ms, 1)) * 10) / 10) as bucket_ms,
          count(*) as sends
        from acked group by all""",
    "produce_outcomes": f"""
        select scenario, config, count(*) as sends, sum((outcome = 'fail')::bigint) as failed,
          sum((outcome = 'info')::bigint) as unknown, failed / sends as error_rate, unknown / sends as unknown_rate
        from {_O} where f = 'send' and acks <> 0 group by all""",
    "cluster_changes": f"""
        with runs as (select scenario, config, count(*) as runs from {_V} group by all),
        counts as (select scenario, config, sum((type = 'isr_shrunk')::bigint) as isr_shrinks,
            sum((type = 'isr_expanded')::bigint) as isr_expansions,
            sum((type = 'leader_elected' and leader >= 0)::bigint) as leader_elections,
            sum((type = 'leader_elected' and coalesce(unclean, false))::bigint) as unclean_elections,
            sum((type = 'log_truncated')::bigint) as truncations,
            sum(case when type = 'log_truncated' then removed_count else 0 end) as records_truncated
          from {_E} group by all),
        j as (select r.scenario, r.config, r.runs, coalesce(isr_shrinks, 0) as isr_shrinks,
            coalesce(isr_expansions, 0) as isr_expansions, coalesce(leader_elections, 0) as leader_elections,
            coalesce(unclean_elections, 0) as unclean_elections, coalesce(truncations, 0) as truncations,
            coalesce(records_truncated, 0) as records_truncated
          from runs r left join counts c using (scenario, config))
        select *, isr_shrinks / runs as isr_shrinks_per_run, isr_expansions / runs as isr_expansions_per_run,
          leader_elections / runs as leader_elections_per_run, unclean_elections / runs as unclean_elections_per_run,
          truncations / runs as truncations_per_run
        from j""",
    "compaction_and_quotas": f"""
        with runs as (select scenario, config, count(*) as runs, sum(throttled) as throttled_responses
            from {_V} group by all),
        counts as (select scenario, config, count(*) as cleaning_passes,
            sum(json_extract(fields, '$.records_before')::bigint - json_extract(fields, '$.records_after')::bigint)
              as records_removed,
            sum(json_extract(fields, '$.tombstones_removed')::bigint) as tombstones_removed
          from {_E} where type = 'segments_cleaned' group by all),
        j as (select r.scenario, r.config, r.runs, coalesce(cleaning_passes, 0) as cleaning_passes,
            coalesce(records_removed, 0) as records_removed, coalesce(tombstones_removed, 0) as tombstones_removed,
            r.throttled_responses
          from runs r left join counts c using (scenario, config))
        select *, cleaning_passes / runs as cleaning_passes_per_run, records_removed / runs as records_removed_per_run,
          tombstones_removed / runs as tombstones_removed_per_run,
          throttled_responses / runs as throttled_responses_per_run
        from j""",
    "fault_anomalies": f"""
        with {_INTERVALS},
        a as (select scenario, config, seed, run_id, x.key as anomaly, x.value as t_ms
              from (select *, unnest(map_entries(first_anomaly_ms)) as x from {_V})),
        totals as (select scenario, config, count(*) as anomalies from a group by all),
        during as (select scenario, config, fault, count(*) as during_fault from (
            select distinct a.scenario, a.config, a.seed, a.run_id, a.anomaly, i.fault from a join i
              on a.scenario = i.scenario and a.config = i.config and a.seed = i.seed and a.run_id = i.run_id
              and a.t_ms between i.start_ms and i.end_ms) group by all)
        select k.scenario, k.config, k.fault, coalesce(t.anomalies, 0) as anomalies,
          coalesce(d.during_fault, 0) as during_fault,
          case when coalesce(t.anomalies, 0) > 0 then coalesce(d.during_fault, 0) / t.anomalies end as share
        from k left join totals t using (scenario, config) left join during d using (scenario, config, fault)""",
    "fault_latency": f"""
        with {_INTERVALS}, {_ACKNOWLEDGED},
        flagged as (select s.*, k.fault, exists (select 1 from i where i.scenario = s.scenario
                      and i.config = s.config and i.seed = s.seed and i.run_id = s.run_id and i.fault = k.fault
                      and s.invoke_ms between i.start_ms and i.end_ms) as during
                    from acked s join k using (scenario, config))
        select scenario, config, fault, during, {_LATENCY} from flagged group by all""",
    "fault_availability": f"""
        with {_INTERVALS},
        happened as (select distinct scenario, config, seed, run_id, fault from i)
        select v.scenario, v.config, k.fault, h.fault is not null as with_fault, count(*) as runs,
          avg(v.unavailable_ms) as mean_unavailable_ms, max(v.unavailable_ms) as max_unavailable_ms
        from {_V} v join k using (scenario, config)
          left join happened h on h.scenario = v.scenario and h.config = v.config and h.seed = v.seed
            and h.run_id = v.run_id and h.fault = k.fault
        group by all""",
    "seed_agreement": f"""
        select scenario, config, count(*) as runs, count(distinct outcome) as outcomes,
          count(distinct {_RESULT}) as results, runs >= 2 and results = 1 as same_results,
          case when outcomes = 1 then min(outcome) end as outcome
        from {_V} group by all""",
    "failing_runs": f"""
        select scenario, config, seed, why_failed, replay from {_V} where outcome = 'FAIL'""",
}

# The columns that name a row (the rest are its values); rows are compared sorted by them.
KEYS = {"anomaly_probabilities": ("scenario", "config", "anomaly"),
        "availability": ("scenario", "config", "partition"),
        "produce_latency": ("scenario", "config"),
        "latency_histogram": ("scenario", "config", "bucket_ms"),
        "produce_outcomes": ("scenario", "config"),
        "cluster_changes": ("scenario", "config"),
        "compaction_and_quotas": ("scenario", "config"),
        "fault_anomalies": ("scenario", "config", "fault"),
        "fault_latency": ("scenario", "config", "fault", "during"),
        "fault_availability": ("scenario", "config", "fault", "with_fault"),
        "seed_agreement": ("scenario", "config"),
        "failing_runs": ("scenario", "config", "seed")}


def duckdb_tables(folder: str, threads: int = 1) -> dict[str, tuple[list[str], list[tuple]]]:
    """Every report table over the sweep in ``folder``: name -> (columns, rows)."""
    import duckdb
    connection = duckdb.connect()
    connection.execute(f"set threads to {threads}")  # one thread: the plain single-process baseline
    out = {}
    for name, sql in SQL.items():
        cursor = connection.execute(sql.format(d=folder))
        out[name] = ([c[0] for c in cursor.description], cursor.fetchall())
    return out


def differences(name: str, spark: tuple[list[str], list[tuple]], duck: tuple[list[str], list[tuple]],
                tolerance: float = 1e-9) -> list[str]:
    """Where two results of one table differ (columns, a key present on one side only, a
    value beyond ``tolerance``, relative), at most five; empty when they agree."""
    (spark_columns, spark_rows), (duck_columns, duck_rows) = spark, duck
    if spark_columns != duck_columns:
        return [f"{name}: columns {spark_columns} != {duck_columns}"]
    keys = [spark_columns.index(k) for k in KEYS[name]]

    def indexed(rows):
        return {tuple(_normal(row[i]) for i in keys): row for row in rows}
    left, right = indexed(spark_rows), indexed(duck_rows)
    found = [f"{name}: row {key} only in {'Spark' if key in left else 'DuckDB'}"
             for key in sorted(set(left) ^ set(right), key=repr)]
    for key in sorted(set(left) & set(right), key=repr):
        for column, a, b in zip(spark_columns, left[key], right[key]):
            if not _same(a, b, tolerance):
                found.append(f"{name}: {key} {column}: Spark {a!r}, DuckDB {b!r}")
    return found[:5]


def _normal(value):
    return round(value, 9) if isinstance(value, float) else value


def _same(a, b, tolerance: float) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))
    return a == b
