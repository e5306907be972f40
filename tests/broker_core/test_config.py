import pytest

from broker_core.config import broker_config, topic_config
from broker_core.errors import ConfigError


def test_profiles_select_kafka_version_behaviour():
    new = broker_config("kafka-2.7")
    old = broker_config("kafka-0.8")
    assert new.truncation == "leader_epoch" and not new.unclean_leader_election_enable
    assert new.replica_lag_time_max_ms == 30000 and new.zookeeper_session_timeout_ms == 18000
    assert old.truncation == "high_watermark" and old.unclean_leader_election_enable
    assert old.replica_lag_time_max_ms == 10000 and old.replica_lag_max_messages == 4000
    assert old.zookeeper_session_timeout_ms == 6000


def test_kafka_names_override_and_topics_override_brokers():
    base = broker_config("kafka-2.7", {"min.insync.replicas": 2, "truncation": "high_watermark"})
    assert base.min_insync_replicas == 2 and base.truncation == "high_watermark"
    topic = topic_config(base, {"unclean.leader.election.enable": True, "min.insync.replicas": 1})
    assert topic.unclean_leader_election_enable and topic.min_insync_replicas == 1


@pytest.mark.parametrize("overrides,key", [
    ({"no.such.key": 1}, "no.such.key"),
    ({"min.insync.replicas": "two"}, "min.insync.replicas"),
    ({"min.insync.replicas": 0}, "min.insync.replicas"),
    ({"unclean.leader.election.enable": 1}, "unclean.leader.election.enable"),
    ({"truncation": "sometimes"}, "truncation"),
])
def test_bad_values_name_their_key(overrides, key):
    with pytest.raises(ConfigError) as info:
        broker_config("kafka-2.7", overrides)
    assert info.value.key == key


def test_unknown_profile_and_topic_key():
    with pytest.raises(ConfigError):
        broker_config("kafka-9")
    with pytest.raises(ConfigError) as info:
        topic_config(broker_config(), {"replica.lag.time.max.ms": 5})
    assert info.value.key == "replica.lag.time.max.ms"


def test_every_profile_has_client_defaults():
    from broker_core.config import CLIENT_PROFILES, PROFILES, client_defaults
    assert set(CLIENT_PROFILES) == set(PROFILES)
    assert client_defaults("kafka-0.8").partitioner == "round_robin"
    assert client_defaults("kafka-2.7").partitioner == "sticky" and client_defaults("kafka-2.7").validate_positions
    assert client_defaults("kafka-3.0").enable_idempotence and not client_defaults("kafka-2.7").enable_idempotence
