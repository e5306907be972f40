"""One run of a sweep turned into rows of the sweep's tables (plain tuples in the order
of spark_reports.schemas), computed where the run ran: on a Spark executor."""
from __future__ import annotations

import json
from typing import Iterator, Sequence

from analysis.checkers import MAPPING_CHECKERS, TIMED_ANOMALIES
from analysis.history import build_history
from analysis.trace import SCHEMA_VERSION, Event
from scenarios.runner import RunResult
from spark_reports.schemas import CLUSTER_EVENT_TYPES, CLUSTER_EVENTS, METRICS, OPERATIONS, TRACES, VERDICTS

_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode


def _ordered(schema, row: dict) -> tuple:
    return tuple(map(row.get, schema.names))


def why_failed(result: RunResult) -> str:
    reasons = [f"{e.name} expected {e.expectation} got {e.actual}" for e in result.evaluations if not e.passed]
    reasons += [f"NOT TESTED: {reason}" for reason in result.untested]
    if not result.evaluations and result.verdict is not None and not result.verdict.valid:
        reasons += [f"{n}: {r.explanation}" for n, r in result.verdict.results.items() if not r.valid]
    return "; ".join(reasons)


def verdict_row(key: dict, result: RunResult, variant: str | None, grid: str, replay: str) -> tuple:
    verdict = result.verdict
    assert verdict is not None  # run_task's runs are always judged
    unavailable = verdict["unavailable_ms"].details
    first = {}
    for name in TIMED_ANOMALIES:
        check = verdict[name]
        if check.value and check.examples and "t_ms" in check.examples[0]:
            first[name] = int(check.examples[0]["t_ms"])
    row = {**key, "variant": variant, "grid": grid, "outcome": "PASS" if result.passed else "FAIL",
           "valid": verdict.valid, "why_failed": why_failed(result), "replay": replay, "events": result.events,
           "until_ms": unavailable.get("until_ms"),
           "unavailable_per_partition_ms": {k: int(v) for k, v in unavailable.get("per_partition_ms", {}).items()},
           "first_anomaly_ms": first, "verdict_json": verdict.to_json()}
    for name in METRICS:
        value = verdict.number(name)
        row[name] = float(value) if isinstance(value, float) else int(value)
    for name in MAPPING_CHECKERS:
        row[name] = {k: int(v) for k, v in verdict.mapping(name).items()}
    return _ordered(VERDICTS, row)


# The operations table's columns after the run's key, in the order operation_rows
# builds them (directly as tuples: a dict per operation, ordered by the schema's names,
# cost a sweep about a twentieth of a compiled run's time; 3,200 operations a run).
_OPERATION_COLUMNS = ("process", "op", "f", "partition", "acks", "values", "invoke_ms", "complete_ms", "outcome",
                      "completed", "offset", "error", "reason")
if tuple(OPERATIONS.fieldNames()) != ("scenario", "config", "seed", "run_id") + _OPERATION_COLUMNS:
    raise RuntimeError("spark_reports.rows builds the operations table in another order than its schema")


def operation_rows(key: dict, events: Sequence[Event]) -> Iterator[tuple]:
    history = build_history(events, keep_internal=False)
    head = (key["scenario"], key["config"], key["seed"], key["run_id"])
    for op in history.operations:
        invoke, done = op.invoke.fields, op.completion
        values = invoke.get("values")
        start = (op.process, op.op, op.f, invoke.get("partition"), invoke.get("acks"),
                 len(values) if values is not None else None, op.invoke.t_ms)
        if done is None:
            yield head + start + (None, op.outcome, False, None, None, None)
        else:
            ended = done.fields
            yield head + start + (done.t_ms, op.outcome, True, ended.get("offset"), ended.get("error"),
                                  ended.get("reason"))


def cluster_event_rows(key: dict, events: Sequence[Event]) -> Iterator[tuple]:
    wanted = set(CLUSTER_EVENT_TYPES)
    for event in events:
        if event.type not in wanted:
            continue
        fields = event.fields
        isr = fields.get("isr")
        row = {**key, "t_ms": event.t_ms, "node": event.node, "type": event.type,
               "partition": fields.get("partition") if isinstance(fields.get("partition"), str) else None,
               "leader": _int(fields.get("leader")), "leader_epoch": _int(fields.get("leader_epoch")),
               "isr": [int(b) for b in isr] if isinstance(isr, list) else None,
               "unclean": fields.get("unclean") if isinstance(fields.get("unclean"), bool) else None,
               "fault": fields.get("fault"), "fault_id": _int(fields.get("fault_id")),
               "removed_count": _int(fields.get("removed_count")), "fields": _dumps(fields)}
        yield _ordered(CLUSTER_EVENTS, row)


def trace_rows(scenario: str, config: str, result: RunResult, events: Sequence[Event]) -> Iterator[tuple]:
    header = {"schema_version": SCHEMA_VERSION, "run_id": f"{result.scenario.name}-seed{result.seed}",
              "seed": result.seed, "binding": "sim"}
    for line, event in enumerate(events, 1):
        row = {"scenario": scenario, "config": config, "line": line, **header, "t_ms": event.t_ms,
               "node": event.node, "type": event.type, "fields": _dumps(event.fields)}
        yield _ordered(TRACES, row)


def _int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
