import simpy

from faults import model as fm
from faults.links import cut_links
from faults.rng import derive
from sim.network import LinkSpec, Network


def make(**link):
    env = simpy.Environment()
    net = Network(env, derive(1, "net"), LinkSpec(**link))
    got = {n: [] for n in ("a", "b", "c")}
    for name in got:
        net.add_node(name, lambda src, m, name=name: got[name].append((env.now, src, m)))
    return env, net, got


def test_links_are_fifo_despite_jitter():
    env, net, got = make(latency_ms=1, jitter_ms=5)
    for i in range(50):
        net.send("a", "b", i)
    env.run(until=100)
    assert [m for _, _, m in got["b"]] == list(range(50))


def test_isolate_split_and_heal():
    env, net, got = make(latency_ms=1, jitter_ms=0)
    net.add_cuts(1, cut_links(fm.Isolate(("a",)), net.nodes))
    net.send("a", "b", "waits")
    net.send("b", "c", "kept")
    net.send("a", "a", "loopback stays")
    env.run(until=10)
    assert got["b"] == [] and [m for *_, m in got["c"]] == ["kept"]
    assert [m for *_, m in got["a"]] == ["loopback stays"]
    assert net.heal() == [1]
    net.add_cuts(2, cut_links(fm.Split((("a", "b"), ("c",))), net.nodes))
    net.send("a", "b", 1)
    net.send("a", "c", 2)
    env.run(until=20)
    assert [m for *_, m in got["b"]] == ["waits", 1] and [m for *_, m in got["c"]] == ["kept"]
    assert ("a", "c") in net.cut_edges() and ("a", "b") not in net.cut_edges()


def test_ending_one_fault_keeps_the_cuts_of_another():
    env, net, got = make(latency_ms=1, jitter_ms=0)
    net.add_cuts(1, cut_links(fm.Cut(("a",), ("b",)), net.nodes))
    net.add_cuts(2, cut_links(fm.Isolate(("c",)), net.nodes))
    net.remove_cuts(2)
    assert net.cut_edges() == [("a", "b")]
    net.send("b", "a", "reply flows")
    net.send("a", "b", "request lost")
    env.run(until=5)
    assert [m for *_, m in got["a"]] == ["reply flows"] and got["b"] == []


def test_link_overrides_degrade_and_restore():
    env, net, got = make(latency_ms=1, jitter_ms=0)
    net.add_link_override(5, [("a", "b")], {"latency_ms": 50.0})
    net.send("a", "b", "slow")
    net.send("a", "c", "fast")
    env.run(until=20)
    assert got["b"] == [] and got["c"]
    env.run(until=60)
    assert got["b"][0][0] >= 50
    net.remove_link_override(5)
    assert net.link("a", "b").latency_ms == 1


def test_messages_wait_on_a_cut_link_and_arrive_in_order_after_the_heal():
    env, net, got = make(latency_ms=10, jitter_ms=0)
    net.send("a", "b", "in flight")
    env.run(until=5)
    net.add_cuts(1, cut_links(fm.Isolate(("b",)), net.nodes))
    net.send("a", "b", "sent while cut")
    env.run(until=50)
    assert got["b"] == []
    net.remove_cuts(1)
    net.send("a", "b", "sent after")
    env.run(until=100)
    assert [m for *_, m in got["b"]] == ["in flight", "sent while cut", "sent after"]


def test_a_message_held_longer_than_the_connection_lives_is_dropped():
    env = simpy.Environment()
    restarts = {"b": 0}
    net = Network(env, derive(1, "net"), LinkSpec(latency_ms=1, jitter_ms=0), hold_ms=1000,
                  incarnation=lambda node: restarts.get(node, 0))
    got = []
    net.add_node("a", lambda s, m: None)
    net.add_node("b", lambda s, m: got.append(m))
    net.add_cuts(1, cut_links(fm.Isolate(("b",)), net.nodes))
    net.send("a", "b", "old")
    env.run(until=2000)
    net.send("a", "b", "recent")
    restarts_before = dict(restarts)
    net.remove_cuts(1)
    env.run(until=2100)
    assert got == ["recent"] and restarts == restarts_before
    net.add_cuts(2, cut_links(fm.Isolate(("b",)), net.nodes))
    net.send("a", "b", "to a process that restarts")
    restarts["b"] += 1  # its connections died with it
    net.remove_cuts(2)
    env.run(until=2200)
    assert got == ["recent"]


def test_loss_is_drawn_from_the_seeded_stream():
    def delivered(seed):
        env = simpy.Environment()
        net = Network(env, derive(seed, "net"), LinkSpec(loss=0.5))
        got = []
        net.add_node("a", lambda s, m: None)
        net.add_node("b", lambda s, m: got.append(m))
        for i in range(200):
            net.send("a", "b", i)
        env.run(until=100)
        return got
    assert delivered(7) == delivered(7)
    assert delivered(7) != delivered(8)
    assert 50 < len(delivered(7)) < 150


def test_a_reset_loses_what_is_in_flight_or_held_both_ways_and_the_next_message_goes_through():
    env, net, got = make(latency_ms=10, jitter_ms=0)
    assert net.reset("a", "b") is False  # nothing was ever sent: no connection
    net.send("a", "b", "request in flight")
    net.send("b", "a", "answer in flight")
    net.send("a", "c", "elsewhere")
    env.run(until=5)
    net.add_cuts(1, cut_links(fm.Cut(("a",), ("b",)), net.nodes))
    net.send("a", "b", "held on the cut")
    assert net.reset("a", "b") is True
    net.send("b", "a", "after the reset")
    env.run(until=50)
    net.remove_cuts(1)  # the cut outlives the reset; what it held does not
    net.send("a", "b", "new connection")
    env.run(until=100)
    assert [m for *_, m in got["b"]] == ["new connection"]
    assert [m for *_, m in got["a"]] == ["after the reset"]
    assert [m for *_, m in got["c"]] == ["elsewhere"]
    assert net.reset("a", "b") is True and net.reset("a", "b") is False  # once reset, it is gone


def test_after_a_reset_answers_to_old_requests_are_lost_until_the_requester_restarts():
    env, net, got = make(latency_ms=1, jitter_ms=0)
    net.send("b", "a", "request 1")
    env.run(until=5)
    net.reset("a", "b", lambda dst, message: dst == "b" and message <= 1)
    net.send("a", "b", 1)  # the answer to request 1, which came on the old connection
    net.send("a", "b", 2)
    env.run(until=10)
    assert [m for *_, m in got["b"]] == [2]
    net.forget_connections("b")  # b's process died: a new one numbers its requests from 1 again
    net.send("a", "b", 1)
    env.run(until=15)
    assert [m for *_, m in got["b"]] == [2, 1]
    assert net.reset("a", "b") is True  # that answer opened a new connection


def test_a_reset_end_hears_of_it_at_once_before_any_other_event_of_the_instant():
    env, net, got = make(latency_ms=0, jitter_ms=0)
    order = []
    env.timeout(5).callbacks.append(lambda _e: (net.tell("a", "b", "reset"), order.append("reset fault")))
    env.timeout(5).callbacks.append(lambda _e: order.append(("b hears", list(got["b"]))))
    env.run(until=10)
    assert order == ["reset fault", ("b hears", [(5, "a", "reset")])]
