"""A config change made through one broker of a cluster reaches every broker (issue 22):
three `isrlab serve` processes on ZooKeeper (real_io/cluster.py). Kafka 2.7.0:
AdminManager.alterConfigs writes through AdminZkClient.changeTopicConfig /
changeBrokerConfig (the config node, then /config/changes/config_change_<n>); every
broker's DynamicConfigManager (ZkNodeChangeNotificationListener) reads the notification
and its TopicConfigHandler / BrokerConfigHandler applies the change."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from real_io.cluster import LocalCluster
from real_io.protocol.apis import ApiKey
from tests.real_io.test_serve_wire import WireClient

pytestmark = pytest.mark.slow
BROKERS = (1, 2, 3)
TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=len(BROKERS), stop_timeout_s=10) as running:
        yield running


def ask(cluster: LocalCluster, broker: int, key: int, version: int, body: dict) -> dict:
    """One request to one broker by its own address (not whichever the client picks)."""
    wire = WireClient(cluster.ports[broker])
    try:
        return wire.ask(key, version, body)
    finally:
        wire.close()


def described(cluster: LocalCluster, broker: int, kind: int, name: str, key: str) -> tuple[str | None, int]:
    answer = ask(cluster, broker, ApiKey.DESCRIBE_CONFIGS, 1, {"include_synonyms": False, "resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": [key]}]})
    result = answer["results"][0]
    if not result["configs"]:  # UNKNOWN_TOPIC_OR_PARTITION: the broker's metadata lacks the topic yet
        return None, result["error_code"]
    entry = result["configs"][0]
    return entry["value"], entry["config_source"]


def on_every_broker(cluster: LocalCluster, kind: int, name: str | None, key: str, expected: tuple,
                    timeout_s: float = 20):
    """What each broker describes (``name`` None: each broker its own broker resource)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {broker: described(cluster, broker, kind, str(broker) if name is None else name, key)
                for broker in BROKERS}
        if all(value == expected for value in seen.values()) or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_an_alter_through_one_broker_reaches_every_broker(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("everywhere", 3, 3, config={"retention.ms": "3600000"})],
                        request_timeout=20)["everywhere"].result(timeout=30)
    assert on_every_broker(cluster, 2, "everywhere", "retention.ms", ("3600000", TOPIC_CONFIG)) == {
        broker: ("3600000", TOPIC_CONFIG) for broker in BROKERS}
    # IncrementalAlterConfigs sent to broker 2 only
    answer = ask(cluster, 2, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "everywhere", "configs": [
            {"name": "min.insync.replicas", "config_operation": 0, "value": "4"}]}]})
    assert answer["responses"][0]["error_code"] == 0, answer
    assert on_every_broker(cluster, 2, "everywhere", "min.insync.replicas", ("4", TOPIC_CONFIG)) == {
        broker: ("4", TOPIC_CONFIG) for broker in BROKERS}
    # every partition's leader (the three are spread over the brokers) applies it: acks=all
    # cannot reach 4 in-sync replicas of 3
    errors = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                         "message.timeout.ms": 10000, "log_level": 0})
    for partition in range(3):
        producer.produce("everywhere", b"x", partition=partition, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert [e.code() if e else None for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS] * 3
    # a cluster-default broker key through broker 3 reaches brokers 1 and 2
    answer = ask(cluster, 3, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.flush.interval.messages", "config_operation": 0, "value": "777"}]}]})
    assert answer["responses"][0]["error_code"] == 0, answer
    assert on_every_broker(cluster, 4, None, "log.flush.interval.messages", ("777", DYNAMIC_DEFAULT_BROKER_CONFIG)) == {
        broker: ("777", DYNAMIC_DEFAULT_BROKER_CONFIG) for broker in BROKERS}
