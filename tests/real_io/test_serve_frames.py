"""Frames at the served broker's socket (real_io/connection.py): requests read straight
into buffers of their own however the bytes are cut, answered one at a time and in
order (Kafka 2.7.0 SocketServer's Processor mutes a channel from a request's receipt
until its response is sent)."""
from __future__ import annotations

import socket
import time

import pytest

from broker_core.records import RecordBatch, Records
from real_io.connection import FIRST_ALLOCATION, STAGING_BYTES, FramePool
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.protocol.record_batch import decode_batches
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_wire import WireClient, create, fetch_body, partition_of, produce_body


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = ServeProcess(tmp_path_factory.mktemp("frames") / "data").start()
    yield process
    assert process.stop() == 0


@pytest.fixture
def client(broker):
    wire = WireClient(broker.port)
    wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield wire
    wire.close()


def frame(key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return apis.encode_request(RequestHeader(key, version, correlation_id, "frames"), body)


def one_record(value: str) -> RecordBatch:
    return RecordBatch(0, -1, Records([value], [None], 0, [1], None))


def test_pipelined_requests_are_answered_in_order_one_at_a_time(client):
    """Seven requests in one write, small and large mixed: each is answered, in the
    order sent, and the produces take consecutive offsets."""
    create(client, "pipelined")
    big = "b" * (3 * STAGING_BYTES)  # a frame that outgrows the staging buffer
    requests = [(ApiKey.PRODUCE, 8, produce_body("pipelined", one_record(v), acks=1)) for v in ("x", big, "y")]
    requests[1:1] = [(ApiKey.API_VERSIONS, 2, {})]
    requests += [(ApiKey.METADATA, 4, {"topics": [{"name": "pipelined"}], "allow_auto_topic_creation": False}),
                 (ApiKey.PRODUCE, 8, produce_body("pipelined", one_record("z"), acks=1)),
                 (ApiKey.FETCH, 11, fetch_body("pipelined", 0, 0, 1))]
    client.sock.sendall(b"".join(frame(k, v, 100 + i, body) for i, (k, v, body) in enumerate(requests)))
    answers = [client.receive(k, v) for k, v, _ in requests]
    assert [cid for cid, _ in answers] == list(range(100, 100 + len(requests)))
    offsets = [partition_of(body)["base_offset"] for (k, _, _), (_, body) in zip(requests, answers)
               if k == ApiKey.PRODUCE]
    assert offsets == [0, 1, 2, 3]
    fetched = partition_of(answers[-1][1], inner="partition_responses")["record_set"]
    assert [b.records.values[0] for b in decode_batches(fetched)] == ["x", big, "y", "z"]


@pytest.mark.parametrize("piece", [1, 3, 7, 4096])
def test_frames_cut_anywhere_are_read_whole(client, piece):
    """Two produce frames sent a few bytes at a time, so that reads end inside size
    prefixes, headers and records alike."""
    topic = f"cut-{piece}"
    create(client, topic)
    data = (frame(ApiKey.PRODUCE, 8, 1, produce_body(topic, one_record("first" * 50), acks=1)) +
            frame(ApiKey.PRODUCE, 8, 2, produce_body(topic, one_record("second"), acks=1)))
    for start in range(0, len(data), piece):
        client.sock.sendall(data[start:start + piece])
        if piece < 10 and start % 50 == 0:
            time.sleep(0.001)  # let the broker read what it has
    first, second = client.receive(ApiKey.PRODUCE, 8), client.receive(ApiKey.PRODUCE, 8)
    assert (first[0], partition_of(first[1])["base_offset"]) == (1, 0)
    assert (second[0], partition_of(second[1])["base_offset"]) == (2, 1)


def test_a_request_larger_than_the_first_allocation_is_read_whole(client):
    """A frame's buffer grows as its bytes arrive; a 3 MiB request is stored intact."""
    create(client, "large")
    value = "".join(chr(i % 256) for i in range(3 * FIRST_ALLOCATION))
    answer = client.ask(ApiKey.PRODUCE, 8, produce_body("large", one_record(value), acks=1))
    assert partition_of(answer)["error_code"] == 0
    body = fetch_body("large", 0, 0, 1)
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 4 * FIRST_ALLOCATION
    fetched = partition_of(client.ask(ApiKey.FETCH, 11, body), inner="partition_responses")["record_set"]
    assert [b.records.values for b in decode_batches(fetched)] == [(value,)]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_read_that_ends_inside_the_next_size_prefix(client, cut):
    """A whole small frame and the first bytes of the next one's size arrive together;
    the rest of that size and its frame come later. (The second frame is over 64 KiB,
    so that its size's first bytes differ from the first frame's.)"""
    topic = f"prefix-{cut}"
    create(client, topic)
    first = frame(ApiKey.PRODUCE, 8, 1, produce_body(topic, one_record("one"), acks=1))
    second = frame(ApiKey.PRODUCE, 8, 2, produce_body(topic, one_record("2" * 70000), acks=1))
    client.sock.sendall(first + second[:cut])
    assert partition_of(client.receive(ApiKey.PRODUCE, 8)[1])["base_offset"] == 0
    time.sleep(0.05)
    client.sock.sendall(second[cut:])
    answered, body = client.receive(ApiKey.PRODUCE, 8)
    assert (answered, partition_of(body)["base_offset"]) == (2, 1)


def test_large_requests_pipelined_through_the_pooled_buffers_are_each_stored_intact(client):
    """Twelve 300 KiB produce frames in one write, acks 1 and 0 mixed: each is received
    into a pool buffer that earlier frames used, and every record reads back as sent."""
    create(client, "pooled")
    values = ["".join(chr((i * 7 + j) % 256) for j in range(300 * 1024)) for i in range(12)]
    acks = [1 if i % 3 else 0 for i in range(12)]
    client.sock.sendall(b"".join(frame(ApiKey.PRODUCE, 8, 10 + i, produce_body("pooled", one_record(v), acks=a))
                                 for i, (v, a) in enumerate(zip(values, acks))))
    answers = [client.receive(ApiKey.PRODUCE, 8) for a in acks if a]
    assert [cid for cid, _ in answers] == [10 + i for i, a in enumerate(acks) if a]
    body = fetch_body("pooled", 0, 0, 1)
    body["topics"][0]["partitions"][0]["partition_max_bytes"] = 8 * FIRST_ALLOCATION
    body["max_bytes"] = 8 * FIRST_ALLOCATION
    fetched = partition_of(client.ask(ApiKey.FETCH, 11, body), inner="partition_responses")["record_set"]
    assert [b.records.values[0] for b in decode_batches(fetched)] == values


def test_a_pool_buffer_is_used_again_only_once_no_view_of_it_is_left():
    """What a produce request's batch holds (a view of its frame's buffer) keeps the
    buffer out of the pool's use: the next frame gets a fresh one."""
    pool = FramePool(limit=2)
    first = pool.take()
    batch = memoryview(first)[100:200]
    pool.give(first)
    second = pool.take()
    assert second is not first and len(second) == FIRST_ALLOCATION
    del batch
    pool.give(second)
    assert pool.take() is second
    pool.give(first)  # not viewed any more: kept, and its length is still its own
    assert pool.take() is first and len(first) == FIRST_ALLOCATION
    for _ in range(3):
        pool.give(bytearray(FIRST_ALLOCATION))
    assert len(pool.free) == 2
