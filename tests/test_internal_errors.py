"""A bug inside the simulation is reported with the seed that replays it, never as a verdict."""
from dataclasses import replace

import pytest

from broker_core.errors import InvariantViolation
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.partition import Partition
from broker_core.config import broker_config
from broker_core.types import TopicPartition
from scenarios.model import ProducerWorkload
from scenarios.parse import parse_scenario
import pickle

from scenarios.runner import SimulationFailed, run_scenario, run_seeds
from tests.broker_core.logs import AppliedLog


def test_a_leader_epoch_going_back_is_an_invariant_violation():
    tp = TopicPartition("t", 0)
    partition = Partition(1, tp, AppliedLog(tp, 1 << 30), broker_config())
    partition.make_follower(PartitionState(LeaderAndIsr(2, 5, (1, 2), 1), (1, 2)))
    with pytest.raises(InvariantViolation, match="from 5 to 4"):
        partition.make_follower(PartitionState(LeaderAndIsr(2, 4, (1, 2), 1), (1, 2)))


def test_an_exception_in_the_simulation_names_the_seed_and_the_replay_command(tmp_path):
    # A scenario object the parser would have refused (a producer for a topic that does
    # not exist), handed straight to the runner: the world itself fails.
    scenario = parse_scenario("cluster: {brokers: 1, topics: [{name: t}]}\nduration: 2s\n", "boom.yaml")
    broken = replace(scenario, producers=(ProducerWorkload("no-such-topic"),))
    with pytest.raises(SimulationFailed) as info:
        run_scenario(broken, 42, tmp_path)
    assert "seed 42" in str(info.value) and info.value.replay_command.endswith(
        f"isrlab run boom.yaml --seed 42 --out {tmp_path}")
    assert "no-such-topic" in info.value.traceback_path.read_text()


def test_a_failing_seed_in_a_parallel_sweep_is_reported_as_in_a_single_run(tmp_path):
    scenario = parse_scenario("cluster: {brokers: 1, topics: [{name: t}]}\nduration: 2s\n", "boom.yaml")
    broken = replace(scenario, producers=(ProducerWorkload("no-such-topic"),))
    with pytest.raises(SimulationFailed) as info:
        run_seeds(broken, [7, 8, 9], tmp_path, jobs=2)
    failure = info.value
    assert failure.seed == 7 and f"isrlab run boom.yaml --seed {failure.seed} --out " in failure.replay_command
    assert failure.traceback_path == tmp_path / f"seed-{failure.seed}" / "error.txt"
    assert "no-such-topic" in failure.traceback_path.read_text()
    copy = pickle.loads(pickle.dumps(failure))
    assert (str(copy), copy.seed, copy.replay_command, copy.traceback_path) == (
        str(failure), failure.seed, failure.replay_command, failure.traceback_path)
