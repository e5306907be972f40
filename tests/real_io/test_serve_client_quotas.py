"""AlterClientQuotas / DescribeClientQuotas (KIP-546) on ``isrlab serve``, through the
project's own codec at the wire (confluent-kafka 2.x has no alter_client_quotas, and
kafka-python 3.0 has neither API). Kafka 2.7.0 sources: core/.../server/KafkaApis.scala
``handleAlterClientQuotasRequest`` / ``handleDescribeClientQuotasRequest`` and
AdminManager.scala ``alterClientQuotas`` / ``describeClientQuotas``."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from analysis.trace import TraceError, read_events
from real_io.cluster import LocalCluster
from real_io.protocol.apis import ApiKey
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_cluster_clients import WireClient
from tests.real_io.test_serve_quotas import BATCH, QUOTA, RECORD, WINDOWS, _produce_for, _within_tolerance

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def alter(wire: WireClient, entries, validate_only=False) -> list[tuple[int, str | None, list]]:
    body = {"validate_only": validate_only, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}
        for entity, ops in entries]}
    answer = wire.ask(ApiKey.ALTER_CLIENT_QUOTAS, 0, body)
    return [(e["error_code"], e["error_message"], [(x["entity_type"], x["entity_name"]) for x in e["entity"]])
            for e in answer["entries"]]


def describe(wire: WireClient, components, strict=False) -> dict:
    answer = wire.ask(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, {"strict": strict, "components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]})
    if answer["error_code"]:
        return {"error": (answer["error_code"], answer["error_message"])}
    return {tuple((x["entity_type"], x["entity_name"]) for x in e["entity"]): {v["key"]: v["value"] for v in e["values"]}
            for e in answer["entries"]}


@pytest.fixture()
def broker(tmp_path):
    broker = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl", config=WINDOWS).start()
    yield broker
    assert broker.stop() == 0


def test_alter_then_describe_at_the_wire_with_kafkas_errors(broker):
    """AdminManager.alterClientQuotas (validate_only, per-entry ApiErrors) and
    handleDescribeClientQuotas (exact / default / specified, strict); bad input answers
    Kafka's error codes and the connection goes on being served."""
    wire = WireClient(broker.bootstrap, 10)
    try:
        app = [("client-id", "app")]
        assert alter(wire, [(app, [("producer_byte_rate", 5000.0)])], validate_only=True) == [(0, None, app)]
        assert describe(wire, [("client-id", EXACT, "app")]) == {}
        answer = alter(wire, [(app, [("producer_byte_rate", 5000.0), ("request_percentage", 25.0)]),
                              ([("user", None)], [("consumer_byte_rate", 7000.0)]),
                              ([("client-id", "bad")], [("producer_byte_rate", 1.5)]),
                              ([("ip", "1.2.3.4")], [("producer_byte_rate", 1.0)])])
        assert answer == [(0, None, app), (0, None, [("user", None)]),
                          (42, "Configuration producer_byte_rate must be a Long value", [("client-id", "bad")]),
                          (42, "Unhandled client quota entity type: ip", [("ip", "1.2.3.4")])]
        assert describe(wire, [("client-id", EXACT, "app")], strict=True) == {
            (("client-id", "app"),): {"producer_byte_rate": 5000.0, "request_percentage": 25.0}}
        assert describe(wire, [("user", DEFAULT, None)]) == {(("user", None),): {"consumer_byte_rate": 7000.0}}
        assert describe(wire, [("client-id", SPECIFIED, None)], strict=True) == {
            (("client-id", "app"),): {"producer_byte_rate": 5000.0, "request_percentage": 25.0}}
        assert describe(wire, [("group", SPECIFIED, None)]) == {"error": (35, "Custom entity type 'group' not supported")}
        assert describe(wire, [("user", 9, None)]) == {"error": (-1, None)}
        assert alter(wire, [(app, [("request_percentage", None)])]) == [(0, None, app)]
        assert describe(wire, [("client-id", EXACT, "app")], strict=True) == {
            (("client-id", "app"),): {"producer_byte_rate": 5000.0}}
        assert wire.ask(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0  # still served
    finally:
        wire.close()


@pytest.mark.slow
def test_a_quota_set_by_alter_client_quotas_throttles_confluent_kafka(broker, tmp_path):
    """KafkaApis.handleAlterClientQuotasRequest, then the broker's QuotaConfigHandler
    (through the change notification, no restart) and handleProduceRequest's throttle:
    librdkafka is held to the quota."""
    wire = WireClient(broker.bootstrap, 10)
    try:
        assert alter(wire, [([("client-id", "aq")], [("producer_byte_rate", float(QUOTA))])])[0][0] == 0
    finally:
        wire.close()
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "aq", "acks": "all", "linger.ms": 5,
                         "batch.size": BATCH, "queue.buffering.max.messages": 100000,
                         "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000))})
    producer.produce("ta", b"warm-up")
    producer.flush(10)
    delivered: list[int] = []
    started = time.monotonic()

    def send() -> bool:
        try:
            producer.produce("ta", b"x" * RECORD, on_delivery=lambda err, msg: delivered.append(0 if err else 1))
            return True
        except BufferError:
            return False
    _produce_for(send, lambda: producer.poll(0), 4.0)
    elapsed = time.monotonic() - started
    producer.purge()
    producer.flush(5)
    assert throttles and max(throttles) > 0
    assert _within_tolerance(sum(delivered) * RECORD, elapsed, BATCH), (sum(delivered), elapsed)


@pytest.mark.slow
def test_every_broker_of_a_cluster_applies_an_alter_sent_to_one(tmp_path):
    """AdminZkClient.changeConfigs' change notification on real ZooKeeper
    (real_io/cluster.py): the other broker's DynamicConfigManager reads it and its
    QuotaConfigHandler applies the node while it runs (its trace says
    quota_config_changed); it also describes what the first one wrote."""
    with LocalCluster(tmp_path / "cluster", brokers=2, stop_timeout_s=10) as cluster:
        one, two = WireClient(f"127.0.0.1:{cluster.ports[1]}", 10), WireClient(f"127.0.0.1:{cluster.ports[2]}", 10)
        try:
            entity = [("user", "u1"), ("client-id", "c1")]
            assert alter(one, [(entity, [("consumer_byte_rate", 3000.0)])]) == [(0, None, entity)]
            assert describe(two, [("user", EXACT, "u1")]) == {tuple(entity): {"consumer_byte_rate": 3000.0}}
        finally:
            one.close()
            two.close()
        trace = cluster.broker_dir(2) / "trace.jsonl"
        deadline = time.monotonic() + 20
        while not _applied(trace) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _applied(trace)


def _applied(trace) -> bool:
    """The broker's trace shows the node applied (a line still being written: not yet)."""
    try:
        return any(e.type == "quota_config_changed" and e.get("entity") == "/config/users/u1/clients/c1"
                   and e.get("config") == {"consumer_byte_rate": 3000} for e in read_events(trace))
    except TraceError:
        return False
