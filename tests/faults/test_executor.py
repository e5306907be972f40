"""faults/executor.py on a third binding: a small in-memory cluster (``ToyBinding``)
that implements faults/binding.py's Protocol and records what it was asked to do. It
shows the executor's books without a simulation or a process: ids, ``for:`` undo, heal,
roles, and a crash of a paused broker ending its pause."""
from __future__ import annotations

import random

import pytest

from faults import model as fm
from faults.executor import HANDLERS, UNDO, FaultExecutor


class ToyBinding:
    def __init__(self, brokers=(1, 2, 3), controller=1, refuse=()):
        self.alive = {b: True for b in brokers}
        self.paused = {b: False for b in brokers}
        self.controller = controller
        self.refuse = set(refuse)
        self.calls: list[tuple] = []
        self.events: list[tuple[str, dict]] = []
        self.links: dict[int, set] = {}
        self.clock = {b: 0 for b in brokers}
        self.connections = 0  # what reset_links answers

    def refusal(self, fault):
        return f"no {fm.kind_of(fault)} here" if type(fault) in self.refuse else None

    def trace(self, node, type_, fields):
        self.events.append((type_, fields))

    def cluster_view(self):
        return {"controller": self.controller,
                "partitions": {"t-0": {"leader": 2, "replicas": [1, 2, 3], "isr": [1, 2, 3]}}}

    def brokers(self):
        return sorted(self.alive)

    def is_alive(self, broker):
        return self.alive[broker]

    def is_paused(self, broker):
        return self.alive[broker] and self.paused[broker]  # a killed process is not stopped

    def crash(self, broker):
        self.calls.append(("crash", broker))
        self.alive[broker] = False

    power_loss = crash

    def shutdown(self, broker):
        self.calls.append(("shutdown", broker))
        self.alive[broker] = False

    def start(self, broker):
        self.calls.append(("start", broker))
        self.alive[broker], self.paused[broker] = True, False
        return True

    def pause(self, broker):
        self.calls.append(("pause", broker))
        self.paused[broker] = True

    def resume(self, broker):
        self.calls.append(("resume", broker))
        self.paused[broker] = False

    def network_nodes(self):
        return [f"broker-{b}" for b in self.alive] + ["zk"]

    def cut_links(self, fault_id, links):
        self.links[fault_id] = set(links)

    def degrade_links(self, fault_id, links, changes):
        self.links[fault_id] = set(links)

    def restore_links(self, fault_id):
        self.links.pop(fault_id, None)

    def heal_links(self):
        ended, self.links = sorted(self.links), {}
        return ended

    def reset_links(self, links):
        self.calls.append(("reset", sorted(links)))
        return self.connections


    def degrade_disk(self, broker, fault):
        self.calls.append(("degrade_disk", broker, fm.kind_of(fault)))

    def restore_disk(self, broker):
        self.calls.append(("restore_disk", broker))

    def flip_bit(self, broker, partition, rng):
        return {"path": f"{partition}/0.log", "byte": 7}

    def shift_clock(self, broker, delta_ms):
        self.clock[broker] += delta_ms

    def expire_session(self, broker):
        if not self.alive[broker]:
            return "it is not running"
        return lambda: self.calls.append(("expire", broker))

    def request_preferred_election(self, partitions):
        return list(partitions or ["t-0"]), True

    def change_topic_config(self, topic, config):
        return dict(config) if topic == "t" else None

    def change_client_quota(self, entity, config):
        return {k: v for k, v in config.items() if v is not None}


def executor(**kwargs) -> tuple[FaultExecutor, ToyBinding]:
    binding = ToyBinding(**kwargs)
    return FaultExecutor(binding, random.Random(1), random.Random(2)), binding


def kinds(binding, type_):
    return [(f["fault_id"], f["fault"]) for t, f in binding.events if t == type_]


def test_every_fault_class_has_a_handler_and_every_undoable_one_an_undo():
    assert set(HANDLERS) == set(fm.KINDS.values())
    assert set(UNDO) == set(fm.UNDOABLE)


def test_ids_count_up_and_instant_faults_end_as_they_start():
    run, toy = executor()
    assert run.apply(fm.Crash((1,))) == 1
    assert run.apply(fm.Restart((1,))) is None  # instant: no id to undo
    assert kinds(toy, "fault_started") == [(1, "crash"), (2, "restart")]
    assert kinds(toy, "fault_ended") == [(2, "restart"), (1, "crash")]  # the restart ended the crash
    assert run.active == {}


def test_for_undo_restarts_what_a_crash_stopped_and_ends_it_once_every_broker_runs():
    run, toy = executor()
    fault_id = run.apply(fm.Crash((1, 2)))
    assert toy.calls == [("crash", 1), ("crash", 2)] and fault_id in run.active
    run.undo(fault_id)
    assert toy.calls[2:] == [("start", 1), ("start", 2)]
    assert kinds(toy, "fault_ended") == [(fault_id, "crash")] and run.active == {}
    run.undo(fault_id)  # undoing an ended fault does nothing
    assert len(toy.calls) == 4


def test_a_fault_with_nothing_to_stop_is_traced_as_having_no_effect():
    run, toy = executor()
    run.apply(fm.Crash((3,)))
    assert run.apply(fm.Crash((3,))) is None
    assert toy.events[-2][1]["no_effect"] == "no running broker to stop"


def test_heal_all_ends_network_pause_disk_and_clock_faults_and_restarts_every_broker():
    run, toy = executor()
    cut = run.apply(fm.Isolate(("broker-1",)))
    paused = run.apply(fm.Pause((2,)))
    disk = run.apply(fm.DiskFull((3,)))
    clock = run.apply(fm.ClockJump((3,), 500))
    crashed = run.apply(fm.Shutdown((3,)))
    assert toy.links[cut] and toy.clock[3] == 500
    run.apply(fm.Heal("all"))
    assert run.active == {} and toy.links == {} and toy.clock[3] == 0
    assert {fid for fid, _ in kinds(toy, "fault_ended")} >= {cut, paused, disk, clock, crashed}
    assert ("resume", 2) in toy.calls and ("restore_disk", 3) in toy.calls and ("start", 3) in toy.calls


def test_heal_network_ends_only_the_network_faults():
    run, toy = executor()
    cut = run.apply(fm.Cut(("broker-1",), ("broker-2",)))
    paused = run.apply(fm.Pause((2,)))
    run.apply(fm.Heal("network"))
    assert cut not in run.active and paused in run.active


def test_roles_resolve_once_on_the_cluster_view_and_are_traced():
    run, toy = executor(controller=3)
    fault_id = run.apply(fm.Crash((fm.CONTROLLER, fm.Role("leader", "t-0"))))
    started = toy.events[0][1]
    assert started["targets"] == [3, 2] and started["roles"] == {"controller": 3, "leader: t-0": 2}
    toy.controller = 1  # a later view does not move the fault's targets
    run.undo(fault_id)
    assert toy.calls[-2:] == [("start", 2), ("start", 3)]


def test_a_role_that_resolves_to_nothing_makes_the_whole_fault_change_nothing():
    run, toy = executor(controller=None)
    assert run.apply(fm.Crash((fm.CONTROLLER, 2))) is None
    assert toy.calls == [] and toy.events[0][1]["no_effect"] == "controller resolved to no broker: no active controller"


def test_a_crash_of_a_paused_broker_ends_its_pause_and_the_pause_ends_once():
    run, toy = executor()
    paused = run.apply(fm.Pause((1, 2)))
    crashed = run.apply(fm.Crash((1,)))
    assert paused in run.active  # broker 2 is still frozen
    run.apply(fm.Crash((2,)))
    assert paused not in run.active and crashed in run.active
    assert [fid for fid, _ in kinds(toy, "fault_ended")] == [paused]
    run.undo(paused)  # the pause's ``for:`` runs out after the crash: nothing left to resume
    assert ("resume", 1) not in toy.calls and ("resume", 2) not in toy.calls


def test_a_refused_fault_raises_before_anything_changes():
    run, toy = executor(refuse={fm.ClockJump})
    with pytest.raises(ValueError, match="no clock here"):
        run.apply(fm.ClockJump((1,), 10))
    assert toy.events == [] and run.active == {}


def test_a_session_expiry_names_the_brokers_it_missed_and_acts_after_fault_started():
    run, toy = executor()
    run.apply(fm.Crash((1,)))
    toy.events.clear()
    run.apply(fm.ExpireSession((1, 2)))
    started = toy.events[0][1]
    assert started["targets"] == [2] and started["missed"] == ["broker 1: it is not running"]
    assert "no_effect" not in started and toy.calls[-1] == ("expire", 2)


def test_a_reset_resolves_its_roles_resets_both_directions_once_and_ends_at_once():
    run, toy = executor()
    toy.connections = 3
    assert run.apply(fm.Reset(((fm.Role("leader", "t-0"),), ("broker-1", "zk")))) is None
    assert toy.calls == [("reset", [("broker-1", "broker-2"), ("broker-2", "broker-1"), ("broker-2", "zk"),
                                    ("zk", "broker-2")])]
    started = [f for t, f in toy.events if t == "fault_started"][0]
    assert started["links"] == [["broker-1", "broker-2"], ["broker-2", "zk"]]
    assert started["connections"] == 3 and started["roles"] == {"leader: t-0": 2}
    assert started["targets"] == [["broker-2"], ["broker-1", "zk"]] and "no_effect" not in started
    assert kinds(toy, "fault_ended") == [(1, "reset")] and run.active == {}
    assert toy.links == {}  # nothing stays cut


def test_a_reset_that_found_no_connection_or_no_link_has_no_effect():
    run, toy = executor()
    run.apply(fm.Reset((("broker-1",), ("zk",))))
    run.apply(fm.Reset((("broker-1",), ("broker-1",))))
    effects = [f["no_effect"] for t, f in toy.events if t == "fault_started"]
    assert effects == ["no connection between them", "names no link"]
    assert toy.calls == [("reset", [("broker-1", "zk"), ("zk", "broker-1")])]  # no link: the binding is not asked
