"""The report's computations, each a function from the sweep's DataFrames to one
DataFrame of aggregated rows (docs/spark.md lists their columns). Nothing here
collects: the HTML step collects only these small results.

Anomaly probabilities carry 95% Wilson score intervals; percentiles are exact (Spark's
``percentile``: linear interpolation between the closest ranks, as numpy's default).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis.checkers import MAPPING_CHECKERS
from analysis.seed_agreement import COMPARED

Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal
KEY = ["scenario", "config"]
RUN = ["scenario", "config", "seed", "run_id"]
CONSUMER_ANOMALIES = ("consumer_non_monotonic", "consumer_skips", "consumer_truncated_reads")
ANOMALY_NAMES = ("lost_writes", "divergence", "duplicates", "consumer_anomalies", "inconsistent_offsets", "failed_run")


def anomaly_conditions() -> dict[str, Column]:
    """anomaly -> when a run has it (built on call: a Column needs a running session)."""
    return {
        "lost_writes": F.col("lost_writes") > 0,
        "divergence": F.col("divergence") > 0,
        "duplicates": F.col("duplicates") > 0,
        "consumer_anomalies": sum((F.col(c) for c in CONSUMER_ANOMALIES[1:]), F.col(CONSUMER_ANOMALIES[0])) > 0,
        "inconsistent_offsets": F.col("inconsistent_offsets") > 0,
        "failed_run": F.col("outcome") == "FAIL",
    }
LATENCY_QUANTILES = (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999))


def wilson_interval(successes: Column, trials: Column, z: float = Z95) -> tuple[Column, Column]:
    """The Wilson score interval of a proportion successes / trials."""
    n = trials.cast("double")
    p = successes.cast("double") / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * F.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # at 0 or n successes the interval ends exactly at 0 or 1; the formula misses by a rounding
    low = F.when(successes == 0, F.lit(0.0)).otherwise(F.greatest(F.lit(0.0), centre - half))
    high = F.when(successes == trials, F.lit(1.0)).otherwise(F.least(F.lit(1.0), centre + half))
    return low, high


def anomaly_probabilities(verdicts: DataFrame) -> DataFrame:
    """Per configuration and anomaly: runs, runs with it, probability, 95% Wilson interval."""
    pairs = F.array(*[F.struct(F.lit(name).alias("anomaly"), cond.cast("long").alias("hit"))
                      for name, cond in anomaly_conditions().items()])
    counted = (verdicts.select(*KEY, F.explode(pairs).alias("a"))
               .groupBy(*KEY, "a.anomaly").agg(F.count("*").alias("runs"), F.sum("a.hit").alias("runs_with")))
    low, high = wilson_interval(F.col("runs_with"), F.col("runs"))
    return (counted.withColumn("probability", F.col("runs_with") / F.col("runs"))
            .withColumn("ci_low", low).withColumn("ci_high", high).orderBy(*KEY, "anomaly"))


def availability(verdicts: DataFrame) -> DataFrame:
    """Per configuration and partition: time without a leader until the workload
    stopped (analysis' leadership replay), over the runs: mean, median, p99, max, and
    the mean share of the measured window."""
    per_partition = verdicts.select(*KEY, "until_ms", F.explode("unavailable_per_partition_ms")
                                    .alias("partition", "unavailable_ms"))
    return (per_partition.groupBy(*KEY, "partition").agg(
        F.count("*").alias("runs"),
        F.mean("unavailable_ms").alias("mean_unavailable_ms"),
        F.percentile("unavailable_ms", 0.5).alias("p50_unavailable_ms"),
        F.percentile("unavailable_ms", 0.99).alias("p99_unavailable_ms"),
        F.max("unavailable_ms").alias("max_unavailable_ms"),
        F.mean(F.col("unavailable_ms") / F.col("until_ms")).alias("mean_unavailable_share"))
        .orderBy(*KEY, "partition"))


def acknowledged_sends(operations: DataFrame) -> DataFrame:
    """Sends acknowledged with an offset, with their latency (invoke to ok)."""
    return (operations.where((F.col("f") == "send") & (F.col("outcome") == "ok") & (F.col("offset") >= 0))
            .withColumn("latency_ms", F.col("complete_ms") - F.col("invoke_ms")))


def _latency_aggregates(prefix: str = "") -> list[Column]:
    return [F.count("*").alias(f"{prefix}acknowledged_sends"), F.mean("latency_ms").alias(f"{prefix}mean_ms")] + [
        F.percentile("latency_ms", q).alias(f"{prefix}{name}") for name, q in LATENCY_QUANTILES] + [
        F.max("latency_ms").alias(f"{prefix}max_ms")]


def produce_latency(operations: DataFrame) -> DataFrame:
    """Per configuration: produce latency of acknowledged sends, p50 / p99 / p99.9."""
    return acknowledged_sends(operations).groupBy(*KEY).agg(*_latency_aggregates()).orderBy(*KEY)


def latency_histogram(operations: DataFrame, per_decade: int = 10) -> DataFrame:
    """Per configuration: acknowledged sends per latency bucket (``per_decade`` buckets
    per power of ten, from 1 ms; ``bucket_ms`` is a bucket's lower edge)."""
    exponent = F.floor(F.log10(F.greatest(F.col("latency_ms"), F.lit(1))) * per_decade) / per_decade
    return (acknowledged_sends(operations).withColumn("bucket_ms", F.pow(F.lit(10.0), exponent))
            .groupBy(*KEY, "bucket_ms").agg(F.count("*").alias("sends")).orderBy(*KEY, "bucket_ms"))


def produce_outcomes(operations: DataFrame) -> DataFrame:
    """Per configuration: sends with acks 1 or all, and the share that failed (``fail``)
    and whose outcome is unknown (``info``, or never completed)."""
    sends = operations.where((F.col("f") == "send") & (F.col("acks") != 0))
    return (sends.groupBy(*KEY).agg(
        F.count("*").alias("sends"),
        F.sum((F.col("outcome") == "fail").cast("long")).alias("failed"),
        F.sum((F.col("outcome") == "info").cast("long")).alias("unknown"))
        .withColumn("error_rate", F.col("failed") / F.col("sends"))
        .withColumn("unknown_rate", F.col("unknown") / F.col("sends")).orderBy(*KEY))


def cluster_changes(cluster_events: DataFrame, verdicts: DataFrame) -> DataFrame:
    """Per configuration: ISR shrinks and expansions, leader and unclean elections and
    log truncations, in total and per run (runs without any count as zero)."""
    counts = cluster_events.groupBy(*KEY).agg(
        F.sum((F.col("type") == "isr_shrunk").cast("long")).alias("isr_shrinks"),
        F.sum((F.col("type") == "isr_expanded").cast("long")).alias("isr_expansions"),
        F.sum(((F.col("type") == "leader_elected") & (F.col("leader") >= 0)).cast("long")).alias("leader_elections"),
        F.sum(((F.col("type") == "leader_elected") & F.coalesce(F.col("unclean"), F.lit(False))).cast("long"))
        .alias("unclean_elections"),
        F.sum((F.col("type") == "log_truncated").cast("long")).alias("truncations"),
        F.sum(F.when(F.col("type") == "log_truncated", F.col("removed_count")).otherwise(0)).alias("records_truncated"))
    runs = verdicts.groupBy(*KEY).agg(F.count("*").alias("runs"))
    joined = runs.join(counts, KEY, "left").fillna(0)
    for name in ("isr_shrinks", "isr_expansions", "leader_elections", "unclean_elections", "truncations"):
        joined = joined.withColumn(f"{name}_per_run", F.col(name) / F.col("runs"))
    return joined.orderBy(*KEY)


COMPACTION_AND_QUOTA_COUNTS = ("cleaning_passes", "records_removed", "tombstones_removed", "throttled_responses")


def compaction_and_quotas(cluster_events: DataFrame, verdicts: DataFrame) -> DataFrame:
    """Per configuration: the cleaners' passes (segments_cleaned, every replica's), the
    records and tombstones they removed, and the answers throttled by a client quota
    (the ``throttled`` checker's count), in total and per run (runs without any count as
    zero). A sweep without compacted topics or quotas has a row of zeros."""
    def field(name: str) -> Column:
        return F.get_json_object("fields", f"$.{name}").cast("long")
    counts = (cluster_events.where(F.col("type") == "segments_cleaned").groupBy(*KEY).agg(
        F.count("*").alias("cleaning_passes"),
        F.sum(field("records_before") - field("records_after")).alias("records_removed"),
        F.sum(field("tombstones_removed")).alias("tombstones_removed")))
    runs = verdicts.groupBy(*KEY).agg(F.count("*").alias("runs"), F.sum("throttled").alias("throttled_responses"))
    joined = runs.join(counts, KEY, "left").fillna(0)
    return (joined.select(*KEY, "runs", *COMPACTION_AND_QUOTA_COUNTS,
                          *[(F.col(name) / F.col("runs")).alias(f"{name}_per_run") for name in COMPACTION_AND_QUOTA_COUNTS])
            .orderBy(*KEY))


def fault_intervals(cluster_events: DataFrame) -> DataFrame:
    """One row per fault a run started that had an effect: its kind, start and end
    (a fault never ended lasts to the end of the run)."""
    started = (cluster_events.where((F.col("type") == "fault_started")
                                    & F.get_json_object("fields", "$.no_effect").isNull())
               .select(*RUN, "fault_id", "fault", F.col("t_ms").alias("start_ms")))
    ended = (cluster_events.where(F.col("type") == "fault_ended")
             .groupBy(*RUN, "fault_id").agg(F.min("t_ms").alias("end_ms")))
    return (started.join(ended, RUN + ["fault_id"], "left")
            .withColumn("end_ms", F.coalesce(F.col("end_ms"), F.lit(2 ** 62))))


def fault_anomalies(verdicts: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per configuration and fault kind: of the anomalies (each checker's first case in
    a run, at its time), how many happened while a fault of that kind was active."""
    anomalies = verdicts.select(*RUN, F.explode("first_anomaly_ms").alias("anomaly", "t_ms"))
    totals = anomalies.groupBy(*KEY).agg(F.count("*").alias("anomalies"))
    kinds = intervals.select(*KEY, "fault").distinct()
    i = intervals.alias("i")
    during = (anomalies.alias("a").join(i, [F.col(f"a.{c}") == F.col(f"i.{c}") for c in RUN]
                                        + [F.col("a.t_ms").between(F.col("i.start_ms"), F.col("i.end_ms"))])
              .select(*[F.col(f"a.{c}") for c in RUN], "a.anomaly", "i.fault").distinct()
              .groupBy(*KEY, "fault").agg(F.count("*").alias("during_fault")))
    return (kinds.join(totals, KEY, "left").join(during, KEY + ["fault"], "left").fillna(0)
            .withColumn("share", F.when(F.col("anomalies") > 0, F.col("during_fault") / F.col("anomalies")))
            .orderBy(*KEY, "fault"))


def fault_latency(operations: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per configuration and fault kind: latency of acknowledged sends invoked while a
    fault of that kind was active (``during`` true) against all the others. A run has
    few faults: each send is paired with its run's intervals of a kind as one small
    array, so no step groups the sends themselves again."""
    sends = acknowledged_sends(operations).select(*RUN, "invoke_ms", "latency_ms")
    kinds = intervals.select(*KEY, "fault").distinct()
    spans = intervals.groupBy(*RUN, "fault").agg(F.collect_list(F.struct("start_ms", "end_ms")).alias("spans"))
    paired = sends.join(kinds, KEY).join(spans, RUN + ["fault"], "left")  # every send against every kind
    during = F.coalesce(F.exists("spans", lambda span: F.col("invoke_ms").between(span["start_ms"], span["end_ms"])),
                        F.lit(False))
    return (paired.withColumn("during", during).groupBy(*KEY, "fault", "during").agg(*_latency_aggregates())
            .orderBy(*KEY, "fault", "during"))


def fault_availability(verdicts: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per configuration and fault kind: mean time without a leader (the run's worst
    partition) of the runs where that kind happened against the runs where it did not."""
    kinds = intervals.select(*KEY, "fault").distinct()
    happened = intervals.select(*RUN, "fault").distinct().withColumn("with_fault", F.lit(True))
    return (verdicts.select(*RUN, "unavailable_ms").join(kinds, KEY)
            .join(happened, RUN + ["fault"], "left").fillna(False, ["with_fault"])
            .groupBy(*KEY, "fault", "with_fault").agg(F.count("*").alias("runs"),
                                                      F.mean("unavailable_ms").alias("mean_unavailable_ms"),
                                                      F.max("unavailable_ms").alias("max_unavailable_ms"))
            .orderBy(*KEY, "fault", "with_fault"))


def seed_agreement(verdicts: DataFrame) -> DataFrame:
    """Per configuration: runs, distinct outcomes, distinct results (the outcome and
    every verdict metric of analysis.seed_agreement.COMPARED, numbers as doubles and
    mappings as their sorted entries), and ``same_results``: at least two runs and one
    result, when the seeds changed nothing and the probabilities estimate nothing
    random. ``outcome``: the outcome when every run had the same one, else null."""
    def comparable(name: str) -> Column:
        if name in MAPPING_CHECKERS:
            return F.array_sort(F.map_entries(F.col(name)))
        return F.col(name).cast("double")
    result = F.struct(F.col("outcome"), *[comparable(name).alias(name) for name in COMPARED])
    counted = verdicts.groupBy(*KEY).agg(F.count("*").alias("runs"), F.countDistinct("outcome").alias("outcomes"),
                                         F.countDistinct(result).alias("results"), F.min("outcome").alias("first"))
    return (counted.select(*KEY, "runs", "outcomes", "results",
                           ((F.col("runs") >= 2) & (F.col("results") == 1)).alias("same_results"),
                           F.when(F.col("outcomes") == 1, F.col("first")).alias("outcome"))
            .orderBy(*KEY))


def failing_runs(verdicts: DataFrame) -> DataFrame:
    return (verdicts.where(F.col("outcome") == "FAIL")
            .select(*KEY, "seed", "why_failed", "replay").orderBy(*KEY, "seed"))


def all_reports(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Every report table, by name, from the sweep's tables."""
    verdicts, operations, events = tables["verdicts"], tables["operations"], tables["cluster_events"]
    intervals = fault_intervals(events)
    return {
        "anomaly_probabilities": anomaly_probabilities(verdicts),
        "availability": availability(verdicts),
        "produce_latency": produce_latency(operations),
        "latency_histogram": latency_histogram(operations),
        "produce_outcomes": produce_outcomes(operations),
        "cluster_changes": cluster_changes(events, verdicts),
        "compaction_and_quotas": compaction_and_quotas(events, verdicts),
        "fault_anomalies": fault_anomalies(verdicts, intervals),
        "fault_latency": fault_latency(operations, intervals),
        "fault_availability": fault_availability(verdicts, intervals),
        "seed_agreement": seed_agreement(verdicts),
        "failing_runs": failing_runs(verdicts),
    }
