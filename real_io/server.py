"""The Kafka listener: connections, frames, and one request at a time per connection.

Like Kafka's SocketServer (2.7.0: Processor mutes a channel from the moment a request
is read until its response is sent) a connection's next request is read only after the
previous one is answered, so responses go out in request order. An acks=0 produce gets
no response and the next request is read at once.

A frame is an int32 size and that many bytes, read by real_io/connection.py straight
into a buffer of its own; a size below zero or above ``socket.request.max.bytes``
closes the connection before anything is allocated (Kafka's InvalidReceiveException).
A request that does not parse closes the connection, as Kafka does; an ApiVersions
request of a version not offered gets the v0 answer with UNSUPPORTED_VERSION so the
client can pick another. None of this touches other
connections. An idle connection costs one coroutine waiting on its socket, and is closed after
``connections.max.idle.ms`` without a whole request (Kafka's Selector closes idle
connections too).

The listener's bounds (real_io/listener_limits.py): the bytes of requests being
received come from a ``MemoryPool`` of ``queued.max.request.bytes`` (a connection whose
frame cannot get its size is not read until memory comes back); ``max.connections``
makes the acceptor wait for a connection to close and ``max.connections.per.ip`` closes
a connection from an address that has that many, as Kafka 2.7.0 SocketServer's
Acceptor and ConnectionQuotas do. The listener accepts in a loop of its own (asyncio's
server cannot be told to stop accepting for a while).
"""
from __future__ import annotations

import asyncio
import errno
import itertools
import socket
import sys
from typing import Any, Callable

from broker_core.inputs import RequestHandled
from broker_core.messages import ANONYMOUS
from real_io import group_api, inter_broker_api, kafka_api, local_apis, quota_apis, reassign_apis, request_time
from real_io.connection import FrameConnection, FramePool
from real_io.files import PinnedRegion
from real_io.listener_limits import ConnectionQuotas, ListenerLimits, MemoryPool
from real_io.protocol import apis
from real_io.protocol.primitives import Splice
from real_io.protocol.apis import ApiKey
from real_io.protocol.errors import ProtocolError, UnsupportedVersionError
from real_io.runtime import BrokerRuntime

# FindCoordinator goes to the core exactly when the group APIs are served
# (apis.GROUPS_SERVED, the one switch): until then the binding's own answer (local_apis:
# GROUP_AUTHORIZATION_FAILED) makes a client with a group fail at once, where a
# coordinator found but JoinGroup unsupported would make it hang.
_LOCAL: dict[int, Callable[[dict], dict]] = {
    ApiKey.API_VERSIONS: local_apis.api_versions,
    ApiKey.FIND_COORDINATOR: local_apis.find_coordinator,
}


DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600000  # Kafka's connections.max.idle.ms
ACCEPT_BACKLOG = 4096
ACCEPT_RETRY_S = 1.0  # after running out of descriptors or memory, as asyncio's own server waits
_ACCEPT_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class ConnectionClosed(Exception):
    """The connection ends: the broker stopped while a request waited for the core, or
    an acks=0 produce had an error the binding found decoding it (the only way to tell
    such a producer; errors the core finds close it by the core's CloseConnection)."""


class KafkaServer:
    def __init__(self, runtime: BrokerRuntime, host: str, port: int,
                 max_request_bytes: int = apis.DEFAULT_MAX_REQUEST_BYTES,
                 connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS,
                 limits: ListenerLimits = ListenerLimits()):
        self.runtime = runtime
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.idle_s = connections_max_idle_ms / 1000.0
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task | None = None
        self.memory = MemoryPool(limits.pool_bytes(max_request_bytes))  # queued.max.request.bytes
        self.quotas = ConnectionQuotas(limits.max_connections, limits.max_connections_per_ip)
        self._connections = itertools.count(1)
        self._correlation = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}  # the core's correlation id -> its answer
        self._tasks: set[asyncio.Task] = set()
        self._pool = FramePool()  # the connections' frame buffers, used again request after request
        self._closed_by_core: set[str] = set()  # connections the core closed (CloseConnection)
        self._hosts: dict[str, str] = {}  # connection -> its peer as Java writes it, for JoinGroup

    @property
    def endpoints(self) -> dict[int, tuple[str, int]]:
        """What Metadata names: every broker's advertised address (--advertise, else its
        --peer address), this broker's own listener unless it advertises another."""
        endpoints = dict(self.runtime.advertised)
        endpoints.setdefault(self.runtime.broker_id, (self.host, self.port))
        return endpoints

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._listener = socket.create_server((self.host, self.port), family=family, backlog=ACCEPT_BACKLOG)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._acceptor = asyncio.get_running_loop().create_task(self._accept_loop(self._listener))

    async def _accept_loop(self, listener: socket.socket) -> None:
        """Kafka 2.7.0 SocketServer Acceptor.accept with ConnectionQuotas.inc: accept,
        wait while ``max.connections`` are open, then close the connection at once if
        its address already has ``max.connections.per.ip``."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as error:
                if error.errno in _ACCEPT_RESOURCE_ERRORS:
                    print(f"isrlab serve: cannot accept connections for now: {error.strerror}", file=sys.stderr)
                    await asyncio.sleep(ACCEPT_RETRY_S)
                continue  # otherwise the connection went away before it was accepted (ECONNABORTED)
            await self.quotas.wait_for_slot()
            address = peer[0]
            if not self.quotas.inc(address):
                sock.close()  # TooManyConnectionsException: the client sees its connection closed
                continue
            uncount = self._uncounter(address)
            try:
                # Acceptor.accept sets both; asyncio sets TCP_NODELAY only on sockets made with
                # proto IPPROTO_TCP, which socket.create_server's are not (Nagle's algorithm
                # held responses back: produce throughput halved)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                await loop.connect_accepted_socket(
                    lambda: FrameConnection(self.max_request_bytes, self._opened, self._pool, self.memory,
                                            on_lost=uncount), sock)
            except Exception as error:  # one connection's failure must not stop the acceptor
                sock.close()
                uncount()
                if not isinstance(error, OSError):
                    print(f"isrlab serve: accepting {address}: {type(error).__name__}: {error}", file=sys.stderr)

    def _uncounter(self, address: str) -> Callable[[], None]:
        """The connection's count taken back, once, whichever of its ends comes first."""
        counted = [True]

        def uncount() -> None:
            if counted[0]:
                counted[0] = False
                self.quotas.dec(address)
        return uncount

    def _opened(self, connection: FrameConnection) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.cancel()
            await asyncio.gather(self._acceptor, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionClosed())
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one connection --------------------------------------------------------------
    async def _serve(self, connection: FrameConnection) -> None:
        address = f"client-{next(self._connections)}"

        def close() -> None:  # the core's CloseConnection: frames already read are not served
            self._closed_by_core.add(address)
            connection.close()
        muted = [0.0]  # the event loop's time until which the core muted this connection

        def mute(until: float) -> None:
            muted[0] = max(muted[0], until)
        self.runtime.register_client(address, self._on_core_message, close, mute)
        self._hosts[address] = _client_host(connection)
        timer = request_time.RequestTimer()
        try:
            while address not in self._closed_by_core:
                payload = await connection.read_frame(self.idle_s)
                if payload is None or address in self._closed_by_core:
                    return
                timer.start()
                response = await self._handle(address, payload, timer)
                del payload  # its buffer goes back to the pool at the next read_frame
                if response is not None:
                    await self._write(connection, response)
                await _wait_unmuted(muted)
        except (ProtocolError, ConnectionClosed, ConnectionError):
            return
        except asyncio.TimeoutError:
            return  # connections.max.idle.ms without a whole request: Kafka's Selector closes it too
        except asyncio.CancelledError:
            return  # the server is closing: the connection just ends
        except Exception as error:  # a bug answering one client must not stop the others
            print(f"isrlab serve: closing {address}: {type(error).__name__}: {error}", file=sys.stderr)
        finally:
            self.runtime.unregister_client(address)
            self._closed_by_core.discard(address)
            self._hosts.pop(address, None)
            connection.close()

    async def _write(self, connection: FrameConnection, parts: list[bytes | Splice[list[PinnedRegion]]]) -> None:
        """A response's bytes, and its spliced file regions straight from the segment
        files with sendfile (os.sendfile on a socket transport). A region the file no
        longer holds whole (truncated meanwhile) ends the connection, as Kafka's
        FileRecords.writeTo does, rather than send a short frame."""
        try:
            for part in parts:
                if not isinstance(part, Splice):  # (isinstance: mypy narrows both ways)
                    connection.write(part)
                    continue
                await connection.drain()
                loop = asyncio.get_running_loop()
                for region in part.parts:
                    with open(region.fd, "rb", buffering=0, closefd=False) as file:
                        sent = await loop.sendfile(connection.transport, file, region.position, region.size)
                    if sent != region.size:
                        raise ConnectionClosed()
            await connection.drain()
        finally:
            _close_splices(parts)

    async def _handle(self, address: str, payload: bytearray | memoryview,
                      timer: request_time.RequestTimer | None = None) -> list | None:
        try:
            request = apis.decode_request(payload)
        except UnsupportedVersionError as unsupported:
            if unsupported.api_key == ApiKey.API_VERSIONS:
                return [apis.unsupported_api_versions_response(unsupported.correlation_id)]
            raise
        header = request.header
        key, version = header.api_key, header.api_version
        local = _LOCAL.get(key) if key != ApiKey.FIND_COORDINATOR or not apis.GROUPS_SERVED else None
        body: dict | None
        if local is not None:
            body = local(request.body)
        elif key == ApiKey.DESCRIBE_CONFIGS:
            body = local_apis.describe_configs(request.body, version, self.runtime.broker_id,
                                               self.runtime.node.config_layers_now(), self._topic_overrides)
        else:
            body = await self._through_core(address, key, version, request.body, header.client_id or "", len(payload))
            if body is None:
                return None  # an acks=0 produce: 2.7 does not enforce the request quota on it
        if timer is not None:
            self._throttle_for_request_time(address, header.client_id or "", key, request.body, body, timer)
            with timer.encoding():
                return apis.encode_response_parts(key, version, header.correlation_id, body)
        # (a response that fails to encode drops its pinned regions: they close when collected)
        return apis.encode_response_parts(key, version, header.correlation_id, body)

    def _throttle_for_request_time(self, address: str, client_id: str, key: int, request: dict, body: dict,
                                   timer: request_time.RequestTimer) -> None:
        """2.7.0 KafkaApis ``sendResponseMaybeThrottle``: the core records the handler
        time (real_io/request_time.py says what is counted) against the request quota
        and mutes the connection if it is over; the response carries the larger of that
        throttle and a byte quota's (``maxThrottleTimeMs``) where its version has the
        field (a version without it drops the key when encoded). Skipped while no
        request quota was ever set: the core would record nothing."""
        if not self.runtime.node.request_quota_enabled():
            return
        cid = next(self._correlation)
        future = asyncio.get_running_loop().create_future()
        self._waiting[cid] = future
        try:  # the core answers at once, within feed (RequestThrottle); a stopping node not at all
            self.runtime.feed(RequestHandled(address, cid, client_id, ANONYMOUS, timer.handler_nanos(),
                                             timer.network_nanos, key, request.get("replica_id", -1)))
        finally:
            self._waiting.pop(cid, None)
        timer.network_nanos = 0
        throttle = future.result().throttle_time_ms if future.done() else 0
        if throttle > 0:
            body["throttle_time_ms"] = max(body.get("throttle_time_ms", 0), throttle)

    def _topic_overrides(self, topic: str):
        node = self.runtime.node
        return node.stored_topic_overrides(topic) if node.has_topic(topic) else None

    async def _through_core(self, address: str, key: int, version: int, body: dict, client_id: str = "",
                            size: int = -1) -> dict | None:
        """``client_id`` (the request header's) and ``size`` (the request's bytes) are
        for the client quotas; the user is ANONYMOUS, the PLAINTEXT listener's principal
        (2.7.0 SocketServer: PlaintextChannelBuilder's DefaultKafkaPrincipalBuilder)."""
        cid = next(self._correlation)
        if key == ApiKey.PRODUCE:
            message, errors = kafka_api.produce_request(cid, body, client_id, size + 4)  # with the size field
            if message.acks == 0:
                if message.partitions:
                    self.runtime.deliver(address, message)  # a partition error: the core closes the connection
                if errors:  # KafkaApis.handleProduceRequest: acks=0 with an error closes the connection
                    raise ConnectionClosed()
                return None  # acks=0: the producer expects no answer at all
            answer = await self._ask(address, message) if message.partitions else None
            return kafka_api.produce_response(answer, errors)
        if key == ApiKey.FETCH:  # a follower's fetch names its replica id; its answer carries the log end
            return kafka_api.fetch_response(await self._ask(address, kafka_api.fetch_request(cid, body, client_id)),
                                            replica=body["replica_id"] >= 0)
        if key == ApiKey.METADATA:
            answer = await self._ask(address, kafka_api.metadata_request(cid, version, body))
            return kafka_api.metadata_response(answer, self.endpoints)
        if key == ApiKey.LIST_OFFSETS:
            offsets, offset_errors = kafka_api.list_offsets_request(cid, body)
            answer = await self._ask(address, offsets) if offsets.partitions else None
            return kafka_api.list_offsets_response(answer, offset_errors, version)
        if key == ApiKey.FIND_COORDINATOR:  # only with apis.GROUPS_SERVED
            return kafka_api.find_coordinator_response(
                await self._ask(address, kafka_api.find_coordinator_request(cid, body)), self.endpoints)
        if key == ApiKey.INIT_PRODUCER_ID:
            return kafka_api.init_producer_id_response(
                await self._ask(address, kafka_api.init_producer_id_request(cid, body)))
        if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return kafka_api.offset_for_leader_epoch_response(
                await self._ask(address, kafka_api.offset_for_leader_epoch_request(cid, body)))
        if key == ApiKey.CREATE_TOPICS:
            creation, topic_errors = kafka_api.create_topics_request(cid, body)
            answer = await self._ask(address, creation) if creation.topics else None
            return kafka_api.create_topics_response(answer, topic_errors)
        if key == ApiKey.DELETE_TOPICS:
            deletion = kafka_api.delete_topics_request(cid, body)
            answer = await self._ask(address, deletion) if deletion.topics else None
            return kafka_api.delete_topics_response(answer, version)
        if key == ApiKey.CREATE_PARTITIONS:
            return kafka_api.create_partitions_response(
                await self._ask(address, kafka_api.create_partitions_request(cid, body)))
        if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
            change = kafka_api.alter_configs_request(cid, body, incremental=key == ApiKey.INCREMENTAL_ALTER_CONFIGS)
            return kafka_api.alter_configs_response(await self._ask(address, change))
        group = group_api.INBOUND.get(key)  # decoded only while apis.GROUPS_SERVED
        if group is not None:
            return await self._group(address, group, cid, version, body, client_id)
        inter_broker = (inter_broker_api.INBOUND.get(key) or quota_apis.INBOUND.get(key)
                        or reassign_apis.INBOUND.get(key))
        if inter_broker is not None:  # the controller's requests, and those to the controller
            to_core, to_wire = inter_broker
            return to_wire(await self._ask(address, to_core(cid, version, body)))
        raise ProtocolError(f"API key {key} has no handler")

    async def _group(self, address: str, api: group_api.GroupApi, cid: int, version: int, body: dict,
                     client_id: str) -> dict:
        """A group request, through the core like the others; the core may hold the
        answer (a JoinGroup until the rebalance completes, a follower's SyncGroup until
        the leader's), and this connection reads nothing more meanwhile, as Kafka's
        muted channel does."""
        request = api.to_core(cid, version, body, group_api.Client(client_id, self._hosts.get(address, "")))
        answer = api.refusal(request, version)
        if answer is None:
            answer = await self._ask(address, request)
        return api.to_wire(answer, version, request)

    async def _ask(self, address: str, message: Any) -> Any:
        if not self.runtime.is_running:
            raise ConnectionClosed()
        future = asyncio.get_running_loop().create_future()
        self._waiting[message.correlation_id] = future
        try:
            self.runtime.deliver(address, message)
            with request_time.awaiting_core():
                return await future
        finally:
            self._waiting.pop(message.correlation_id, None)

    def _on_core_message(self, message: Any) -> None:
        correlation_id = getattr(message, "correlation_id", None)  # none: as unexpected as one nobody awaits
        future = self._waiting.get(correlation_id) if correlation_id is not None else None
        if future is not None and not future.done():
            future.set_result(message)
        elif future is None:
            print(f"isrlab serve: unexpected {type(message).__name__} for a client", file=sys.stderr)


def _client_host(connection: FrameConnection) -> str:
    """The peer's address as Java's InetAddress.toString writes one without a host name
    ("/127.0.0.1"): what 2.7.0 keeps as a member's client host (KafkaApis
    handleJoinGroupRequest: request.context.clientAddress.toString)."""
    transport = getattr(connection, "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    return f"/{peer[0]}" if peer else ""


async def _wait_unmuted(muted: list[float]) -> None:
    """A throttled client's response went out at once; its next request is not read
    until the throttle time has passed (KIP-219: 2.7.0 SocketServer Processor mutes the
    channel, CHANNEL_MUTED_AND_THROTTLED, until ClientQuotaManager's ThrottledChannel
    expires). What it sends meanwhile waits in the socket's buffers."""
    delay = muted[0] - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


def _close_splices(parts: list[bytes | Splice[list[PinnedRegion]]]) -> None:
    for part in parts:
        if type(part) is Splice:
            for region in part.parts:
                region.close()

