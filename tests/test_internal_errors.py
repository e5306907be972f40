"""A bug inside the simulation is reported with the seed that replays it, never as a verdict."""
from dataclasses import replace

import pytest

from broker_core.errors import InvariantViolation
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.partition import Partition
from broker_core.log import PartitionLog
from broker_core.config import broker_config
from broker_core.types import TopicPartition
from scenarios.model import ProducerWorkload
from scenarios.parse import parse_scenario
from scenarios.runner import SimulationFailed, run_scenario


def test_a_leader_epoch_going_back_is_an_invariant_violation():
    tp = TopicPartition("t", 0)
    partition = Partition(1, tp, PartitionLog(tp, 1 << 30), broker_config())
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
    assert "seed 42" in str(info.value) and info.value.replay_command == "isrlab run boom.yaml --seed 42"
    assert "no-such-topic" in info.value.traceback_path.read_text()
