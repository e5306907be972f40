"""The real binding refuses a scenario's reassign step before the run, with its reason
(real_io/real_faults.py UNSUPPORTED), as it refuses create_topic: its controller takes
reassignments from /admin/reassign_partitions in ZooKeeper, not from the scenario."""
from pathlib import Path

from real_io.scenario_run import refusals
from scenarios.parse import load_scenario

PATH = Path(__file__).resolve().parents[2] / "scenarios" / "library" / "reassign-throttled.yaml"


def test_reassign_step_is_refused_with_its_reason():
    found = [why for where, _, why in refusals(load_scenario(PATH), on_zookeeper=True) if where[-1] == "reassign"]
    assert len(found) == 1 and "/admin/reassign_partitions" in found[0]
