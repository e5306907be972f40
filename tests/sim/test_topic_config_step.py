"""The topic_config step (kafka-configs.sh) in the simulation: enabling unclean election
for a topic whose only ISR member is dead."""
from analysis.history import load_history
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: topic-config
cluster:
  brokers: 3
  profile: {profile}
  config: {{unclean.leader.election.enable: false, replica.lag.time.max.ms: 3000}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
workload:
  producers: [{{topic: t, acks: 1, rate: 50}}]
faults:
  - {{at: 2s, crash: [2, 3]}}
  - {{when: {{partition: t-0, isr: [1]}}, crash: 1}}
  - {{at: 30s, restart: [2, 3]}}
{step}
duration: 50s
"""
STEP = "  - {at: 40s, topic_config: {topic: t, set: {unclean.leader.election.enable: true}}}"


def run(tmp_path, profile: str, step: str):
    scenario = parse_scenario(SCENARIO.format(profile=profile, step=step), "topic-config.yaml")
    result = run_scenario(scenario, 1, tmp_path)
    return result, load_history(result.trace_path)


def test_under_2_7_the_step_makes_the_controller_elect_an_unclean_leader_at_once(tmp_path):
    """2.7.0 TopicConfigHandler.processConfigChanges -> KafkaController
    .processTopicUncleanLeaderElectionEnable -> triggerOnlinePartitionStateChange("t"):
    t-0, leaderless since broker 1 (its only ISR member) died, gets broker 2 or 3 as an
    unclean leader right after the step, and broker 1's acknowledged writes are lost. Without the
    step t-0 waits for broker 1 (restarted by the final phase) and nothing is lost."""
    result, history = run(tmp_path / "step", "kafka-2.7", STEP)
    step = [e for e in history.events if e.type == "fault_started" and e["fault"] == "topic_config"]
    assert len(step) == 1 and step[0]["overrides"] == {"unclean.leader.election.enable": True}
    assert result.verdict.value("unclean_elections") == 1
    unclean = [e for e in history.events if e.type == "leader_elected" and e["unclean"]]
    assert 40000 <= unclean[0].t_ms < 40100 and unclean[0]["leader"] in (2, 3)
    assert result.verdict.value("lost_writes") > 0
    without, _ = run(tmp_path / "without", "kafka-2.7", "")
    assert without.verdict.value("unclean_elections") == 0 and without.verdict.value("lost_writes") == 0


def test_under_0_8_the_step_elects_nothing_and_broker_1_comes_back_clean(tmp_path):
    """0.8.2.2 TopicConfigManager gives the brokers' logs the new config, but the
    controller has no hook for it: no election follows the step. The next one (broker
    1's restart in the final phase, KafkaController.onBrokerStartup) finds broker 1, the
    ISR's last member, alive and elects it cleanly."""
    result, history = run(tmp_path, "kafka-0.8", STEP)
    changed = [e for e in history.events if e.type == "topic_config_changed" and 40000 <= e.t_ms < 50000]
    assert sorted(e.node for e in changed) == ["broker-2", "broker-3"]
    assert result.verdict.value("unclean_elections") == 0
    assert not [e for e in history.events if e.type == "leader_elected" and 40000 <= e.t_ms < 50000]
    assert result.verdict.value("lost_writes") == 0
