"""The coordination binding against a real ZooKeeper: every op the core uses, each
error it maps, watches, the fenced multi-op write, and session expiry. The contract is
the simulated service's (sim/coordination.py), which these tests hold the binding to."""
from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from broker_core import coordination as coord
from broker_core.inputs import CoordSessionExpired, CoordSessionStarted, CoordWatchFired

from .driver import Driver


@pytest.fixture
def zk(zk_hosts):
    driver = Driver(zk_hosts)
    yield driver
    driver.close()


def test_the_session_id_is_kazoos_and_marks_ephemeral_nodes(zk, admin):
    """The core compares Reply.ephemeral_owner with the id from CoordSessionStarted
    (create_checked): both must be ZooKeeper's real session id."""
    assert zk.session_id == zk.binding.client_id[0] != 0
    assert zk.ask(coord.Create("/e", b"x", ephemeral=True)).ok
    reply = zk.ask(coord.GetData("/e"))
    assert (reply.ok, reply.data, reply.version, reply.ephemeral_owner) == (True, b"x", 0, zk.session_id)
    assert admin.get("/e")[1].ephemeralOwner == zk.session_id
    assert zk.ask(coord.Create("/p", b"y")).ok
    assert zk.ask(coord.GetData("/p")).ephemeral_owner == 0


def test_create_answers_node_exists_and_no_node_and_makes_parents(zk, admin):
    assert zk.ask(coord.Create("/a", b"1")) == coord.Reply(True, version=0)
    assert zk.ask(coord.Create("/a", b"2")).error == coord.NODE_EXISTS
    assert zk.ask(coord.Create("/x/y/z", b"3")).error == coord.NO_NODE
    assert zk.ask(coord.Create("/x/y/z", b"3", ephemeral=True, make_parents=True)).ok
    assert admin.get("/x/y/z")[0] == b"3"
    assert admin.get("/x/y")[1].ephemeralOwner == 0  # parents are persistent, as Kafka's are


def test_create_checked_recognises_its_own_ephemeral_node(zk, admin):
    """A resent create answering NODE_EXISTS on this session's own node is a success
    (2.7.0 KafkaZkClient.CheckedEphemeral.getAfterNodeExists); another session's is not."""
    runner_reply = _run_task(zk, coord.create_checked(coord.Create("/mine", b"m", ephemeral=True), zk.session_id))
    assert runner_reply.ok
    runner_reply = _run_task(zk, coord.create_checked(coord.Create("/mine", b"m", ephemeral=True), zk.session_id))
    assert runner_reply.ok and runner_reply.ephemeral_owner == zk.session_id
    admin.create("/theirs", b"t", ephemeral=True)
    theirs = _run_task(zk, coord.create_checked(coord.Create("/theirs", b"m", ephemeral=True), zk.session_id))
    assert theirs.error == coord.NODE_EXISTS and theirs.ephemeral_owner == admin.client_id[0]


def test_set_data_compares_versions(zk):
    zk.ask(coord.Create("/s", b"0"))
    assert zk.ask(coord.SetData("/s", b"1", version=0)) == coord.Reply(True, version=1)
    assert zk.ask(coord.SetData("/s", b"2", version=0)).error == coord.BAD_VERSION
    assert zk.ask(coord.SetData("/s", b"3")) == coord.Reply(True, version=2)  # ANY_VERSION
    assert zk.ask(coord.SetData("/missing", b"3")).error == coord.NO_NODE
    assert zk.ask(coord.GetData("/s")).data == b"3"


def test_a_write_fenced_by_a_newer_controller_epoch_fails_the_check(zk, admin):
    """The controller's fenced write (2.7.0 KafkaZkClient.updateLeaderAndIsr, a multi-op
    with checkControllerEpoch): once another controller bumped /controller_epoch, the
    write is refused as a whole with CHECK_FAILED and the partition state is untouched."""
    zk.ask(coord.Create("/controller_epoch", b"1"))
    zk.ask(coord.Create("/state", b"old"))
    fenced = coord.SetData("/state", b"new", version=0, check_path="/controller_epoch", check_version=0)
    admin.set("/controller_epoch", b"2")  # a newer controller
    assert zk.ask(fenced).error == coord.CHECK_FAILED
    assert admin.get("/state")[0] == b"old"
    assert zk.ask(coord.SetData("/state", b"new", version=0, check_path="/gone", check_version=0)).error \
        == coord.CHECK_FAILED
    # the check holds but the write itself is stale: its own error
    assert zk.ask(coord.SetData("/state", b"new", version=7, check_path="/controller_epoch", check_version=1)).error \
        == coord.BAD_VERSION
    assert zk.ask(coord.SetData("/state", b"new", version=0, check_path="/controller_epoch", check_version=1)) \
        == coord.Reply(True, version=1)
    assert admin.get("/state")[0] == b"new"


def test_children_exists_and_delete(zk):
    zk.ask(coord.Create("/d/b", b"", make_parents=True))
    zk.ask(coord.Create("/d/a", b""))
    reply = zk.ask(coord.GetChildren("/d"))
    assert reply.ok and reply.children == ("a", "b")
    assert zk.ask(coord.GetChildren("/nowhere")).error == coord.NO_NODE
    assert zk.ask(coord.Exists("/d/a")) == coord.Reply(True, version=0)
    assert zk.ask(coord.Exists("/nowhere")).error == coord.NO_NODE
    assert zk.ask(coord.Delete("/d")).error == coord.NOT_EMPTY
    assert zk.ask(coord.Delete("/d/a", version=3)).error == coord.BAD_VERSION
    assert zk.ask(coord.Delete("/d/a", version=0)).ok
    assert zk.ask(coord.Delete("/d/a")).error == coord.NO_NODE


def test_watches_fire_once_for_each_kind_of_change(zk, admin):
    zk.ask(coord.Exists("/w", watch=True))
    admin.create("/w", b"1")
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/w", "created")
    zk.ask(coord.GetData("/w", watch=True))
    zk.ask(coord.GetChildren("/w", watch=True))
    admin.set("/w", b"2")
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/w", "changed")
    admin.create("/w/c", b"")
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/w", "children")
    zk.ask(coord.Exists("/w/c", watch=True))
    admin.delete("/w/c")
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/w/c", "deleted")
    admin.set("/w", b"3")  # every watch was one-shot: nothing more fires
    assert zk.ask(coord.GetData("/w")).data == b"3"
    assert not any(isinstance(e, CoordWatchFired) for e in zk.seen)


def test_a_watched_read_of_a_missing_node_reports_its_creation(zk, admin):
    """The simulated service leaves a watch on a missing node read with GetData(watch);
    ZooKeeper does not, so the binding sets one with exists()."""
    assert zk.ask(coord.GetData("/later", watch=True)).error == coord.NO_NODE
    admin.create("/later", b"")
    assert zk.wait_for(lambda e: isinstance(e, CoordWatchFired)) == CoordWatchFired("/later", "created")


def test_replies_come_back_in_request_order(zk):
    """Even a create that kazoo splits into parent creates answers before what was asked after it."""
    ids = [zk.send(coord.Create("/deep/er/node", b"", make_parents=True))]
    ids += [zk.send(coord.Exists(f"/n{i}")) for i in range(20)]
    ids.append(zk.send(coord.GetData("/deep/er/node")))
    replies = [zk.binding.poll(10) for _ in ids]
    assert [r.request_id for r in replies] == ids
    assert replies[0].reply.ok and replies[-1].reply.ok


def test_session_expiry_is_delivered_and_a_new_session_started(zk_hosts, admin):
    """The session is closed from outside (another client takes it over with its id and
    password, then closes it): ZooKeeper deletes its ephemeral nodes, the core hears
    CoordSessionExpired for the old id and then CoordSessionStarted for a new one, as
    Kafka's KafkaZkClient re-creates its session (2.7.0 ZooKeeperClient.reinitialize)."""
    zk = Driver(zk_hosts)
    try:
        old = zk.session_id
        zk.ask(coord.Create("/brokers/ids/1", b"{}", ephemeral=True, make_parents=True))
        thief = KazooClient(hosts=zk_hosts, client_id=zk.binding.client_id)
        thief.start(timeout=10)
        thief.stop()  # closes the session for good
        thief.close()
        assert zk.wait_for(lambda e: isinstance(e, CoordSessionExpired), timeout_s=15) == CoordSessionExpired(old)
        started = zk.wait_for(lambda e: isinstance(e, CoordSessionStarted), timeout_s=15)
        assert started.session_id not in (old, None)
        assert admin.exists("/brokers/ids/1") is None
        assert zk.ask(coord.Create("/brokers/ids/1", b"{}", ephemeral=True)).ok
        assert admin.get("/brokers/ids/1")[1].ephemeralOwner == started.session_id
    finally:
        zk.close()


def test_answers_of_an_expired_session_are_dropped(zk_hosts):
    """After the core heard CoordSessionExpired it must not get answers of the old
    session (its tasks were abandoned), and what it asks before the new session starts
    is sent on the new session."""
    zk = Driver(zk_hosts)
    try:
        thief = KazooClient(hosts=zk_hosts, client_id=zk.binding.client_id)
        thief.start(timeout=10)
        thief.stop()
        thief.close()
        zk.send(coord.Exists("/"))  # may go out on the dying session
        expired = zk.wait_for(lambda e: isinstance(e, CoordSessionExpired), timeout_s=15)
        held = zk.send(coord.Create("/after", b"", ephemeral=True))
        started = zk.wait_for(lambda e: isinstance(e, CoordSessionStarted), timeout_s=15)
        assert expired.session_id != started.session_id
        reply = zk.reply_to(held)
        assert reply.ok
        assert zk.ask(coord.GetData("/after")).ephemeral_owner == started.session_id
    finally:
        zk.close()


def _run_task(zk: Driver, task):
    """Drive a coordination generator (create_checked, conditional_update) by hand."""
    reply = None
    try:
        op = task.send(None)
        while True:
            reply = zk.ask(op)
            op = task.send(reply)
    except StopIteration as stop:
        return stop.value
