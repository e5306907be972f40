"""The core's requests to other brokers over TCP: Kafka's NetworkClient, for one broker.

``Send(dst=<broker id>)`` of a request goes on a connection to that broker's --peer
address, opened when first needed. As in Kafka, each purpose has connections of its
own: the replica fetcher's (Fetch, OffsetsForLeaderEpoch; ReplicaFetcherThread), the
controller's to each broker (LeaderAndIsr, UpdateMetadata, StopReplica;
ControllerChannelManager's RequestSendThread) and this broker's to the controller
(AlterIsr, ControlledShutdown; BrokerToControllerChannelManager), so a fetch parked at
the leader for replica.fetch.wait.max.ms never delays a LeaderAndIsr behind it.

Requests on one connection are written as they come and answered in order (the
receiving broker reads one request at a time per connection); each answer comes back to
the core as ``MessageReceived(src=<broker id>, response)``. What cannot be delivered is
dropped with a ``message_dropped`` trace event that says why -- no address for the
broker, a failed connect (then new connects wait reconnect.backoff.ms, doubling up to
reconnect.backoff.max.ms), a connection lost or closed before the answer: the core has a
timeout for every request and sends again. A connection whose oldest request has waited
longer than its request timeout is closed, as NetworkClient disconnects on
request.timeout.ms, so requests do not queue behind a peer that stopped answering. An
answer that does not decode, or names a correlation id not in flight, closes that
connection; nothing here raises into the event loop.
"""
from __future__ import annotations

import asyncio
import itertools
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from real_io import inter_broker_api
from real_io.connection import FrameConnection, FramePool
from real_io.protocol import apis
from real_io.protocol.errors import ProtocolError

Address = tuple[str, int]
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms
RECONNECT_BACKOFF_MAX_MS = 1000  # reconnect.backoff.max.ms
CONNECT_TIMEOUT_MS = 10000  # socket.connection.setup.timeout.ms (KIP-601)
MAX_RESPONSE_BYTES = apis.DEFAULT_MAX_REQUEST_BYTES  # a larger answer closes the connection
# A channel waits for answers as long as it has requests in flight (each has its own
# timeout, _check_timeout) and for nothing otherwise: no idle limit of its own.
NO_IDLE_LIMIT_S = 365 * 24 * 3600.0


@dataclass
class _InFlight:
    api_key: int
    version: int
    message: Any  # the core's request: its correlation id and type name


class _Channel:
    """One connection to one broker for one purpose."""

    def __init__(self, owner: "PeerChannels", broker: int, purpose: str, timeout_ms: int,
                 loop: asyncio.AbstractEventLoop):
        self.owner = owner
        self.loop = loop
        self.broker = broker
        self.purpose = purpose
        self.timeout_s = timeout_ms / 1000.0
        self.connection: FrameConnection | None = None
        self.connecting: asyncio.Task | None = None
        self.reading: asyncio.Task | None = None
        self.queued: list[tuple[bytes, int, _InFlight]] = []  # written once connected
        self.in_flight: OrderedDict[int, _InFlight] = OrderedDict()
        self.backoff_ms = 0
        self.retry_at = 0.0
        self.generation = 0  # which connection a timeout check belongs to

    def send(self, frame: bytes, correlation_id: int, entry: _InFlight) -> None:
        loop = self.loop
        if self.connection is not None:
            self._write(frame, correlation_id, entry)
        elif self.connecting is not None:
            self.queued.append((frame, correlation_id, entry))
        elif loop.time() < self.retry_at:
            self.owner.dropped(self.broker, entry.message, f"reconnect backoff after a failed connect to broker "
                                                           f"{self.broker} ({self.purpose})")
        else:
            self.queued.append((frame, correlation_id, entry))
            self.connecting = loop.create_task(self._connect())

    def _write(self, frame: bytes, correlation_id: int, entry: _InFlight) -> None:
        assert self.connection is not None
        self.in_flight[correlation_id] = entry
        self.connection.write(frame)
        self.loop.call_later(self.timeout_s, self._check_timeout, self.generation, correlation_id)

    async def _connect(self) -> None:
        host, port = self.owner.peers[self.broker]
        # Answers are read as the broker reads requests (real_io.connection): each frame
        # straight into a buffer of its own, a fetch's records copied once, by the kernel
        # (a StreamReader copied them into its buffer and out again).
        frames = self.owner.frames
        try:
            _, connection = await asyncio.wait_for(
                self.loop.create_connection(lambda: FrameConnection(MAX_RESPONSE_BYTES, _opened, frames,
                                                                    whole_frames=True), host, port),
                CONNECT_TIMEOUT_MS / 1000.0)
        except (OSError, asyncio.TimeoutError) as error:
            self.connecting = None
            self.backoff_ms = min(max(self.backoff_ms * 2, RECONNECT_BACKOFF_MS), RECONNECT_BACKOFF_MAX_MS)
            self.retry_at = self.loop.time() + self.backoff_ms / 1000.0
            queued, self.queued = self.queued, []
            reason = f"cannot connect to broker {self.broker} at {host}:{port} ({self.purpose}): " \
                     f"{type(error).__name__} {getattr(error, 'strerror', None) or error}"
            for _, _, entry in queued:
                self.owner.dropped(self.broker, entry.message, reason)
            return
        self.connecting = None
        self.backoff_ms = 0
        self.generation += 1
        self.connection = connection
        self.reading = self.loop.create_task(self._read(connection, self.generation))
        queued, self.queued = self.queued, []
        for frame, correlation_id, entry in queued:
            self._write(frame, correlation_id, entry)

    async def _read(self, connection: FrameConnection, generation: int) -> None:
        reason = "closed by the peer"
        try:
            while True:
                # (a view of a pooled buffer: used again only once nothing views it)
                payload = await connection.read_frame(NO_IDLE_LIMIT_S)
                if payload is None:
                    break
                response = self._decode(payload)
                del payload
                self.owner.deliver(self.broker, response)
        except asyncio.CancelledError:
            raise
        except (ProtocolError, ConnectionError, OSError) as error:
            reason = f"{type(error).__name__}: {error}"
        except Exception as error:  # a bug must end this connection, never the broker
            reason = f"{type(error).__name__}: {error}"
            print(f"isrlab serve: connection to broker {self.broker} ({self.purpose}): {reason}", file=sys.stderr)
        if generation == self.generation:
            self.close(reason)

    def _decode(self, payload: bytes | bytearray | memoryview) -> Any:
        """The core's response for an answer frame; ProtocolError if it is not one. The
        answers come in request order: one to any other request than the oldest in
        flight is refused, as NetworkClient refuses a correlation id that does not
        match. The request stays in flight until its answer decodes, so that closing
        the connection reports it dropped."""
        if len(payload) < 4:
            raise ProtocolError("a response without a correlation id")
        correlation_id = int.from_bytes(payload[:4], "big", signed=True)
        oldest = next(iter(self.in_flight), None)
        if correlation_id != oldest:
            raise ProtocolError(f"a response with correlation id {correlation_id}, the oldest in flight is {oldest}")
        entry = self.in_flight[correlation_id]
        _, body = apis.decode_response(entry.api_key, entry.version, payload)
        try:
            response = inter_broker_api.RESPONSES[entry.api_key](entry.message.correlation_id, entry.version, body)
        except (KeyError, TypeError, ValueError) as error:
            raise ProtocolError(f"a response that does not map: {type(error).__name__}: {error}") from None
        del self.in_flight[correlation_id]
        return response

    def _check_timeout(self, generation: int, correlation_id: int) -> None:
        if generation == self.generation and correlation_id in self.in_flight:
            self.close(f"no response from broker {self.broker} within {self.timeout_s * 1000:.0f} ms "
                       f"({self.purpose}; request.timeout.ms)")

    def close(self, reason: str) -> None:
        """End the connection; what it had in flight will get no answer."""
        self.generation += 1
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()
        reading, self.reading = self.reading, None
        if reading is not None and reading is not asyncio.current_task():
            reading.cancel()
        in_flight, self.in_flight = self.in_flight, OrderedDict()
        for entry in in_flight.values():
            self.owner.dropped(self.broker, entry.message, f"connection to broker {self.broker} ({self.purpose}) "
                                                           f"ended before the response: {reason}")

    def abandon(self) -> None:
        """The broker stops: nothing is reported any more."""
        if self.connecting is not None:
            self.connecting.cancel()
        self.queued.clear()
        self.in_flight.clear()
        self.close("the broker stopped")


def _opened(_connection: FrameConnection) -> None:
    """(create_connection returns the connection: nothing to do when it opens)"""


class PeerChannels:
    """The connections of one broker to the others. ``peers``: where to reach each broker
    (--peer); ``endpoints()``: the advertised addresses the controller's requests name;
    ``deliver(broker, response)`` hands an answer to the core; ``trace(type, fields)``."""

    def __init__(self, broker_id: int, peers: Mapping[int, Address], endpoints: Callable[[], Mapping[int, Address]],
                 deliver: Callable[[int, Any], None], trace: Callable[[str, dict], None],
                 timeouts_ms: Mapping[str, int]):
        self.broker_id = broker_id
        self.peers = dict(peers)
        self.endpoints = endpoints
        self.deliver = deliver
        self.trace = trace
        self.timeouts_ms = dict(timeouts_ms)
        self._channels: dict[tuple[int, str], _Channel] = {}
        self._correlation = itertools.count(1)
        self.frames = FramePool()  # the answers' buffers, shared by the channels

    def send(self, broker: int, message: Any) -> None:
        """Carry out the core's ``Send(dst=broker, message)``, at once or never."""
        route = inter_broker_api.OUTBOUND.get(type(message))
        if route is None:
            self.dropped(broker, message, f"{type(message).__name__} does not go to another broker")
            return
        if broker not in self.peers:
            self.dropped(broker, message, f"no address for broker {broker} (--peer)")
            return
        api_key, purpose, encode = route
        version = inter_broker_api.SEND_VERSIONS[api_key]
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        try:
            frame = apis.encode_request(apis.RequestHeader(api_key, version, correlation_id,
                                                           f"broker-{self.broker_id}-{purpose}"),
                                        encode(message, self.endpoints()))
        except ProtocolError as error:
            self.dropped(broker, message, f"cannot encode: {error}")
            return
        channel = self._channels.get((broker, purpose))
        if channel is None:
            channel = _Channel(self, broker, purpose, self.timeouts_ms[purpose], asyncio.get_running_loop())
            self._channels[(broker, purpose)] = channel
        channel.send(frame, correlation_id, _InFlight(api_key, version, message))

    def dropped(self, broker: int, message: Any, reason: str) -> None:
        self.trace("message_dropped", {"dst": broker, "message": type(message).__name__, "reason": reason})

    def close(self) -> None:
        for channel in self._channels.values():
            channel.abandon()
        self._channels.clear()
