"""Config changes asked for by clients (AlterConfigs / IncrementalAlterConfigs), their
validation against Kafka 2.7.0's tables, how brokers apply them, and what
DescribeConfigs computes. Each rule names its 2.7.0 source."""
import pytest

from broker_core import coordination as coord
from broker_core.config import broker_config
from broker_core.config_describe import (
    DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, TOPIC_CONFIG,
    ConfigLayers, describe_broker, describe_topic, static_layer)
from broker_core.config_keys import (
    APPEND, DELETE, SET, SUBTRACT, ConfigOp, InvalidConfig, apply_operations, validate_broker_configs,
    validate_topic_configs)
from broker_core.coordination_store import CoordinationStore
from broker_core.dynamic_config import CONFIG_CHANGES_PATH, entity_config, topic_config_path
from broker_core.errors import ErrorCode
from broker_core.messages import AlterConfigsRequest, ConfigResourceChange
from tests.harness import Cluster


def refused(check, *args) -> InvalidConfig:
    with pytest.raises(InvalidConfig) as failure:
        check(*args)
    return failure.value


def test_topic_values_are_checked_by_type_and_validator_with_kafkas_messages():
    """ConfigDef.parseType and Range.atLeast / between, ValidList.in (clients/.../config/
    ConfigDef.java), LogConfig.validateNames for an unknown name."""
    assert refused(validate_topic_configs, {"min.insync.replicas": "0"}).message == \
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    assert refused(validate_topic_configs, {"segment.bytes": "big"}).message == \
        "Invalid value big for configuration segment.bytes: Not a number of type INT"
    assert refused(validate_topic_configs, {"segment.bytes": str(2**31)}).key == "segment.bytes"  # beyond INT
    assert refused(validate_topic_configs, {"min.cleanable.dirty.ratio": "1.5"}).message.endswith(
        "Value must be no more than 1")
    assert refused(validate_topic_configs, {"cleanup.policy": "compact,shred"}).key == "cleanup.policy"
    assert refused(validate_topic_configs, {"preallocate": "yes"}).message.endswith("either true or false")
    unknown = refused(validate_topic_configs, {"no.such": "1"})
    assert unknown.unknown and unknown.message == "Unknown topic config name: no.such"
    validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact,delete", "retention.bytes": "-5"})


def test_broker_keys_must_be_dynamic_and_per_broker_ones_not_at_the_default():
    """DynamicBrokerConfig.validateConfigs: nonDynamicConfigs, perBrokerConfigs; a broker
    key a topic key falls back to takes the topic key's validator."""
    assert "Cannot update these configs dynamically" in refused(
        validate_broker_configs, {"num.partitions": "3"}, True).message
    assert "broker id must be specified" in refused(
        validate_broker_configs, {"listeners": "PLAINTEXT://:1"}, False).message
    assert refused(validate_broker_configs, {"min.insync.replicas": "0"}, False).key == "min.insync.replicas"
    assert refused(validate_broker_configs, {"replica.lag.max.messages": "1"}, True).unknown  # removed in 2.7
    validate_broker_configs({"log.flush.interval.messages": "10", "listeners": "PLAINTEXT://:1"}, True)


def test_incremental_operations_combine_as_prepare_incremental_configs():
    """AdminManager.prepareIncrementalConfigs: APPEND/SUBTRACT start from the current value
    or the key's default, and only on LIST keys."""
    ops = (ConfigOp("cleanup.policy", APPEND, "compact"), ConfigOp("retention.ms", DELETE, None),
           ConfigOp("segment.bytes", SET, "1048576"))
    assert apply_operations({"retention.ms": "1"}, ops, topic=True) == {
        "cleanup.policy": "delete,compact", "segment.bytes": "1048576"}
    assert apply_operations({"cleanup.policy": "delete,compact"},
                            (ConfigOp("cleanup.policy", SUBTRACT, "delete"),), topic=True) == {"cleanup.policy": "compact"}
    assert "append is not allowed" in refused(
        apply_operations, {}, (ConfigOp("retention.ms", APPEND, "1"),), True).message


def test_describe_sources_and_synonyms_follow_admin_manager():
    """AdminManager.createTopicConfigEntry / createBrokerConfigEntry / configSynonyms: an
    override is TOPIC_CONFIG; otherwise the broker key's layers in precedence order, the
    synonyms before the key itself dropped (DynamicBrokerConfig.brokerConfigSynonyms)."""
    layers = ConfigLayers(static_layer(1, broker_config("kafka-2.7", {"min.insync.replicas": 2})),
                          dynamic_default={"log.roll.ms": "60000"}, dynamic_broker={"log.flush.interval.messages": "5"})
    topic = {e.name: e for e in describe_topic(layers, {"retention.ms": "1000"}, True, None)}
    assert len(topic) == 26
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == ("1000", TOPIC_CONFIG)
    assert (topic["flush.ms"].value, topic["flush.ms"].source, topic["flush.ms"].synonyms) == (
        "9223372036854775807", DEFAULT_CONFIG, ())  # log.flush.interval.ms has no value: nothing kept
    assert (topic["min.insync.replicas"].value, topic["min.insync.replicas"].source) == ("2", STATIC_BROKER_CONFIG)
    assert (topic["segment.ms"].value, topic["segment.ms"].source) == ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in topic["flush.messages"].synonyms] == [
        ("log.flush.interval.messages", "5", DYNAMIC_BROKER_CONFIG),
        ("log.flush.interval.messages", "9223372036854775807", DEFAULT_CONFIG)]
    broker = {e.name: e for e in describe_broker(layers, True, True, None)}
    assert broker["broker.id"].source == STATIC_BROKER_CONFIG and broker["broker.id"].read_only
    assert broker["log.roll.hours"].source == DEFAULT_CONFIG  # log.roll.ms (dynamic) came before it: dropped
    assert broker["log.roll.ms"].synonyms[1].name == "log.roll.hours"
    assert broker["ssl.key.password"].sensitive and broker["ssl.key.password"].value is None
    assert "truncation" not in broker and "replica.lag.max.messages" not in broker
    assert [e.name for e in describe_broker(layers, False, False, None)] == ["log.roll.ms"]


def test_sequential_children_are_numbered_past_those_a_snapshot_kept():
    """ZooKeeper numbers a sequential child by the parent's cversion; the embedded store's
    snapshot keeps the children but not the counter, so a new one must not collide."""
    store = CoordinationStore(lambda *a: None)
    sid = store.create_session("t", 10000, 0)
    store.put(f"{CONFIG_CHANGES_PATH}/config_change_0000000000", b"{}")
    store.znodes[CONFIG_CHANGES_PATH].child_sequence = 0  # as after a snapshot load
    reply = store.request(sid, coord.Create(f"{CONFIG_CHANGES_PATH}/config_change_", b"{}", sequential=True), 0)
    assert reply.ok and reply.data == f"{CONFIG_CHANGES_PATH}/config_change_0000000001".encode()


def alter(cluster: Cluster, broker: int, *resources, validate_only=False, incremental=True):
    return cluster.request_and_wait(broker, lambda cid: AlterConfigsRequest(cid, tuple(resources), validate_only,
                                                                            incremental))


def test_an_alter_through_one_broker_is_applied_by_every_broker():
    """AdminZkClient.changeTopicConfig then every broker's TopicConfigHandler (through
    /config/changes); validate_only writes nothing; AlterConfigs replaces the set."""
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    change = ConfigResourceChange(2, "t", (ConfigOp("min.insync.replicas", SET, "2"),))
    answer = alter(cluster, 2, change, validate_only=True)
    assert answer.results[0].error is ErrorCode.NONE
    assert entity_config(cluster.store.get(topic_config_path("t"))) == {}  # nothing written
    assert alter(cluster, 2, change).results[0].error is ErrorCode.NONE
    assert cluster.wait_for(lambda: all(cluster.nodes[b].replicas.config_for("t").min_insync_replicas == 2
                                        for b in (1, 2, 3)), 2000)
    replace = ConfigResourceChange(2, "t", (ConfigOp("retention.ms", SET, "1000"),))
    assert alter(cluster, 3, replace, incremental=False).results[0].error is ErrorCode.NONE
    assert cluster.wait_for(lambda: all(cluster.nodes[b].replicas.config_for("t").min_insync_replicas == 1
                                        for b in (1, 2, 3)), 2000)
    assert entity_config(cluster.store.get(topic_config_path("t"))) == {"retention.ms": "1000"}
    assert cluster.nodes[1].topic_overrides["t"] == {"retention.ms": "1000"}


def test_broker_layers_apply_in_order_and_a_refused_value_keeps_the_config():
    """BrokerConfigHandler.processConfigChanges: the default applies to every broker, a
    broker's own config only to it and over the default; DynamicBrokerConfig refuses a
    bad value read from ZooKeeper and the broker keeps its config (written here behind
    the admin API's back, as an operator's tool could)."""
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    default = ConfigResourceChange(4, "", (ConfigOp("min.insync.replicas", SET, "2"),))
    own = ConfigResourceChange(4, "3", (ConfigOp("min.insync.replicas", SET, "3"),))
    assert alter(cluster, 1, default).results[0].error is ErrorCode.NONE
    assert alter(cluster, 3, own).results[0].error is ErrorCode.NONE
    other = alter(cluster, 1, ConfigResourceChange(4, "3", (ConfigOp("min.insync.replicas", SET, "3"),)))
    assert other.results[0].error is ErrorCode.INVALID_REQUEST
    expected = {1: 2, 2: 2, 3: 3}
    assert cluster.wait_for(lambda: {b: cluster.nodes[b].config.min_insync_replicas for b in (1, 2, 3)} == expected,
                            2000)
    assert all(cluster.nodes[b].replicas.config_for("t").min_insync_replicas == expected[b] for b in (1, 2, 3))
    cluster.store.put("/config/brokers/<default>", coord.encode_data({"version": 1, "config": {
        "min.insync.replicas": "0"}}))
    cluster.store.put_sequential(f"{CONFIG_CHANGES_PATH}/config_change_",
                                 coord.encode_data({"version": 2, "entity_path": "brokers/<default>"}))
    cluster.run_for(1000)
    assert {b: cluster.nodes[b].config.min_insync_replicas for b in (1, 2, 3)} == expected
    assert cluster.nodes[1].config_layers.dynamic_default == {"min.insync.replicas": "2"}
