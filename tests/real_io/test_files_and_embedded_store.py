"""The data directory (real_io/files.py) and the embedded coordination store
(real_io/embedded_coordination.py) on real files."""
from __future__ import annotations

import pytest

from broker_core import coordination as coord
from broker_core.inputs import CoordReplied, CoordSessionStarted, CoordWatchFired
from real_io.embedded_coordination import SNAPSHOT_FILE, EmbeddedCoordination
from broker_core.records import RecordBatch, Records
from broker_core.segment_format import DecodeError, encode_batch, stored_bytes
from broker_core.effects import WriteBytes
from real_io.files import RESERVE_STEP, DataDir


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
    data.close()
    (tmp_path / "half.tmp").write_bytes(b"an interrupted replace")
    fresh = DataDir(tmp_path)
    assert {p: fresh.read_file(p) for p in fresh.paths()} == {"t-0/0.log": b"hello th", "checkpoint": b"v2"}


def test_a_batch_the_core_wrote_unencoded_lands_as_its_encoded_bytes(tmp_path):
    """The core writes its own RecordBatches as BatchBytes (bytes made when read); the
    real data directory writes exactly the bytes the batch encodes to."""
    batch = RecordBatch(0, 3, Records(["a", "b", None]))
    data = DataDir(tmp_path)
    data.carry_out(WriteBytes("t-0/0.log", 0, stored_bytes(batch)))
    data.carry_out(WriteBytes("t-0/0.log", len(encode_batch(batch)), memoryview(b"tail")))  # a request's view
    assert data.read_file("t-0/0.log") == encode_batch(batch) + b"tail"
    data.close()


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


def _allocated(path) -> int:
    return path.stat().st_blocks * 512


def test_a_growing_file_gets_blocks_reserved_past_its_end_its_length_and_bytes_unchanged(tmp_path):
    """Past RESERVE_FROM a file's blocks are allocated a step ahead (FALLOC_FL_KEEP_SIZE):
    after every write its length and bytes are exactly what was written, as a process
    killed then would leave them for recovery to read."""
    data = DataDir(tmp_path)
    chunk = bytes(range(256)) * 4096  # 1 MiB
    segment = tmp_path / "t-0" / "0.log"
    written = 0
    for _ in range(6):
        data.write("t-0/0.log", written, chunk)
        written += len(chunk)
        assert segment.stat().st_size == written
    assert data.reserved["t-0/0.log"] > written
    assert _allocated(segment) >= written + RESERVE_STEP - len(chunk)
    killed = DataDir(tmp_path)  # what a restart after kill -9 finds: the length written, no more
    assert killed.size("t-0/0.log") == written and killed.read_file("t-0/0.log") == chunk * 6
    with pytest.raises(DecodeError):
        killed.decode_at("t-0/0.log", written)  # the scan ends at the written end


def test_reserved_blocks_go_back_at_a_roll_a_truncation_and_close(tmp_path):
    data = DataDir(tmp_path)
    chunk = b"x" * (1 << 20)
    for name in ("t-0/0.log", "u-0/0.log"):
        for i in range(6):
            data.write(name, i * len(chunk), chunk)
    data.write("t-0/6.log", 0, b"the next segment")  # t-0 rolled: its old segment stops growing
    assert _allocated(tmp_path / "t-0" / "0.log") < 6 * len(chunk) + len(chunk)
    assert _allocated(tmp_path / "u-0" / "0.log") >= 6 * len(chunk) + RESERVE_STEP - len(chunk)  # another log
    data.truncate("u-0/0.log", 5 * len(chunk))
    assert _allocated(tmp_path / "u-0" / "0.log") < 6 * len(chunk)
    data.write("u-0/0.log", 5 * len(chunk), chunk)
    assert _allocated(tmp_path / "u-0" / "0.log") > 7 * len(chunk)
    data.close()
    assert _allocated(tmp_path / "u-0" / "0.log") < 7 * len(chunk)
    assert (tmp_path / "u-0" / "0.log").read_bytes() == chunk * 6


def test_small_files_are_never_reserved_for(tmp_path):
    data = DataDir(tmp_path)
    for i in range(4):
        data.write("t-0/0.log", i * 1000, b"y" * 1000)
    assert data.reserved == {}
    assert _allocated(tmp_path / "t-0" / "0.log") <= 8192
