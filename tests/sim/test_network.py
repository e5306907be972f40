import simpy

from sim.network import LinkSpec, Network
from sim.rng import derive


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
    net.isolate("a")
    net.send("a", "b", "lost")
    net.send("b", "c", "kept")
    env.run(until=10)
    assert got["b"] == [] and [m for *_, m in got["c"]] == ["kept"]
    net.heal()
    net.split([["a", "b"], ["c"]])
    net.send("a", "b", 1)
    net.send("a", "c", 2)
    env.run(until=20)
    assert [m for *_, m in got["b"]] == [1] and [m for *_, m in got["c"]] == ["kept"]
    assert ("a", "c") in net.cut_edges() and ("a", "b") not in net.cut_edges()


def test_a_message_in_flight_is_lost_when_its_link_is_cut():
    env, net, got = make(latency_ms=10, jitter_ms=0)
    net.send("a", "b", "x")
    env.run(until=5)
    net.isolate("b")
    env.run(until=50)
    assert got["b"] == []


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
