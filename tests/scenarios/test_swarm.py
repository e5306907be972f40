"""The ``swarm:`` block: strict validation naming file, line and field; each seed draws
its own corner (kinds, knobs, schedule), the same one every time; a drawn run is an
ordinary scenario that ``drawn.yaml`` replays byte for byte."""
import hashlib

import pytest

from faults import model as fm

from scenarios.parse import load_scenario, parse_scenario
from scenarios.runner import run_scenario
from scenarios.source import ScenarioError
from scenarios.explore.draw import DRAWN_FILE, drawn_scenario

BASE = """\
name: sw
cluster:
  brokers: 3
  profile: kafka-0.8
  topics: [{name: t}]
workload:
  producers: [{topic: t, acks: all, rate: 50}]
duration: 20s
"""


def scenario(swarm: str):
    return parse_scenario(BASE + swarm, "sw.yaml")


@pytest.mark.parametrize("block, line, field, words", [
    ("swarm:\n  faults: [crash, meteor]\n", 10, "swarm.faults[1]", "unknown fault kind 'meteor'; known: crash"),
    ("swarm:\n  choose: most\n", 10, "swarm.choose", "must be some or all"),
    ("swarm:\n  rate: [8, 2]\n", 10, "swarm.rate", "low is above high"),
    ("swarm:\n  for: [1s, 20]\n", 10, "swarm.for[1]", "20 needs a unit"),
    ("swarm:\n  roles: 2\n", 10, "swarm.roles", "must be between 0 and 1"),
    ("swarm:\n  config:\n    min.insync.replicas: [1, 0]\n", 11, "swarm.config.min.insync.replicas[1]", "at least 1"),
    ("swarm:\n  config:\n    replica.lag.time.max.ms: {min: 100}\n", 11, "swarm.config.replica.lag.time.max.ms.max",
     "is required"),
    ("swarm:\n  config:\n    no.such.key: [1]\n", 11, "swarm.config.no.such.key[0]", "unknown configuration key"),
    ("swarm:\n  start: 30s\n", 10, "swarm.start", "not before the end of the run"),
    ("swarm:\n  crash: 1\n", 10, "swarm.crash", "unknown key 'crash'"),
])
def test_a_bad_swarm_block_is_an_error_naming_its_line_and_field(block, line, field, words):
    with pytest.raises(ScenarioError) as caught:
        scenario(block)
    error = caught.value
    assert (error.filename, error.line, error.field) == ("sw.yaml", line, field), str(error)
    assert words in error.message


def test_each_seed_draws_its_own_kinds_knobs_and_schedule_and_the_same_every_time():
    swarm = scenario("swarm:\n  faults: [crash, pause, isolate, partition, cut, clock]\n"
                     "  config:\n    min.insync.replicas: [1, 2]\n    replica.lag.time.max.ms: {min: 2000, max: 9000}\n")
    drawn = {seed: drawn_scenario(swarm, seed) for seed in range(1, 21)}
    assert drawn_scenario(swarm, 7)[1] == drawn[7][1]
    assert len({text for _, text in drawn.values()}) == 20
    knobs = [s.cluster.config for s, _ in drawn.values()]
    assert {k["min.insync.replicas"] for k in knobs} == {1, 2}
    assert all(2000 <= k["replica.lag.time.max.ms"] <= 9000 for k in knobs)
    kinds = [frozenset(type(step.fault).__name__ for step in s.faults) for s, _ in drawn.values()]
    assert len(set(kinds)) > 5  # the seeds stress different corners
    allowed = {"Crash", "Pause", "Isolate", "Split", "RandomHalves", "Cut", "ClockJump", "Restart", "Resume"}
    assert set().union(*kinds) <= allowed
    for s, _ in drawn.values():
        assert s.name == "sw" and s.path == "sw.yaml" and s.swarm is None


def test_a_drawn_role_or_trigger_and_every_kind_validate():
    swarm = scenario("swarm:\n  choose: all\n  roles: 1\n  triggers: 1\n  rate: 30\n")
    steps = [step for seed in range(1, 6) for step in drawn_scenario(swarm, seed)[0].faults]
    assert any(step.when is not None for step in steps)
    assert all(step.when is not None or type(step.fault).__name__ in ("Restart", "Resume") for step in steps)
    every = scenario("swarm:\n  choose: all\n  rate: 60\n")
    kinds = {type(step.fault).__name__ for seed in range(1, 8) for step in drawn_scenario(every, seed)[0].faults}
    assert len(kinds) >= 20, kinds


# sha256 of the texts seeds 1-10 draw with every kind on (``choose: all``) and with the
# swarm's own choice of kinds, as drawn before slow_nodes was added: the searches the
# tests size (tests/test_mutants.py's explorer rows) draw what they drew.
DRAWS_BEFORE_SLOW_NODES = {
    "swarm:\n  choose: all\n  roles: 0.5\n  triggers: 0.5\n  rate: 30\n":
        "8136393a002a64fa7d61cfd0eece5d249df382af7cc5d829825ced803cd5f203",
    "swarm:\n  rate: 30\n": "0c22d3315bf59c504d4f4a4a26bba7d54c906d56632091b78e5d7a9cde6555f7",
}


@pytest.mark.parametrize("block", sorted(DRAWS_BEFORE_SLOW_NODES))
def test_the_default_kinds_leave_slow_nodes_out_and_draw_what_they_drew(block):
    swarm = scenario(block)
    assert "slow_nodes" not in swarm.swarm.kinds
    texts = "".join(drawn_scenario(swarm, seed)[1] for seed in range(1, 11))
    assert hashlib.sha256(texts.encode()).hexdigest() == DRAWS_BEFORE_SLOW_NODES[block]


def test_slow_nodes_slows_every_link_of_one_node_or_of_it_and_zk_with_a_jitter():
    swarm = scenario("swarm:\n  faults: [slow_nodes]\n  rate: 30\n")
    steps = [step for seed in range(1, 11) for step in drawn_scenario(swarm, seed)[0].faults]
    assert len(steps) > 20
    sides = set()
    for step in steps:
        fault = step.fault
        assert type(fault).__name__ == "LinkFault" and fault.symmetric and step.for_ms, step
        assert fault.destinations == ("broker-1", "broker-2", "broker-3", "zk"), fault.destinations
        assert fault.jitter_ms in (20, 50, 100) and fault.latency_ms is None and fault.loss is None
        assert 1 <= len(fault.sources) <= 2 and (len(fault.sources) == 1 or fault.sources[1] == "zk")
        sides.add(len(fault.sources))
    assert sides == {1, 2}


@pytest.mark.slow
def test_isrlab_run_of_a_swarm_file_draws_per_seed_and_its_drawn_file_replays_the_trace(tmp_path):
    path = tmp_path / "sw.yaml"
    path.write_text(BASE + "swarm:\n  faults: [crash, isolate, pause]\n  rate: 12\n", encoding="utf-8")
    swarm = load_scenario(path)
    seed = next(s for s in range(1, 20) if any(step.when is None for step in drawn_scenario(swarm, s)[0].faults))
    first = run_scenario(swarm, seed, tmp_path / "a")
    again = run_scenario(swarm, seed, tmp_path / "b")
    digest = lambda result: hashlib.sha256(result.trace_path.read_bytes()).hexdigest()  # noqa: E731
    assert digest(first) == digest(again)
    assert first.verdict.value("faults_applied") > 0
    drawn_path = tmp_path / "a" / DRAWN_FILE
    replayed = run_scenario(load_scenario(drawn_path), seed, tmp_path / "c")
    assert digest(replayed) == digest(first)
    assert first.replay_command.split(" run ")[1].startswith(str(path))


def test_a_base_with_group_consumers_also_draws_the_coordinator_role():
    """The fifth role (scenarios/explore/generate.py) is drawn only when the base has
    group consumers; each drawn one names one of its groups and validates."""
    groups = BASE.replace("duration:", "  consumers:\n    - {group: g, topic: t, members: 2}\n"
                                       "    - {group: h, topic: t}\nduration:")
    block = "swarm:\n  faults: [crash, pause, isolate]\n  roles: 1\n  rate: 30\n"
    drawn = [drawn_scenario(parse_scenario(groups + block, "sw.yaml"), seed)[0] for seed in range(1, 6)]
    coordinators = {str(role) for s in drawn for step in s.faults for role in fm.roles_of(step.fault)
                    if getattr(role, "group", None) is not None}
    assert coordinators == {"coordinator: g", "coordinator: h"}
    plain = [drawn_scenario(scenario(block), seed)[0] for seed in range(1, 6)]
    assert not [r for s in plain for step in s.faults for r in fm.roles_of(step.fault) if getattr(r, "group", None)]
