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
    ({"auto.leader.rebalance.enable": 1}, "auto.leader.rebalance.enable"),
    ({"leader.imbalance.check.interval.seconds": 0}, "leader.imbalance.check.interval.seconds"),
    ({"leader.imbalance.per.broker.percentage": -1}, "leader.imbalance.per.broker.percentage"),
    ({"unclean_empties_isr": "yes"}, "unclean_empties_isr"),
    # 0 made these spin forever in zero simulated time (the run hung)
    ({"replica.high.watermark.checkpoint.interval.ms": 0}, "replica.high.watermark.checkpoint.interval.ms"),
    ({"controller.socket.timeout.ms": 0}, "controller.socket.timeout.ms"),
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


def test_preferred_leader_balancing_has_kafkas_defaults_in_every_profile():
    """2.7.0 KafkaConfig Defaults (AutoLeaderRebalanceEnable = true,
    LeaderImbalancePerBrokerPercentage = 10, LeaderImbalanceCheckIntervalSeconds = 300);
    0.8.2.2 KafkaConfig has the same three defaults."""
    for profile in ("kafka-0.8", "kafka-2.7", "kafka-3.0"):
        config = broker_config(profile)
        assert config.auto_leader_rebalance_enable
        assert config.leader_imbalance_check_interval_seconds == 300
        assert config.leader_imbalance_per_broker_percentage == 10
    assert not broker_config("kafka-2.7", {"auto.leader.rebalance.enable": False}).auto_leader_rebalance_enable


def test_the_controllers_offline_replica_rules_follow_the_profile():
    new, old = broker_config("kafka-2.7"), broker_config("kafka-0.8")
    assert new.failover_removes_dead_replicas and not new.unclean_empties_isr
    assert not old.failover_removes_dead_replicas and old.unclean_empties_isr
