"""Whole simulated runs through the scenario runner."""
from pathlib import Path

from analysis.history import load_history
from analysis.summary import acknowledged_values
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

LEADER_CRASH = """
name: leader-crash-test
cluster:
  brokers: 3
  config: {min.insync.replicas: 2}
  topics: [{name: t, partitions: 2, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 200}]
faults:
  - {at: 5s, crash: 1}
  - {at: 30s, restart: 1}
duration: 45s
"""


def test_leader_crash_and_restart_recovers_and_loses_nothing_acknowledged(tmp_path: Path):
    scenario = parse_scenario(LEADER_CRASH, "leader-crash-test.yaml")
    result = run_scenario(scenario, 3, tmp_path)
    history = load_history(result.trace_path)
    elections = [e for e in history.events if e.type == "leader_elected" and e["election"] == "offline"]
    # broker 1 leads t-0 from the start (assignment [1, 2, 3]); its crash forces a new election
    assert any(e["partition"] == "t-0" and e["leader"] != 1 and not e["unclean"] for e in elections)
    acked = acknowledged_values(history)
    assert len(acked) > 3000
    late = [o for o in history.of("send") if o.outcome == "ok" and o.invoke.t_ms > 30000]
    assert late, "producing resumed after the new leader was elected"
    assert result.summary.settled and result.summary.final_read_complete
    assert result.summary.missing == ()
    assert result.summary.read_back >= len(acked)
    restarted = [e for e in history.events if e.type == "log_recovered" and e.node == "broker-1"]
    assert restarted, "the restarted broker recovered its log from disk"


def test_the_final_phase_can_restart_every_broker(tmp_path: Path):
    text = LEADER_CRASH.replace("duration: 45s", "duration: 45s\nfinal: {restart: all}")
    result = run_scenario(parse_scenario(text, "restart-all.yaml"), 3, tmp_path)
    history = load_history(result.trace_path)
    final_at = next(e.t_ms for e in history.events if e.type == "final_phase_started")
    recovered = {e.node for e in history.events if e.type == "log_recovered" and e.t_ms >= final_at}
    assert recovered == {"broker-1", "broker-2", "broker-3"}
    assert result.summary.settled and result.summary.missing == ()
