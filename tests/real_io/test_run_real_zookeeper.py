"""``isrlab run --binding real --zk``: the broker keeps its metadata in a real ZooKeeper
(started by the test session), in a chroot of the run's own, and the run can expire its
session from outside, as ZooKeeper does for a client that is gone."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from analysis.trace import read_events
from scenarios.parse import load_scenario
from scenarios.runner import check_binding, run_scenario
from scenarios.source import ScenarioError

ROOT = Path(__file__).resolve().parents[2]

EXPIRING = """
name: expiring
cluster: {brokers: 1, config: {zookeeper.session.timeout.ms: 4000}, topics: [{name: t, partitions: 2}]}
workload: {producers: [{topic: t, acks: all, rate: 100}], consumers: [{topic: t}]}
faults:
  - {at: 2s, expire_session: 1}
duration: 6s
expect: {lost_writes: 0, acknowledged: ">100", faults_without_effect: 0}
"""


def _scenario(tmp_path: Path, text: str = EXPIRING):
    path = tmp_path / "expiring.yaml"
    path.write_text(text)
    return load_scenario(path)


@pytest.mark.slow
def test_an_expired_session_gives_the_same_verdict_simulated_and_on_zookeeper(zookeeper, tmp_path):
    """The broker's ZooKeeper session is taken over with its id and password and closed:
    its ephemeral /brokers/ids/1 goes, the core hears CoordSessionExpired and then a new
    session (2.7.0 KafkaZkClient / ZooKeeperClient.reinitialize), registers again and
    goes on leading; the verdict equals the simulated run's."""
    scenario = _scenario(tmp_path)
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real", zk=zookeeper.hosts)
    assert sim.passed and real.passed, ([e for e in real.evaluations if not e.passed], real.untested)
    assert {n: c.valid for n, c in real.verdict.results.items()} == {n: c.valid for n, c in sim.verdict.results.items()}
    events = list(read_events(real.trace_path))
    fault = next(e for e in events if e.type == "fault_started")
    assert (fault["fault"], fault["targets"], "no_effect" in fault.fields) == ("expire_session", [1], False)
    expired = [e for e in events if e.type == "session_expired" and e.node == "broker-1"]
    assert expired and expired[0].t_ms >= fault.t_ms, "the broker never heard its session expire"
    # it registered again on a new session and led to the end: every partition read back whole
    assert real.summary.final_read_complete and real.summary.settled
    assert real.verdict.value("acknowledged") > 100 and real.verdict.value("lost_writes") == 0
    # the run's chroot went with it
    admin = KazooClient(hosts=zookeeper.hosts)
    admin.start(timeout=10)
    try:
        assert admin.get_children("/isrlab-runs") == []
    finally:
        admin.stop()
        admin.close()
    assert f"--zk {zookeeper.hosts}" in real.replay_command


@pytest.mark.slow
def test_expiring_a_broker_that_is_down_is_said_to_have_changed_nothing(zookeeper, tmp_path):
    """A session cannot be expired on a broker that is not running: the fault is traced
    with ``no_effect`` and the run fails as one that tested nothing."""
    text = EXPIRING.replace("  - {at: 2s, expire_session: 1}",
                            "  - {at: 1s, crash: 1, for: 3s}\n  - {at: 2s, expire_session: 1}")
    real = run_scenario(_scenario(tmp_path, text), 1, tmp_path / "real", binding="real", zk=zookeeper.hosts)
    events = list(read_events(real.trace_path))
    expiry = next(e for e in events if e.type == "fault_started" and e["fault"] == "expire_session")
    assert expiry["targets"] == [] and "not running" in expiry["no_effect"]
    assert real.verdict.value("faults_without_effect") == 1 and not real.passed


def test_expire_session_needs_zookeeper(tmp_path):
    scenario = _scenario(tmp_path)
    with pytest.raises(ScenarioError) as refused:
        check_binding(scenario, "real")
    assert (refused.value.line, refused.value.field) == (6, "faults[0].expire_session")
    assert "--zk" in refused.value.message
    check_binding(scenario, "real", zk="127.0.0.1:2181")  # refused on the embedded store only
    result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(scenario.path), "--zk", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2 and "--zk is for --binding real" in result.stderr


def _run_cli(scenario, tmp_path, *extra):
    return subprocess.run([sys.executable, "-m", "isrlab", "run", str(scenario.path), "--binding", "real",
                           "--out", str(tmp_path / "out"), *extra], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_zookeeper_that_cannot_be_reached_is_named_and_exits_2(tmp_path):
    scenario = _scenario(tmp_path, EXPIRING.replace("  - {at: 2s, expire_session: 1}", "  - {at: 2s, crash: 1}"))
    result = _run_cli(scenario, tmp_path, "--zk", "127.0.0.1:1")
    assert result.returncode == 2, result.stderr
    assert "cannot reach ZooKeeper at 127.0.0.1:1" in result.stderr and "Traceback" not in result.stderr


def test_a_zookeeper_that_grants_another_session_timeout_is_refused(zookeeper, tmp_path):
    """The test's server ticks every 250 ms, so it grants 500 to 5000 ms: a scenario that
    asks for 6000 ms would run by a timeout the simulation does not model, and is
    refused before the broker starts, naming both numbers and the way out."""
    scenario = _scenario(tmp_path, EXPIRING.replace("zookeeper.session.timeout.ms: 4000",
                                                    "zookeeper.session.timeout.ms: 6000"))
    result = _run_cli(scenario, tmp_path, "--zk", zookeeper.hosts)
    assert result.returncode == 2, result.stderr
    assert "grants sessions of 5000 ms, not the 6000 ms the scenario asks" in result.stderr
    assert "isrlab zk start --tick-ms 3000" in result.stderr
    assert not (tmp_path / "out" / "real" / "broker-1-trace.jsonl").exists()  # nothing started


def test_a_broker_that_exits_while_starting_is_named_by_its_last_words(tmp_path):
    """The broker cannot use its data directory (a file stands in its place): it exits
    saying so, and the run passes that on in one line (exit 2), not as a timeout."""
    scenario = _scenario(tmp_path, EXPIRING.replace("  - {at: 2s, expire_session: 1}", "  - {at: 2s, crash: 1}"))
    (tmp_path / "out" / "real").mkdir(parents=True)
    (tmp_path / "out" / "real" / "broker-1-data").write_text("not a directory")
    result = _run_cli(scenario, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "the broker exited while starting: isrlab: serve: cannot use the data directory" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_the_library_crash_scenario_gives_the_same_verdict_on_zookeeper(zookeeper, tmp_path):
    """single-broker-crash (acks=all) with the metadata in ZooKeeper: the killed broker's
    session ends within the scenario's 2 s timeout, so the restarted broker registers
    again (2.7.0 KafkaZkClient.registerBroker) and the verdict equals the simulated one."""
    library = ROOT / "scenarios" / "library" / "single-broker-crash.yaml"
    scenario = next(v for v in load_scenario(library).variants if v.variant == "acks-all")
    sim = run_scenario(scenario, 1, tmp_path / "sim", binding="sim")
    real = run_scenario(scenario, 1, tmp_path / "real", binding="real", zk=zookeeper.hosts)
    assert sim.passed and real.passed, ([e for e in real.evaluations if not e.passed], real.untested)
    assert [(e.name, e.passed) for e in real.evaluations] == [(e.name, e.passed) for e in sim.evaluations]
    events = list(read_events(real.trace_path))
    assert [e.type for e in events if e.type in ("broker_registered", "broker_registration_conflict")] \
        == ["broker_registered", "broker_registered"]


def test_a_session_that_is_gone_or_never_published_is_named_not_expired(zookeeper, tmp_path):
    """The executor's two ways to miss: no session file yet (the broker has not
    connected), and a session ZooKeeper no longer knows (kazoo then opens a new one of
    its own, which must not count as the broker's session expired)."""
    from real_io.real_faults import expire_zk_session
    missing = tmp_path / "missing.zk-session"
    assert "has not published" in expire_zk_session(zookeeper.hosts, missing)
    gone = tmp_path / "gone.zk-session"
    gone.write_text('{"session_id": 12345, "password": "' + "00" * 16 + '"}')
    assert "0x3039 was already gone" in expire_zk_session(zookeeper.hosts, gone)
    live = KazooClient(hosts=zookeeper.hosts)
    live.start(timeout=10)
    try:
        session_id, password = live.client_id
        taken = tmp_path / "live.zk-session"
        taken.write_text(f'{{"session_id": {session_id}, "password": "{password.hex()}"}}')
        assert expire_zk_session(zookeeper.hosts, taken) is None
    finally:
        live.stop()
        live.close()
