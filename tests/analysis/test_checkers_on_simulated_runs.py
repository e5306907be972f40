"""The checkers on whole simulated runs: nothing on a benign run, and on a lossy run
the same lost writes the run summary reports."""
from pathlib import Path

from analysis.checkers import GROUPS_ONLY
from analysis.verdict import CHECKER_NAMES, Verdict, check_trace, evaluate
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

BENIGN = """
name: checkers-benign
cluster:
  brokers: 3
  config: {min.insync.replicas: 2}
  topics: [{name: t, partitions: 2, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 300}]
  consumers: [{topic: t}]
faults:
  - {at: 2s, crash: 1}
  - {at: 20s, restart: 1}   # after its old session expired: a 2.7 broker restarted sooner exits
duration: 24s
"""

# The old leader, cut off with its producer, keeps acknowledging acks=1 writes that the
# leader elected on the other side never has (kafka-0.8 rules).
LOSSY = """
name: checkers-lossy
cluster:
  brokers: 3
  profile: kafka-0.8
  config: {min.insync.replicas: 1}
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: 1, rate: 300, retries: 3}]
  consumers: [{topic: t}]
faults:
  - {at: 2s, partition: [[broker-1, producer-0, consumer-0], [broker-2, broker-3, zk]]}
  - {at: 8s, heal: network}
duration: 12s
"""


def run(text: str, tmp_path: Path, seed: int = 1):
    result = run_scenario(parse_scenario(text, "inline.yaml"), seed, tmp_path)
    return result, check_trace(result.trace_path)


def test_a_benign_run_loses_nothing_and_its_replicas_agree(tmp_path: Path):
    result, verdict = run(BENIGN, tmp_path)
    assert verdict.run_id == "checkers-benign-seed1" and verdict.scenario == "checkers-benign"
    assert verdict.value("lost_writes") == 0
    assert verdict.value("divergence") == 0
    assert verdict["divergence"].details["partitions_compared"] == 2
    assert verdict["lost_writes"].details["acknowledged_records"] == result.summary.acknowledged > 1000
    for name in ("duplicates", "inconsistent_offsets", "consumer_non_monotonic", "consumer_skips",
                 "consumer_truncated_reads"):
        assert verdict.value(name) == 0, (name, verdict[name].examples)
    assert verdict.value("unavailable_ms") > 0  # the crashed broker led t-0 until its session expired
    assert all(r.passed for r in evaluate(verdict, {"lost_writes": 0, "divergence": 0}))
    assert Verdict.from_json(verdict.to_json()) == verdict


def test_a_lossy_run_reports_the_lost_writes_the_summary_counts(tmp_path: Path):
    result, verdict = run(LOSSY, tmp_path)
    lost = verdict["lost_writes"]
    assert lost.value == result.summary.missing_count
    assert verdict.value("lost_writes_acks_1") == lost.value
    assert verdict.value("lost_writes_acks_all") == 0
    assert {e["value"] for e in lost.examples} <= set(result.summary.missing)
    assert all(e["acks"] == "1" and e["partition"] == "t-0" for e in lost.examples)
    # every checker's result, in order; the group checkers' only in runs with groups
    assert tuple(verdict.results) == tuple(n for n in CHECKER_NAMES if n not in GROUPS_ONLY)


# Every broker of the cluster is down for 19 s: no broker writes a sample meanwhile. (A
# 2.7 broker restarted while its old session still holds its registration exits, so
# the restart waits for the 18 s session timeout.)
BLACKOUT = """
name: checkers-blackout
cluster:
  brokers: 2
  topics: [{name: t, partitions: 1, replication_factor: 2}]
workload:
  producers: [{topic: t, acks: all, rate: 100}]
  consumers: [{topic: t}]
faults:
  - {at: 3s, crash: [1, 2]}
  - {at: 22s, restart: [1, 2]}
duration: 32s
"""


def test_a_whole_cluster_down_is_unavailable_for_at_least_its_outage(tmp_path: Path):
    """Issue 8, item 18: the sample-based measure read about 0 here."""
    _, verdict = run(BLACKOUT, tmp_path)
    unavailable = verdict["unavailable_ms"]
    assert 19000 <= unavailable.value < 29000, unavailable.examples
    assert unavailable.examples[0]["from_ms"] == 3000
    assert verdict.value("failed_but_present") == 0
    assert verdict.value("leader_elections") >= 1
    assert set(verdict.value("final_leader")) == {"t-0"} and verdict.value("final_leader")["t-0"] in (1, 2)
