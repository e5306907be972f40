"""How a sweep is cut into configurations and tasks (no Spark needed)."""
from __future__ import annotations

import pytest

from spark_reports.sweep import MAX_SEEDS_PER_TASK, SweepError, parse_grid, plan_configs, plan_tasks
from tests.spark_reports.conftest import JEPSEN


def test_a_grid_is_the_product_of_its_axes():
    assert parse_grid(["a.b=1,2", "c=x,y,z"]) == [[f"a.b={i}", f"c={x}"] for i in "12" for x in "xyz"]
    assert parse_grid([]) == [[]]


@pytest.mark.parametrize("bad", ["a.b", "a.b=", "=1,2", "a.b=1,,2"])
def test_a_malformed_grid_is_refused(bad):
    with pytest.raises(SweepError, match="expected key=value1,value2"):
        parse_grid([bad])


def test_configurations_are_every_variant_at_every_grid_point_with_their_replay_command():
    configs = plan_configs(str(JEPSEN), None, ["cluster.config.min.insync.replicas=1,2"])
    assert [c.label for c in configs] == [
        "unclean|cluster.config.min.insync.replicas=1", "safe|cluster.config.min.insync.replicas=1",
        "unclean|cluster.config.min.insync.replicas=2", "safe|cluster.config.min.insync.replicas=2"]
    last = configs[-1]
    assert last.scenario.cluster.config["min.insync.replicas"] == 2
    before, after = last.replay_parts
    assert f"{before} --seed 9{after}".endswith(
        f"run {JEPSEN} --seed 9 --variant safe --set cluster.config.min.insync.replicas=2")


def test_tasks_cover_every_seed_of_every_configuration_once():
    seeds = list(range(1, 1001))
    tasks = plan_tasks(3, seeds, parallelism=2)
    for config in range(3):
        covered = [s for c, chunk in tasks if c == config for s in chunk]
        assert covered == seeds
    assert max(len(chunk) for _, chunk in tasks) == MAX_SEEDS_PER_TASK
    # guided: each task about half of what is left per core, down to one seed at the
    # end, and never two configurations in one task
    small = plan_tasks(2, list(range(1, 21)), parallelism=2)
    assert small == [(0, tuple(range(1, 11))), (0, tuple(range(11, 19))), (0, (19, 20)), (1, (1, 2, 3, 4, 5)),
                     (1, (6, 7, 8, 9)), (1, (10, 11, 12)), (1, (13, 14)), (1, (15, 16)), (1, (17,)), (1, (18,)),
                     (1, (19,)), (1, (20,))]
    assert [len(chunk) for _, chunk in plan_tasks(1, list(range(200)), parallelism=2)] == [
        25, 25, 25, 25, 25, 19, 14, 11, 8, 6, 5, 3, 3, 2, 1, 1, 1, 1]
