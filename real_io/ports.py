"""Ports for the servers the project starts (brokers, ZooKeeper): chosen below the
kernel's ephemeral range, and checked free.

A port the kernel picks (a bind to port 0) comes from the ephemeral range, the same one
it takes the local ports of outgoing connections from. Between the choice and the
server's own bind, any client's or broker's new connection could take it: under
`make test`'s parallel workers a broker then failed to start with "Address already in
use". No connection is given a port below that range, so a port chosen there stays free
unless another server takes it; the draw is random (seeded by the OS, not by a run's
seed: ports are never part of a trace) so that two processes choosing at once rarely
pick the same one.
"""
from __future__ import annotations

import random
import socket

HOST = "127.0.0.1"
_LOWEST = 10_000  # below: ports services on a developer's machine tend to use
_DEFAULT_EPHEMERAL = (32_768, 60_999)  # Linux's default ip_local_port_range
_draw = random.Random()


def ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL


def port_in_use(port: int, host: str = HOST) -> bool:
    """Something listens on the port, or holds it bound (TIME_WAIT is free: servers
    bind with SO_REUSEADDR)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = HOST) -> int:
    """A free port outside the ephemeral range (the kernel's choice if that range
    leaves no room, as on a machine that made it span almost every port)."""
    low, high = ephemeral_range()
    spans = [(a, b) for a, b in ((_LOWEST, low - 1), (high + 1, 65_535)) if b - a >= 1_000]
    for _ in range(100 if spans else 0):
        a, b = _draw.choice(spans)
        port = _draw.randint(a, b)
        if not port_in_use(port, host):
            return port
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
