"""The request-time quota (request_percentage) on ``isrlab serve`` (issue 22): the broker
times each request's handling (real_io/request_time.py) and the core records it against
the quota set through AlterClientQuotas (KIP-546); over it the response carries
throttle_time_ms and the connection is muted. Kafka 2.7.0 sources: KafkaApis.scala
``sendResponseMaybeThrottle`` and ``handleProduceRequest``, ClientRequestQuotaManager.scala
``maybeRecordAndGetThrottleTimeMs``."""
from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Producer

from analysis.checkers.quotas import check_quotas
from analysis.history import History
from analysis.trace import read_events
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_cluster_clients import WireClient
from tests.real_io.test_serve_client_quotas import alter
from tests.real_io.test_serve_quotas import WINDOWS


class NamedClient(WireClient):
    """A wire client with a client id of the test's choosing (quotas are per client id)."""

    def __init__(self, address: str, timeout_s: float, client_id: str):
        super().__init__(address, timeout_s)
        self.client_id = client_id

    def ask(self, key: int, version: int, body: dict) -> dict | None:
        self.correlation += 1
        self.sock.sendall(apis.encode_request(RequestHeader(key, version, self.correlation, self.client_id), body))
        try:
            size = struct.unpack(">i", self._exactly(4))[0]
            correlation, response = apis.decode_response(key, version, self._exactly(size))
        except (TimeoutError, socket.timeout):
            return None
        assert correlation == self.correlation
        return response


@pytest.fixture()
def broker(tmp_path):
    broker = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl", config=WINDOWS).start()
    yield broker
    assert broker.stop() == 0


def _set_request_quota(broker, client_id: str, percent: float) -> None:
    admin = WireClient(broker.bootstrap, 10)
    try:
        assert alter(admin, [([("client-id", client_id)], [("request_percentage", percent)])])[0][0] == 0
    finally:
        admin.close()
    time.sleep(0.3)  # the change notification reaches the broker's listener


def test_api_versions_is_throttled_by_the_request_quota_and_the_connection_muted(broker, tmp_path):
    """2.7.0 KafkaApis.handleApiVersionsRequest answers through sendResponseMaybeThrottle
    (no exemption for ApiVersions in 2.7): over a request_percentage quota its response
    carries throttle_time_ms (v1+), bounded to one window (boundedThrottleTime), and the
    next request is not read before the throttle has passed (KIP-219)."""
    _set_request_quota(broker, "chatty", 0.001)  # 10 microseconds of handling per second
    client = NamedClient(broker.bootstrap, 10, "chatty")
    try:
        throttle = 0
        for _ in range(50):
            answer = client.ask(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert answer is not None and answer["error_code"] == 0
            throttle = answer["throttle_time_ms"]
            if throttle > 0:
                break
        assert 0 < throttle <= 1000 * WINDOWS["quota.window.size.seconds"]
        started = time.monotonic()
        assert client.ask(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert time.monotonic() - started >= throttle / 1000.0 - 0.05  # muted: read only after the throttle
    finally:
        client.close()
    other = NamedClient(broker.bootstrap, 10, "quiet")  # another client id is not throttled
    try:
        answers = [other.ask(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
                   for _ in range(20)]
        assert all(a is not None and a["throttle_time_ms"] == 0 for a in answers)
    finally:
        other.close()
    recorded = [e for e in read_events(tmp_path / "trace.jsonl") if e.type == "quota_recorded"]
    assert recorded and all(e["quota_type"] == "request" and e["client"] == "chatty" and e["nanos"] > 0
                            for e in recorded)


@pytest.mark.slow
def test_confluent_kafka_sending_many_small_records_is_throttled_by_request_time(broker, tmp_path):
    """2.7.0 KafkaApis.handleProduceRequest: a produce with acks != 0 is recorded against
    the request quota too, and the response carries the larger throttle; librdkafka
    (linger.ms=0, one small request after another) reports it through throttle_cb and
    waits it out. The broker's trace passes the request-time tolerance."""
    _set_request_quota(broker, "chatty", 1.0)  # 10 ms of handling per second
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "chatty", "acks": 1, "linger.ms": 0,
                         "queue.buffering.max.messages": 100000,
                         "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000))})
    delivered: list[int] = []
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        try:
            producer.produce("tr", b"x" * 10, on_delivery=lambda err, msg: delivered.append(0 if err else 1))
        except BufferError:
            pass
        producer.poll(0.001)
    producer.purge()
    producer.flush(5)
    assert sum(delivered) > 0
    assert throttles and max(throttles) > 0, "librdkafka never reported a throttle"
    events = list(read_events(tmp_path / "trace.jsonl"))
    throttled = [e for e in events if e.type == "throttled" and e["quota_type"] == "request"]
    assert throttled and {e["client"] for e in throttled} == {"chatty"}
    assert all(e["throttle_time_ms"] <= 1000 for e in throttled)  # boundedThrottleTime
    verdict = {r.name: r for r in check_quotas(events, History())}
    assert verdict["quota_violations"].value == 0, verdict["quota_violations"].examples
    assert verdict["throttle_not_honoured"].value == 0, verdict["throttle_not_honoured"].examples
