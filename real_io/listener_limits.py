"""The listener's bounds: the memory of requests being received (KIP-72) and the number
of connections (KIP-402), with their broker config keys.

These keys belong to the binding, not to the core: the core never sees a socket, so
``serve`` takes them out of ``--config`` before the rest becomes the core's
``BrokerConfig`` (``split_config``), as ``socket.request.max.bytes`` and
``connections.max.idle.ms`` are the binding's own options.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

INT_MAX = 2**31 - 1  # Kafka's Int.MaxValue: the default of both connection limits

QUEUED_MAX_REQUEST_BYTES = "queued.max.request.bytes"
MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
LISTENER_KEYS = (QUEUED_MAX_REQUEST_BYTES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP)


class ListenerConfigError(ValueError):
    """A listener key with a value Kafka would refuse (the message names the key)."""


@dataclass(frozen=True)
class ListenerLimits:
    # None: as large as socket.request.max.bytes, the smallest pool Kafka allows (the
    # broker's default, where Kafka's -1 has no pool at all); 0 or less: no pool.
    queued_max_request_bytes: int | None = None
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX

    def pool_bytes(self, max_request_bytes: int) -> int:
        """The pool's size for a listener whose frames are at most ``max_request_bytes``
        (0: no pool). Kafka 2.7.0 KafkaConfig.validateValues: a pool smaller than
        socket.request.max.bytes is refused."""
        queued = self.queued_max_request_bytes
        if queued is None:
            return max_request_bytes
        if queued <= 0:
            return 0
        if queued < max_request_bytes:
            raise ListenerConfigError(f"{QUEUED_MAX_REQUEST_BYTES} must be at least socket.request.max.bytes "
                                      f"({max_request_bytes}), or -1 for no pool; got {queued}")
        return queued


def split_config(overrides: Mapping[str, Any]) -> tuple[dict[str, Any], ListenerLimits]:
    """``--config`` overrides: those for the core, and the listener's limits."""
    core = {key: value for key, value in overrides.items() if key not in LISTENER_KEYS}
    values = {}
    for key in LISTENER_KEYS:
        if key in overrides:
            value = overrides[key]
            if type(value) is not int:
                raise ListenerConfigError(f"{key} must be an integer, got {value!r}")
            if key != QUEUED_MAX_REQUEST_BYTES and value < 0:  # KafkaConfig: atLeast(0)
                raise ListenerConfigError(f"{key} must be at least 0, got {value}")
            if key == MAX_CONNECTIONS_PER_IP and value == 0:  # KafkaConfig: only with overrides (not offered)
                raise ListenerConfigError(f"{key} can be 0 only with max.connections.per.ip.overrides, "
                                          "which isrlab does not offer")
            values[key.replace(".", "_")] = value
    return core, ListenerLimits(**values)


class MemoryPool:
    """The bytes of requests being received, as Kafka's SimpleMemoryPool (2.7.0) with
    strict=false, the way SocketServer builds it: a reservation is granted while any
    memory is left, so the pool may be overdrawn by one frame (at most
    ``size_bytes + socket.request.max.bytes`` reserved) and a frame larger than what
    is left is never starved by smaller ones. A reservation is a frame's whole size,
    made before its buffer grows past what a connection may hold unreserved, so a frame
    that got memory never waits for more (reservations of what was allocated so far
    would let frames that each hold part of the pool wait on one another forever).
    Refused connections wait in line and are called, first come first served, as
    memory comes back. ``size_bytes`` of 0 or less: no pool, every reservation granted."""

    def __init__(self, size_bytes: int):
        self.size_bytes = size_bytes
        self.available = size_bytes
        self._waiters: deque[Callable[[], None]] = deque()

    def try_allocate(self, size: int) -> bool:
        if self.size_bytes <= 0:
            return True
        if self.available < 1:
            return False
        self.available -= size
        return True

    def release(self, size: int) -> None:
        if self.size_bytes <= 0:
            return
        self.available += size
        waiters = self._waiters
        while waiters and self.available >= 1:
            waiters.popleft()()  # each allocates what it waited for

    def wait(self, waiter: Callable[[], None]) -> None:
        self._waiters.append(waiter)

    def cancel(self, waiter: Callable[[], None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class ConnectionQuotas:
    """Kafka 2.7.0 SocketServer's ConnectionQuotas for one listener: ``max.connections``
    makes the acceptor wait (waitForConnectionSlot) until a connection closes, with the
    connection just accepted held, and later ones left in the kernel's backlog;
    ``max.connections.per.ip`` closes a connection at once when its address already has
    that many (inc throws TooManyConnectionsException, Acceptor.accept closes it)."""

    def __init__(self, max_connections: int = INT_MAX, max_connections_per_ip: int = INT_MAX):
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.counts: dict[str, int] = {}
        self.total = 0
        self._slot_freed: asyncio.Future | None = None

    async def wait_for_slot(self) -> None:
        while self.total >= self.max_connections:
            self._slot_freed = asyncio.get_running_loop().create_future()
            try:
                await self._slot_freed
            finally:
                self._slot_freed = None

    def inc(self, address: str) -> bool:
        """Count a connection from ``address``; False (and not counted) when that
        address already has its maximum."""
        count = self.counts.get(address, 0)
        if count >= self.max_connections_per_ip:
            return False
        self.counts[address] = count + 1
        self.total += 1
        return True

    def dec(self, address: str) -> None:
        count = self.counts[address]
        if count == 1:
            del self.counts[address]
        else:
            self.counts[address] = count - 1
        self.total -= 1
        freed = self._slot_freed
        if freed is not None and not freed.done():
            freed.set_result(None)
