"""The ZooKeeper fixture's start under pytest-xdist: a port chosen free may be taken by
another worker before the server binds it; the fixture then starts on the next port
instead of failing every ZooKeeper test of that worker (tests/real_io/conftest.py)."""
from __future__ import annotations

import itertools
import socket

import pytest

from real_io import zk_server
from tests.real_io.conftest import START_TRIES, free_ports, start_retrying


@pytest.fixture
def directories(tmp_path):
    numbers = itertools.count(1)
    return lambda: tmp_path / f"zk-{next(numbers)}"


@pytest.fixture(autouse=True)
def needs_zookeeper():
    missing = zk_server.server_available()
    if missing is not None:
        pytest.skip(f"no ZooKeeper to test against: {missing}")


def listening_socket() -> socket.socket:
    holder = socket.socket()
    holder.bind((zk_server.HOST, 0))
    holder.listen()
    return holder


def test_a_taken_port_is_passed_over_for_the_next(directories):
    with listening_socket() as taken:
        taken_port = taken.getsockname()[1]
        server = start_retrying(directories, itertools.chain([taken_port], free_ports()))
        try:
            assert server.port != taken_port
            assert zk_server.four_letter_word(server.host, server.port) == "imok"
        finally:
            zk_server.stop(server.directory)


def test_after_the_last_try_the_failure_is_raised(directories):
    with listening_socket() as taken:
        taken_port = taken.getsockname()[1]
        with pytest.raises(zk_server.ZooKeeperError, match=f"port {taken_port} .* is taken"):
            start_retrying(directories, itertools.repeat(taken_port, START_TRIES))
