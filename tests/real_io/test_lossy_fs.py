"""Power loss on real files (real_io/lossy_fs.py, lossy_disk.py, lossy_mount.py): a FUSE
file system over a backing directory that keeps, after ``power_loss()``, exactly what
was fsynced, and takes back the names no directory fsync made durable. Files are read
and written through the mount with plain system calls, as the broker does."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from real_io.lossy_disk import PENDING_DIR, LossyDisk
from real_io.lossy_mount import LossyFsError, available, is_mounted, mount
from sim.disk import SimFile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lossy(tmp_path):
    reason = available()
    if reason is not None:
        pytest.skip(f"power loss cannot be emulated here: {reason}")
    fs = mount(tmp_path / "backing", tmp_path / "mnt")
    try:
        yield fs
    finally:
        fs.unmount()
        assert not is_mounted(fs.mount_point)


def write(path: Path, data: bytes, position: int = 0, sync: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, position)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync(path: Path) -> None:
    """fsync of a file or a directory, by a descriptor of its own (as real_io/files.py)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_power_loss_leaves_each_file_exactly_at_its_last_fsync(lossy):
    segment = lossy.mount_point / "segment"
    write(segment, b"a" * 5000, sync=True)
    fsync(lossy.mount_point)
    write(segment, b"b" * 3000, position=5000)  # an unsynced append
    write(segment, b"c" * 10, position=4090)  # an unsynced overwrite across a block boundary
    assert segment.read_bytes() == b"a" * 4090 + b"c" * 10 + b"a" * 900 + b"b" * 3000
    lost = lossy.power_loss()
    assert segment.read_bytes() == b"a" * 5000
    assert (lossy.backing_dir / "segment").read_bytes() == b"a" * 5000
    assert lost == {"files_reverted": 1, "bytes_dropped": 3000, "changes_undone": 0}


def test_fdatasync_makes_the_bytes_durable_too_and_a_second_loss_loses_nothing_more(lossy):
    segment = lossy.mount_point / "segment"
    write(segment, b"x" * 100, sync=True)
    fsync(lossy.mount_point)
    fd = os.open(segment, os.O_RDWR)
    os.pwrite(fd, b"y" * 100, 100)
    os.fdatasync(fd)
    os.pwrite(fd, b"z" * 100, 200)
    os.close(fd)
    lossy.power_loss()
    assert segment.read_bytes() == b"x" * 100 + b"y" * 100
    assert lossy.power_loss() == {"files_reverted": 0, "bytes_dropped": 0, "changes_undone": 0}
    assert segment.read_bytes() == b"x" * 100 + b"y" * 100


def test_reads_see_every_unsynced_write_before_the_loss(lossy):
    """The page cache: another descriptor, stat and a listing see what no fsync covered."""
    segment = lossy.mount_point / "segment"
    writer = os.open(segment, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(writer, b"unsynced", 0)
        reader = os.open(segment, os.O_RDONLY)
        assert os.pread(reader, 100, 0) == b"unsynced"
        os.close(reader)
        assert segment.stat().st_size == 8
        assert os.listdir(lossy.mount_point) == ["segment"]  # the pending directory is hidden
        assert not (lossy.mount_point / PENDING_DIR).exists()
    finally:
        os.close(writer)
    lossy.power_loss()
    assert os.listdir(lossy.mount_point) == []  # never made durable: neither name nor bytes


def test_a_truncation_not_fsynced_comes_back_and_an_fsynced_one_stays(lossy):
    log = lossy.mount_point / "log"
    original = bytes(range(256)) * 40  # 10240 bytes over three blocks
    write(log, original, sync=True)
    fsync(lossy.mount_point)
    os.truncate(log, 100)
    write(log, b"new tail", position=100)
    assert log.read_bytes() == original[:100] + b"new tail"
    lossy.power_loss()
    assert log.read_bytes() == original
    fd = os.open(log, os.O_RDWR)
    os.ftruncate(fd, 5000)
    os.fsync(fd)
    os.ftruncate(fd, 10)  # unsynced again
    os.close(fd)
    lossy.power_loss()
    assert log.read_bytes() == original[:5000]


def test_open_with_o_trunc_is_a_truncation_like_any_other(lossy):
    checkpoint = lossy.mount_point / "checkpoint"
    write(checkpoint, b"0 durable\n", sync=True)
    fsync(lossy.mount_point)
    checkpoint.write_bytes(b"1\n")  # open(O_TRUNC), write, close: no fsync
    lossy.power_loss()
    assert checkpoint.read_bytes() == b"0 durable\n"


def test_a_durable_replace_survives_and_one_without_its_directory_fsync_reverts(lossy):
    """real_io.files.replace_durably: write a temporary file, fsync it, rename it over
    the old one, fsync the directory. Without the last step the old file comes back."""
    target, temp = lossy.mount_point / "checkpoint", lossy.mount_point / "checkpoint.tmp"
    write(target, b"old", sync=True)
    fsync(lossy.mount_point)
    write(temp, b"new", sync=True)
    os.replace(temp, target)
    assert target.read_bytes() == b"new"
    assert lossy.power_loss()["changes_undone"] == 2  # the create, the rename
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(lossy.mount_point)) == ["checkpoint"]
    write(temp, b"new", sync=True)
    os.replace(temp, target)
    fsync(lossy.mount_point)
    lossy.power_loss()
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(lossy.backing_dir)) == sorted(["checkpoint", PENDING_DIR])
    assert os.listdir(lossy.backing_dir / PENDING_DIR) == []  # the replaced file went for good


def test_a_rename_onto_a_directory_is_refused_and_changes_nothing(lossy):
    write(lossy.mount_point / "file", b"f", sync=True)
    (lossy.mount_point / "dir").mkdir()
    (lossy.mount_point / "dir" / "inside").write_bytes(b"i")
    with pytest.raises(IsADirectoryError):
        os.rename(lossy.mount_point / "file", lossy.mount_point / "dir")
    with pytest.raises(OSError):
        os.rename(lossy.mount_point / "dir", lossy.mount_point / "file")
    assert (lossy.mount_point / "file").read_bytes() == b"f"
    assert (lossy.mount_point / "dir" / "inside").read_bytes() == b"i"


def test_names_not_made_durable_by_a_directory_fsync_vanish(lossy):
    """mkdir d, create d/f, write and fsync f: without an fsync of d both go. With it, d
    stays too: a directory fsync commits the namespace journal in order, as a journaling
    file system does."""
    partition = lossy.mount_point / "t-0"
    partition.mkdir()
    write(partition / "0.log", b"records", sync=True)
    lossy.power_loss()
    assert not partition.exists()
    partition.mkdir()
    write(partition / "0.log", b"records", sync=True)
    write(partition / "0.index", b"never synced")
    fsync(partition)
    lossy.power_loss()
    assert (partition / "0.log").read_bytes() == b"records"
    assert (partition / "0.index").read_bytes() == b""  # its name is durable, its bytes are not


def test_an_unlink_not_made_durable_comes_back_with_its_fsynced_bytes(lossy):
    segment = lossy.mount_point / "old.log"
    write(segment, b"durable", sync=True)
    fsync(lossy.mount_point)
    write(segment, b" unsynced", position=7)
    reader = os.open(segment, os.O_RDONLY)
    segment.unlink()
    assert os.pread(reader, 100, 0) == b"durable unsynced"  # an open file is still read after its unlink
    os.close(reader)
    assert not segment.exists()
    lossy.power_loss()
    assert segment.read_bytes() == b"durable"
    segment.unlink()
    fsync(lossy.mount_point)
    lossy.power_loss()
    assert not segment.exists()
    assert os.listdir(lossy.backing_dir / PENDING_DIR) == []


def test_a_directory_removed_without_a_directory_fsync_comes_back(lossy):
    (lossy.mount_point / "t-1").mkdir()
    fsync(lossy.mount_point)
    (lossy.mount_point / "t-1").rmdir()
    lossy.power_loss()
    assert (lossy.mount_point / "t-1").is_dir()


def test_power_loss_is_refused_while_a_file_is_open(lossy):
    """The fault is kill -9 first: a process still holding a file would see it change."""
    segment = lossy.mount_point / "segment"
    fd = os.open(segment, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"data", 0)
    with pytest.raises(LossyFsError, match="1 file\\(s\\) still open"):
        lossy.power_loss(timeout_s=0.2)
    assert os.pread(fd, 10, 0) == b"data"
    os.close(fd)
    assert lossy.status() == {"open_handles": 0, "dirty_files": 1, "uncommitted_changes": 1}
    lossy.power_loss()
    assert not segment.exists()


def test_power_loss_waits_for_a_killed_process_to_let_go_of_its_files(lossy):
    holder = subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                               f"fd = os.open({str(lossy.mount_point / 'held')!r}, os.O_RDWR | os.O_CREAT)\n"
                               "os.write(fd, b'x'); print('ready', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        holder.send_signal(signal.SIGKILL)
        assert lossy.power_loss()["files_reverted"] == 1
    finally:
        holder.kill()
        holder.wait(10)
        holder.stdout.close()
    assert not (lossy.mount_point / "held").exists()


def test_unmount_detaches_the_mount_of_a_process_that_died(tmp_path):
    reason = available()
    if reason is not None:
        pytest.skip(f"power loss cannot be emulated here: {reason}")
    fs = mount(tmp_path / "backing", tmp_path / "mnt")
    try:
        write(fs.mount_point / "f", b"kept")
        os.kill(fs.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while fs._alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert is_mounted(fs.mount_point)  # stale: every call answers ENOTCONN
        with pytest.raises(LossyFsError, match="is gone"):
            fs.power_loss()
    finally:
        fs.unmount()
    assert not is_mounted(fs.mount_point)
    assert (tmp_path / "backing" / "f").read_bytes() == b"kept"  # the page cache's view, as after a crash
    with pytest.raises(LossyFsError, match="already a mount point"):
        with mount(tmp_path / "backing", tmp_path / "mnt") as again:
            mount(tmp_path / "backing2", again.mount_point)
    assert not is_mounted(tmp_path / "mnt")


def test_a_machine_without_dev_fuse_is_refused_with_the_reason(tmp_path):
    """In a mount namespace whose /dev has no fuse device (a container's usual /dev)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root to hide /dev/fuse in a mount namespace")
    script = ("from real_io.lossy_mount import available, mount, LossyFsError\n"
              "print(available())\n"
              f"try: mount({str(tmp_path / 'b')!r}, {str(tmp_path / 'm')!r})\n"
              "except LossyFsError as e: print(e)\n")
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             f"mount -t tmpfs none /dev && exec {sys.executable} -c \"$0\"", script],
                            cwd=ROOT, capture_output=True, text=True, timeout=30)
    if result.returncode != 0 and "unshare" in result.stderr:
        pytest.skip(f"no mount namespace here: {result.stderr.strip()}")
    assert result.stdout.splitlines() == [
        "no /dev/fuse on this machine (a container needs --device /dev/fuse)",
        "cannot emulate power loss: no /dev/fuse on this machine (a container needs --device /dev/fuse)"]
    assert not is_mounted(tmp_path / "m")


# -- the books alone, against the simulation's disk ------------------------------------------
# Positions and sizes drawn near block boundaries too, where the saved blocks begin and end.
_edges = st.sampled_from([4095, 4096, 4097, 8191, 8192, 8193])
_positions = st.one_of(st.integers(0, 12000), _edges)
_contents = st.one_of(st.binary(max_size=9000), _edges.map(lambda size: bytes(range(251)) * (size // 251) + b"e" * (size % 251)))
_changes = st.lists(st.one_of(
    st.tuples(st.just("write"), _positions, st.binary(min_size=1, max_size=5000)),
    st.tuples(st.just("truncate"), _positions),
    st.tuples(st.just("fsync")),
), max_size=12)


@settings(max_examples=100, deadline=None)
@given(initial=_contents, changes=_changes)
def test_power_loss_keeps_what_the_simulated_disk_keeps(tmp_path_factory, initial, changes):
    """LossyDisk's file contents after a loss equal sim/disk.py's SimFile.durable for the
    same writes, truncations and fsyncs (a file that existed durably before)."""
    root = tmp_path_factory.mktemp("books")
    (root / "f").write_bytes(initial)
    disk = LossyDisk(root)
    model = SimFile(bytearray(initial), durable=True)
    fd = os.open(root / "f", os.O_RDWR)
    try:
        for change in changes:
            if change[0] == "write":
                disk.write(fd, change[2], change[1])
                model.write(change[1], change[2])
            elif change[0] == "truncate":
                disk.truncate(fd, change[1])
                if change[1] < model.size:
                    model.truncate(change[1])
                else:
                    model.write(change[1], b"")  # ftruncate past the end zero-fills, as a write there
            else:
                disk.synced(fd)
                model.sync()
        assert os.pread(fd, 1 << 20, 0) == bytes(model.data)
    finally:
        os.close(fd)
    disk.power_loss()
    assert (root / "f").read_bytes() == bytes(model.durable)
    disk.close()


# -- a real broker on the mount ------------------------------------------------------------
def _produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """acks=1, one at a time: each value returned was acknowledged."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0, request_timeout_ms=5000)
    values = [f"{topic}-{i}".encode() for i in range(count)]
    try:
        for i, value in enumerate(values):
            assert producer.send(topic, value).get(10).offset == i
    finally:
        producer.close(5)
    return values


def _recovered(trace: Path, partition: str) -> dict:
    from analysis.trace import read_events
    return [e for e in read_events(trace) if e.type == "log_recovered" and e["partition"] == partition][-1]


@pytest.mark.slow
def test_a_broker_on_the_mount_loses_only_what_it_never_fsynced(lossy, tmp_path):
    """isrlab serve on the lossy mount. With Kafka's default (no flush by message count)
    records acknowledged with acks=1 sit in the page cache: kill -9, power loss, restart,
    and they may be gone, but the log recovers to a prefix of them and serves. With
    flush.messages=1 every acknowledged record survives the same fault, falling right
    after the last acknowledgement: the broker answers only once its fsync completed."""
    from tests.real_io.serve_process import ServeProcess
    from tests.real_io.test_serve_clients import kafka_python_read
    data, trace = lossy.mount_point, tmp_path / "trace.jsonl"
    broker = ServeProcess(data, trace=trace).start()
    try:
        unsynced = _produce(broker.bootstrap, "unsynced", 200)
        broker.kill()
        lost = lossy.power_loss()
        assert lost["bytes_dropped"] > 0  # the segment's unsynced tail went
        broker = ServeProcess(data, trace=trace).start()
        recovered = _recovered(trace, "unsynced-0")
        assert recovered["log_end_offset"] < len(unsynced)
        records = kafka_python_read(broker.bootstrap, "unsynced", 1, recovered["log_end_offset"], timeout_s=5)
        assert [r.value for r in records] == unsynced[:recovered["log_end_offset"]]  # a prefix, nothing else
        after = _produce(broker.bootstrap, "unsynced", recovered["log_end_offset"] + 1)[-1:]
        assert [r.value for r in kafka_python_read(broker.bootstrap, "unsynced", 1, recovered["log_end_offset"] + 1,
                                                   timeout_s=5)][-1:] == after
    finally:
        broker.kill()
    flushed = {"log.flush.interval.messages": 1}
    broker = ServeProcess(data, trace=trace, config=flushed).start()
    try:
        synced = _produce(broker.bootstrap, "synced", 200)
        # The answer to acks=1 comes after the fsync its append started (Kafka's
        # Log.append flushes inline): crash right after the last acknowledgement.
        broker.kill()
        lossy.power_loss()
        broker = ServeProcess(data, trace=trace, config=flushed).start()
        assert _recovered(trace, "synced-0")["log_end_offset"] == len(synced)
        records = kafka_python_read(broker.bootstrap, "synced", 1, len(synced))
        assert [r.value for r in records] == synced
        assert [r.offset for r in records] == list(range(len(synced)))
    finally:
        assert broker.stop() == 0
