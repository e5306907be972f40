"""Topic and broker configs through the admin APIs real clients use, against `isrlab
serve` (issue 22): CreateTopics with configs, AlterConfigs, IncrementalAlterConfigs and
DescribeConfigs, with confluent-kafka's AdminClient and kafka-python's as a second
client. Each Kafka rule names its 2.7.0 source."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic)
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasError

from analysis.trace import read_events
from real_io.protocol.apis import ApiKey
from tests.real_io.serve_process import ServeProcess
from tests.real_io.test_serve_wire import WireClient

TOPIC = ConfigResource.Type.TOPIC
BROKER = ConfigResource.Type.BROKER


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("configs")
    process = ServeProcess(tmp_path / "data", trace=tmp_path / "trace.jsonl").start()
    process.trace_path = tmp_path / "trace.jsonl"  # read by the throttle-rate test
    yield process
    assert process.stop() == 0, (tmp_path / "data.stderr").read_text()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin: AdminClient, topic: str, config: dict | None = None, validate_only: bool = False) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})], request_timeout=10,
                        validate_only=validate_only)[topic].result(timeout=15)


def describe(admin: AdminClient, kind, name: str) -> dict:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)


def wait_for(admin: AdminClient, kind, name: str, key: str, value: str | None, timeout_s: float = 10) -> dict:
    """The change is applied when the broker's listener has read the notification;
    DescribeConfigs shows what the broker applied."""
    deadline = time.monotonic() + timeout_s
    while True:
        configs = describe(admin, kind, name)
        if configs[key].value == value or time.monotonic() > deadline:
            return configs
        time.sleep(0.1)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as failure:
        future.result(timeout=15)
    return failure.value.args[0]


def test_create_with_configs_describe_shows_them_with_their_source(admin):
    """AdminManager.createTopics writes the configs (AdminZkClient.createTopicWithAssignment);
    describeConfigs/createTopicConfigEntry: every LogConfig key, an override as
    TOPIC_CONFIG, the rest from the broker (flush.ms through log.flush.scheduler.interval.ms:
    Long.MaxValue, not null)."""
    create(admin, "created", {"min.insync.replicas": "1", "retention.ms": "3600000", "cleanup.policy": "compact"})
    configs = wait_for(admin, TOPIC, "created", "retention.ms", "3600000")
    assert len(configs) == 26  # LogConfig.configDef's keys at 2.7.0
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["flush.ms"].value == "9223372036854775807"
    assert configs["flush.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824"
    assert not configs["retention.ms"].is_read_only


def test_validate_only_creates_nothing_and_bad_configs_name_the_setting(admin):
    """AdminManager.createTopics: validateOnly stops before the write; LogConfig.validate:
    an unknown name (InvalidConfigurationException) and a bad value (ConfigException)
    are INVALID_CONFIG at creation, with the setting named."""
    create(admin, "only-validated", {"retention.ms": "1000"}, validate_only=True)
    assert "only-validated" not in admin.list_topics(timeout=10).topics
    unknown = error_of(admin.create_topics([NewTopic("bad1", 1, 1, config={"no.such.key": "1"})])["bad1"])
    assert unknown.code() == KafkaError.INVALID_CONFIG and "no.such.key" in unknown.str()
    negative = error_of(admin.create_topics([NewTopic("bad2", 1, 1, config={"min.insync.replicas": "-1"})])["bad2"])
    assert negative.code() == KafkaError.INVALID_CONFIG and "min.insync.replicas" in negative.str()
    wrong_type = error_of(admin.create_topics([NewTopic("bad3", 1, 1, config={"retention.ms": "soon"})])["bad3"])
    assert wrong_type.code() == KafkaError.INVALID_CONFIG and "retention.ms" in wrong_type.str()
    assert not {"bad1", "bad2", "bad3"} & set(admin.list_topics(timeout=10).topics)


def test_kafka_python_reads_the_created_topics_configs_that_describe_configs_shows(admin, broker):
    """CreateTopics v5+ (KIP-525) as kafka-python 3 reads it (KafkaAdminClient
    .create_topics returns the response, each topic's configs by name): 2.7.0
    core/src/main/scala/kafka/server/AdminManager.scala createTopics ->
    maybePopulateMetadataAndConfigs (createTopicConfigEntry: what DescribeConfigs shows
    of the topic, without synonyms; validate_only too) and KafkaApis.scala
    handleCreateTopicsRequest (none and -1 counts for a topic that failed). At v4, before
    KIP-525, the answer has no such fields (the project's codec, at the wire)."""
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        created = client.create_topics({
            "kp-created": {"num_partitions": 2, "replication_factor": 1, "configs": {"retention.ms": "7200000"}},
            "kp-refused": {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "soon"}}},
            raise_errors=False)
        checked = client.create_topics({"kp-checked": {"num_partitions": 1, "replication_factor": 1,
                                                       "configs": {"cleanup.policy": "compact"}}}, validate_only=True)
    finally:
        client.close()
    topics = {t["name"]: t for t in created["topics"]}
    ok, refused = topics["kp-created"], topics["kp-refused"]
    assert (ok["error_code"], ok["num_partitions"], ok["replication_factor"]) == (0, 2, 1)
    described = wait_for(admin, TOPIC, "kp-created", "retention.ms", "7200000")  # DescribeConfigs, by confluent-kafka
    assert len(ok["configs"]) == len(described) == 26 and set(ok["configs"]) == set(described)
    for name, entry in described.items():
        assert (ok["configs"][name]["value"], ok["configs"][name]["config_source"], ok["configs"][name]["read_only"],
                ok["configs"][name]["is_sensitive"]) == (
            entry.value, ConfigSource(entry.source).name, entry.is_read_only, entry.is_sensitive), name
    assert ok["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert refused["error_code"] == KafkaError.INVALID_CONFIG
    assert (refused.get("configs"), refused["num_partitions"], refused["replication_factor"]) == (None, -1, -1)
    only = checked["topics"][0]
    assert (only["error_code"], only["num_partitions"], only["configs"]["cleanup.policy"]["value"]) == (0, 1, "compact")
    assert "kp-checked" not in admin.list_topics(timeout=10).topics
    wire = WireClient(int(broker.bootstrap.rsplit(":", 1)[1]))
    try:
        v4 = wire.ask(ApiKey.CREATE_TOPICS, 4, {"timeout_ms": 5000, "validate_only": True, "topics": [
            {"name": "v4-checked", "num_partitions": 1, "replication_factor": 1, "configs": [], "assignments": []}]})
    finally:
        wire.sock.close()
    # the decoder gives a field a version lacks its default: nothing of the validated topic came
    assert [(t["error_code"], t["num_partitions"], t["configs"]) for t in v4["topics"]] == [(0, -1, [])]


def test_alter_replaces_the_set_and_a_produce_obeys_the_new_min_insync_replicas(admin, broker):
    """AdminManager.alterConfigs -> AdminZkClient.changeTopicConfig replaces the topic's
    overrides; TopicConfigHandler applies them without a restart; Partition
    .appendRecordsToLeader refuses acks=all below min.insync.replicas."""
    create(admin, "altered", {"retention.ms": "3600000"})
    resource = ConfigResource(TOPIC, "altered", set_config={"min.insync.replicas": "2"})
    admin.alter_configs([resource], request_timeout=10)[resource].result(timeout=15)
    configs = wait_for(admin, TOPIC, "altered", "min.insync.replicas", "2")
    assert configs["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "604800000"  # replaced: back to the broker's
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, request_timeout_ms=5000)
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send("altered", b"refused").get(timeout=15)
    finally:
        producer.close()


def test_incremental_set_delete_append_subtract(admin):
    """AdminManager.incrementalAlterConfigs / prepareIncrementalConfigs: SET and DELETE one
    key and keep the others; APPEND and SUBTRACT only on LIST keys."""
    create(admin, "incremental", {"retention.ms": "3600000"})
    ops = [ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)]
    resource = ConfigResource(TOPIC, "incremental", incremental_configs=ops)
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    configs = wait_for(admin, TOPIC, "incremental", "segment.bytes", "1048576")
    assert configs["retention.ms"].value == "3600000"  # kept
    assert configs["cleanup.policy"].value == "delete,compact"  # appended to the default
    ops = [ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
           ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)]
    resource = ConfigResource(TOPIC, "incremental", incremental_configs=ops)
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    configs = wait_for(admin, TOPIC, "incremental", "retention.ms", "604800000")
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    not_a_list = [ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]
    resource = ConfigResource(TOPIC, "incremental", incremental_configs=not_a_list)
    refused = error_of(admin.incremental_alter_configs([resource])[resource])
    assert refused.code() == KafkaError.INVALID_REQUEST and "retention.ms" in refused.str()


def test_broker_dynamic_keys_per_broker_and_cluster_default(admin, broker):
    """DynamicBrokerConfig: a per-broker value (/config/brokers/<id>) wins over the cluster
    default (/config/brokers/<default>); describe shows each with its source and, asked
    for, its synonyms; a topic without an override follows the broker's value
    (DynamicLogConfig.reconfigure)."""
    create(admin, "follows-broker")
    # Both clients refuse the cluster default's name "" before sending it: the wire client does
    wire = WireClient(broker.port)
    try:
        answer = wire.ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.flush.interval.messages", "config_operation": 0, "value": "1000"}]}]})
        assert answer["responses"][0]["error_code"] == 0, answer
    finally:
        wire.close()
    own = ConfigResource(BROKER, "1", incremental_configs=[
        ConfigEntry("log.flush.interval.messages", "500", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([own])[own].result(timeout=15)
    topic = wait_for(admin, TOPIC, "follows-broker", "flush.messages", "500")
    assert topic["flush.messages"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    configs = describe(admin, BROKER, "1")
    entry = configs["log.flush.interval.messages"]
    assert entry.value == "500" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not entry.is_read_only and configs["num.partitions"].is_read_only
    assert "replica.lag.max.messages" not in configs and "truncation" not in configs  # removed in 2.7 / isrlab's
    wire = WireClient(broker.port)
    try:
        described = wire.ask(ApiKey.DESCRIBE_CONFIGS, 1, {"include_synonyms": True, "resources": [
            {"resource_type": 4, "resource_name": "", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.flush.interval.messages"]}]})
    finally:
        wire.close()
    cluster, own_entry = described["results"][0]["configs"], described["results"][1]["configs"][0]
    assert [(c["name"], c["value"], c["config_source"]) for c in cluster] == [
        ("log.flush.interval.messages", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    assert [(s["value"], s["source"]) for s in own_entry["synonyms"]] == [  # AdminManager.configSynonyms order
        ("500", 2), ("1000", 3), ("9223372036854775807", ConfigSource.DEFAULT_CONFIG.value)]


def test_bad_input_answers_a_kafka_error_per_resource_and_the_broker_goes_on(admin, broker):
    """AdminManager.alterConfigs: UnknownTopicOrPartitionException; ConfigException wrapped
    as INVALID_REQUEST "Invalid config value for resource ..."; an unknown topic key
    INVALID_CONFIG; DynamicBrokerConfig.validateConfigs "Cannot update these configs
    dynamically"; getBrokerId "Unexpected broker id". One bad resource leaves the others."""
    create(admin, "guarded")
    bad = {
        "missing": ConfigResource(TOPIC, "no-such-topic", set_config={"retention.ms": "1"}),
        "negative": ConfigResource(TOPIC, "guarded", set_config={"min.insync.replicas": "0"}),
        "type": ConfigResource(TOPIC, "guarded", set_config={"segment.bytes": "big"}),
        "unknown": ConfigResource(TOPIC, "guarded", set_config={"no.such.key": "1"}),
        "static": ConfigResource(BROKER, "1", set_config={"num.partitions": "3"}),
    }
    expected = {"missing": (KafkaError.UNKNOWN_TOPIC_OR_PART, "no-such-topic"),
                "negative": (KafkaError.INVALID_REQUEST, "min.insync.replicas"),
                "type": (KafkaError.INVALID_REQUEST, "segment.bytes"),
                "unknown": (KafkaError.INVALID_CONFIG, "no.such.key"),
                "static": (KafkaError.INVALID_REQUEST, "num.partitions")}
    for label, resource in bad.items():
        refused = error_of(admin.alter_configs([resource], request_timeout=10)[resource])
        code, named = expected[label]
        assert refused.code() == code, (label, refused)
        assert named in refused.str(), (label, refused)
    # clients send a broker resource to that broker: another id reaches this one by the wire client only
    wire = WireClient(broker.port)
    try:
        answer = wire.ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
            {"resource_type": 4, "resource_name": "7", "configs": [
                {"name": "log.flush.interval.messages", "config_operation": 0, "value": "3"}]},
            {"resource_type": 2, "resource_name": "guarded", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": None}]},
            {"resource_type": 9, "resource_name": "x", "configs": []}]})
    finally:
        wire.close()
    assert [(r["error_code"], r["error_message"]) for r in answer["responses"]] == [
        (42, "Unexpected broker id, expected 1, but received 7"),
        (42, "Null value not supported for : retention.ms"),
        (42, "AlterConfigs is only supported for topics and brokers, but resource type is 9")]
    assert describe(admin, TOPIC, "guarded")["min.insync.replicas"].value == "1"  # nothing changed
    assert "guarded" in admin.list_topics(timeout=10).topics  # and the broker still answers


def test_kafka_python_describes_what_confluent_set(admin, broker):
    """A second client reading DescribeConfigs v0-v3 as kafka-python decodes them."""
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, KafkaAdminClient
    create(admin, "second-client", {"max.message.bytes": "2048"})
    wait_for(admin, TOPIC, "second-client", "max.message.bytes", "2048")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        responses = client.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "second-client")])
    finally:
        client.close()
    # kafka-python 3 answers {resource type: {name: {key: entry}}} and leaves out
    # entries at their default (source DEFAULT_CONFIG): what is left is the override, and
    # flush.messages if the broker test before set it dynamically (the broker is shared)
    found = responses["topic"]["second-client"]
    assert set(found) - {"flush.messages"} == {"max.message.bytes"}, found
    assert "2048" in str(found["max.message.bytes"])


def test_replication_throttle_rates_through_incremental_alter_configs(admin, broker):
    """DynamicConfig.Broker (2.7.0 DynamicConfig.scala): the throttle rates are LONG,
    atLeast(0), settable on a broker resource though KafkaConfig lacks them; applied by
    BrokerConfigHandler.processConfigChanges (ConfigHandler.scala) to this broker's
    replication quotas, and not listed by DescribeConfigs (only KafkaConfig's keys)."""
    rate = "leader.replication.throttled.rate"
    ops = [ConfigEntry(rate, "1048576", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(BROKER, "1", incremental_configs=ops)
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        changes = [e for e in read_events(broker.trace_path) if e.type == "broker_config_changed"
                   and e.fields.get("configs", {}).get(rate) == "1048576"]
        if changes:
            break
        time.sleep(0.1)
    assert changes, "the broker did not read the rate"
    assert rate not in describe(admin, BROKER, "1")
    bad = [ConfigEntry(rate, "-1", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(BROKER, "1", incremental_configs=bad)
    refused = error_of(admin.incremental_alter_configs([resource])[resource])
    assert refused.code() == KafkaError.INVALID_REQUEST and rate in refused.str()
