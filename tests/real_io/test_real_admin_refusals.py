"""The real binding carries a scenario's admin steps out on ZooKeeper (a cluster run, or
one broker with --zk: real_io/zk_admin_store.py) and refuses them before the run only on
the embedded store, with its reason (real_io/real_faults.py UNSUPPORTED): there the
coordination store lives inside the broker process and the run cannot write the admin
tool's nodes. A topic's config at creation is refused there too (CreateTopics refuses
configs), and written as /config/topics/<t> on ZooKeeper."""
from pathlib import Path

import pytest

from real_io.real_faults import ADMIN_KINDS
from real_io.run_refusals import refusals
from scenarios.parse import load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
ADMIN_STEPS = {
    "topic_config": "{topic: t, set: {retention.ms: 1000}}",
    "client_quota": "{entity: clients/app, set: {producer_byte_rate: 1000}}",
    "create_topic": "{topic: u, partitions: 1, replication_factor: 1}",
    "delete_topic": "t",
    "create_partitions": "{topic: t, count: 2}",
    "reassign": "{t-0: [1]}",
    "preferred_replica_election": "[t-0]",
}


def test_the_library_reassignment_runs_on_a_cluster():
    """reassign-throttled.yaml (four brokers: a cluster run, always on ZooKeeper)."""
    assert refusals(load_scenario(LIBRARY / "reassign-throttled.yaml")) == []


@pytest.mark.parametrize("kind", sorted(ADMIN_KINDS))
def test_an_admin_step_is_refused_on_the_embedded_store_only(kind, tmp_path):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(f"name: admin\ncluster: {{brokers: 1, topics: [{{name: t}}]}}\n"
                    f"workload: {{producers: [{{topic: t}}]}}\nfaults:\n  - {{at: 1s, {kind}: {ADMIN_STEPS[kind]}}}\n"
                    "duration: 5s\n")
    scenario = load_scenario(path)
    found = [(where, line, why) for where, line, why in refusals(scenario) if where[:2] == ("faults", 0)]
    assert len(found) == 1 and found[0][1] == 5
    assert "embedded coordination store" in found[0][2] and "--zk" in found[0][2]
    assert refusals(scenario, on_zookeeper=True) == []


def test_a_topic_config_at_creation_needs_zookeeper(tmp_path):
    path = tmp_path / "configured.yaml"
    path.write_text("name: configured\ncluster:\n  brokers: 1\n  topics: [{name: t, config: {retention.ms: 1000}}]\n"
                    "workload: {producers: [{topic: t}]}\nduration: 5s\n")
    scenario = load_scenario(path)
    found = [why for where, _, why in refusals(scenario) if where == ("cluster", "topics", 0, "config")]
    assert len(found) == 1 and "INVALID_CONFIG" in found[0] and "--zk" in found[0]
    assert refusals(scenario, on_zookeeper=True) == []
