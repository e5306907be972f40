"""Issue 10: role targets (controller, leader, follower, random) resolve when their fault
starts, from the view ``when:`` triggers test; the trace records the broker each
resolved to, and a role that resolves to nothing makes the fault change nothing."""
import subprocess
import sys
from pathlib import Path

from analysis.history import load_history
from faults.nodes import broker_id_of
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

ROOT = Path(__file__).resolve().parents[2]
BASE = """
name: roles
cluster:
  brokers: 3
  config: {{min.insync.replicas: 1, replica.lag.time.max.ms: 2000, auto.leader.rebalance.enable: false}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
workload:
  producers: [{{topic: t, acks: 1, rate: 50}}]
faults:
{faults}
duration: {duration}
"""


def run(tmp_path: Path, faults: str, duration: str = "15s", seed: int = 1):
    text = BASE.format(faults=faults, duration=duration)
    result = run_scenario(parse_scenario(text, "roles.yaml"), seed, tmp_path / f"seed{seed}", plot=False)
    return result, load_history(result.trace_path)


def started(history, kind: str):
    return [e for e in history.events if e.type == "fault_started" and e["fault"] == kind]


def leader_at(history, t_ms: int) -> int:
    """The broker that last became leader of t-0 before ``t_ms``."""
    became = [e for e in history.events if e.type == "became_leader" and e["partition"] == "t-0" and e.t_ms <= t_ms]
    return broker_id_of(became[-1].node)


def test_a_crash_of_the_leader_crashes_the_broker_that_leads_when_it_starts(tmp_path):
    """A controlled shutdown moves t-0's leadership away from its first replica (1) and
    1 comes back as a follower: the role must find the new leader, not the assignment's
    first replica."""
    _, history = run(tmp_path, "  - {at: 2s, shutdown: 1}\n  - {at: 5s, restart: 1}\n"
                               "  - {at: 10s, crash: {leader: t-0}}")
    [crash] = started(history, "crash")
    leader = leader_at(history, 10000)
    assert leader != 1
    assert crash["targets"] == [leader] and crash["roles"] == {"leader: t-0": leader}
    assert crash["brokers"] == ["leader: t-0"] and "no_effect" not in crash.fields


def test_a_follower_role_picks_inside_or_outside_the_isr_as_asked(tmp_path):
    """Broker 3 is paused long enough to fall out of the ISR (replica.lag.time.max.ms
    2 s): ``isr: false`` can only be 3, ``isr: true`` only 2 (1 leads), and a plain
    follower is one of the two."""
    _, history = run(tmp_path, "  - {at: 1s, pause: 3, for: 12s}\n"
                               "  - {at: 8s, expire_session: {follower: t-0, isr: false}}\n"
                               "  - {at: 9s, clock: {broker: {follower: t-0, isr: true}, jump: 1s}}\n"
                               "  - {at: 10s, expire_session: {follower: t-0}}")
    outside, anyone = started(history, "expire_session")
    [inside] = started(history, "clock")
    changes = [e for e in history.events if e.type in ("isr_shrunk", "isr_expanded") and e.t_ms <= 10000]
    assert [e["isr"] for e in changes] == [[1, 2]] and leader_at(history, 10000) == 1
    assert outside["targets"] == [3] and outside["roles"] == {"follower: t-0, isr: false": 3}
    assert inside["targets"] == [2] and inside["roles"] == {"follower: t-0, isr: true": 2}
    assert anyone["targets"][0] in (2, 3)


def test_random_is_the_same_for_the_same_seed_and_varies_across_seeds(tmp_path):
    faults = "  - {at: 2s, crash: random, for: 1s}\n  - {at: 4s, isolate: random, for: 1s}"
    picks = {}
    for seed in range(1, 7):
        result, history = run(tmp_path, faults, duration="6s", seed=seed)
        picks[seed] = [started(history, k)[0]["roles"]["random"] for k in ("crash", "isolate")]
    again, _ = run(tmp_path / "again", faults, duration="6s", seed=3)
    first = (tmp_path / "seed3" / "trace.jsonl").read_bytes()
    assert again.trace_path.read_bytes() == first
    assert len({tuple(p) for p in picks.values()}) > 1
    assert all(b in (1, 2, 3) for p in picks.values() for b in p)


def test_a_leader_role_while_the_partition_has_no_leader_changes_nothing(tmp_path):
    """The crashed leader's session outlives it (zookeeper.session.timeout.ms 18 s), so
    nobody leads t-0 3 s later: the isolate cuts nothing and says why."""
    _, history = run(tmp_path, "  - {at: 2s, crash: {leader: t-0}}\n"
                               "  - {at: 5s, isolate: {leader: t-0}, for: 1s, optional: true}")
    [isolate] = started(history, "isolate")
    assert isolate["roles"] == {"leader: t-0": None} and isolate["targets"] == []
    assert isolate["no_effect"] == "leader: t-0 resolved to no broker: t-0 has no leader"
    # instant: nothing to undo
    assert [e.t_ms for e in history.events if e.type == "fault_ended" and e["fault"] == "isolate"] == [5000]


def test_a_role_resolved_into_another_partition_group_cuts_nothing(tmp_path):
    _, history = run(tmp_path, "  - {at: 3s, partition: [[{leader: t-0}], [1, 2, 3]], for: 1s, optional: true}")
    [split] = started(history, "partition")
    assert split["roles"] == {"leader: t-0": 1}
    assert split["no_effect"] == "broker-1 resolved into two groups"


def test_a_role_that_resolves_to_nothing_fails_the_run_unless_optional(tmp_path):
    """Every follower is in the ISR: ``{follower: t-0, isr: false}`` names no broker, the
    crash changes nothing, and the run does not pass (exit 1) unless the step is optional."""
    step = "  - {{at: 5s, crash: {{follower: t-0, isr: false}}{optional}}}"
    for optional, code in (("", 1), (", optional: true", 0)):
        scenario = tmp_path / f"roles{code}.yaml"
        scenario.write_text(BASE.format(faults=step.format(optional=optional), duration="8s"))
        out = tmp_path / f"out{code}"
        result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(scenario), "--out", str(out), "--no-plot"],
                                cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert result.returncode == code, result.stdout + result.stderr
        [crash] = started(load_history(out / "trace.jsonl"), "crash")
        assert crash["roles"] == {"follower: t-0, isr: false": None} and crash["targets"] == []
        assert crash["no_effect"] == "follower: t-0, isr: false resolved to no broker: t-0 has no running follower outside the ISR"
        block = result.stdout.split("what happened:")[1]
        assert "5s  crash  (nothing = follower of t-0 outside the ISR)  (changed nothing:" in block
        assert ("NOT TESTED: 1 scripted faults changed nothing; line 10: crash" in result.stdout) == (code == 1)


def test_the_console_names_the_role_beside_its_broker():
    from isrlab.cli import _roles
    assert _roles({"targets": [2], "roles": {"leader: t-0": 2}}) == " (leader of t-0)"
    assert _roles({"targets": [1, 3], "roles": {"follower: t-0, isr: true": 3}}) == " (3 = follower of t-0 in the ISR)"
    assert _roles({"targets": [[], []], "roles": {"controller": 2, "random": None}}) == " (2 = controller, nothing = random)"
    assert _roles({"targets": [1]}) == ""
    assert _roles({"targets": [3], "roles": {"coordinator: g": 3}}) == " (coordinator of group g)"
