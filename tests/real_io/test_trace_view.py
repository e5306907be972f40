"""The real runner's cluster view (real_io/trace_view.py) follows each broker's own
trace. A simulated run's trace has the same events, and samples of every broker's true
state: between two samples, the events alone must bring the view to what the next
sample says, in every field a trigger reads but a replica's log end offset (the one
field no event brings forward, documented as lagging by a sample)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.nodes import broker_id_of
from real_io.trace_view import TraceClusterView, TraceTail
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"


def _compared(state: dict) -> dict:
    """What the events must keep exact: a leader's whole view; a follower's role, leader
    and epoch (its high watermark moves with fetch answers, which are not traced)."""
    keep = ("role", "leader", "leader_epoch", "isr", "high_watermark") if state["role"] == "leader" else (
        "role", "leader", "leader_epoch")
    return {k: state[k] for k in keep}


@pytest.mark.parametrize("filename, variant", [("jepsen-2013.yaml", "unclean"),
                                               ("controller-and-leader-failover.yaml", None)])
def test_events_keep_the_view_equal_to_the_next_sample(tmp_path, filename, variant):
    scenario = load_scenario(LIBRARY / filename)
    if variant is not None:
        scenario = {v.variant: v for v in scenario.variants}[variant]
    run_scenario(scenario, 3, tmp_path, judge=False)
    tails: dict[int, TraceTail] = {}
    compared = 0
    for line in (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        broker = broker_id_of(event["node"])
        if broker is None:
            continue
        tail = tails.setdefault(broker, TraceTail(broker, tmp_path / "unused"))
        if event["type"] == "replica_state":
            before = {p: _compared(s) for p, s in tail.partitions.items()}
            after = {p: _compared(s) for p, s in event["partitions"].items()}
            if before:  # the first sample of an incarnation has nothing before it
                assert before == after, f"t={event['t_ms']} {event['node']}"
                compared += 1
        tail.apply(event)
    assert compared > 100


def test_a_tail_reads_whole_lines_as_they_are_written_and_skips_a_line_cut_short(tmp_path):
    path = tmp_path / "broker-1-trace.jsonl"
    tail = TraceTail(1, path)
    tail.poll()  # no file yet: nothing
    assert tail.partitions == {}
    became = {"t_ms": 5, "node": "broker-1", "type": "became_leader", "partition": "t-0", "leader_epoch": 2,
              "isr": [1, 2], "log_end_offset": 7, "high_watermark": 4}
    text = json.dumps(became) + "\n"
    with open(path, "w") as stream:
        stream.write(json.dumps({"t_ms": 1, "node": "broker-1", "type": "broker_started"}) + "\n")
        stream.write(text[:20])  # half a line: not judged yet
    tail.poll()
    assert tail.partitions == {}
    with open(path, "a") as stream:
        stream.write(text[20:])
        stream.write('{"t_ms": 6, "node": "broker-1", "type": "isr_shr')  # a SIGKILL cut it here ...
        stream.write("\n" + json.dumps({"t_ms": 9, "node": "broker-1", "type": "controller_elected",
                                        "controller_epoch": 4}) + "\n")
    tail.poll()
    assert tail.partitions["t-0"]["role"] == "leader" and tail.partitions["t-0"]["leader"] == 1
    assert tail.partitions["t-0"]["isr"] == [1, 2]  # ... so the cut line changed nothing
    assert tail.controller_epoch == 4

    view = TraceClusterView({1: path}, lambda broker: 0, ["t-0", "t-1"])()
    assert view["controller"] == 1
    assert view["partitions"]["t-0"]["leader"] == 1 and view["partitions"]["t-0"]["high_watermark"] == 4
    assert view["partitions"]["t-1"]["leader"] is None
    # a broker the runner knows is down or paused shows nothing
    down = TraceClusterView({1: path}, lambda broker: None, ["t-0"])()
    assert down["controller"] is None and down["partitions"]["t-0"]["leader"] is None
    with open(path, "a") as stream:
        stream.write(json.dumps({"t_ms": 12, "node": "broker-1", "type": "broker_started"}) + "\n")
    tail.poll()
    assert tail.partitions == {} and tail.controller_epoch is None  # a new incarnation knows nothing yet


def test_a_new_incarnation_shows_nothing_until_it_says_it_started(tmp_path):
    """A SIGKILL writes nothing: until the restarted process says it started, the view
    must not show what its killed incarnation believed (a trigger on ``role: follower``
    fired on a broker still recovering, even when the view first looked after the
    restart)."""
    path = tmp_path / "trace.jsonl"
    started = {"t_ms": 1, "node": "broker-1", "type": "broker_started"}
    became = {"t_ms": 5, "node": "broker-1", "type": "became_follower", "partition": "t-0", "leader": 2,
              "leader_epoch": 0, "log_end_offset": 7, "high_watermark": 4}
    path.write_text(json.dumps(started) + "\n" + json.dumps(became) + "\n")  # an incarnation started at 0 ms
    processes = {1: 0}  # when the running process was started
    view = TraceClusterView({1: path}, lambda broker: processes[1], ["t-0"])
    assert view()["partitions"]["t-0"]["replicas"][1]["role"] == "follower"
    processes[1] = 8  # killed and started again at 8 ms; the new process has written nothing yet
    assert 1 not in view()["partitions"]["t-0"]["replicas"]
    fresh = TraceClusterView({1: path}, lambda broker: processes[1], ["t-0"])  # first look after the restart
    assert 1 not in fresh()["partitions"]["t-0"]["replicas"]
    with open(path, "a") as stream:
        stream.write(json.dumps({**started, "t_ms": 9}) + "\n")
        stream.write(json.dumps({**became, "t_ms": 10, "leader_epoch": 1}) + "\n")
    assert view()["partitions"]["t-0"]["replicas"][1]["leader_epoch"] == 1
    assert fresh()["partitions"]["t-0"]["replicas"][1]["leader_epoch"] == 1


def test_a_replica_deleted_by_stop_replica_leaves_the_view(tmp_path):
    """A reassignment's removed replica (or a deleted topic's) leaves its broker: the
    simulation's snapshot no longer lists it, and a broker left with no replica writes
    no further sample, so the tail must drop it at ``replicas_stopped`` with delete (else
    the settle check would see a second leader forever). Without delete it stays."""
    tail = TraceTail(1, tmp_path / "unused")
    state = {"role": "leader", "leader": 1, "leader_epoch": 1, "isr": [1, 2], "log_end_offset": 5,
             "high_watermark": 5, "log_start_offset": 0, "durable_offset": 0}
    tail.apply({"type": "replica_state", "partitions": {"t-0": state, "t-1": state}})
    tail.apply({"type": "replicas_stopped", "partitions": ["t-1"], "delete": False})
    assert sorted(tail.partitions) == ["t-0", "t-1"]
    tail.apply({"type": "replicas_stopped", "partitions": ["t-0"], "delete": True})
    assert sorted(tail.partitions) == ["t-1"]


def test_the_real_view_resolves_a_coordinator_role_as_the_simulation_did(tmp_path):
    """The real runner's view holds the __consumer_offsets partitions a coordinator role
    names (real_io/scenario_run.py adds faults/roles.py ``role_partitions``): built from
    each broker's own lines of a simulated run's trace up to the crash, it resolves
    ``{coordinator: g}`` to the broker the simulation's executor crashed."""
    import random

    from faults import model as fm
    from faults.roles import resolve_role, role_partitions
    scenario = load_scenario(LIBRARY / "group-coordinator-failover.yaml")
    run_scenario(scenario, 1, tmp_path / "run", judge=False)
    events = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    [crash] = [e for e in events if e["type"] == "fault_started"]
    traces: dict[int, Path] = {}
    for event in events:
        broker = broker_id_of(event["node"])
        if broker is not None and event["t_ms"] < crash["t_ms"]:
            traces.setdefault(broker, tmp_path / f"broker-{broker}.jsonl")
            with open(traces[broker], "a") as stream:
                stream.write(json.dumps(event) + "\n")
    faults = [step.fault for step in scenario.faults]
    partitions = ["t-0", "t-1", "t-2"] + role_partitions(faults)
    assert partitions[3:] == ["__consumer_offsets-1"]
    view = TraceClusterView(traces, lambda broker: 0, partitions)()
    [role] = fm.roles_of(faults[0])
    assert resolve_role(role, view, sorted(traces), random.Random(0)) == (crash["roles"]["coordinator: g"], "")
