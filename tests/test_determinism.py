"""The same scenario and seed give a byte-identical trace; different seeds differ."""
import hashlib
from pathlib import Path

import pytest

from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: determinism
cluster:
  brokers: 3
  topics: [{name: t, partitions: 3, replication_factor: 3}]
network: {latency_ms: 2, jitter_ms: 3, loss: 0.01}
workload:
  producers: [{topic: t, acks: all, rate: 300, keys: 7}, {topic: t, acks: 1, rate: 100}]
  consumers: [{topic: t}]
faults:
  - {at: 3s, isolate: 2}
  - {at: 6s, heal: true}
  - {at: 7s, power_loss: 3}
  - {at: 9s, restart: 3}
duration: 12s
"""


def digest(tmp_path: Path, seed: int, tag: str) -> str:
    scenario = parse_scenario(SCENARIO, "determinism.yaml")
    result = run_scenario(scenario, seed, tmp_path / f"{seed}-{tag}")
    return hashlib.sha256(result.trace_path.read_bytes()).hexdigest()


@pytest.mark.parametrize("seed", [1, 2, 3, 42])
def test_same_seed_gives_a_byte_identical_trace(tmp_path, seed):
    assert digest(tmp_path, seed, "a") == digest(tmp_path, seed, "b")


def test_different_seeds_give_different_traces(tmp_path):
    digests = {digest(tmp_path, seed, "x") for seed in (1, 2, 3)}
    assert len(digests) == 3
