"""The create_topic, create_partitions and delete_topic steps (kafka-topics.sh against
the coordination store) in the simulation: the controller brings the new topic and
partitions online and deletes a topic's replicas on every broker, waiting for a crashed
one."""
from __future__ import annotations

from analysis.history import load_history
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: topic-admin
cluster:
  brokers: 3
  topics:
    - {{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}
    - {{name: old, partitions: 2, replication_factor: 3, assignment: {{0: [1, 2, 3], 1: [2, 3, 1]}}}}
workload:
  producers: [{{topic: t, acks: all, rate: 20}}]
faults:
  - {{at: 2s, create_topic: {{topic: fresh, assignment: {{0: [2, 3], 1: [3, 1]}}}}}}
  - {{at: 3s, create_partitions: {{topic: t, count: 3}}}}
{steps}
duration: 20s
"""


def run(tmp_path, steps: str):
    scenario = parse_scenario(SCENARIO.format(steps=steps), "topic-admin.yaml")
    result = run_scenario(scenario, 1, tmp_path)
    return result, load_history(result.trace_path)


def events(history, type_: str, **match):
    return [e for e in history.events if e.type == type_ and all(e[k] == v for k, v in match.items())]


def test_steps_create_a_topic_add_partitions_and_delete_a_topic(tmp_path):
    """AdminZkClient.createTopicWithAssignment, addPartitions and deleteTopic (2.7.0) as
    steps; KafkaController.processTopicChange, processPartitionModifications and
    TopicDeletionManager carry them out: leaders for the new partitions, every replica
    of the deleted topic deleted, its nodes gone (topic_deleted)."""
    result, history = run(tmp_path, "  - {at: 5s, delete_topic: old}")
    started = {e["fault"]: e for e in events(history, "fault_started")}
    assert started["create_topic"]["written"] == {"0": [2, 3], "1": [3, 1]}
    assert sorted(started["create_partitions"]["written"]) == ["1", "2"]
    elected = {e["partition"] for e in events(history, "leader_elected", election="initial")}
    assert {"fresh-0", "fresh-1", "t-1", "t-2"} <= elected
    assert events(history, "partitions_added", topic="t")[0]["partitions"] == ["t-1", "t-2"]
    deleted = events(history, "replica_deleted")
    assert sorted((e.node, e["partition"]) for e in deleted) == sorted(
        (f"broker-{b}", f"old-{p}") for b in (1, 2, 3) for p in (0, 1))
    assert len(events(history, "topic_deleted", topic="old")) == 1
    assert result.verdict.value("lost_writes") == 0


def test_a_deletion_waits_for_a_crashed_broker_and_completes_at_its_restart(tmp_path):
    """TopicDeletionManager (2.7.0): broker 3 is down when the deletion starts, so the
    topic is ineligible; brokers 1 and 2 delete their replicas at once, broker 3 its
    own after it restarts (onBrokerStartup -> resumeDeletionForTopics)."""
    steps = "\n".join(["  - {at: 4s, crash: 3}", "  - {at: 5s, delete_topic: old}", "  - {at: 12s, restart: 3}"])
    result, history = run(tmp_path, steps)
    assert events(history, "topic_deletion_ineligible", topic="old")
    deleted = events(history, "replica_deleted")
    early = {e.node for e in deleted if e.t_ms < 12000}
    late = {e.node for e in deleted if e.t_ms >= 12000}
    assert early == {"broker-1", "broker-2"} and late == {"broker-3"}
    done = events(history, "topic_deleted", topic="old")
    assert len(done) == 1 and done[0].t_ms >= 12000


def test_a_refused_step_is_recorded_and_changes_nothing(tmp_path):
    """kafka-topics.sh refuses a topic that does not exist and a partition count that is
    not an increase; the step records why (no_effect)."""
    steps = "\n".join(["  - {at: 5s, delete_topic: nope}", "  - {at: 6s, create_partitions: {topic: t, count: 2}}"])
    _, history = run(tmp_path, steps)
    refused = [e for e in events(history, "fault_started") if e.get("no_effect")]
    assert [e["no_effect"] for e in refused] == ["Topic `nope` to delete does not exist",
                                                "Topic currently has 3 partitions, which is higher than the requested 2."]
