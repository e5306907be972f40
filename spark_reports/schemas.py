"""The tables a sweep writes and a report reads, with explicit Spark schemas.

The columns come from the trace schema and the checkers of ``analysis/``
(docs/trace-schema.md): a trace row carries the trace's common fields
(``analysis.trace.COMMON_FIELDS``), a verdict row one column per checker, typed by the
checkers' registry (``analysis/checkers/registry.py``). Nothing is inferred when
reading: a sweep folder whose files lack a column, or that was written by another
version, is refused.
docs/spark.md describes every column.
"""
from __future__ import annotations

from pyspark.sql.types import (
    ArrayType, BooleanType, DataType, DoubleType, LongType, MapType, StringType, StructField, StructType)

from analysis.checkers import CHECKER_NAMES, MAPPING_CHECKERS, RATE_CHECKERS
from analysis.trace import COMMON_FIELDS, SCHEMA_VERSION

SWEEP_FORMAT_VERSION = 1
MANIFEST_FILE = "sweep.json"
PARTITION_COLUMNS = ("scenario", "config")
RATE_METRICS = RATE_CHECKERS  # the checkers whose value is a fraction
METRICS = tuple(n for n in CHECKER_NAMES if n not in MAPPING_CHECKERS)

_RUN_KEY = [StructField("scenario", StringType(), False), StructField("config", StringType(), False),
            StructField("seed", LongType(), False), StructField("run_id", StringType(), False)]
_COMMON_TYPES: dict[str, DataType] = {"schema_version": LongType(), "run_id": StringType(), "seed": LongType(),
                                      "binding": StringType(), "t_ms": LongType(), "node": StringType(),
                                      "type": StringType()}


def _metric_type(name: str) -> DataType:
    return DoubleType() if name in RATE_METRICS else LongType()


VERDICTS = StructType(_RUN_KEY + [
    StructField("variant", StringType(), True),
    StructField("grid", StringType(), False),  # the grid point, "key=value;key=value" ("" without --grid)
    StructField("outcome", StringType(), False),  # PASS / FAIL, as isrlab run says
    StructField("valid", BooleanType(), False),
    StructField("why_failed", StringType(), False),
    StructField("replay", StringType(), False),
    StructField("events", LongType(), False),
    StructField("until_ms", LongType(), True),  # the end of the measured window (workload_stopped)
] + [StructField(name, _metric_type(name), False) for name in METRICS] + [
    StructField(name, MapType(StringType(), LongType()), False) for name in MAPPING_CHECKERS] + [
    StructField("unavailable_per_partition_ms", MapType(StringType(), LongType()), False),
    StructField("first_anomaly_ms", MapType(StringType(), LongType()), False),
    StructField("verdict_json", StringType(), False),
])

OPERATIONS = StructType(_RUN_KEY + [
    StructField("process", StringType(), False),
    StructField("op", LongType(), False),
    StructField("f", StringType(), False),  # send, poll, read
    StructField("partition", StringType(), True),
    StructField("acks", LongType(), True),
    StructField("values", LongType(), True),
    StructField("invoke_ms", LongType(), False),
    StructField("complete_ms", LongType(), True),  # null: never completed
    StructField("outcome", StringType(), False),  # ok, fail, info (also for never completed: none)
    StructField("completed", BooleanType(), False),
    StructField("offset", LongType(), True),
    StructField("error", StringType(), True),
    StructField("reason", StringType(), True),
])

CLUSTER_EVENT_TYPES = ("controller_elected", "leader_elected", "became_leader", "became_follower",
                       "isr_shrunk", "isr_expanded", "log_truncated", "fault_started", "fault_ended",
                       "broker_started", "broker_halted", "workload_stopped", "run_finished",
                       "segments_cleaned")  # one per cleaning pass: compaction_and_quotas counts them
CLUSTER_EVENTS = StructType(_RUN_KEY + [
    StructField("t_ms", LongType(), False),
    StructField("node", StringType(), False),
    StructField("type", StringType(), False),
    StructField("partition", StringType(), True),
    StructField("leader", LongType(), True),
    StructField("leader_epoch", LongType(), True),
    StructField("isr", ArrayType(LongType()), True),
    StructField("unclean", BooleanType(), True),
    StructField("fault", StringType(), True),
    StructField("fault_id", LongType(), True),
    StructField("removed_count", LongType(), True),
    StructField("fields", StringType(), False),  # every field of the event, as compact JSON
])

TRACES = StructType([StructField("scenario", StringType(), False), StructField("config", StringType(), False),
                     StructField("line", LongType(), False)]
                    + [StructField(name, _COMMON_TYPES[name], False) for name in COMMON_FIELDS]
                    + [StructField("fields", StringType(), False)])

TABLES: dict[str, StructType] = {"verdicts": VERDICTS, "operations": OPERATIONS,
                                 "cluster_events": CLUSTER_EVENTS, "traces": TRACES}
TRACE_SCHEMA_VERSION = SCHEMA_VERSION
