"""Bad input at the listener: each case gets an error response or a closed connection,
and the broker keeps serving a well-behaved client throughout (and afterwards)."""
from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.records import RecordBatch, Records
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.protocol.crc32c import crc32c
from real_io.protocol.record_batch import HEADER_BYTES, encode_batch
from tests.real_io.serve_process import ServeProcess

MAX_REQUEST_BYTES = 65536


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    directory = tmp_path_factory.mktemp("malformed")
    process = ServeProcess(directory / "data", extra=("--max-request-bytes", str(MAX_REQUEST_BYTES))).start()
    yield process
    assert process.stop() == 0


def connect(broker, timeout_s: float = 5.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout_s)
    return sock


def read_frame(sock: socket.socket) -> bytes | None:
    """The next response's payload, or None if the broker closed the connection."""
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    return _read_exactly(sock, struct.unpack(">i", prefix)[0])


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def api_versions_works(broker) -> bool:
    """A well-behaved client's request is answered."""
    with connect(broker) as sock:
        sock.sendall(apis.encode_request(RequestHeader(ApiKey.API_VERSIONS, 2, 7, "good"), {}))
        payload = read_frame(sock)
    correlation_id, body = apis.decode_response(ApiKey.API_VERSIONS, 2, payload)
    return correlation_id == 7 and body["error_code"] == 0


@pytest.mark.parametrize("prefix", [struct.pack(">i", -1), struct.pack(">i", -2**31),
                                    struct.pack(">i", MAX_REQUEST_BYTES + 1), struct.pack(">i", 2**31 - 1)])
def test_a_negative_or_oversized_length_prefix_closes_the_connection(broker, prefix):
    with connect(broker) as sock:
        sock.sendall(prefix)
        assert is_closed(sock)
    assert api_versions_works(broker)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x12\x00\x02", b"\x00\x00\x00\x05\x00\x00\x00\x01\xff\xff"])
def test_a_frame_too_short_for_its_header_or_body_closes_the_connection(broker, payload):
    with connect(broker) as sock:
        sock.sendall(apis.frame(payload))
        assert is_closed(sock)
    assert api_versions_works(broker)


def test_unknown_api_keys_and_versions_close_the_connection_but_api_versions_answers_its_own(broker):
    # The group APIs too, even at versions the codec reads (GROUP_APIS): a bare header
    # is a truncated body where they are served (apis.GROUPS_SERVED), an unknown API
    # where they are not; either way the connection closes.
    group_apis = [(key, hi) for key, (_, hi) in sorted(apis.GROUP_APIS.items())]
    for key, version in [(999, 0), (ApiKey.PRODUCE, 99), (ApiKey.FETCH, 0), (11, 0), *group_apis]:
        with connect(broker) as sock:
            sock.sendall(apis.frame(struct.pack(">hhih", key, version, 5, -1)))
            assert is_closed(sock), (key, version)
    with connect(broker) as sock:  # ApiVersions of an unknown version: the v0 answer with the table
        sock.sendall(apis.frame(struct.pack(">hhih", ApiKey.API_VERSIONS, 77, 9, -1)))
        correlation_id, body = apis.decode_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
        assert (correlation_id, body["error_code"]) == (9, apis.UNSUPPORTED_VERSION)
        assert {k["api_key"] for k in body["api_keys"]} == {int(k) for k in apis.SUPPORTED}
        assert {k["api_key"] for k in body["api_keys"]}.isdisjoint(
            set(apis.GROUP_APIS) - (set(apis.SERVED_GROUP_APIS) if apis.GROUPS_SERVED else set()))
    assert api_versions_works(broker)


def produce_frame(records: bytes, correlation_id: int = 3, topic: str = "crc") -> bytes:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": records}]}]}
    return apis.encode_request(RequestHeader(ApiKey.PRODUCE, 8, correlation_id, "bad-crc"), body)


def test_a_batch_with_a_bad_crc_is_refused_with_corrupt_message_and_nothing_is_stored(broker):
    good = encode_batch(RecordBatch(0, -1, Records(["value"], ["key"], 0, [1000], None)))
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # a flipped bit in the last record
    with connect(broker) as sock:
        sock.sendall(apis.encode_request(RequestHeader(ApiKey.METADATA, 4, 1, "crc"),
                                         {"topics": [{"name": "crc"}], "allow_auto_topic_creation": True}))
        read_frame(sock)  # the topic is being created
        offsets = []
        for correlation_id, records in enumerate([good, bytes(bad), good], 2):
            deadline = time.monotonic() + 10
            while True:
                sock.sendall(produce_frame(records, correlation_id))
                cid, body = apis.decode_response(ApiKey.PRODUCE, 8, read_frame(sock))
                partition = body["responses"][0]["partitions"][0]
                if partition["error_code"] != 6 or time.monotonic() > deadline:  # 6: no leader yet
                    break
                time.sleep(0.05)
            assert cid == correlation_id
            offsets.append((partition["error_code"], partition["base_offset"]))
    assert offsets == [(0, 0), (2, -1), (0, 1)]  # 2: CORRUPT_MESSAGE; the bad batch took no offset
    assert api_versions_works(broker)


def _recrc(wire: bytearray) -> bytes:
    struct.pack_into(">I", wire, 17, crc32c(bytes(wire[21:])))
    return bytes(wire)


def test_batches_whose_records_disagree_with_their_header_are_refused_and_nothing_is_stored(broker):
    """Kafka 2.7.0 DefaultRecordBatch.RecordIterator.makeNext / readNext (the declared
    count must use up the batch: "Incorrect declared batch size") and DefaultRecord.readFrom
    (a record's length must fit, its fields must use it up), run by
    LogValidator.assignOffsetsNonCompressed over a client's batch: each such batch, with
    a correct CRC, is refused with CORRUPT_MESSAGE and takes no offset."""
    good = encode_batch(RecordBatch(0, -1, Records(["a", "b", "c"], [None] * 3, 0, [1, 2, 3], None)))
    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, 2)  # two declared, three present
    struct.pack_into(">i", fewer, 23, 1)
    past = bytearray(good)
    past[HEADER_BYTES] = 2 * 60  # the first record claims 60 bytes; the batch has fewer
    answers = []
    with connect(broker) as sock:
        sock.sendall(apis.encode_request(RequestHeader(ApiKey.METADATA, 4, 99, "framing"),
                                         {"topics": [{"name": "framing"}], "allow_auto_topic_creation": True}))
        read_frame(sock)  # the topic is being created
        for correlation_id, records in enumerate([good, _recrc(fewer), _recrc(past), good], 1):
            deadline = time.monotonic() + 10
            while True:
                sock.sendall(produce_frame(records, correlation_id, topic="framing"))
                cid, body = apis.decode_response(ApiKey.PRODUCE, 8, read_frame(sock))
                partition = body["responses"][0]["partitions"][0]
                if partition["error_code"] != 6 or time.monotonic() > deadline:  # 6: no leader yet
                    break
                time.sleep(0.05)
            answers.append((partition["error_code"], partition["base_offset"]))
    assert answers == [(0, 0), (2, -1), (2, -1), (0, 3)]
    assert api_versions_works(broker)


def test_an_acks_0_produce_with_a_bad_batch_closes_the_connection(broker):
    """2.7.0 KafkaApis.handleProduceRequest: with acks=0 the only way to report an error
    is to close the connection."""
    bad = bytearray(encode_batch(RecordBatch(0, -1, Records(["v"], [None], 0, [1], None))))
    bad[-1] ^= 0x01
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
            "topics": [{"name": "crc", "partitions": [{"partition_index": 0, "records": bytes(bad)}]}]}
    with connect(broker) as sock:
        sock.sendall(apis.encode_request(RequestHeader(ApiKey.PRODUCE, 8, 1, "acks0"), body))
        assert is_closed(sock)
    assert api_versions_works(broker)


def test_a_slow_client_that_never_finishes_its_frame_does_not_block_others(broker):
    with connect(broker) as slow:
        slow.sendall(struct.pack(">i", 1000) + b"\x00\x12")  # 2 of 1000 announced bytes, then silence
        started = time.monotonic()
        assert api_versions_works(broker)
        assert time.monotonic() - started < 2
        slow.sendall(b"\x00" * 10)  # still incomplete: the broker keeps waiting, the others keep going
        assert api_versions_works(broker)


def test_many_idle_connections_cost_little_and_others_are_served(broker):
    idle = [connect(broker) for _ in range(2000)]
    try:
        started = time.monotonic()
        assert api_versions_works(broker)
        assert time.monotonic() - started < 2
        with connect(broker) as sock:  # a request on one of them works too
            sock.sendall(apis.encode_request(RequestHeader(ApiKey.METADATA, 1, 1, "idle"), {"topics": None}))
            assert apis.decode_response(ApiKey.METADATA, 1, read_frame(sock))[1]["brokers"][0]["node_id"] == 1
    finally:
        for sock in idle:
            sock.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(payload=st.one_of(
    st.binary(max_size=200),
    st.builds(lambda key, version, tail: struct.pack(">hhih", key, version, 1, -1) + tail,
              st.sampled_from([int(k) for k in apis.SUPPORTED]), st.integers(-1, 15), st.binary(max_size=120))))
def test_any_frame_gets_an_answer_or_a_closed_connection_and_others_stay_served(broker, payload):
    with connect(broker, timeout_s=5) as sock:
        sock.sendall(apis.frame(payload))
        sock.shutdown(socket.SHUT_WR)  # nothing more comes: a waiting broker sees the end
        while True:  # whatever it answers, it ends by closing
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
    assert api_versions_works(broker)


def test_a_connection_idle_past_connections_max_idle_ms_is_closed(tmp_path):
    process = ServeProcess(tmp_path / "data", extra=("--connections-max-idle-ms", "300")).start()
    try:
        with connect(process) as idle, connect(process) as unfinished:
            unfinished.sendall(struct.pack(">i", 100) + b"\x00\x12")
            started = time.monotonic()
            assert is_closed(idle) and is_closed(unfinished)
            assert 0.25 <= time.monotonic() - started < 3
        assert api_versions_works(process)
    finally:
        assert process.stop() == 0


def test_a_connection_busy_past_connections_max_idle_ms_stays_open_until_it_idles(tmp_path):
    """The idle timer armed by a wait that then ended finds a later wait when it fires
    and moves on to that wait's deadline: a connection asking every 150 ms lives past
    several idle times of 300 ms, and once it stops it is closed one idle time later."""
    process = ServeProcess(tmp_path / "data", extra=("--connections-max-idle-ms", "300")).start()
    try:
        with connect(process) as busy:
            for i in range(8):
                busy.sendall(apis.encode_request(RequestHeader(ApiKey.API_VERSIONS, 2, i, "busy"), {}))
                assert apis.decode_response(ApiKey.API_VERSIONS, 2, read_frame(busy))[0] == i
                time.sleep(0.15)
            stopped = time.monotonic() - 0.15
            assert is_closed(busy)
            assert 0.25 <= time.monotonic() - stopped < 3
    finally:
        assert process.stop() == 0
