"""The listener's limits on a served broker: ``max.connections.per.ip`` and
``max.connections`` (KIP-402, Kafka 2.7.0 core/src/main/scala/kafka/network/
SocketServer.scala: Acceptor.accept, ConnectionQuotas.inc and waitForConnectionSlot) and
``queued.max.request.bytes`` (KIP-72: SimpleMemoryPool with strict=false, Selector muting
a channel whose receive cannot get memory), each forced and observed from outside."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from isrlab import cli
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_frames import one_record
from tests.real_io.test_serve_malformed import is_closed, read_frame
from tests.real_io.test_serve_wire import WireClient, create, partition_of, produce_body

MiB = 1 << 20


def connect(port: int, source: str = "127.0.0.1", timeout_s: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout_s, source_address=(source, 0))


def api_versions(sock: socket.socket, correlation_id: int = 7) -> bool:
    """Whether an ApiVersions request on ``sock`` is answered (False: closed)."""
    try:
        sock.sendall(apis.encode_request(RequestHeader(ApiKey.API_VERSIONS, 2, correlation_id, "limits"), {}))
        payload = read_frame(sock)
    except (ConnectionResetError, BrokenPipeError):
        return False
    return payload is not None and apis.decode_response(ApiKey.API_VERSIONS, 2, payload)[0] == correlation_id


def served_within(port: int, source: str, timeout_s: float = 10.0) -> bool:
    """A new connection from ``source`` is served before ``timeout_s``: the broker
    counts a closed connection off asynchronously, so a retry may be needed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with connect(port, source) as sock:
            if api_versions(sock):
                return True
        time.sleep(0.05)
    return False


def test_the_connection_past_max_connections_per_ip_is_closed_at_once(tmp_path):
    """ConnectionQuotas.inc throws TooManyConnectionsException once an address has
    max.connections.per.ip connections, and Acceptor.accept closes the new one; other
    addresses are not affected, and a closed connection frees its address's slot."""
    broker = ServeProcess(tmp_path / "data", config={"max.connections.per.ip": 3}).start()
    try:
        first = [connect(broker.port) for _ in range(3)]
        assert all(api_versions(sock) for sock in first)
        with connect(broker.port) as fourth:
            assert is_closed(fourth)
        with connect(broker.port, source="127.0.0.2") as elsewhere:
            assert api_versions(elsewhere)
        first.pop().close()
        assert served_within(broker.port, "127.0.0.1")
        assert all(api_versions(sock, 8) for sock in first)
        for sock in first:
            sock.close()
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()


def test_past_max_connections_the_acceptor_waits_until_a_connection_closes(tmp_path):
    """ConnectionQuotas.waitForConnectionSlot: with max.connections open, the acceptor
    holds the connection it just accepted (and leaves later ones in the backlog) until
    one closes; then that connection is served, its request not lost."""
    broker = ServeProcess(tmp_path / "data", config={"max.connections": 2}).start()
    try:
        first = [connect(broker.port, source) for source in ("127.0.0.1", "127.0.0.2")]
        assert all(api_versions(sock) for sock in first)
        waiting = connect(broker.port, "127.0.0.3", timeout_s=1.0)
        with pytest.raises(socket.timeout):
            api_versions(waiting)  # accepted by the kernel, not served
        first.pop(0).close()
        waiting.settimeout(10)
        assert read_frame(waiting) is not None  # the request sent while it waited is answered
        assert api_versions(waiting, 9)
        waiting.close()
        for sock in first:
            sock.close()
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()


def announce(port: int, announced: int, sent: int) -> socket.socket:
    sock = connect(port)
    sock.sendall(struct.pack(">i", announced) + b"\x01" * sent)
    return sock


def test_a_frame_that_cannot_get_memory_is_not_read_until_memory_comes_back(tmp_path):
    """queued.max.request.bytes of 8 MiB, frames of at most 4 MiB: two connections that
    announce 4 MiB and send 32 KiB reserve the pool (strict=false: granted while any is
    left); a third and then a client's 100 KiB produce wait in line, unread, while small
    requests are served; the third leaving the line frees nothing, the first closing
    gives the client's frame its memory and it is answered."""
    broker = ServeProcess(tmp_path / "data", config={"queued.max.request.bytes": 8 * MiB},
                          extra=("--max-request-bytes", str(4 * MiB))).start()
    try:
        client = WireClient(broker.port)
        create(client, "pool")
        holders = [announce(broker.port, 4 * MiB, 32768) for _ in range(2)]
        in_line = announce(broker.port, 4 * MiB, 32768)
        create(client, "barrier")  # a round trip: the broker has read what came before
        client.sock.settimeout(1.0)
        client.send(ApiKey.PRODUCE, 8, produce_body("pool", one_record("v" * 100_000), acks=1))
        with pytest.raises(socket.timeout):
            client.receive(ApiKey.PRODUCE, 8)
        with connect(broker.port) as small:  # a frame within the staging buffer needs no reservation
            assert api_versions(small)
        in_line.close()
        with pytest.raises(socket.timeout):
            client.receive(ApiKey.PRODUCE, 8)
        holders.pop().close()
        client.sock.settimeout(10)
        _, answer = client.receive(ApiKey.PRODUCE, 8)
        assert (partition_of(answer)["error_code"], partition_of(answer)["base_offset"]) == (0, 0)
        for sock in holders:
            sock.close()
        client.close()
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()


@pytest.mark.parametrize("bad", [["queued.max.request.bytes=1000"], ["max.connections.per.ip=0"],
                                 ["max.connections=-1"], ["max.connections=many"]])
def test_serve_refuses_listener_limits_kafka_refuses(tmp_path, bad, capsys):
    """KafkaConfig.validateValues: a pool smaller than socket.request.max.bytes, a
    per-IP limit of 0 without overrides; the definitions' atLeast(0) and types."""
    argv = ["serve", "--broker-id", "1", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0"]
    assert cli.main(argv + [arg for pair in bad for arg in ("--config", pair)]) == 2
    assert bad[0].split("=")[0] in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
