"""The real binding's ``reset``: refused before the run without a fault proxy; with a real
one (real_io/fault_proxy.py), the shared executor resets the connections between two
nodes through it, both directions, and nothing stays cut."""
from __future__ import annotations

import random
import socket

import pytest

from faults import model as fm
from real_io.fault_proxy_client import FaultProxyProcess
from real_io.real_faults import RealFaultBinding, RealFaultExecutor
from real_io.scenario_run import refusals
from scenarios.parse import parse_scenario
from tests.real_io.test_fault_proxy import Target, connect, is_closed, receive

RESET = fm.Reset((("broker-1",), ("producer-0",)))


def no_view() -> dict:
    return {"controller": None, "partitions": {}}


@pytest.fixture
def proxy(tmp_path):
    process = FaultProxyProcess(stderr_path=tmp_path / "proxy-stderr")
    client = process.start()
    yield client
    process.stop()
    assert process.process.returncode == 0 and (tmp_path / "proxy-stderr").read_text() == ""


@pytest.fixture
def target():
    server = Target()
    yield server
    server.close()


def test_without_a_proxy_a_reset_is_refused_with_the_reason():
    why = RealFaultBinding({}, lambda *a: None, no_view).refusal(RESET)
    assert why == ("the real binding cannot apply reset: needs the fault proxy on the links "
                   "(real_io/fault_proxy.py), which only a cluster run has")


def test_a_scenario_with_a_reset_is_refused_before_a_real_run_without_a_proxy():
    scenario = parse_scenario(
        "cluster: {brokers: 1, topics: [{name: t, partitions: 1, replication_factor: 1}]}\n"
        "workload: {producers: [{topic: t}]}\n"
        "faults:\n  - {at: 1s, reset: {between: [1, producer-0]}}\nduration: 5s\n", "r.yaml")
    found = [(path, line, why) for path, line, why in refusals(scenario, False) if path[:2] == ("faults", 0)]
    assert found == [(("faults", 0, "reset"), 4, "the real binding cannot apply reset: needs the fault proxy on "
                      "the links (real_io/fault_proxy.py), which only a cluster run has")]


def test_through_the_proxy_a_reset_closes_both_directions_and_a_new_connection_works(proxy, target):
    events: list[tuple[str, dict]] = []
    run = RealFaultExecutor(RealFaultBinding({}, lambda node, type_, fields: events.append((type_, fields)), no_view,
                                             proxy=proxy), random.Random(1))
    assert run.binding.refusal(RESET) is None
    requests = connect(proxy, "producer-0", "broker-1", target)
    answers = connect(proxy, "broker-1", "producer-0", target)
    bystander = connect(proxy, "broker-2", "broker-1", target)
    requests[0].sendall(b"in flight")
    assert receive(requests[1], 9) == b"in flight"
    run.apply(RESET)
    started = [fields for type_, fields in events if type_ == "fault_started"]
    assert started[0]["connections"] == 2 and started[0]["links"] == [["broker-1", "producer-0"]]
    assert "no_effect" not in started[0]
    assert [type_ for type_, _ in events] == ["fault_started", "fault_ended"]
    assert all(is_closed(sock) for sock in (*requests, *answers))
    bystander[0].sendall(b"still")
    assert receive(bystander[1], 5) == b"still"
    again = connect(proxy, "producer-0", "broker-1", target)  # nothing stays cut
    again[0].sendall(b"new")
    assert receive(again[1], 3) == b"new"
    run.apply(RESET)  # the new connection is the only one left between them
    run.apply(RESET)
    last = [fields for type_, fields in events if type_ == "fault_started"][-2:]
    assert [f["connections"] for f in last] == [1, 0] and last[1]["no_effect"] == "no connection between them"
    assert is_closed(again[0])
    for sock in (*requests, *answers, *bystander, *again):
        sock.close()


def test_a_reset_of_nodes_the_proxy_has_no_link_for_has_no_effect(proxy):
    events: list[tuple[str, dict]] = []
    run = RealFaultExecutor(RealFaultBinding({}, lambda node, type_, fields: events.append((type_, fields)), no_view,
                                             proxy=proxy), random.Random(1))
    run.apply(RESET)
    assert events[0][1]["no_effect"] == "names no link" and events[0][1]["connections"] == 0
