"""Client quotas on ``isrlab serve`` against real clients (issue 22): confluent-kafka
(librdkafka) and kafka-python producers are throttled to their quota, their responses
carry throttle_time_ms, and the broker's own trace passes the quota checkers.

The quota window is made short (3 samples of 1 s) so that a few seconds measure it:
over a span the client may send at most T x (span + N x W) + M, the young window's
credit included (docs/quotas.md, "Tolerance")."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError
from kazoo.client import KazooClient

from analysis.checkers.quotas import check_quotas
from analysis.history import History
from analysis.trace import read_events
from broker_core.quota_config import change_notification, encode_quota_config
from tests.real_io.serve_process import ServeProcess

SAMPLES, WINDOW_S = 3, 1
QUOTA = 50_000  # bytes/s
RECORD = 1000
RUN_S = 4.0
BATCH = 16384  # the producers' batch.size: the largest request (M) is about one batch
WINDOWS = {"quota.window.num": SAMPLES, "quota.window.size.seconds": WINDOW_S}


def _within_tolerance(sent_bytes: int, elapsed_s: float, largest: int) -> bool:
    return sent_bytes <= QUOTA * (elapsed_s + SAMPLES * WINDOW_S) + largest


def _quota_results(trace) -> dict:
    return {r.name: r for r in check_quotas(list(read_events(trace)), History())}


def _produce_for(send, poll, seconds: float) -> int:
    """Send RECORD-byte values as fast as the client takes them for ``seconds``."""
    deadline, count = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        if send():
            count += 1
        poll()
    return count


@pytest.mark.slow
def test_confluent_kafka_is_throttled_by_a_quota_in_zookeeper(zk_hosts, tmp_path):
    """2.7.0 ConfigHandler.QuotaConfigHandler (/config/clients/<id> and its change
    notification, applied while the broker runs) and KafkaApis.handleProduceRequest
    (throttle_time_ms in the response, the channel muted: KIP-219); librdkafka reports
    the throttle through throttle_cb and holds its next request."""
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", zk=zk_hosts, trace=trace, config=WINDOWS).start()
    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=10)
    try:
        zk.create("/config/clients/cq", encode_quota_config({"producer_byte_rate": QUOTA}), makepath=True)
        zk.create("/config/changes/config_change_", change_notification("/config/clients/cq"), sequence=True,
                  makepath=True)
        throttles: list[int] = []
        delivered: list[int] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "cq", "acks": "all",
                             "linger.ms": 5, "batch.size": BATCH, "queue.buffering.max.messages": 100000,
                             "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000))})
        producer.produce("tq", b"warm-up")  # auto-creates the topic and waits for the quota to be read
        producer.flush(10)
        time.sleep(0.5)
        started = time.monotonic()

        def send() -> bool:
            try:
                producer.produce("tq", b"x" * RECORD, on_delivery=lambda err, msg: delivered.append(0 if err else 1))
                return True
            except BufferError:
                return False
        _produce_for(send, lambda: producer.poll(0), RUN_S)
        elapsed = time.monotonic() - started
        acknowledged = sum(delivered) * RECORD
        producer.purge()
        producer.flush(5)
        del producer
    finally:
        zk.stop()
        zk.close()
        assert broker.stop() == 0
    assert throttles and max(throttles) > 0, "librdkafka never reported a throttle time"
    assert _within_tolerance(acknowledged, elapsed, BATCH), (acknowledged, elapsed)
    results = _quota_results(trace)
    assert results["throttled"].value > 0
    assert results["quota_violations"].value == 0, results["quota_violations"].examples
    assert results["throttle_not_honoured"].value == 0, results["throttle_not_honoured"].examples


@pytest.mark.slow
def test_kafka_python_is_throttled_by_the_static_default_quota(tmp_path):
    """2.7.0 KafkaConfig quota.producer.default (deprecated, still read: a per-client-id
    quota for every client id from the start, ClientQuotaManager's static default) with
    the embedded store; kafka-python's produce responses carry throttle_time_ms (the
    broker's trace shows them) and the muted connection holds it to the quota."""
    trace = tmp_path / "trace.jsonl"
    broker = ServeProcess(tmp_path / "data", trace=trace, config={**WINDOWS, "quota.producer.default": QUOTA}).start()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="kp", acks=1, linger_ms=5,
                                 batch_size=BATCH,
                                 request_timeout_ms=30000, max_block_ms=1000, enable_idempotence=False)
        producer.send("tk", b"warm-up").get(timeout=10)
        futures = []
        started = time.monotonic()

        def send() -> bool:
            try:
                futures.append(producer.send("tk", b"x" * RECORD))
                return True
            except Exception:  # KafkaTimeoutError: the buffer is full while throttled
                return False
        _produce_for(send, lambda: None, RUN_S)
        elapsed = time.monotonic() - started
        acknowledged = sum(RECORD for f in futures if f.is_done and f.succeeded())
        try:
            producer.close(timeout=1)  # what is still queued, throttled, is dropped
        except KafkaTimeoutError:
            pass
    finally:
        assert broker.stop() == 0
    assert _within_tolerance(acknowledged, elapsed, BATCH), (acknowledged, elapsed)
    results = _quota_results(trace)
    assert results["throttled"].value > 0 and "kp" in results["throttled"].details["clients"]
    assert results["quota_violations"].value == 0, results["quota_violations"].examples
    assert results["throttle_not_honoured"].value == 0, results["throttle_not_honoured"].examples
