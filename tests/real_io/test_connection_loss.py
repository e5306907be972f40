"""Connections lost at chosen moments (through a proxy the test stalls and cuts) between
the binding and a real ZooKeeper: a request in flight answers CONNECTION_LOSS, the core's
resend waits for the reconnect, and the session (with its ephemeral nodes) survives."""
from __future__ import annotations

import time

import pytest

from broker_core import coordination as coord
from broker_core.effects import CoordRequest, Trace
from broker_core.inputs import CoordReplied, CoordSessionExpired, CoordWatchFired

from .driver import Driver
from .proxy import Proxy


@pytest.fixture
def proxied(zookeeper, zk_hosts):
    proxy = Proxy((zookeeper.host, zookeeper.port))
    driver = Driver(f"127.0.0.1:{proxy.port}{zk_hosts[len(zookeeper.hosts):]}", session_timeout_ms=3000)
    yield proxy, driver
    driver.close()
    proxy.close()


def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_request_cut_off_answers_connection_loss_and_the_resend_waits_for_the_reconnect(proxied, admin):
    """2.7.0 ZooKeeperClient: a request whose connection drops fails with
    CONNECTIONLOSS, and KafkaZkClient.retryRequestsUntilConnected sends it again once
    connected. Watches kazoo dropped with the connection are reported fired, so the core
    reads again."""
    proxy, zk = proxied
    session = zk.session_id
    assert zk.ask(coord.Exists("/watched", watch=True)).error == coord.NO_NODE
    proxy.hold_requests.set()
    lost = zk.send(coord.Create("/n", b"1"))
    time.sleep(0.05)
    proxy.cut()  # the request never reached ZooKeeper
    assert zk.reply_to(lost) == coord.Reply(False, coord.CONNECTION_LOSS)
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/watched", "changed")
    assert admin.exists("/n") is None
    assert zk.ask(coord.Create("/n", b"1")).ok  # sent once reconnected, on the same session
    assert zk.binding.session_id == session
    assert not any(isinstance(e, CoordSessionExpired) for e in zk.seen)


def test_an_applied_create_whose_answer_was_lost_is_recognised_on_resend(proxied, admin):
    """The core's TaskRunner resends on CONNECTION_LOSS; the resent ephemeral create
    answers NODE_EXISTS and create_checked finds its own session owns the node (2.7.0
    KafkaZkClient.CheckedEphemeral.getAfterNodeExists): a success, not a conflict."""
    proxy, zk = proxied
    effects: list = []
    runner = coord.TaskRunner(effects.append, lambda: 0)
    outcome = {}

    def register():
        outcome["reply"] = yield from coord.create_checked(
            coord.Create("/brokers/ids/1", b"{}", ephemeral=True), zk.session_id)

    admin.ensure_path("/brokers/ids")
    proxy.hold_answers.set()
    runner.start(register())
    _route(effects, zk)
    _until(lambda: admin.exists("/brokers/ids/1") is not None)  # applied by ZooKeeper
    proxy.cut()  # ... and its answer is lost
    deadline = time.monotonic() + 10
    while "reply" not in outcome:
        assert time.monotonic() < deadline, effects
        event = zk.binding.poll(0.5)
        if isinstance(event, CoordReplied):
            runner.on_reply(event.request_id, event.reply)
            _route(effects, zk)
    reply = outcome["reply"]
    assert reply.ok and reply.ephemeral_owner == zk.session_id
    assert [e.type for e in effects if isinstance(e, Trace)] == ["coordination_request_retried"]
    assert admin.get("/brokers/ids/1")[1].ephemeralOwner == zk.session_id


def _route(effects: list, zk: Driver) -> None:
    for effect in [e for e in effects if isinstance(e, CoordRequest)]:
        effects.remove(effect)
        zk.binding.request(effect.request_id, effect.op)
