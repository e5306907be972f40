"""KIP-219's muted channel in the simulation (sim/broker_host.py): after a throttled
answer the broker reads nothing more from that client until the throttle time has
passed, even from a client that does not wait (2.7.0 SocketServer Processor: a channel
CHANNEL_MUTED_AND_THROTTLED is not read until its ThrottledChannel expires); and the
simulated clients wait on their own (2.7.0 NetworkClient: a throttled node is not ready)."""
import random

import simpy

from broker_core.config import broker_config
from broker_core.effect_loop import carry_out_effects
from broker_core.effects import MuteConnection
from broker_core.messages import MetadataRequest, ProduceResponse
from sim.broker_host import BrokerHost
from sim.clients import SimClient
from sim.disk import SimDisk
from sim.network import LinkSpec, Network


def _world():
    env = simpy.Environment()
    network = Network(env, random.Random(0), LinkSpec(1, 0, 0))
    host = BrokerHost(env, network, 1, broker_config("kafka-2.7", {}), {}, SimDisk(env), lambda *fields: None)
    got: list[tuple[float, object]] = []
    network.add_node("impatient", lambda src, message: got.append((env.now, message)))
    host.start()
    return env, network, host, got


def test_a_muted_client_is_not_read_until_the_mute_ends_and_then_in_order():
    env, network, host, got = _world()
    carry_out_effects([MuteConnection("impatient", 500)], host)
    network.send("impatient", "broker-1", MetadataRequest(1))
    network.send("impatient", "broker-1", MetadataRequest(2))
    env.run(until=499)
    assert got == []  # sent at once, but unread while muted
    env.run(until=510)
    assert [m.correlation_id for _, m in got] == [1, 2] and all(t >= 500 for t, _ in got)


def test_a_crash_forgets_the_mutes_with_the_connections():
    env, network, host, got = _world()
    carry_out_effects([MuteConnection("impatient", 10_000)], host)
    host.crash(reset_connections=False)
    host.start()
    network.send("impatient", "broker-1", MetadataRequest(1))
    env.run(until=100)
    assert [getattr(m, "correlation_id", None) for _, m in got] == [1]


class _Recorder(SimClient):
    def on_response(self, context, message):
        self.answers.append(self.env.now)


def test_a_simulated_client_holds_its_next_request_to_a_throttled_broker():
    """2.7.0 NetworkClient.maybeThrottle / ClusterConnectionStates.throttle (KIP-219)."""
    env = simpy.Environment()
    network = Network(env, random.Random(0), LinkSpec(1, 0, 0))
    sent: list[float] = []
    network.add_node("broker-1", lambda src, message: sent.append(env.now))
    client = _Recorder(env, network, "c", [1], lambda *a: None)
    client.answers = []
    client.request(1, lambda cid: MetadataRequest(cid), "first")
    env.run(until=5)
    client._receive("broker-1", ProduceResponse(1, {}, throttle_time_ms=300))
    assert client.throttled(1) and not client.reachable(1)
    client.request(1, lambda cid: MetadataRequest(cid), "second")
    env.run(until=400)
    assert sent[0] < 5 and 300 <= sent[1] - 5 < 310


def test_a_mute_extended_while_requests_wait_holds_them_until_its_later_end():
    """KIP-219: a channel stays muted until its last ThrottledChannel expires. Forced: a
    second throttled answer (the simulation's broker answers pipelined requests) extends
    the mute after the first mute's release was scheduled; the waiting requests are read
    at the later end, not the earlier (the request quota's throttled scenario caught it)."""
    env, network, host, got = _world()
    carry_out_effects([MuteConnection("impatient", 300)], host)
    network.send("impatient", "broker-1", MetadataRequest(1))  # held: its release is set for 300
    env.run(until=100)
    carry_out_effects([MuteConnection("impatient", 700)], host)  # extended while it waits
    env.run(until=650)
    assert got == []
    env.run(until=710)
    assert [m.correlation_id for _, m in got] == [1] and got[0][0] >= 700
