"""``isrlab cluster up|status|down`` as an operator runs it: real ZooKeeper, real
``isrlab serve`` processes, real clients; after every test no process of the cluster
is left (checked by pid and start time, and by scanning /proc for anything that names
the cluster's directory)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from real_io import process_identity, zk_server
from real_io.cluster import LocalCluster
from real_io.process_identity import ProcessIdentity
from real_io.real_clients import QUIET
from tests.real_io.test_cluster_launcher import eventually

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def isrlab(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def serve_knows_peers() -> bool:
    """Whether ``isrlab serve`` takes --peer: brokers of a cluster reach each other only
    once it does (until then a cluster of more than one broker cannot start)."""
    from isrlab.cli import build_parser
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(["serve", "--broker-id", "1", "--data-dir", "d", "--peer", "2=127.0.0.1:1"])
        except SystemExit:
            return False
    return True


def recorded(directory: Path) -> list[ProcessIdentity]:
    record = json.loads((directory / "cluster.json").read_text())
    entries = [*record["brokers"].values(), *([record["zookeeper"]] if record["zookeeper"] else [])]
    return [ProcessIdentity.from_data(e) for e in entries if "start_time" in e]


def processes_naming(directory: Path) -> list[int]:
    """Every live process whose command line names ``directory`` (ZooKeeper's config
    and every broker's data directory are in it), recorded or not."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if str(directory).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def cluster_dir(tmp_path):
    """The cluster's directory; whatever a failing test leaves running there is stopped."""
    if zk_server.server_available() is not None:
        pytest.skip(f"no ZooKeeper to run: {zk_server.server_available()}")
    directory = tmp_path / "cluster"
    yield directory
    leftovers = processes_naming(directory)
    for pid in leftovers:
        identity = process_identity.identify(pid)
        if identity is not None:
            process_identity.stop(identity, 5.0)
    assert not leftovers, f"processes left running: {leftovers}"


def assert_nothing_left(directory: Path) -> None:
    assert not [i for i in recorded(directory) if process_identity.is_running(i)]
    assert processes_naming(directory) == []


def status(directory: Path, *extra) -> dict:
    result = isrlab("cluster", "status", "--dir", str(directory), "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def create_and_produce(bootstrap: str, topic: str, partitions: int, replication_factor: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(topic, partitions, replication_factor)],
                                      request_timeout=30).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
    delivered = []
    for i in range(records):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions,
                         on_delivery=lambda error, message: delivered.append(error))
    assert producer.flush(30) == 0
    assert delivered == [None] * records


def test_one_broker_up_status_down(cluster_dir):
    started = isrlab("cluster", "up", "--brokers", "1", "--dir", str(cluster_dir))
    assert started.returncode == 0, started.stderr
    record = json.loads((cluster_dir / "cluster.json").read_text())
    assert f"bootstrap: {record['bootstrap']}" in started.stdout
    assert f"isrlab cluster down --dir {cluster_dir}" in started.stdout
    assert record["state"] == "running" and all(process_identity.is_running(i) for i in recorded(cluster_dir))
    again = isrlab("cluster", "up", "--brokers", "1", "--dir", str(cluster_dir))
    assert again.returncode == 2 and "a cluster is still running in" in again.stderr

    create_and_produce(record["bootstrap"], "t", 2, 1, 7)
    seen = status(cluster_dir)
    assert [(b["broker_id"], b["state"], b["registered"]) for b in seen["brokers"]] == [(1, "alive", True)]
    assert seen["controller"] == 1 and seen["zookeeper"] == "alive"
    assert [(p["topic"], p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"],
             p["high_watermark"], p["log_start_offset"]) for p in seen["partitions"]] \
        == [("t", 0, 1, 0, [1], [1], 4, 0), ("t", 1, 1, 0, [1], [1], 3, 0)]
    text = isrlab("cluster", "status", "--dir", str(cluster_dir)).stdout
    assert "controller: broker 1" in text and "alive" in text

    broker = ProcessIdentity.from_data(record["brokers"]["1"])
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        assert [b["state"] for b in status(cluster_dir, "--no-offsets")["brokers"]] == ["paused"]
    finally:
        os.kill(broker.pid, signal.SIGCONT)

    stopped = isrlab("cluster", "down", "--dir", str(cluster_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert f"broker 1 (pid {broker.pid}, {record['brokers']['1']['listen']}): stopped" in stopped.stdout
    assert f"ZooKeeper (pid {record['zookeeper']['pid']}" in stopped.stdout
    assert_nothing_left(cluster_dir)
    after = status(cluster_dir)
    assert after["state"] == "stopped" and [b["state"] for b in after["brokers"]] == ["down"]


@pytest.mark.skipif(not serve_knows_peers(), reason="isrlab serve does not take --peer yet: brokers cannot reach "
                                                    "each other, so a cluster of three cannot start")
def test_three_brokers_up_status_down(cluster_dir):
    started = isrlab("cluster", "up", "--brokers", "3", "--dir", str(cluster_dir),
                     "--config", "min.insync.replicas=2")
    assert started.returncode == 0, started.stderr
    try:
        bootstrap = json.loads((cluster_dir / "cluster.json").read_text())["bootstrap"]
        seen = status(cluster_dir)
        assert [(b["broker_id"], b["state"], b["registered"]) for b in seen["brokers"]] \
            == [(1, "alive", True), (2, "alive", True), (3, "alive", True)]
        assert seen["controller"] in (1, 2, 3)
        create_and_produce(bootstrap, "r", 3, 3, 30)
        deadline = time.monotonic() + 30  # followers join the ISR once they have caught up
        while True:
            partitions = status(cluster_dir)["partitions"]
            full = all(p["isr"] is not None and sorted(p["isr"]) == sorted(p["replicas"]) for p in partitions)
            if full or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [(p["partition"], sorted(p["replicas"]), sorted(p["isr"] or []), p["high_watermark"])
                for p in partitions] == [(n, [1, 2, 3], [1, 2, 3], 10) for n in range(3)]
        assert all(p["leader"] in p["replicas"] for p in partitions)
    finally:
        stopped = isrlab("cluster", "down", "--dir", str(cluster_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.count(": stopped") + stopped.stdout.count(": killed") == 5  # 3 brokers, the fault proxy, ZooKeeper
    assert_nothing_left(cluster_dir)


def test_down_does_not_signal_a_reused_pid(cluster_dir):
    """cluster.json names a live process that is not the one started (same pid, another
    start time, as after the pid was reused): down leaves it running."""
    unrelated = subprocess.Popen(["sleep", "300"])
    try:
        started = isrlab("cluster", "up", "--brokers", "1", "--dir", str(cluster_dir))
        assert started.returncode == 0, started.stderr
        path = cluster_dir / "cluster.json"
        record = json.loads(path.read_text())
        real = process_identity.identify(unrelated.pid)
        record["brokers"]["9"] = {**record["brokers"]["1"], "pid": unrelated.pid, "start_time": real.start_time + 7}
        path.write_text(json.dumps(record))
        stopped = isrlab("cluster", "down", "--dir", str(cluster_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert f"broker 9 (pid {unrelated.pid}, " in stopped.stdout
        assert "left alone" in stopped.stdout and "broker 1 (pid" in stopped.stdout
        time.sleep(0.2)
        assert unrelated.poll() is None and process_identity.state(real) == "running"
        assert processes_naming(cluster_dir) == []
    finally:
        unrelated.kill()
        unrelated.wait()


def _foreground(cluster_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "isrlab", "cluster", "up", "--foreground", "--brokers", "1",
                             "--dir", str(cluster_dir), "--timeout", "20"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _read_until(process: subprocess.Popen, text: str, timeout_s: float = 90.0) -> str:
    """The launcher's output up to ``text`` (read from the descriptor itself: a buffered
    reader could hold the line while select sees nothing more to read)."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while text.encode() not in seen:
        assert time.monotonic() < deadline and process.poll() is None, f"no {text!r} in {seen!r}"
        if select.select([process.stdout], [], [], 0.5)[0]:
            seen += os.read(process.stdout.fileno(), 4096)
    return seen.decode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_foreground_cluster_leaves_nothing_running(cluster_dir, signum):
    launcher = _foreground(cluster_dir)
    try:
        _read_until(launcher, "running in the foreground")
        assert all(process_identity.is_running(i) for i in recorded(cluster_dir))
        launcher.send_signal(signum)
        out, err = launcher.communicate(timeout=90)
    finally:
        launcher.kill()
        launcher.communicate()
    assert launcher.returncode == 0, err
    assert "broker 1 (pid" in out and "ZooKeeper (pid" in out and "fault proxy (pid" in out and ": stopped" in out
    assert_nothing_left(cluster_dir)
    assert json.loads((cluster_dir / "cluster.json").read_text())["state"] == "stopped"


def test_a_start_interrupted_half_way_leaves_nothing_running(cluster_dir):
    """SIGTERM once ZooKeeper runs and the broker is starting, not yet listening."""
    launcher = _foreground(cluster_dir)
    try:
        deadline = time.monotonic() + 60
        while not (cluster_dir / "cluster.json").exists():
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.02)
        launcher.send_signal(signal.SIGTERM)
        out, err = launcher.communicate(timeout=90)
    finally:
        launcher.kill()
        launcher.communicate()
    assert "ZooKeeper (pid" in out, (out, err)
    assert "running in the foreground" not in out  # it was interrupted before the broker listened
    assert_nothing_left(cluster_dir)


def test_the_runner_primitives_act_on_the_processes(cluster_dir):
    """What a scenario runner does with a LocalCluster: pause, resume, kill, restart,
    shutdown and a ZooKeeper session expiry, each seen in ``states`` and cluster.json."""
    with LocalCluster(cluster_dir, brokers=1, zk_tick_ms=250) as cluster:
        assert cluster.states() == {1: "alive"}
        first = cluster.brokers[1].identity
        cluster.pause(1)
        assert cluster.states() == {1: "paused"}
        assert eventually(lambda: process_identity.state(first) == "paused")  # SIGSTOP lands asynchronously
        cluster.resume(1)
        session = json.loads(cluster.brokers[1].zk_session_file.read_text())["session_id"]
        assert cluster.expire_zk_session(1) is None
        deadline = time.monotonic() + 30  # the broker hears of the expiry and opens a new session
        while True:
            try:
                renewed = json.loads(cluster.brokers[1].zk_session_file.read_text())["session_id"]
            except (OSError, ValueError, KeyError):
                renewed = session
            if renewed != session or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert renewed != session
        assert eventually(lambda: cluster.registered_brokers() == [1], 30)  # registered again in its new session
        cluster.kill(1)
        assert cluster.states() == {1: "down"} and not process_identity.is_running(first)
        assert cluster.expire_zk_session(1) == "broker 1 is not running"
        # At once, the killed incarnation's session still holds its registration: a
        # 2.7 broker exits at startup (KafkaZkClient.registerBroker), as in the simulation.
        assert cluster.registered_brokers() == [1]
        assert not cluster.restart(1)
        assert "node exists" in cluster.brokers[1].last_words() and cluster.states() == {1: "down"}
        assert eventually(lambda: cluster.registered_brokers() == [], 30)  # 20 ticks of 250 ms at most
        assert cluster.restart(1)
        second = cluster.brokers[1].identity
        assert second != first and cluster.states() == {1: "alive"}
        assert ProcessIdentity.from_data(json.loads((cluster_dir / "cluster.json").read_text())["brokers"]["1"]) \
            == second
        cluster.shutdown(1)
        assert cluster.brokers[1].wait_exit(30) and cluster.states() == {1: "down"}
        assert cluster.restart(1)
    assert cluster.stopped and "stopped" in cluster.stop_report[0]
    assert_nothing_left(cluster_dir)
