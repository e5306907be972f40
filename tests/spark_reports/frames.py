"""Small hand-made sweep tables (every column of the real schema, defaults filled in)."""
from __future__ import annotations

from spark_reports.schemas import CLUSTER_EVENTS, METRICS, OPERATIONS, RATE_METRICS, VERDICTS


def verdict(scenario="s", config="c", seed=1, **given) -> dict:
    row = {"scenario": scenario, "config": config, "seed": seed, "run_id": f"{scenario}-seed{seed}",
           "variant": None, "grid": "", "outcome": "PASS", "valid": True, "why_failed": "", "replay": f"replay {seed}",
           "events": 0, "until_ms": 10000, "final_leader": {}, "unavailable_per_partition_ms": {},
           "first_anomaly_ms": {}, "verdict_json": "{}"}
    row.update({m: (0.0 if m in RATE_METRICS else 0) for m in METRICS})
    row.update(given)
    return row


def send(seed, op, invoke_ms, complete_ms, outcome="ok", offset=0, acks=-1, config="c", scenario="s", f="send") -> dict:
    return {"scenario": scenario, "config": config, "seed": seed, "run_id": f"{scenario}-seed{seed}",
            "process": "producer-0", "op": op, "f": f, "partition": "t-0", "acks": acks, "values": 1,
            "invoke_ms": invoke_ms, "complete_ms": complete_ms, "outcome": outcome,
            "completed": complete_ms is not None, "offset": offset if outcome == "ok" else None,
            "error": None, "reason": None}


def event(seed, t_ms, type_, config="c", scenario="s", fields="{}", **given) -> dict:
    row = {"scenario": scenario, "config": config, "seed": seed, "run_id": f"{scenario}-seed{seed}", "t_ms": t_ms,
           "node": "nemesis", "type": type_, "partition": None, "leader": None, "leader_epoch": None, "isr": None,
           "unclean": None, "fault": None, "fault_id": None, "removed_count": None, "fields": fields}
    row.update(given)
    return row


def frame(spark, schema, rows):
    return spark.createDataFrame([tuple(r[n] for n in schema.fieldNames()) for r in rows], schema)


def verdicts(spark, rows):
    return frame(spark, VERDICTS, rows)


def operations(spark, rows):
    return frame(spark, OPERATIONS, rows)


def cluster_events(spark, rows):
    return frame(spark, CLUSTER_EVENTS, rows)
