"""The connections to other brokers (real_io/peer_channels.py) against small fake peers
on 127.0.0.1: answers reach the core in order with its correlation ids, each purpose
has its own connection (a parked fetch does not delay a LeaderAndIsr), and every way a
request can fail to be answered -- no address, a refused connect and its backoff, a
peer that never answers, an answer out of order or one that does not decode -- ends in
a ``message_dropped`` event with its reason, never an exception."""
from __future__ import annotations

import asyncio

import pytest

from broker_core.errors import ErrorCode
from broker_core.messages import (
    FetchPartition, FetchPartitionResult, FetchRequest, FetchResponse, LeaderAndIsrRequest, LeaderAndIsrResponse,
    UpdateMetadataRequest, UpdateMetadataResponse)
from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io import inter_broker_api, kafka_api
from real_io.connection import FIRST_ALLOCATION
from real_io.protocol.record_batch import encode_batch
from real_io.ports import free_port
from real_io.peer_channels import PeerChannels
from real_io.protocol import apis

TIMEOUTS = {inter_broker_api.FETCHER: 400, inter_broker_api.CONTROLLER: 400, inter_broker_api.TO_CONTROLLER: 400}


class FakePeer:
    """A listener that hands each request to ``answer(connection number, request)``,
    which returns the frames to write back (none: no answer)."""

    def __init__(self, answer):
        self.answer = answer
        self.connections = 0
        self.requests: list[tuple[int, apis.Request]] = []

    async def start(self, port: int = 0) -> "FakePeer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                request = apis.decode_request(await reader.readexactly(size))
                self.requests.append((number, request))
                for frame in self.answer(number, request):
                    writer.write(frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        self.server.close()


def update_metadata_answer(request: apis.Request, error: ErrorCode = ErrorCode.NONE) -> bytes:
    header = request.header
    return apis.encode_response(header.api_key, header.api_version, header.correlation_id,
                                {"error_code": int(error)})


class Core:
    """What the runtime gives the channels: the answers and the trace, recorded."""

    def __init__(self, peers: dict):
        self.answers: list = []
        self.events: list[dict] = []
        self.channels = PeerChannels(1, peers, lambda: {}, lambda broker, response: self.answers.append(
            (broker, response)), lambda type_, fields: self.events.append({"type": type_, **fields}), TIMEOUTS)

    def dropped(self) -> list[str]:
        return [e["reason"] for e in self.events if e["type"] == "message_dropped"]


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def update_metadata(correlation_id: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(correlation_id, 1, 3, (1, 2), {})


def test_answers_come_back_in_order_with_the_cores_correlation_ids():
    async def run():
        peer = await FakePeer(lambda n, r: [update_metadata_answer(r)]).start()
        core = Core({2: ("127.0.0.1", peer.port)})
        for correlation_id in (41, 17, 99):
            core.channels.send(2, update_metadata(correlation_id))
        await until(lambda: len(core.answers) == 3)
        assert core.answers == [(2, UpdateMetadataResponse(c, ErrorCode.NONE)) for c in (41, 17, 99)]
        assert peer.connections == 1 and not core.dropped()
        core.channels.close()
        await peer.close()
    asyncio.run(run())


def test_a_parked_fetch_does_not_delay_a_leader_and_isr():
    """ReplicaFetcherThread and the controller's RequestSendThread have connections of
    their own: the fetch is never answered here, the LeaderAndIsr is."""
    def answer(number, request):
        if request.header.api_key == apis.ApiKey.FETCH:
            return []
        body = inter_broker_api.leader_and_isr_response_body(LeaderAndIsrResponse(0, ErrorCode.NONE))
        return [apis.encode_response(request.header.api_key, request.header.api_version,
                                     request.header.correlation_id, body)]

    async def run():
        peer = await FakePeer(answer).start()
        core = Core({2: ("127.0.0.1", peer.port)})
        core.channels.send(2, FetchRequest(5, 1, 10000, 1, {TopicPartition("t", 0): FetchPartition(0)}))
        core.channels.send(2, LeaderAndIsrRequest(6, 2, 1, {}, ()))
        await until(lambda: core.answers)
        assert core.answers == [(2, LeaderAndIsrResponse(6, ErrorCode.NONE, {}))]
        assert peer.connections == 2
        assert {r.header.client_id for _, r in peer.requests} == {"broker-1-replica-fetcher", "broker-1-controller"}
        core.channels.close()
        await peer.close()
    asyncio.run(run())


def test_fetch_answers_larger_than_a_pooled_buffer_arrive_whole_and_in_order():
    """A follower's fetch may bring several partitions' megabytes in one answer: it is
    read into a buffer of its whole size (real_io.connection, whole_frames), and the
    small answer after it, into a pooled one, still decodes."""
    tp = TopicPartition("t", 0)
    big = [encode_batch(RecordBatch(i * 10, 1, Records([str(i) * 600_000] * 2))) for i in range(3)]
    assert sum(map(len, big)) > 3 * FIRST_ALLOCATION

    def answer(number, request):
        header = request.header
        batches = inter_broker_api.fetched_batches(b"".join(big) if header.correlation_id == 1 else big[0])
        response = FetchResponse(header.correlation_id, {tp: FetchPartitionResult(ErrorCode.NONE, 30, 0, 30, batches)})
        return [apis.encode_response(header.api_key, header.api_version, header.correlation_id,
                                     kafka_api.fetch_response(response, replica=True))]

    async def run():
        peer = await FakePeer(answer).start()
        core = Core({2: ("127.0.0.1", peer.port)})
        for correlation_id in (7, 8):
            core.channels.send(2, FetchRequest(correlation_id, 1, 500, 1, {tp: FetchPartition(0)}))
        await until(lambda: len(core.answers) == 2)
        received = [[bytes(b.encode()) for b in response.partitions[tp].batches] for _, response in core.answers]
        assert [response.correlation_id for _, response in core.answers] == [7, 8]
        assert received == [big, big[:1]] and not core.dropped()
        core.channels.close()
        await peer.close()
    asyncio.run(run())


def test_no_address_is_dropped_with_the_reason():
    async def run():
        core = Core({})
        core.channels.send(3, update_metadata(1))
        assert core.dropped() == ["no address for broker 3 (--peer)"]
        core.channels.send(3, UpdateMetadataResponse(1, ErrorCode.NONE))
        assert core.dropped()[-1] == "UpdateMetadataResponse does not go to another broker"
    asyncio.run(run())


def test_a_refused_connect_drops_then_backs_off_then_connects():
    """reconnect.backoff.ms: sends during the backoff are dropped without a connect."""
    async def run():
        port = free_port()
        core = Core({2: ("127.0.0.1", port)})
        core.channels.send(2, update_metadata(1))
        await until(lambda: core.dropped())
        assert "cannot connect to broker 2" in core.dropped()[0]
        core.channels.send(2, update_metadata(2))
        assert "reconnect backoff" in core.dropped()[1]
        await asyncio.sleep(0.1)  # past the first backoff (50 ms); a peer now listens there
        peer = await FakePeer(lambda n, r: [update_metadata_answer(r)]).start(port)
        core.channels.send(2, update_metadata(3))
        await until(lambda: core.answers)
        assert core.answers == [(2, UpdateMetadataResponse(3, ErrorCode.NONE))] and len(core.dropped()) == 2
        core.channels.close()
        await peer.close()
    asyncio.run(run())


def test_a_peer_that_never_answers_is_disconnected_after_the_request_timeout():
    """NetworkClient closes a connection whose request waited request.timeout.ms; the
    next request goes on a new connection (and is answered there)."""
    async def run():
        peer = await FakePeer(lambda n, r: [update_metadata_answer(r)] if n > 1 else []).start()
        core = Core({2: ("127.0.0.1", peer.port)})
        core.channels.send(2, update_metadata(1))
        await until(lambda: core.dropped(), 3)
        assert "no response from broker 2 within 400 ms" in core.dropped()[0]
        core.channels.send(2, update_metadata(2))
        await until(lambda: core.answers)
        assert core.answers == [(2, UpdateMetadataResponse(2, ErrorCode.NONE))] and peer.connections == 2
        core.channels.close()
        await peer.close()
    asyncio.run(run())


@pytest.mark.parametrize("answer, reason", [
    (lambda r: [apis.frame(r.header.correlation_id.to_bytes(4, "big") + b"\xff" * 9)], "varint longer"),
    (lambda r: [update_metadata_answer(apis.Request(
        apis.RequestHeader(r.header.api_key, r.header.api_version, r.header.correlation_id + 1), {}))],
     "correlation id"),
    (lambda r: [b"\xff\xff\xff\xff"], "frame size -1"),
    (lambda r: [b"\x00\x00\x00\x02\x00\x00"], "without a correlation id"),
])
def test_an_answer_that_does_not_decode_closes_the_connection_and_reports_the_request(answer, reason):
    async def run():
        peer = await FakePeer(lambda n, r: answer(r) if n == 1 else [update_metadata_answer(r)]).start()
        core = Core({2: ("127.0.0.1", peer.port)})
        core.channels.send(2, update_metadata(1))
        await until(lambda: core.dropped())
        assert reason in core.dropped()[0] and "ended before the response" in core.dropped()[0]
        core.channels.send(2, update_metadata(2))  # a new connection, answered properly
        await until(lambda: core.answers)
        assert core.answers == [(2, UpdateMetadataResponse(2, ErrorCode.NONE))]
        core.channels.close()
        await peer.close()
    asyncio.run(run())
