"""A real ZooKeeper for the real-I/O tests: started once per test session through
real_io.zk_server on a free 127.0.0.1 port in a temporary directory, stopped at the end.
Under pytest-xdist (make test) a session is one worker: each worker that runs a ZooKeeper
test starts its own server, in its own temporary directory, and stops it when it ends.
Each test gets its own chroot, so tests sharing the server never see each other's nodes."""
from __future__ import annotations

import itertools

import pytest
from kazoo.client import KazooClient

from real_io import zk_server
from real_io.ports import free_port

# A short tick lets sessions be short (ZooKeeper allows 2 to 20 ticks), so that losing
# a connection is noticed in well under a second.
TICK_MS = 250
# The port is free when chosen but is only bound when the JVM is up, a second later:
# another worker's broker or client may take it in between. Such a start fails (the
# port is taken, or the server exits before answering) and is tried again on a new port.
START_TRIES = 3
_chroots = itertools.count(1)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    missing = zk_server.server_available()
    if missing is not None:
        pytest.skip(f"no ZooKeeper to test against: {missing} (make test installs it)")
    server = serving_zookeeper(lambda: tmp_path_factory.mktemp("zookeeper"))
    yield server
    zk_server.stop(server.directory)


def serving_zookeeper(directories) -> zk_server.RunningZooKeeper:
    """A started server that has served a session. A server that has just started answers
    ruok before it serves sessions: the first test of each worker would otherwise see
    its connections dropped, and under load a broker's registration would come late. A
    server that answers ruok but no session within the handshake's time (seen once at the
    start of a loaded `make test`, 10 s without a reply) is stopped and another started,
    at most START_TRIES times."""
    for attempt in range(START_TRIES):
        server = start_retrying(directories, free_ports())
        try:
            zk_server.negotiated_session_timeout_ms(server.hosts, 2 * TICK_MS)
            return server
        except OSError:
            zk_server.stop(server.directory)
            if attempt == START_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def start_retrying(directories, ports) -> zk_server.RunningZooKeeper:
    """A server on the first of ``ports`` it can bind (at most START_TRIES), each try in
    a fresh directory from ``directories()``."""
    for _ in range(START_TRIES - 1):
        try:
            return zk_server.start(directories(), next(ports), tick_time_ms=TICK_MS)
        except zk_server.ZooKeeperError:
            continue
    return zk_server.start(directories(), next(ports), tick_time_ms=TICK_MS)


def free_ports():
    while True:
        yield free_port()


@pytest.fixture
def zk_hosts(zookeeper, request):
    """A connect string rooted at a fresh chroot of the shared server."""
    root = f"/test-{next(_chroots)}-{request.node.name.split('[')[0]}"
    admin = KazooClient(hosts=zookeeper.hosts)
    admin.start(timeout=10)
    admin.create(root)
    admin.stop()
    admin.close()
    return zookeeper.hosts + root


@pytest.fixture
def admin(zk_hosts):
    """A second client on the test's chroot: the other writers the core must live with."""
    client = KazooClient(hosts=zk_hosts)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _groups_switched(served: bool):
    """apis.serve_groups(served) for one test, the module's setting put back after."""
    from real_io.protocol import apis
    before = apis.GROUPS_SERVED
    apis.serve_groups(served)
    try:
        yield served
    finally:
        apis.serve_groups(before)


@pytest.fixture
def groups_served():
    """The consumer-group APIs served (apis.GROUPS_SERVED on) in this process only: a
    broker started in the test (real_io.serve.serve) offers them; a child process keeps
    the module's setting."""
    yield from _groups_switched(True)


@pytest.fixture
def groups_not_served():
    yield from _groups_switched(False)
