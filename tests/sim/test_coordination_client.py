"""The simulated coordination client and service on the simulated network, as unkind as
ZooKeeper through its client: a cut link fails the requests in flight with
CONNECTION_LOSS, the client reconnects to its session, and the core's TaskRunner sends
them again. No answer cache: a resend is applied again."""
from __future__ import annotations

import simpy

from broker_core import coordination as coord
from broker_core.effects import CoordRequest, Trace
from broker_core.inputs import CoordReplied, CoordSessionExpired, CoordSessionStarted
from sim.coordination import SERVICE, CoordinationClient, CoordinationService
from sim.network import LinkSpec, Network
from faults.rng import derive

NAME = "broker-1"
TIMEOUT_MS = 6000


class Rig:
    """One client (with a real TaskRunner) and the service, on a seeded network."""

    def __init__(self, seed: int = 1):
        self.env = env = simpy.Environment()
        self.network = network = Network(env, derive(seed, "network"), LinkSpec(latency_ms=1.0, jitter_ms=0.0))
        self.service = CoordinationService(env, lambda dst, m: network.send(SERVICE, dst, m), lambda *a: None)
        network.add_node(SERVICE, self.service.handle)
        self.traces: list[tuple[float, str, dict]] = []
        self.sent: list[tuple[float, object]] = []
        self.sessions: list[object] = []
        self.runner = coord.TaskRunner(self._emit, lambda: int(env.now))
        self.client = CoordinationClient(
            env, NAME, TIMEOUT_MS, lambda m: network.send(NAME, SERVICE, m), self._deliver,
            discard=lambda: network.discard_held(NAME, SERVICE),
            trace=lambda type_, fields: self.traces.append((env.now, type_, dict(fields))))
        network.add_node(NAME, lambda src, m: self.client.handle(m))
        self.client.connect()
        env.run(until=10)
        assert self.client.connected

    def _emit(self, effect) -> None:
        if isinstance(effect, CoordRequest):
            self.sent.append((self.env.now, effect.op))
            self.client.request(effect.request_id, effect.op)
        elif isinstance(effect, Trace):
            self.traces.append((self.env.now, effect.type, dict(effect.fields)))

    def _deliver(self, event) -> None:
        if isinstance(event, CoordReplied):
            self.runner.on_reply(event.request_id, event.reply)
        elif isinstance(event, (CoordSessionStarted, CoordSessionExpired)):
            self.sessions.append(event)

    def cut(self, *edges) -> int:
        self.network.add_cuts(99, edges)
        return 99

    def traced(self, type_: str) -> list[tuple[float, dict]]:
        return [(t, f) for t, ty, f in self.traces if ty == type_]


def create_task(rig: Rig, results: list):
    def task():
        reply = yield from coord.create_checked(
            coord.Create("/brokers/ids/1", b"me", ephemeral=True, make_parents=True), rig.client.session_id)
        results.append(reply)
    return task()


def test_a_request_in_flight_when_the_link_is_cut_fails_with_connection_loss_and_is_sent_again_after_reconnect():
    """ZooKeeper's ClientCnxn fails every pending request with CONNECTIONLOSS when its
    read timeout (two thirds of the session timeout) passes in silence; Kafka 2.7.0
    KafkaZkClient.retryRequestsUntilConnected waits for the reconnect and sends them
    again. The first attempt, held on the cut link, went with the abandoned connection."""
    rig = Rig()
    results: list = []
    rig.cut((NAME, SERVICE), (SERVICE, NAME))
    rig.runner.start(create_task(rig, results))
    rig.env.run(until=5500)
    lost = rig.traced("coordination_connection_lost")
    assert lost and lost[0][1]["requests_lost"] == 1
    assert 4000 <= lost[0][0] <= 5000, "given up after two thirds of the session timeout"
    assert [f for _, f in rig.traced("coordination_request_retried")] == [
        {"op": "Create", "path": "/brokers/ids/1", "error": coord.CONNECTION_LOSS}]
    assert results == [] and rig.service.store.get("/brokers/ids/1") is None
    rig.network.remove_cuts(99)  # back before the session expires at the service
    rig.env.run(until=6000)
    assert rig.traced("coordination_reconnected")
    assert len(results) == 1 and results[0].ok
    assert [type(op).__name__ for _, op in rig.sent] == ["Create", "Create"]  # no NODE_EXISTS: sent once
    assert rig.service.store.znodes["/brokers/ids/1"].ephemeral_owner == rig.client.session_id
    assert len(rig.sessions) == 1  # the same session throughout


def test_an_applied_create_whose_answer_was_lost_answers_node_exists_when_resent_and_is_its_own():
    """The answer is cut off after the service applied the create: the resend answers
    NODE_EXISTS (no answer cache) and Kafka 2.7.0 CheckedEphemeral.getAfterNodeExists
    finds this session the node's ephemeral owner: success."""
    rig = Rig()
    results: list = []
    rig.cut((SERVICE, NAME))  # requests arrive, answers do not
    rig.runner.start(create_task(rig, results))
    rig.env.run(until=5500)
    assert rig.service.store.get("/brokers/ids/1") == b"me"  # applied the first time
    assert rig.traced("coordination_connection_lost") and results == []
    rig.network.remove_cuts(99)
    rig.env.run(until=6000)
    assert len(results) == 1 and results[0].ok
    assert [type(op).__name__ for _, op in rig.sent] == ["Create", "Create", "GetData"]
    assert len(rig.sessions) == 1


def test_a_link_cut_past_the_session_timeout_expires_the_session_instead():
    """When the service expired the session before the client got back, the reconnect is
    refused and the core hears of the expiry (ZooKeeper's SESSIONEXPIRED): the new
    session starts over; the old request's task is the core's to abandon."""
    rig = Rig()
    results: list = []
    rig.cut((NAME, SERVICE), (SERVICE, NAME))
    rig.runner.start(create_task(rig, results))
    rig.env.run(until=9000)
    rig.network.remove_cuts(99)
    rig.env.run(until=13000)
    assert [type(e).__name__ for e in rig.sessions[1:]] == ["CoordSessionExpired", "CoordSessionStarted"]
    assert rig.service.store.get("/brokers/ids/1") is None  # never applied: its socket was given up


ZK_ANSWER_CUT = """
name: zk-answer-cut
cluster:
  brokers: 3
  config: {min.insync.replicas: 2, replica.lag.time.max.ms: 2000, isr_change_protocol: zookeeper}
  topics: [{name: t, partitions: 1, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
workload:
  producers: [{topic: t, acks: all, rate: 100}]
faults:
  - {at: 5s, cut: {from: 3, to: 1}}             # the follower's fetches are lost: the leader shrinks the ISR
  - {at: 6s, cut: {from: zk, to: 1}, for: 10s}  # ... and the answer to that write is lost
duration: 30s
"""


def test_a_whole_run_where_the_answer_to_an_isr_write_is_cut_off_retries_it_and_takes_its_own_write(tmp_path):
    """End to end, from a seed: the leader's ISR shrink (Kafka 2.7.0
    ReplicationUtils.updateLeaderAndIsr) reaches the service, its answer does not; the
    client gives the connection up, the core resends after the reconnect, the resend
    answers BAD_VERSION and checkLeaderAndIsrZkData finds the leader's own data."""
    from analysis.history import load_history
    from scenarios.parse import parse_scenario
    from scenarios.runner import run_scenario
    result = run_scenario(parse_scenario(ZK_ANSWER_CUT, "zk-answer-cut.yaml"), 1, tmp_path)
    events = [e for e in load_history(result.trace_path).events if e.node == "broker-1"]
    kinds = [e.type for e in events if e.type.startswith("coordination_") or e.type.startswith("isr_")]
    assert kinds[:4] == ["coordination_connection_lost", "coordination_request_retried",
                         "coordination_reconnected", "isr_shrunk"]
    lost = next(e for e in events if e.type == "coordination_connection_lost")
    shrunk = next(e for e in events if e.type == "isr_shrunk")
    assert lost["requests_lost"] == 1 and 16000 <= shrunk.t_ms < 16100  # after the cut ends at 16 s
    assert shrunk["isr"] == [1, 2] and shrunk["zk_version"] == 1  # the first write's version: applied once
    assert "isr_update_conflict" not in kinds
    assert result.summary.missing == () and result.summary.settled
