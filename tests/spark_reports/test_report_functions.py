"""Each report function on small hand-made tables gives the numbers worked out by hand
(in each test's docstring)."""
from __future__ import annotations

import json

import pytest

from spark_reports import report
from tests.spark_reports.frames import cluster_events, event, operations, send, verdict, verdicts


def by(rows, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in (x.asDict() for x in rows)}


def test_anomaly_probability_with_wilson_intervals(spark):
    """Ten runs, three with lost writes: p = 0.3; Wilson 95% (z = 1.95996):
    centre (0.3 + z²/20) / (1 + z²/10) = 0.35551, half-width 0.24772 -> [0.1078, 0.6032]
    (the textbook interval for 3/10). A configuration of three clean runs: [0, z²/(3+z²)] =
    [0, 0.5615]. consumer_anomalies counts a run with any consumer checker above zero."""
    rows = [verdict(seed=s, lost_writes=5 if s <= 3 else 0, consumer_skips=2 if s == 4 else 0,
                    outcome="FAIL" if s <= 3 else "PASS") for s in range(1, 11)]
    rows += [verdict(config="clean", seed=s) for s in range(1, 4)]
    result = by(report.anomaly_probabilities(verdicts(spark, rows)).collect(), "config", "anomaly")
    lost = result[("c", "lost_writes")]
    assert (lost["runs"], lost["runs_with"], lost["probability"]) == (10, 3, 0.3)
    assert lost["ci_low"] == pytest.approx(0.10779, abs=1e-4)
    assert lost["ci_high"] == pytest.approx(0.60322, abs=1e-4)
    assert result[("c", "consumer_anomalies")]["runs_with"] == 1
    assert result[("c", "failed_run")]["runs_with"] == 3
    assert result[("c", "divergence")]["runs_with"] == 0
    clean = result[("clean", "lost_writes")]
    assert (clean["probability"], clean["ci_low"]) == (0.0, 0.0)
    assert clean["ci_high"] == pytest.approx(0.56151, abs=1e-4)


def test_produce_latency_percentiles_of_acknowledged_sends(spark):
    """Latencies 1..100 ms: exact percentiles interpolate between ranks (0-based rank
    q*(n-1)): p50 = 50.5, p99 = 99 + 0.01 = 99.01, p99.9 = 99 + 0.901 = 99.901. A
    failed send and an ok without an offset (-1) are not acknowledged records."""
    rows = [send(1, i, 1000, 1000 + i) for i in range(1, 101)]
    rows += [send(1, 200, 1000, 99999, outcome="fail"), send(1, 201, 1000, 99999, offset=-1)]
    (row,) = report.produce_latency(operations(spark, rows)).collect()
    assert (row["acknowledged_sends"], row["p50_ms"], row["max_ms"]) == (100, 50.5, 100)
    assert row["p99_ms"] == pytest.approx(99.01)
    assert row["p999_ms"] == pytest.approx(99.901)
    assert row["mean_ms"] == 50.5


def test_latency_histogram_buckets_ten_per_decade(spark):
    """1 ms and 1.2 ms fall in [1, 1.259); 10 ms in [10, 12.59); 0 ms counts as 1 ms."""
    rows = [send(1, 1, 0, 1), send(1, 2, 0, 0), send(1, 3, 0, 10), send(1, 4, 0, 10)]
    result = {round(r["bucket_ms"], 3): r["sends"] for r in report.latency_histogram(operations(spark, rows)).collect()}
    assert result == {1.0: 2, 10.0: 2}


def test_availability_per_partition(spark):
    """t-0 is without a leader 1000, 3000 and 2000 ms in three runs of a 10 s window:
    mean 2000, median 2000, p99 = 2000 + 0.98 * 1000 = 2980, max 3000, share 0.2."""
    rows = [verdict(seed=1, unavailable_per_partition_ms={"t-0": 1000, "t-1": 0}),
            verdict(seed=2, unavailable_per_partition_ms={"t-0": 3000, "t-1": 500}),
            verdict(seed=3, unavailable_per_partition_ms={"t-0": 2000, "t-1": 0})]
    result = by(report.availability(verdicts(spark, rows)).collect(), "partition")
    t0 = result["t-0"]
    assert (t0["runs"], t0["mean_unavailable_ms"], t0["p50_unavailable_ms"], t0["max_unavailable_ms"]) == (
        3, 2000.0, 2000.0, 3000)
    assert t0["p99_unavailable_ms"] == pytest.approx(2980.0)
    assert t0["mean_unavailable_share"] == pytest.approx(0.2)
    assert result["t-1"]["mean_unavailable_ms"] == pytest.approx(500 / 3)


def test_error_and_unknown_outcome_rates(spark):
    """Ten sends with acks=all: 8 ok, 1 fail, 1 info -> 0.1 and 0.1; acks=0 sends are
    left out (their outcome is never known)."""
    rows = [send(1, i, 0, 5) for i in range(8)] + [send(1, 8, 0, 5, outcome="fail"), send(1, 9, 0, 5, outcome="info")]
    rows += [send(1, 10 + i, 0, 5, outcome="info", acks=0) for i in range(5)]
    (row,) = report.produce_outcomes(operations(spark, rows)).collect()
    assert (row["sends"], row["failed"], row["unknown"], row["error_rate"], row["unknown_rate"]) == (10, 1, 1, 0.1, 0.1)


def test_isr_changes_and_unclean_elections_per_run(spark):
    """Two runs (one without any event): 3 shrinks, 1 expansion, 2 real elections of
    which 1 unclean (a leaderless election does not count), 2 truncations removing 5 + 7."""
    events = [event(1, 10, "isr_shrunk"), event(1, 20, "isr_shrunk"), event(1, 30, "isr_shrunk"),
              event(1, 40, "isr_expanded"), event(1, 50, "leader_elected", leader=2, unclean=True),
              event(1, 60, "leader_elected", leader=-1, unclean=False),
              event(1, 70, "leader_elected", leader=1, unclean=False),
              event(1, 80, "log_truncated", removed_count=5), event(1, 90, "log_truncated", removed_count=7)]
    runs = verdicts(spark, [verdict(seed=1), verdict(seed=2)])
    (row,) = report.cluster_changes(cluster_events(spark, events), runs).collect()
    assert (row["runs"], row["isr_shrinks"], row["isr_expansions"], row["leader_elections"],
            row["unclean_elections"], row["truncations"], row["records_truncated"]) == (2, 3, 1, 2, 1, 2, 12)
    assert (row["isr_shrinks_per_run"], row["unclean_elections_per_run"]) == (1.5, 0.5)


def test_compaction_and_quota_metrics_per_run(spark):
    """Two runs of one configuration: run 1's replicas cleaned three times, removing
    30 + 5 + 0 records and 2 + 1 tombstones, run 2 never; 4 + 2 throttled answers.
    A configuration without either gets a row of zeros."""
    def cleaned(seed, t_ms, before, after, tombstones, config="c"):
        fields = json.dumps({"partition": "t-0", "records_before": before, "records_after": after,
                             "tombstones_removed": tombstones, "end_offset": 10})
        return event(seed, t_ms, "segments_cleaned", config=config, node="broker-1", partition="t-0", fields=fields)
    events = [cleaned(1, 100, 40, 10, 2), cleaned(1, 200, 12, 7, 1), cleaned(1, 300, 7, 7, 0),
              event(1, 400, "isr_shrunk")]
    runs = verdicts(spark, [verdict(seed=1, throttled=4), verdict(seed=2, throttled=2),
                            verdict(config="plain", seed=1)])
    rows = by(report.compaction_and_quotas(cluster_events(spark, events), runs).collect(), "config")
    c = rows["c"]
    assert (c["runs"], c["cleaning_passes"], c["records_removed"], c["tombstones_removed"],
            c["throttled_responses"]) == (2, 3, 35, 3, 6)
    assert (c["cleaning_passes_per_run"], c["records_removed_per_run"], c["tombstones_removed_per_run"],
            c["throttled_responses_per_run"]) == (1.5, 17.5, 1.5, 3.0)
    plain = rows["plain"]
    assert (plain["runs"], plain["cleaning_passes"], plain["records_removed"], plain["throttled_responses"]) == (
        1, 0, 0, 0)


def _faults(spark):
    """Run 1: a partition 1000-5000 ms, a crash 3000-4000 ms, and a crash without effect
    at 6000 ms (not counted); run 2: no fault."""
    return cluster_events(spark, [
        event(1, 1000, "fault_started", fault="partition", fault_id=1),
        event(1, 3000, "fault_started", fault="crash", fault_id=2),
        event(1, 4000, "fault_ended", fault="crash", fault_id=2),
        event(1, 5000, "fault_ended", fault="partition", fault_id=1),
        event(1, 6000, "fault_started", fault="crash", fault_id=3, fields='{"no_effect":"no broker running"}'),
        event(1, 6000, "fault_ended", fault="crash", fault_id=3)])


def test_fault_kinds_active_when_anomalies_happened(spark):
    """Anomalies: run 1 lost writes at 3500 ms (partition and crash active), duplicates
    at 4500 ms (partition only); run 2 lost writes at 2000 ms (no fault). Of 3:
    partition 2 (2/3), crash 1 (1/3)."""
    runs = verdicts(spark, [verdict(seed=1, first_anomaly_ms={"lost_writes": 3500, "duplicates": 4500}),
                            verdict(seed=2, first_anomaly_ms={"lost_writes": 2000})])
    intervals = report.fault_intervals(_faults(spark))
    assert sorted((r["fault_id"], r["start_ms"], r["end_ms"]) for r in intervals.collect()) == [
        (1, 1000, 5000), (2, 3000, 4000)]
    result = by(report.fault_anomalies(runs, intervals).collect(), "fault")
    assert (result["partition"]["anomalies"], result["partition"]["during_fault"]) == (3, 2)
    assert result["partition"]["share"] == pytest.approx(2 / 3)
    assert (result["crash"]["during_fault"], result["crash"]["share"]) == (1, pytest.approx(1 / 3))


def test_fault_kinds_move_latency_and_availability(spark):
    """Acknowledged sends: run 1 invoked at 1500 (10 ms), 3200 (20 ms), 8000 (30 ms); run 2
    at 3500 (40 ms). partition: during [10, 20] -> p50 15, outside [30, 40] -> 35;
    crash: during [20], outside [10, 30, 40] -> p50 30. Time without a leader: run 1
    (both kinds) 700 ms, run 2 (none) 100 ms."""
    ops = operations(spark, [send(1, 1, 1500, 1510), send(1, 2, 3200, 3220), send(1, 3, 8000, 8030),
                             send(2, 1, 3500, 3540)])
    intervals = report.fault_intervals(_faults(spark))
    latency = by(report.fault_latency(ops, intervals).collect(), "fault", "during")
    assert (latency[("partition", True)]["acknowledged_sends"], latency[("partition", True)]["p50_ms"]) == (2, 15.0)
    assert latency[("partition", False)]["p50_ms"] == 35.0
    assert (latency[("crash", True)]["p50_ms"], latency[("crash", False)]["p50_ms"]) == (20.0, 30.0)
    runs = verdicts(spark, [verdict(seed=1, unavailable_ms=700), verdict(seed=2, unavailable_ms=100)])
    available = by(report.fault_availability(runs, intervals).collect(), "fault", "with_fault")
    assert (available[("partition", True)]["runs"], available[("partition", True)]["mean_unavailable_ms"]) == (1, 700.0)
    assert available[("partition", False)]["mean_unavailable_ms"] == 100.0


def test_failing_runs_with_their_replay_commands(spark):
    rows = [verdict(seed=2, outcome="FAIL", why_failed="lost_writes expected 0 got 3"), verdict(seed=1)]
    result = [r.asDict() for r in report.failing_runs(verdicts(spark, rows)).collect()]
    assert result == [{"scenario": "s", "config": "c", "seed": 2, "why_failed": "lost_writes expected 0 got 3",
                       "replay": "replay 2"}]


def test_seed_agreement_counts_distinct_results(spark):
    """Configuration "same": three runs alike but for what is not a metric (seed, events,
    replay, the order of final_leader's entries): one result, same_results. "metric":
    one outcome, but one run's unavailable_ms differs by 1 ms: two results, not the
    same. "outcome": the same metrics, one run FAIL: two outcomes, no outcome named.
    "single": one run proves nothing."""
    leader = {"t-0": 1, "t-1": 2}
    rows = [verdict(config="same", seed=s, events=100 + s, final_leader=dict(sorted(leader.items(), reverse=s == 2)),
                    unavailable_ms=300) for s in (1, 2, 3)]
    rows += [verdict(config="metric", seed=s, unavailable_ms=300 + (s == 3)) for s in (1, 2, 3)]
    rows += [verdict(config="outcome", seed=s, outcome="FAIL" if s == 1 else "PASS") for s in (1, 2)]
    rows += [verdict(config="single", seed=1)]
    result = by(report.seed_agreement(verdicts(spark, rows)).collect(), "config")
    columns = ("runs", "outcomes", "results", "same_results", "outcome")
    assert {c: tuple(r[k] for k in columns) for c, r in result.items()} == {
        "same": (3, 1, 1, True, "PASS"), "metric": (3, 1, 2, False, "PASS"), "outcome": (2, 2, 2, False, None),
        "single": (1, 1, 1, False, "PASS")}
