"""``isrlab zk start|stop`` as a user runs it: a ZooKeeper on 127.0.0.1 that answers,
a pid file that ``stop`` follows, and clear refusals."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from real_io import zk_server
from real_io.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def isrlab(*args):
    return subprocess.run([sys.executable, "-m", "isrlab", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def installed():
    missing = zk_server.server_available()
    if missing is not None:
        pytest.skip(f"no ZooKeeper to run: {missing} (make test installs it)")


@pytest.mark.slow
def test_start_answers_on_loopback_and_stop_stops_it(installed, tmp_path):
    port = free_port()
    started = isrlab("zk", "start", "--dir", str(tmp_path / "zk"), "--port", str(port))
    try:
        assert started.returncode == 0, started.stderr
        assert f"ZooKeeper listening on 127.0.0.1:{port}" in started.stdout
        assert zk_server.four_letter_word("127.0.0.1", port, "ruok", timeout=10.0) == "imok"  # a loaded machine
        assert "clientPortAddress=127.0.0.1" in (tmp_path / "zk" / "zoo.cfg").read_text()
        # tickTime 2000: sessions of 4 to 40 s, whatever a client asks
        hosts = f"127.0.0.1:{port}"
        assert [zk_server.negotiated_session_timeout_ms(hosts, ms) for ms in (1000, 6000, 60000)] \
            == [4000, 6000, 40000]

        again = isrlab("zk", "start", "--dir", str(tmp_path / "zk"), "--port", str(port))
        assert again.returncode == 2 and "already running" in again.stderr
        taken = isrlab("zk", "start", "--dir", str(tmp_path / "other"), "--port", str(port))
        assert taken.returncode == 2 and f"port {port} on 127.0.0.1 is taken" in taken.stderr
    finally:
        stopped = isrlab("zk", "stop", "--dir", str(tmp_path / "zk"))
    assert stopped.returncode == 0, stopped.stderr
    assert zk_server.four_letter_word("127.0.0.1", port, "ruok") is None
    assert not (tmp_path / "zk" / zk_server.PID_FILE).exists()
    nothing = isrlab("zk", "stop", "--dir", str(tmp_path / "zk"))
    assert nothing.returncode == 2 and "no ZooKeeper started from" in nothing.stderr


def test_the_tick_bounds_the_session_timeouts_granted(installed, tmp_path):
    port = free_port()
    started = isrlab("zk", "start", "--dir", str(tmp_path / "zk"), "--port", str(port), "--tick-ms", "100")
    try:
        assert started.returncode == 0, started.stderr
        assert "tickTime=100" in (tmp_path / "zk" / "zoo.cfg").read_text()
        hosts = f"127.0.0.1:{port}"
        assert [zk_server.negotiated_session_timeout_ms(hosts, ms) for ms in (100, 1500, 6000)] == [200, 1500, 2000]
    finally:
        isrlab("zk", "stop", "--dir", str(tmp_path / "zk"))


def test_a_missing_package_is_named_with_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr(zk_server, "JAR_CANDIDATES", (tmp_path / "absent.jar",))
    with pytest.raises(zk_server.ZooKeeperError, match="apt-get install -y zookeeper"):
        zk_server.start(tmp_path / "zk", free_port())
    assert "apt-get install -y zookeeper" in zk_server.server_available()


def test_a_bad_port_is_refused():
    result = isrlab("zk", "start", "--port", "70000")
    assert result.returncode == 2 and "is not a port number" in result.stderr
