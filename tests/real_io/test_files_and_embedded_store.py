"""The data directory (real_io/files.py) and the embedded coordination store
(real_io/embedded_coordination.py) on real files."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.inputs import CoordReplied, CoordSessionStarted, CoordWatchFired
from real_io.embedded_coordination import SNAPSHOT_FILE, EmbeddedCoordination
from real_io.files import DataDir


def test_file_effects_land_on_disk_and_a_restart_reads_them(tmp_path):
    data = DataDir(tmp_path)
    data.write("t-0/0.log", 0, b"hello world")
    data.write("t-0/0.log", 6, b"there")
    data.truncate("t-0/0.log", 8)
    data.replace("checkpoint", b"v1")
    data.replace("checkpoint", b"v2")
    data.write("t-0/gone", 0, b"x")
    data.delete("t-0/gone")
    data.delete("never-there")
    data.fsync("t-0/0.log")
    data.fsync_all()
    data.close()
    (tmp_path / "half.tmp").write_bytes(b"an interrupted replace")
    fresh = DataDir(tmp_path)
    assert {p: fresh.read_file(p) for p in fresh.paths()} == {"t-0/0.log": b"hello th", "checkpoint": b"v2"}


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "t-0/../../x", "."])
def test_a_path_outside_the_data_directory_is_refused(tmp_path, path):
    data = DataDir(tmp_path / "d")
    with pytest.raises(ValueError):
        data.write(path, 0, b"x")


def drain(store: EmbeddedCoordination) -> list:
    out = []
    while (event := store.poll()) is not None:
        out.append(event)
    return out


def test_embedded_store_answers_in_order_with_watch_events_before_the_reply(tmp_path):
    store = EmbeddedCoordination(tmp_path / SNAPSHOT_FILE)
    store.start()
    [started] = drain(store)
    assert isinstance(started, CoordSessionStarted)
    store.request(1, coord.Exists("/a", watch=True))
    store.request(2, coord.Create("/a", b"1"))
    events = drain(store)
    assert [type(e) for e in events] == [CoordReplied, CoordWatchFired, CoordReplied]
    assert events[0].reply.error == coord.NO_NODE
    assert (events[1].path, events[1].kind) == ("/a", "created")
    assert events[2].reply.ok


def test_embedded_store_keeps_persistent_nodes_with_versions_across_a_restart(tmp_path):
    store = EmbeddedCoordination(tmp_path / SNAPSHOT_FILE)
    store.start()
    store.request(1, coord.Create("/brokers/topics/t", b'{"partitions":{}}', make_parents=True))
    store.request(2, coord.SetData("/brokers/topics/t", b"\xff\x00binary", 0))
    store.request(3, coord.Create("/brokers/ids/1", b"me", ephemeral=True, make_parents=True))
    assert all(e.reply.ok for e in drain(store) if isinstance(e, CoordReplied))
    again = EmbeddedCoordination(tmp_path / SNAPSHOT_FILE)  # a new process on the same directory
    again.start()
    again.request(1, coord.GetData("/brokers/topics/t"))
    again.request(2, coord.Exists("/brokers/ids/1"))
    again.request(3, coord.GetChildren("/brokers"))
    replies = [e.reply for e in drain(again) if isinstance(e, CoordReplied)]
    assert (replies[0].data, replies[0].version) == (b"\xff\x00binary", 1)
    assert replies[1].error == coord.NO_NODE  # the ephemeral node died with its process
    assert replies[2].children == ("ids", "topics")
