"""The launcher's pieces that need no cluster: process identities (a pid is signalled
only while it names the process recorded), the brokers' command lines (every link's
address from ``link_address``), and the refusals an operator meets before anything
starts (a port in use, no java, no cluster)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from real_io import process_identity
from real_io.cluster import CHROOT, ClusterError, LocalCluster, stop_recorded
from real_io.process_identity import ProcessIdentity

ROOT = Path(__file__).resolve().parents[2]


def isrlab(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def eventually(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def sleeper():
    """An unrelated process the test owns: it must survive whatever the launcher does."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def test_a_process_is_known_by_pid_and_start_time(sleeper):
    identity = process_identity.identify(sleeper.pid)
    assert identity is not None and process_identity.state(identity) == "running"
    os.kill(sleeper.pid, signal.SIGSTOP)  # delivered asynchronously: wait for the state to show it
    assert eventually(lambda: process_identity.state(identity) == "paused")
    os.kill(sleeper.pid, signal.SIGCONT)
    assert eventually(lambda: process_identity.state(identity) == "running")
    # The same pid recorded with another start time is a reused pid: it is not signalled.
    reused = ProcessIdentity(sleeper.pid, identity.start_time - 1)
    assert process_identity.state(reused) == "gone"
    assert process_identity.send(reused, signal.SIGKILL) is False
    assert process_identity.stop(reused, 1.0) == "not running"
    time.sleep(0.1)
    assert sleeper.poll() is None
    # The recorded process itself is stopped, and then it is gone (its zombie reaped).
    assert process_identity.stop(identity, 5.0) == "stopped"
    assert sleeper.poll() is not None  # reaped by the launcher, so Popen no longer sees the signal
    assert process_identity.state(identity) == "gone"


def test_a_process_that_ignores_sigterm_is_killed():
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
                                 "time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline() == "ready\n"
        identity = process_identity.identify(stubborn.pid)
        assert process_identity.stop(identity, 0.5) == "killed"
        assert stubborn.poll() is not None
    finally:
        stubborn.kill()
        stubborn.wait()
        stubborn.stdout.close()


def test_down_leaves_a_reused_pid_alone(sleeper, tmp_path):
    """A record whose pid now names another process (another start time) is not
    signalled; a recorded process that is gone is reported as such."""
    real = process_identity.identify(sleeper.pid)
    record = {"brokers": {"1": {"pid": sleeper.pid, "start_time": real.start_time + 7, "listen": "127.0.0.1:1"},
                          "2": {"pid": 2 ** 22 + 1, "start_time": 1, "listen": "127.0.0.1:2"}}}
    said = stop_recorded(record, 1.0)
    assert said == [f"broker 1 (pid {sleeper.pid}, 127.0.0.1:1): not running (its pid now names another process, "
                    "left alone)", f"broker 2 (pid {2 ** 22 + 1}, 127.0.0.1:2): not running"]
    time.sleep(0.1)
    assert sleeper.poll() is None


def _options(args: list[str], option: str) -> list[str]:
    return [args[i + 1] for i, word in enumerate(args) if word == option]


def test_every_broker_reaches_the_others_at_their_link_address(tmp_path):
    cluster = LocalCluster(tmp_path / "c", brokers=3, config={"min.insync.replicas": 2})
    for broker in (1, 2, 3):
        args = cluster.serve_arguments(broker)
        assert _options(args, "--broker-id") == [str(broker)]
        assert _options(args, "--listen") == [f"127.0.0.1:{cluster.ports[broker]}"]
        assert _options(args, "--peer") == [f"{o}=127.0.0.1:{cluster.ports[o]}" for o in (1, 2, 3) if o != broker]
        assert _options(args, "--zk") == [f"127.0.0.1:{cluster.zk_port}{CHROOT}"]
        assert _options(args, "--config") == ["min.insync.replicas=2"]
        # Links are direct: serve's defaults already advertise these addresses, and an
        # older serve knows neither option.
        assert "--advertise" not in args and "--profile" not in args
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in (1, 2, 3))
    assert len({*cluster.ports.values(), cluster.zk_port}) == 4


def test_a_one_broker_cluster_asks_nothing_an_older_serve_lacks(tmp_path):
    args = LocalCluster(tmp_path / "c", brokers=1).serve_arguments(1)
    assert not {"--peer", "--advertise", "--profile"} & set(args)
    assert _options(LocalCluster(tmp_path / "d", brokers=1, profile="kafka-3.0").serve_arguments(1),
                    "--profile") == ["kafka-3.0"]


class _Proxied(LocalCluster):
    """A cluster whose links go through another port each, as a fault proxy's do."""

    def link_address(self, src: str, dst: str) -> str:
        direct = super().link_address(src, dst)
        host, _, port = direct.rpartition(":")
        return f"{host}:{int(port) + (100 if src == 'client' else 200 if dst == 'zk' else 300)}"


def test_proxied_links_reach_every_option(tmp_path):
    cluster = _Proxied(tmp_path / "c", brokers=2)
    args = cluster.serve_arguments(1)
    assert _options(args, "--peer") == [f"2=127.0.0.1:{cluster.ports[2] + 300}"]
    assert _options(args, "--advertise") == [f"{b}=127.0.0.1:{cluster.ports[b] + 100}" for b in (1, 2)]
    assert _options(args, "--zk") == [f"127.0.0.1:{cluster.zk_port + 200}{CHROOT}"]
    assert _options(args, "--listen") == [f"127.0.0.1:{cluster.ports[1]}"]  # it listens on its own port
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{cluster.ports[b] + 100}" for b in (1, 2))


def test_bad_settings_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ClusterError, match="at least one broker"):
        LocalCluster(tmp_path, brokers=0)
    with pytest.raises(ClusterError, match="unknown profile"):
        LocalCluster(tmp_path, brokers=1, profile="kafka-9.9")
    with pytest.raises(ClusterError, match="no.such.key"):
        LocalCluster(tmp_path, brokers=1, config={"no.such.key": 1})
    assert not any(tmp_path.iterdir())


def test_a_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = isrlab("cluster", "up", "--brokers", "2", "--port", str(port - 1), "--dir", str(tmp_path / "c"))
        assert result.returncode == 2
        assert f"port {port} on 127.0.0.1 (broker 2) is in use" in result.stderr
        result = isrlab("cluster", "up", "--zk-port", str(port), "--dir", str(tmp_path / "c"))
        assert result.returncode == 2 and f"port {port} on 127.0.0.1 (ZooKeeper) is in use" in result.stderr
    assert not (tmp_path / "c").exists()


def test_no_java_is_named_with_how_to_install_it(tmp_path):
    result = isrlab("cluster", "up", "--brokers", "1", "--dir", str(tmp_path / "c"), env={**os.environ, "PATH": ""})
    assert result.returncode == 2
    assert "cannot start ZooKeeper: no java on PATH" in result.stderr and "apt-get install" in result.stderr
    assert json.loads((tmp_path / "c" / "cluster.json").read_text())["state"] == "stopped"


def test_status_and_down_without_a_cluster_say_so(tmp_path):
    for action in ("status", "down"):
        result = isrlab("cluster", action, "--dir", str(tmp_path))
        assert result.returncode == 2
        assert f"no cluster in {tmp_path} (no cluster.json); start one with: isrlab cluster up" in result.stderr
    (tmp_path / "cluster.json").write_text("{not json")
    result = isrlab("cluster", "down", "--dir", str(tmp_path))
    assert result.returncode == 2 and "cannot be read as a cluster file" in result.stderr
