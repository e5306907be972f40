"""The floor under bench/cluster_throughput.py: the same bytes moved, with no broker logic.

Three broker processes and one client process on this machine, as in the cluster
benchmark, but each does only what any replicated log with replication factor 3 and
acks=all must do with the produced bytes:

- the client sends requests of ``--request-bytes`` (1,000,000: librdkafka's
  ``message.max.bytes``, the cap on its produce requests) to each leader, one request
  in flight per connection (a Kafka broker reads a connection's next request only once
  it has answered the last one: SocketServer's muted channel), each request holding
  one chunk for every partition that broker leads (4 partitions led by brokers 1, 2, 3,
  1 as Kafka's assignment of a fresh topic does);
- the leader writes each chunk to its partition's file (pwrite; page cache, no fsync, as
  Kafka's default), sends it to both followers, and answers the client once both have
  said they wrote it (acks=all, all three replicas in the ISR);
- a follower writes the chunk to its file and answers with 8 bytes.

What it leaves out, and so what makes it a floor (no implementation can do less and be
a replicated log): the Kafka protocol's encoding and decoding, CRCs, record batches,
offsets, indexes, the follower's fetch round trips (the leader pushes here), the high
watermark, metadata, ISR changes, timers and traces. Its client sends prebuilt bytes,
which costs far less than librdkafka's batching. Each side's blocking I/O runs in a
thread per connection; the GIL is released in every system call, which is where the
time goes.

    .venv/bin/python bench/cluster_floor.py [--records-mb 200] [--request-bytes 1000000]

Imported by bench/cluster_throughput.py, which runs it in the same run as the real
cluster and the mock.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from multiprocessing import get_context
from pathlib import Path

BROKERS = 3
PARTITIONS = 4
REQUEST_BYTES = 1_000_000
_HEADER = struct.Struct(">iI")  # partition, length
_ACK = 8


def leader_of(partition: int) -> int:
    return partition % BROKERS


def _recv_exactly(sock: socket.socket, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def _read_chunk(sock: socket.socket, buffer: bytearray) -> tuple[int, memoryview] | None:
    head = bytearray(_HEADER.size)
    if not _recv_exactly(sock, memoryview(head)):
        return None
    partition, length = _HEADER.unpack(head)
    view = memoryview(buffer)[:length]
    if not _recv_exactly(sock, view):
        return None
    return partition, view


class _Files:
    """One append-only file per partition this broker holds."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.fds: dict[int, int] = {}
        self.ends: dict[int, int] = {}
        self.lock = threading.Lock()

    def append(self, partition: int, data: memoryview) -> None:
        with self.lock:
            fd = self.fds.get(partition)
            if fd is None:
                fd = self.fds[partition] = os.open(self.directory / f"p{partition}.log",
                                                   os.O_CREAT | os.O_WRONLY, 0o644)
                self.ends[partition] = 0
            position = self.ends[partition]
            self.ends[partition] = position + len(data)
        os.pwrite(fd, data, position)


def _follower_loop(sock: socket.socket, files: _Files) -> None:
    buffer = bytearray(REQUEST_BYTES + 64)
    while True:
        chunk = _read_chunk(sock, buffer)
        if chunk is None:
            return
        files.append(*chunk)
        sock.sendall(b"\0" * _ACK)


def _leader_loop(client: socket.socket, followers: list[socket.socket], files: _Files) -> None:
    """One client connection: one request at a time, as a muted Kafka channel."""
    buffer = bytearray(REQUEST_BYTES + 64)
    head = bytearray(4)
    ack = bytearray(_ACK)
    while _recv_exactly(client, memoryview(head)):
        (chunks,) = struct.unpack(">i", head)
        for _ in range(chunks):
            chunk = _read_chunk(client, buffer)
            if chunk is None:
                return
            partition, data = chunk
            files.append(partition, data)
            for follower in followers:
                follower.sendall(_HEADER.pack(partition, len(data)))
                follower.sendall(data)
        for follower in followers:
            for _ in range(chunks):
                _recv_exactly(follower, memoryview(ack))
        client.sendall(b"\0" * _ACK)


def _broker(index: int, directory: str, ports, ready) -> None:
    """Listen for the client and for the other brokers' replication connections, connect
    to the others as their leader, and serve until the client goes."""
    files = _Files(Path(directory))
    client_listener = socket.create_server(("127.0.0.1", 0))
    replication_listener = socket.create_server(("127.0.0.1", 0))
    ports[index] = (client_listener.getsockname()[1], replication_listener.getsockname()[1])
    ready.wait()
    followers = []
    for other in range(BROKERS):
        if other != index:
            follower = socket.create_connection(("127.0.0.1", ports[other][1]))
            follower.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            followers.append(follower)
    for _ in range(BROKERS - 1):
        inbound, _ = replication_listener.accept()
        inbound.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_follower_loop, args=(inbound, files), daemon=True).start()
    client, _ = client_listener.accept()
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _leader_loop(client, followers, files)


def _client_loop(sock: socket.socket, partitions: list[int], value: bytes, requests: int) -> None:
    ack = bytearray(_ACK)
    chunk = len(value)
    for _ in range(requests):
        sock.sendall(struct.pack(">i", len(partitions)))
        for partition in partitions:
            sock.sendall(_HEADER.pack(partition, chunk))
            sock.sendall(value)
        if not _recv_exactly(sock, memoryview(ack)):
            raise SystemExit("a floor broker closed its connection")


def floor_throughput(megabytes: float, request_bytes: int = REQUEST_BYTES) -> dict:
    """Seconds to move ``megabytes`` MiB through three floor brokers, and the CPU
    seconds (user, system) the brokers and the client spent on it."""
    context = get_context("spawn")
    manager = context.Manager()
    ports, ready = manager.dict(), manager.Event()
    led = {b: [p for p in range(PARTITIONS) if leader_of(p) == b] for b in range(BROKERS)}
    # Every partition gets the same bytes: a request carries one chunk per partition its
    # broker leads, and together they come to at most request_bytes, as a librdkafka
    # produce request's batches do.
    chunk = request_bytes // max(len(p) for p in led.values())
    total = int(megabytes * 1024 * 1024)
    requests = max(1, total // (chunk * PARTITIONS))
    with tempfile.TemporaryDirectory(prefix="isrlab-floor-") as tmp:
        processes = []
        # A spawned child imports this module by name: from wherever its parent found it.
        here = str(Path(__file__).resolve().parent)
        added = here not in sys.path
        if added:
            sys.path.insert(0, here)
        try:
            for b in range(BROKERS):
                directory = Path(tmp) / f"b{b}"
                directory.mkdir()
                process = context.Process(target=_broker, args=(b, str(directory), ports, ready), daemon=True)
                process.start()
                processes.append(process)
        finally:
            if added:
                sys.path.remove(here)
        deadline = time.monotonic() + 30
        while len(ports) < BROKERS:
            if time.monotonic() > deadline:
                raise SystemExit("the floor brokers did not start")
            time.sleep(0.01)
        ready.set()
        clients = {}
        for b in range(BROKERS):
            clients[b] = socket.create_connection(("127.0.0.1", ports[b][0]))
            clients[b].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        value = os.urandom(chunk)
        before = {p.pid: cpu_seconds(p.pid) for p in processes}
        mine = os.times()
        start = time.perf_counter()
        threads = [threading.Thread(target=_client_loop, args=(clients[b], led[b], value, requests))
                   for b in range(BROKERS) if led[b]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        after_mine = os.times()
        brokers_cpu = sum(sum(cpu_seconds(p.pid)) - sum(before[p.pid]) for p in processes)
        for sock in clients.values():
            sock.close()
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
        manager.shutdown()
        # what each broker's files hold: every partition, on every broker, all its bytes
        stored = {b: {int(f.stem[1:]): f.stat().st_size for f in (Path(tmp) / f"b{b}").glob("p*.log")}
                  for b in range(BROKERS)}
    moved = requests * chunk * PARTITIONS
    return {"floor_bytes": moved, "floor_stored": stored, "floor_produce_s": elapsed,
            "floor_brokers_cpu_s": brokers_cpu,
            "floor_client_cpu_s": (after_mine.user - mine.user) + (after_mine.system - mine.system)}


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records-mb", type=float, default=200.0, help="MiB moved")
    parser.add_argument("--request-bytes", type=int, default=REQUEST_BYTES, help="bytes per produce request")
    args = parser.parse_args(argv)
    r = floor_throughput(args.records_mb, args.request_bytes)
    mb = r["floor_bytes"] / 1e6
    print(f"floor: {mb:.0f} MB in {r['floor_produce_s']:.2f} s = {mb / r['floor_produce_s']:.1f} MB/s; "
          f"CPU: brokers {r['floor_brokers_cpu_s']:.2f} s, client {r['floor_client_cpu_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
