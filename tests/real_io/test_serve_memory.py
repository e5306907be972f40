"""The broker's memory under hostile clients (KIP-72's queued.max.request.bytes): a
connection that announces a large request and sends a few bytes costs what it sent, not
what it announced, and a frame that needs more memory than the pool has left is not
read until memory comes back, while a real client goes on producing and consuming."""
from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic

from broker_core.records import RecordBatch, Records
from real_io.protocol.apis import ApiKey
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_wire import WireClient, create, partition_of, produce_body

HOSTILE_CONNECTIONS = 1500
ANNOUNCED_BYTES = 100_000_000  # under socket.request.max.bytes (104857600): a size the broker accepts
# What 1500 such connections may add to the broker's resident memory: a few KiB each
# (socket, transport, coroutine, a frame buffer of what arrived). The code before the
# memory pool gave each one a 1 MiB buffer: +1.5 GiB.
HOSTILE_GROWTH_LIMIT_MIB = 64


def resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_hostile(port: int, count: int, announced: int, sent: int) -> list[socket.socket]:
    """``count`` connections that each announce ``announced`` bytes and send ``sent``."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(struct.pack(">i", announced) + b"\x01" * sent)
            sockets.append(sock)
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def settled_resident_mib(pid: int, timeout_s: float = 5.0) -> float:
    """The broker's resident memory once it stops growing (it reads the hostile bytes
    asynchronously): the largest of readings taken until two in a row agree."""
    deadline, last, peak = time.monotonic() + timeout_s, -1.0, 0.0
    while time.monotonic() < deadline:
        now = resident_mib(pid)
        peak = max(peak, now)
        if abs(now - last) < 0.5:
            break
        last = now
        time.sleep(0.3)
    return peak


def round_trip(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """confluent-kafka produces ``values`` with acks=all and reads them all back."""
    failures: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 15000})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda e, m: failures.append(e) if e else None)
    assert producer.flush(20) == 0 and failures == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "isrlab-unused", "enable.auto.commit": False})
    consumer.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
    read, deadline = [], time.monotonic() + 20
    while len(read) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():  # the coordinator lookup's refusal (no groups), not a fetch error
            assert message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, message.error()
            continue
        read.append(message.value())
    consumer.close()
    assert read == values


def measure_under_hostile(tmp_path, connections: int, sent: int, value_bytes: int) -> tuple[float, float]:
    """The broker's resident MiB before and while ``connections`` announce
    ANNOUNCED_BYTES and send ``sent`` bytes each; a confluent-kafka producer and
    consumer round-trip records of ``value_bytes`` meanwhile."""
    broker = ServeProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([CNewTopic(t, 1, 1) for t in ("warm", "calm")], request_timeout=5).values():
            assert future.result(timeout=10) is None
        values = [bytes([i]) * value_bytes for i in range(20)]
        round_trip(broker.bootstrap, "warm", values[:10])  # the client's own costs, before the measure
        before = settled_resident_mib(broker.process.pid)
        hostile = open_hostile(broker.port, connections, ANNOUNCED_BYTES, sent)
        try:
            during = settled_resident_mib(broker.process.pid)
            round_trip(broker.bootstrap, "calm", values)  # served while every hostile connection is open
            during = max(during, resident_mib(broker.process.pid))
        finally:
            close_all(hostile)
        print(f"broker VmRSS before {before:.1f} MiB, with {connections} connections that sent {sent} B "
              f"of {ANNOUNCED_BYTES} B: {during:.1f} MiB (+{during - before:.1f})")
        return before, during
    finally:
        assert broker.stop() == 0, broker.stderr_path.read_text()


@pytest.mark.slow
def test_hostile_announcers_cost_what_they_sent_while_a_real_client_produces_and_consumes(tmp_path):
    """The user's measure: 1,500 connections announce 100 MB and send two bytes. The
    real client's 40 KiB records make frames past the 16 KiB a frame's start is carried
    in, so its produces take the memory pool's path too."""
    before, during = measure_under_hostile(tmp_path, HOSTILE_CONNECTIONS, 2, 40960)
    assert during - before < HOSTILE_GROWTH_LIMIT_MIB, (before, during)


@pytest.mark.slow
def test_hostile_senders_past_the_carried_start_are_bounded_by_the_memory_pool(tmp_path):
    """200 connections announce 100 MB and send 64 KiB each (13 MB in all): the default
    pool (socket.request.max.bytes) grants two of them their announced size (strict=false
    lends while anything is left), each then holds a buffer of 1 MiB; the others are
    muted holding at most 32 KiB read. The code before the pool held 1 MiB for each: +200
    MiB. A client's frames within 16 KiB need no reservation and go on being served (its
    larger ones wait until the pool has memory again, as every frame does in Kafka)."""
    before, during = measure_under_hostile(tmp_path, 200, 65536, 1024)
    assert during - before < 32, (before, during)


