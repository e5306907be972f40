"""Broker registration on restart in whole simulated runs: the host shows a 2.7 broker
that failed startup as down until a later restart; a 0.8 broker keeps retrying."""
from pathlib import Path

from analysis.history import load_history
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: quick-restart
cluster:
  brokers: 3
  profile: {profile}
  topics: [{{name: t, partitions: 1, replication_factor: 3}}]
workload:
  producers: [{{topic: t, acks: all, rate: 50}}]
faults:
  - {{at: 5s, crash: 3}}
  - {{at: 7s, restart: 3}}     # long before the old session's timeout
{later}duration: 50s
"""
# A 2.7 broker exits on its own: the schedule kills it (a no-op if it is down) and
# starts it again.
LATER = """  - {at: 39s, crash: 3}
  - {at: 40s, restart: 3}
"""


def run(profile: str, tmp_path: Path, later: str = ""):
    scenario = parse_scenario(SCENARIO.format(profile=profile, later=later), "quick-restart.yaml")
    result = run_scenario(scenario, 1, tmp_path)
    events = [e for e in load_history(result.trace_path).events if e.node in ("broker-3", "nemesis")]
    return result, events


def test_a_2_7_broker_restarted_within_the_session_timeout_exits_and_a_later_restart_brings_it_back(tmp_path):
    """Kafka 2.7.0 KafkaZkClient.registerBroker (checkedEphemeralCreate throws
    NODEEXISTS: the node's ephemeral owner is the killed process's session) and
    KafkaServer.startup / KafkaServerStartable.startup (fatal error: shut down, exit 1)."""
    result, events = run("kafka-2.7", tmp_path, LATER)
    halted = [e for e in events if e.type == "broker_halted"]
    assert len(halted) == 1 and 7000 <= halted[0].t_ms < 8000
    assert "registration" in halted[0]["reason"]
    conflict = [e for e in events if e.type == "broker_registration_conflict"]
    assert conflict and conflict[0]["action"] == "exit"
    registered = [e.t_ms for e in events if e.type == "broker_registered"]
    assert [t for t in registered if t > 5000] and min(t for t in registered if t > 5000) >= 40000
    started = [e.t_ms for e in events if e.type == "broker_started"]
    assert [t for t in started if 8000 < t < 40000] == []  # nothing restarted it before the fault at 40 s
    assert result.summary.settled


def test_a_0_8_broker_restarted_within_the_session_timeout_retries_and_registers(tmp_path):
    """Kafka 0.8.2.2 ZkUtils.registerBrokerInZk / createEphemeralPathExpectConflictHandleZKBug:
    the conflict is this broker's own old registration, so it backs off for the session
    timeout and retries until the old session has expired."""
    result, events = run("kafka-0.8", tmp_path)
    assert not [e for e in events if e.type == "broker_halted"]
    conflict = [e for e in events if e.type == "broker_registration_conflict"]
    assert conflict and all(e["action"] == "retry" for e in conflict)
    registered = [e.t_ms for e in events if e.type == "broker_registered" and e.t_ms > 5000]
    assert registered and 11000 <= registered[0] < 20000  # after the old session (6 s) expired
    assert result.summary.settled


SUPERVISED = """
name: supervised
cluster:
  brokers: 3
  supervisor: {{restart_after: 5s}}
  topics: [{{name: t, partitions: 1, replication_factor: 3}}]
workload:
  producers: [{{topic: t, acks: all, rate: 50}}]
faults:
  - {{at: 3s, {stop}: 2}}
  - {{at: 5s, restart: 2}}
duration: 40s
"""


def supervised_events(tmp_path: Path, stop: str):
    result = run_scenario(parse_scenario(SUPERVISED.format(stop=stop), "supervised.yaml"), 1, tmp_path)
    events = load_history(result.trace_path).events
    return result, [(e.t_ms, e.type) for e in events if e.type in (
        "supervisor_restarted", "broker_halted", "broker_registered") and e.node in ("broker-2", "world")]


def test_a_supervisor_restarts_a_broker_that_exited_until_its_registration_succeeds(tmp_path):
    """A 2.7 broker restarted while its old session lives exits (KafkaServer.startup,
    2.7.0); under a supervisor (systemd Restart=on-failure) it is started again every
    ``restart_after`` until the old session (18 s) has expired and it registers."""
    result, events = supervised_events(tmp_path, "crash")
    kinds = [k for _, k in events]
    assert kinds[0] == "broker_registered"  # the first start
    restarts = [t for t, k in events if k == "supervisor_restarted"]
    assert len(restarts) >= 2 and all(b - a >= 5000 for a, b in zip(restarts, restarts[1:]))
    assert kinds[-1] == "broker_registered" and kinds.count("broker_halted") == len(restarts)
    assert events[-1][0] >= 18000, "registered only once the old session (last heard before 3 s) expired"
    assert result.summary.settled


def test_a_supervisor_leaves_a_broker_stopped_on_request(tmp_path):
    """A controlled shutdown is a stop someone asked for (exit 0): not restarted."""
    _, events = supervised_events(tmp_path, "shutdown")
    assert ("supervisor_restarted" not in [k for _, k in events])
    assert [k for _, k in events].count("broker_halted") == 1
