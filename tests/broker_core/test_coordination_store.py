from broker_core import coordination as coord
from broker_core.coordination_store import CoordinationStore, WatchEvent


def make():
    events = []
    store = CoordinationStore(lambda owner, event: events.append((owner, event)))
    return store, events


def test_ephemeral_nodes_vanish_with_their_session_and_fire_watches():
    store, events = make()
    a = store.create_session("a", 1000, now=0)
    b = store.create_session("b", 1000, now=0)
    assert store.request(a, coord.Create("/brokers/ids/1", b"{}", ephemeral=True, make_parents=True), 0).ok
    assert store.request(b, coord.GetChildren("/brokers/ids", watch=True), 0).children == ("1",)
    assert store.request(b, coord.Exists("/brokers/ids/1", watch=True), 0).ok
    store.touch(b, 900)
    store.expire_idle(1500)  # a has been silent for 1500 ms > 1000
    assert a not in store.sessions and b in store.sessions
    assert store.get("/brokers/ids/1") is None
    assert ("b", WatchEvent(b, "/brokers/ids/1", "deleted")) in events
    assert ("b", WatchEvent(b, "/brokers/ids", "children")) in events


def test_watches_fire_once():
    store, events = make()
    s = store.create_session("s", 1000, 0)
    store.put("/x", b"1")
    store.request(s, coord.GetData("/x", watch=True), 0)
    store.request(s, coord.SetData("/x", b"2"), 0)
    store.request(s, coord.SetData("/x", b"3"), 0)
    assert [e for _, e in events] == [WatchEvent(s, "/x", "changed")]


def test_compare_and_set_rejects_a_stale_version():
    store, _ = make()
    s = store.create_session("s", 1000, 0)
    store.put("/state", b"v0")
    first = store.request(s, coord.SetData("/state", b"v1", version=0), 0)
    assert first.ok and first.version == 1
    stale = store.request(s, coord.SetData("/state", b"v2", version=0), 0)
    assert not stale.ok and stale.error == coord.BAD_VERSION
    assert store.get("/state") == b"v1"


def test_a_multi_op_check_fences_a_replaced_controller():
    store, _ = make()
    s = store.create_session("s", 1000, 0)
    store.put("/controller_epoch", b"1")
    store.put("/state", b"x")
    store.request(s, coord.SetData("/controller_epoch", b"2", version=0), 0)
    reply = store.request(s, coord.SetData("/state", b"y", 0, check_path="/controller_epoch", check_version=0), 0)
    assert not reply.ok and reply.error == coord.CHECK_FAILED
    assert store.get("/state") == b"x"


def test_requests_on_an_expired_session_fail_and_creates_conflict():
    store, _ = make()
    s = store.create_session("s", 10, 0)
    assert store.request(s, coord.Create("/a", b""), 0).ok
    assert store.request(s, coord.Create("/a", b""), 0).error == coord.NODE_EXISTS
    assert store.request(s, coord.Create("/p/q", b""), 0).error == coord.NO_NODE
    store.expire_idle(100)
    assert store.request(s, coord.GetData("/a"), 100).error == coord.SESSION_EXPIRED
