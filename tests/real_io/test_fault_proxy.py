"""The fault proxy (real_io/fault_proxy.py) with plain sockets: one proxy process for the
module, a target server whose accepted sockets the test holds (so it drives both ends
of a connection), and a real ZooKeeper session lost across a blocked link."""
from __future__ import annotations

import itertools
import os
import queue
import select
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

import pytest
from kazoo.client import KazooClient, KazooState

from real_io import fault_proxy
from real_io.fault_proxy_client import FaultProxyClient, FaultProxyError, FaultProxyProcess

QUIET_S = 0.4  # how long "nothing arrives" is watched
_names = itertools.count(1)


class Target:
    """A listener whose accepted sockets go to a queue: the test plays the server side."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: queue.Queue[socket.socket] = queue.Queue()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.put(sock)

    def next(self, timeout_s: float = 5.0) -> socket.socket:
        sock = self.accepted.get(timeout=timeout_s)
        sock.settimeout(5.0)
        return sock

    def close(self) -> None:
        self.listener.close()
        while not self.accepted.empty():
            self.accepted.get().close()


@pytest.fixture(scope="module")
def proxy_process(tmp_path_factory):
    """One proxy for the module; it must have logged nothing (no exception, even the ones
    asyncio catches and prints) through every reset, bad command and test."""
    stderr = tmp_path_factory.mktemp("fault-proxy") / "stderr"
    process = FaultProxyProcess(stderr_path=stderr)
    process.start()
    yield process
    process.stop()
    assert process.process.returncode == 0
    assert stderr.read_text() == ""


@pytest.fixture
def proxy(proxy_process):
    """The module's proxy, left without links or faults after each test."""
    client = proxy_process.client
    yield client
    client.heal()
    for link in client.state()["links"]:
        client.remove_link(link["src"], link["dst"])


@pytest.fixture
def target():
    server = Target()
    yield server
    server.close()


def nodes(count: int = 2) -> list[str]:
    """Node names of the test's own (the module shares one proxy)."""
    return [f"node-{next(_names)}" for _ in range(count)]


def connect(proxy: FaultProxyClient, src: str, dst: str, target: Target) -> tuple[socket.socket, socket.socket]:
    """A connection through the (src, dst) link: (the client's socket, the server's)."""
    port = next((link["port"] for link in proxy.state()["links"] if (link["src"], link["dst"]) == (src, dst)), None)
    if port is None:
        port = proxy.add_link(src, dst, target.address)
    client = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    return client, target.next()


def receive(sock: socket.socket, size: int, timeout_s: float = 10.0) -> bytes:
    sock.settimeout(timeout_s)
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(1 << 20, size - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def is_closed(sock: socket.socket) -> bool:
    """The peer closed or reset the connection (the target's side of a connection reset
    while its connect was still under way sees a close)."""
    try:
        return sock.recv(10) == b""
    except ConnectionResetError:
        return True


def is_silent(sock: socket.socket, seconds: float = QUIET_S) -> bool:
    readable, _, _ = select.select([sock], [], [], seconds)
    return not readable


def numbered(count: int, size: int = 1000) -> bytes:
    """Chunks that say their own place, so a reordering or a loss shows."""
    return b"".join(struct.pack(">I", i) + bytes([i % 251]) * (size - 4) for i in range(count))


def test_forwards_both_ways_byte_for_byte(proxy, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    request, response = os.urandom(1 << 20), os.urandom(300_000)
    threading.Thread(target=client.sendall, args=(request,), daemon=True).start()
    assert receive(server, len(request)) == request
    server.sendall(response)
    assert receive(client, len(response)) == response
    client.shutdown(socket.SHUT_WR)  # a half close passes through; the other direction goes on
    assert server.recv(10) == b""
    server.sendall(b"after")
    assert receive(client, 5) == b"after"


def test_block_stops_one_direction_on_every_link_between_the_nodes(proxy, target):
    a, b = nodes()
    a_client, b_server = connect(proxy, a, b, target)  # a's connection to b
    b_client, a_server = connect(proxy, b, a, target)  # b's connection to a
    proxy.block(a, b)
    a_client.sendall(b"request a->b")
    a_server.sendall(b"response a->b")
    assert is_silent(b_server) and is_silent(b_client)
    b_client.sendall(b"request b->a")  # b -> a flows on both links
    b_server.sendall(b"response b->a")
    assert receive(a_server, 12) == b"request b->a"
    assert receive(a_client, 13) == b"response b->a"
    proxy.unblock(a, b)
    assert receive(b_server, 12) == b"request a->b"
    assert receive(b_client, 13) == b"response a->b"


def test_heal_delivers_the_held_bytes_in_order(proxy, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    proxy.set_cuts("partition", [(a, b), (b, a)])
    data = numbered(2000)  # 2 MB: more than the proxy holds, the rest waits in the sender's socket
    sender = threading.Thread(target=client.sendall, args=(data,), daemon=True)
    sender.start()
    assert is_silent(server)
    assert proxy.heal() == ["partition"]
    assert receive(server, len(data)) == data
    sender.join(5)


def test_overlapping_faults_heal_independently(proxy, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    proxy.set_cuts(1, [(a, b)])
    proxy.set_cuts(2, [(a, b), (b, a)])
    proxy.block(b, a)
    assert proxy.clear(2) is True
    client.sendall(b"one")
    server.sendall(b"two")
    assert is_silent(server) and is_silent(client)  # fault 1 still cuts a->b, the manual block b->a
    assert proxy.clear(1) is True
    assert receive(server, 3) == b"one"
    assert is_silent(client)
    proxy.unblock(b, a)
    assert receive(client, 3) == b"two"
    assert proxy.clear(1) is False  # nothing left to end
    assert proxy.state()["cuts"] == []


def test_a_new_connection_across_a_one_way_cut_is_made_and_its_open_direction_flows(proxy, target):
    """The scenario language's one-way cut loses only the messages from its sources
    (faults/links.py, as the simulation cuts): a connection is made, requests flow, the
    answers are held until the heal."""
    a, b = nodes()
    port = proxy.add_link(a, b, target.address)
    proxy.block(b, a)  # the answers' direction
    client = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    client.sendall(b"hello")
    server = target.next()
    assert receive(server, 5) == b"hello"
    server.sendall(b"answer")
    client.settimeout(QUIET_S)
    with pytest.raises(socket.timeout):
        client.recv(6)  # held by the cut
    proxy.unblock(b, a)
    client.settimeout(5.0)
    assert receive(client, 6) == b"answer"


def test_a_new_connection_across_a_cut_both_ways_waits_for_the_heal(proxy, target):
    a, b = nodes()
    port = proxy.add_link(a, b, target.address)
    proxy.block(a, b)
    proxy.block(b, a)
    client = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    client.sendall(b"hello")
    with pytest.raises(queue.Empty):
        target.accepted.get(timeout=QUIET_S)  # the target never sees it
    proxy.unblock(b, a)  # one direction open: the connection is made, the request still held
    server = target.next()
    proxy.unblock(a, b)
    assert receive(server, 5) == b"hello"


def _round_trip_s(client: socket.socket, server: socket.socket) -> float:
    started = time.monotonic()
    client.sendall(b"ping")
    assert receive(server, 4) == b"ping"
    server.sendall(b"pong")
    assert receive(client, 4) == b"pong"
    return time.monotonic() - started


def test_delay_holds_each_chunk_and_keeps_the_order(proxy, target):
    a, b, c = nodes(3)
    slow_client, slow_server = connect(proxy, a, b, target)
    fast_client, fast_server = connect(proxy, c, b, target)
    delay_ms = 150
    proxy.delay(b, a, delay_ms)  # the responses of a's connection
    delayed = statistics.median(_round_trip_s(slow_client, slow_server) for _ in range(5))
    plain = statistics.median(_round_trip_s(fast_client, fast_server) for _ in range(5))
    assert delayed >= delay_ms / 1000 * 0.95  # a chunk is never forwarded before its time
    assert delayed / plain > 3, (delayed, plain)
    data = numbered(300)
    for i in range(0, len(data), 7000):  # many chunks on their way at once
        slow_server.sendall(data[i:i + 7000])
    assert receive(slow_client, len(data)) == data
    proxy.delay(b, a, 0)
    assert proxy.state()["delays"] == []


def test_reset_closes_the_connections_between_the_nodes(proxy, target):
    a, b, c = nodes(3)
    client, server = connect(proxy, a, b, target)
    back_client, back_server = connect(proxy, b, a, target)
    other_client, other_server = connect(proxy, c, b, target)
    assert proxy.reset(a, b) == 2
    assert all(is_closed(sock) for sock in (client, server, back_client, back_server))
    other_client.sendall(b"still")
    assert receive(other_server, 5) == b"still"
    again, again_server = connect(proxy, a, b, target)  # new connections are welcome
    again.sendall(b"new")
    assert receive(again_server, 3) == b"new"


def test_a_peer_reset_ends_only_its_connection(proxy, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    other, other_server = connect(proxy, a, b, target)
    client.sendall(b"x" * 100_000)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # a reset
    with pytest.raises((ConnectionResetError, AssertionError)):  # the reset is passed on
        while True:
            assert server.recv(65536) != b""
    deadline = time.monotonic() + 5
    while proxy.state()["links"][0]["connections"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.state()["links"][0]["connections"] == 1
    other.sendall(b"fine")
    assert receive(other_server, 4) == b"fine"


@pytest.mark.parametrize("line, error", [
    (b"not json", "Expecting value"),
    (b"\xff\xfe", "can't decode"),
    (b"[1, 2]", "a command is a JSON object"),
    (b'{"op": "explode"}', "unknown op"),
    (b'{"op": ["ping"]}', "unknown op"),
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    (b'{"op": "delay", "src": "a", "dst": "b", "ms": NaN}', "'ms' must be"),
    (b'{"op": "set_cuts", "fault_id": 1.5, "links": []}', "'fault_id' must be"),
    (b'{"op": "set_cuts", "fault_id": 1, "links": [[1, 2]]}', "'src' must be a node name"),
    (b'{"op": "block", "src": "a"}', "'dst' must be a node name"),
    (b'{"op": "block", "src": "", "dst": "b"}', "'src' must be a node name"),
    (b'{"op": "delay", "src": "a", "dst": "b", "ms": -1}', "'ms' must be"),
    (b'{"op": "delay", "src": "a", "dst": "b", "ms": true}', "'ms' must be"),
    (b'{"op": "add_link", "src": "a", "dst": "b", "target": "nowhere"}', "'target' must be HOST:PORT"),
    (b'{"op": "add_link", "src": "a", "dst": "b", "target": "h:1", "port": 70000}', "'port' must be"),
    (b'{"op": "set_cuts", "fault_id": true, "links": []}', "'fault_id' must be"),
    (b'{"op": "set_cuts", "fault_id": 1, "links": [["a"]]}', "'links' must be"),
    (b'{"op": "set_cuts", "fault_id": 1, "links": {}}', "'links' must be"),
    (b'{"op": "remove_link", "src": "a", "dst": "b"}', "no link a -> b"),
    (b'{"op": "clear"}', "'fault_id' must be"),
])
def test_a_bad_command_is_answered_with_an_error(proxy, target, line, error):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    with socket.create_connection(proxy.address, timeout=5) as control, control.makefile("rb") as answers:
        control.sendall(line + b"\n")
        answer = fault_proxy.json.loads(answers.readline())
        assert answer["ok"] is False and error in answer["error"], answer
        control.sendall(b'{"op": "ping"}\n')  # the same connection goes on
        assert fault_proxy.json.loads(answers.readline()) == {"ok": True}
    client.sendall(b"alive")  # and the links are served
    assert receive(server, 5) == b"alive"


def test_a_link_twice_or_a_busy_port_is_refused(proxy, target):
    a, b = nodes()
    port = proxy.add_link(a, b, target.address)
    with pytest.raises(FaultProxyError, match="exists already"):
        proxy.add_link(a, b, target.address)
    with pytest.raises(FaultProxyError, match="OSError"):
        proxy.add_link(b, a, target.address, port=port)


def test_removing_a_link_closes_its_listener_and_connections(proxy, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    port = client.getpeername()[1]
    proxy.remove_link(a, b)
    assert is_closed(server) and is_closed(client)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    assert proxy.state()["links"] == []


def test_a_control_line_too_long_closes_only_that_connection(proxy):
    with socket.create_connection(proxy.address, timeout=5) as control, control.makefile("rb") as answers:
        try:
            control.sendall(b"x" * (fault_proxy.CONTROL_LINE_BYTES + 10))
        except OSError:
            pass  # closed while we were still sending
        assert b"too long" in answers.readline()
        assert answers.readline() == b""
    assert proxy.call("ping") == {}


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


class _Stream:
    """A sender writing ``data`` as fast as the connection takes it and a receiver reading
    it all, each counting as it goes."""

    def __init__(self, client: socket.socket, server: socket.socket, data: bytes):
        self.data, self.sent, self.received = data, 0, bytearray()
        self.threads = [threading.Thread(target=self._send, args=(client,), daemon=True),
                        threading.Thread(target=self._receive, args=(server,), daemon=True)]
        for thread in self.threads:
            thread.start()

    def _send(self, sock: socket.socket) -> None:
        for start in range(0, len(self.data), 65536):
            sock.sendall(self.data[start:start + 65536])
            self.sent = start + 65536

    def _receive(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        while len(self.received) < len(self.data) and (chunk := sock.recv(1 << 20)):
            self.received += chunk

    def counts(self) -> tuple[int, int]:
        return self.sent, len(self.received)


@pytest.mark.slow
def test_a_fast_sender_blocked_mid_stream_is_held_back_with_bounded_memory(proxy, proxy_process, target):
    a, b = nodes()
    client, server = connect(proxy, a, b, target)
    rss_before = _rss_kb(proxy_process.process.pid)
    stream = _Stream(client, server, numbered(64_000))  # 64 MB: far more than every buffer on the way
    deadline = time.monotonic() + 10
    while stream.counts()[1] < 1 << 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    proxy.block(a, b)  # while bytes flow: some are read and queued in the proxy
    time.sleep(0.5)
    held = proxy.state()["links"][0]["held_bytes"]
    before = stream.counts()
    time.sleep(1.0)
    after = stream.counts()
    assert after[1] == before[1]  # nothing got through the block
    # back-pressure reached the sender: the kernels' buffers are full and its writes stall
    # (a few KiB may trickle in as loopback's TCP autotuning grows a buffer)
    assert after[0] - before[0] < 512 << 10, f"the sender went on: {before} {after}"
    assert after[0] - after[1] < 32 << 20
    assert 0 < held <= (fault_proxy.QUEUE_CHUNKS + 2) * fault_proxy.CHUNK_BYTES
    assert _rss_kb(proxy_process.process.pid) - rss_before < 20_000
    proxy.unblock(a, b)
    for thread in stream.threads:
        thread.join(30)
    assert stream.received == stream.data


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # exited, not reaped by its new parent
    except FileNotFoundError:
        return True


def test_the_proxy_exits_when_its_parent_is_killed():
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom real_io.fault_proxy_client import FaultProxyProcess\n"
         "p = FaultProxyProcess(); p.start(); print(p.process.pid, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        pid = int(launcher.stdout.readline())
        assert not _gone(pid)
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 5
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid)
    finally:
        launcher.kill()
        launcher.wait()
        launcher.stdout.close()


def test_sigterm_closes_every_listener_and_connection(target):
    process = FaultProxyProcess()
    client = process.start()
    port = client.add_link("a", "b", target.address)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    target.next()
    process.stop()
    assert process.process.returncode == 0
    assert is_closed(sock)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


@pytest.mark.slow
def test_a_zookeeper_session_is_lost_across_a_link_blocked_past_its_timeout(proxy, zk_hosts, admin):
    address, chroot = zk_hosts.split("/", 1)
    port = proxy.add_link("client-zk", "zk", address)
    states: list[str] = []
    session_timeout_s = 2.0
    zk = KazooClient(hosts=f"127.0.0.1:{port}/{chroot}", timeout=session_timeout_s)
    zk.add_listener(states.append)
    zk.start(timeout=10)
    try:
        zk.create("/mine", ephemeral=True)
        proxy.set_cuts("isolate-client", [("client-zk", "zk"), ("zk", "client-zk")])
        cut_at = time.monotonic()
        while admin.exists("/mine") is not None and time.monotonic() < cut_at + 10:
            time.sleep(0.05)
        assert admin.exists("/mine") is None  # ZooKeeper expired the session it stopped hearing from
        assert time.monotonic() - cut_at >= session_timeout_s * 0.9  # not before its timeout
        assert KazooState.SUSPENDED in states and KazooState.LOST not in states
        proxy.clear("isolate-client")
        deadline = time.monotonic() + 10
        while KazooState.LOST not in states and time.monotonic() < deadline:
            time.sleep(0.05)
        assert KazooState.LOST in states  # the client learns it on its way back
    finally:
        zk.stop()
        zk.close()
