"""The ``reset`` fault in the simulation: every connection between two sets of nodes is
reset at one instant; what was on its way is lost, the ends hear it as a closed
connection, and a new connection works at once."""
from pathlib import Path

from analysis.history import load_history
from analysis.trace import read_events
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario

SCENARIO = """
name: reset
cluster:
  brokers: 3
  config: {{min.insync.replicas: 2, replica.socket.timeout.ms: 2000}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
network: {{latency_ms: {latency}, jitter_ms: 0}}
workload:
  producers:
{producers}
faults:
  - {{at: 5s, reset: {reset}}}
duration: 12s
"""
RESET_MS = 5000


def run(tmp_path: Path, reset: str, producers: str = "    - {topic: t, rate: 100}", latency: int = 1):
    text = SCENARIO.format(reset=reset, producers=producers, latency=latency)
    result = run_scenario(parse_scenario(text, "reset.yaml"), 1, tmp_path)
    return result, list(read_events(result.trace_path))


def started(events) -> dict:
    return next(e for e in events if e.type == "fault_started" and e["fault"] == "reset")


def test_a_producer_hears_the_reset_fails_its_requests_in_flight_and_retries_them(tmp_path):
    # 20 ms each way: a producer always has requests on their way or parked at the leader
    result, events = run(tmp_path, "{between: [{leader: t-0}, [producer-0, producer-1]]}", latency=20,
                         producers="    - {topic: t, rate: 100, retries: 0}\n"
                                   "    - {topic: t, rate: 100, retries: 5, retry_backoff: 100ms}")
    fault = started(events)
    assert fault["targets"] == [["broker-1"], ["producer-0", "producer-1"]] and fault["connections"] == 2
    assert fault.get("no_effect") is None
    operations = load_history(result.trace_path).operations
    in_flight = [o for o in operations if o.invoke.t_ms < RESET_MS <= o.completion.t_ms]
    without_retries = [o.completion for o in in_flight if o.process == "producer-0"]
    with_retries = [o.completion for o in in_flight if o.process == "producer-1"]
    assert without_retries and with_retries
    # at the reset's instant, outcome unknown: the connection carrying them is gone
    assert all(e.type == "info" and e["reason"] == "connection_reset" and e.t_ms == RESET_MS for e in without_retries)
    # sent again after the backoff, on a new connection, and acknowledged
    assert all(e.type == "ok" and e.t_ms >= RESET_MS + 100 for e in with_retries)
    assert result.verdict.value("lost_writes") == 0
    later = [o for o in operations if o.process == "producer-0" and o.invoke.t_ms > RESET_MS]
    assert later[0].outcome == "ok" and later[0].completion.t_ms < RESET_MS + 500  # nothing stays cut


def test_a_reset_between_brokers_loses_the_fetch_the_leader_holds_and_the_follower_resumes(tmp_path):
    # one record a second: the followers' fetches wait at the leader (long poll) almost all the time
    result, events = run(tmp_path, "{between: [{leader: t-0}, {follower: t-0}]}",
                         producers="    - {topic: t, rate: 1, linger: 1ms}")
    fault = started(events)
    follower = fault["roles"]["follower: t-0"]
    assert fault["connections"] == 1
    timed_out = [e for e in events if e.type == "fetch_timed_out"]
    # replica.socket.timeout.ms + replica.fetch.wait.max.ms after the lost fetch was sent
    assert [e.node for e in timed_out] == [f"broker-{follower}"]
    assert RESET_MS + 2000 <= timed_out[0].t_ms <= RESET_MS + 2500
    assert timed_out[0]["leader"] == fault["roles"]["leader: t-0"]
    # it fetches again at once: later records reach it and it never leaves the ISR
    last = [e for e in events if e.type == "replica_state" and e.node == f"broker-{follower}"][-1]
    leader = [e for e in events if e.type == "replica_state" and e.node == f"broker-{fault['roles']['leader: t-0']}"][-1]
    assert last["partitions"]["t-0"]["log_end_offset"] == leader["partitions"]["t-0"]["log_end_offset"] >= 10
    assert not [e for e in events if e.type == "isr_shrunk"]
    assert result.passed


def test_a_reset_of_a_brokers_coordination_connection_is_heard_at_once(tmp_path):
    _, events = run(tmp_path, "{between: [controller, zk]}")
    fault = started(events)
    broker = f"broker-{fault['roles']['controller']}"
    lost = [e for e in events if e.type == "coordination_connection_lost"]
    assert [(e.node, e.t_ms) for e in lost] == [(broker, RESET_MS)]
    assert [e.node for e in events if e.type == "coordination_reconnected"] == [broker]
    assert not [e for e in events if e.type in ("session_expired_at_service", "leader_elected") and e.t_ms > RESET_MS]


def test_a_reset_where_no_connection_exists_has_no_effect_and_the_run_does_not_pass(tmp_path):
    result, events = run(tmp_path, "{between: [producer-0, zk]}")
    fault = started(events)
    assert fault["no_effect"] == "no connection between them" and fault["connections"] == 0
    assert result.verdict.value("faults_without_effect") == 1 and not result.passed
