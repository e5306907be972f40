"""The scenario step that asks for a preferred leader election, run in the simulation."""
from analysis.history import load_history
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: preferred
cluster:
  brokers: 3
  config: {{min.insync.replicas: 2, auto.leader.rebalance.enable: {auto}}}
  topics: [{{name: t, partitions: 2, replication_factor: 3, assignment: {{0: [1, 2, 3], 1: [2, 3, 1]}}}}]
workload:
  producers: [{{topic: t, acks: all, rate: 100}}]
faults:
  - {{at: 3s, crash: 1}}
  - {{at: 25s, restart: 1}}
{step}
duration: 45s
"""


def run(tmp_path, step: str, auto: str = "false"):
    scenario = parse_scenario(SCENARIO.format(step=step, auto=auto), "preferred.yaml")
    result = run_scenario(scenario, 1, tmp_path)
    return result, load_history(result.trace_path)


def elections(history, **match):
    return [e for e in history.events if e.type == "leader_elected" and all(e.get(k) == v for k, v in match.items())]


def test_the_step_writes_the_request_and_the_controller_elects_the_preferred_replica(tmp_path):
    """kafka-preferred-replica-election.sh (2.7.0 PreferredReplicaLeaderElectionCommand,
    0.8.2.2 likewise) writes /admin/preferred_replica_election; 2.7.0 KafkaController
    handles it with onReplicaElection(PREFERRED): t-0's leadership returns to broker 1,
    its preferred replica; t-1, led by its preferred replica 2, needs nothing."""
    result, history = run(tmp_path, "  - {at: 40s, preferred_replica_election: all}")
    step = [e for e in history.events if e.type == "fault_started" and e["fault"] == "preferred_replica_election"]
    assert len(step) == 1 and step[0]["requested"] == ["t-0", "t-1"] and step[0]["written"]
    moved = [e for e in elections(history, partition="t-0") if 3000 < e.t_ms < 40000]
    assert moved and moved[-1]["leader"] != 1, "broker 1's crash moved t-0's leadership away"
    preferred = elections(history, election="preferred")
    assert [(e["partition"], e["leader"]) for e in preferred] == [("t-0", 1)]
    assert preferred[0].t_ms >= 40000 and preferred[0].node != "nemesis"
    assert result.verdict.value("lost_writes") == 0


def test_without_the_step_and_without_auto_rebalance_leadership_stays_moved(tmp_path):
    _, history = run(tmp_path, "")
    assert not elections(history, election="preferred")


def test_auto_rebalance_checks_5s_after_the_controller_starts_then_every_interval(tmp_path):
    """2.7.0 KafkaController.onControllerFailover schedules the first imbalance check 5 s
    after failover and processAutoPreferredReplicaLeaderElection the next ones every
    leader.imbalance.check.interval.seconds (0.8.2.2: the same, as a periodic task).
    Broker 1 controlled, so its crash makes broker 2 controller at about 18 s: its first
    check (23 s) comes before broker 1 is back (25 s), and by default (300 s) the next
    one is after this run; with a 10 s interval it is at 33 s and elects broker 1."""
    _, default = run(tmp_path / "default", "", auto="true")
    assert not elections(default, election="preferred")
    _, often = run(tmp_path / "often", "", auto="true, leader.imbalance.check.interval.seconds: 10")
    started = [e for e in often.events if e.type == "controller_started"][-1]
    preferred = elections(often, election="preferred")
    assert [(e["partition"], e["leader"]) for e in preferred] == [("t-0", 1)]
    assert 0 <= preferred[0].t_ms - (started.t_ms + 5000 + 10000) <= 50
