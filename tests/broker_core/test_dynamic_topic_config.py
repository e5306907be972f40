"""Topic configs changed while the cluster runs (kafka-configs.sh): the brokers read the
change notification, then the topic's config node; under 2.7 a change that enables
unclean leader election makes the controller elect the topic's offline partitions."""
from broker_core import coordination as coord
from broker_core.dynamic_config import (
    CONFIG_CHANGES_PATH, change_topic_config, decode_overrides, encode_overrides, notified_topic, topic_config_path)
from broker_core.types import TopicPartition
from tests.harness import Cluster

TP = TopicPartition("t", 0)
FAST = {"replica.lag.time.max.ms": 2000, "zookeeper.session.timeout.ms": 3000,
        "unclean.leader.election.enable": False}


def store_state(cluster: Cluster):
    return coord.decode_data(cluster.store.get(coord.partition_state_path("t", 0)))


def offline_with_its_only_isr_member_dead(profile: str) -> Cluster:
    """t-0 on [1, 2, 3], led by 1. Brokers 2 and 3 die, the ISR shrinks to [1]; then 1
    dies too and 2 and 3 come back: the ISR's only member is dead and unclean election
    is off, so t-0 has no leader."""
    cluster = Cluster(profile=profile, config=FAST)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000) and cluster.leader() == 1
    assert cluster.produce_and_wait(1, ["a", "b"]) is not None
    cluster.crash(2)
    cluster.crash(3)
    assert cluster.wait_for(lambda: store_state(cluster)["isr"] == [1], 20000)
    cluster.crash(1)
    cluster.run_for(10000)  # 1's session expires
    cluster.start(2)
    cluster.start(3)
    assert cluster.wait_for(lambda: store_state(cluster)["leader"] == -1 and cluster.controller() is not None, 20000)
    cluster.run_for(5000)
    assert store_state(cluster)["leader"] == -1 and store_state(cluster)["isr"] == [1]
    assert not cluster.traced("leader_elected", unclean=True)
    return cluster


def enable_unclean(cluster: Cluster) -> None:
    written = change_topic_config(cluster.store, "t", {"unclean.leader.election.enable": True})
    assert written == {"unclean.leader.election.enable": True}


def test_enabling_unclean_election_for_the_topic_elects_its_offline_partition_at_once_under_2_7():
    """2.7.0 server/ConfigHandler.scala TopicConfigHandler.processConfigChanges calls
    KafkaController.enableTopicUncleanLeaderElection; processTopicUncleanLeaderElectionEnable
    runs PartitionStateMachine.triggerOnlinePartitionStateChange(topic): the offline
    partition gets an unclean leader as soon as the brokers read the change."""
    cluster = offline_with_its_only_isr_member_dead("kafka-2.7")
    changed_at = cluster.now
    enable_unclean(cluster)
    assert cluster.wait_for(lambda: cluster.leader() in (2, 3), 1000)
    unclean = cluster.traced("leader_elected", unclean=True)
    assert len(unclean) == 1 and unclean[0][0] - changed_at < 100
    assert unclean[0][2]["election"] == "offline" and unclean[0][2]["isr"] == [unclean[0][2]["leader"]]
    assert cluster.traced("topic_unclean_election_enabled", topic="t", offline_partitions=["t-0"])
    for broker in (2, 3):  # each broker took the new config for its partition
        assert cluster.nodes[broker].replicas.config_for("t").unclean_leader_election_enable
        assert cluster.partition(broker).config.unclean_leader_election_enable
        assert cluster.traced("topic_config_changed", topic="t")


def test_enabling_unclean_election_elects_nothing_under_0_8_until_the_next_election_trigger():
    """0.8.2.2 server/TopicConfigManager.scala processConfigChanges only gives the topic's
    logs the new config: the controller has no hook for a config change. The next
    election that something else triggers (here a broker bounce: KafkaController
    onBrokerStartup runs the offline partitions' election) reads the new value
    (OfflinePartitionLeaderSelector fetchTopicConfig) and elects uncleanly."""
    cluster = offline_with_its_only_isr_member_dead("kafka-0.8")
    enable_unclean(cluster)
    cluster.run_for(10000)
    assert cluster.leader() is None and store_state(cluster)["leader"] == -1
    assert not cluster.traced("leader_elected", unclean=True)
    assert not cluster.traced("topic_unclean_election_enabled")
    assert cluster.nodes[2].replicas.config_for("t").unclean_leader_election_enable, "the broker has the new value"
    cluster.crash(3)
    cluster.run_for(8000)  # its session expires; then it starts again: a broker change
    cluster.start(3)
    assert cluster.wait_for(lambda: cluster.leader() in (2, 3), 20000)
    assert len(cluster.traced("leader_elected", unclean=True)) == 1


def test_a_broker_that_starts_later_reads_the_current_config_node():
    """2.7.0 KafkaServer.startup (getLogConfigs) and DynamicConfigManager.startup
    (fetchAllEntityConfigs), 0.8.2.2 KafkaServer.createLogManager (fetchAllTopicConfigs):
    a broker that was down during the change has the current overrides once it runs."""
    cluster = Cluster(config=FAST)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    cluster.crash(3)
    change_topic_config(cluster.store, "t", {"min.insync.replicas": 2})
    cluster.run_for(100)
    assert cluster.partition(1).config.min_insync_replicas == 2
    cluster.run_for(5000)
    cluster.start(3)
    cluster.run_for(100)
    assert cluster.nodes[3].replicas.config_for("t").min_insync_replicas == 2
    assert cluster.wait_for(lambda: cluster.partition(3) is not None, 5000)
    assert cluster.partition(3).config.min_insync_replicas == 2


def test_a_change_adds_to_the_overrides_and_notifications_are_sequential():
    """kafka-configs.sh --add-config (2.7.0 ConfigCommand.alterConfig) keeps the other
    overrides; AdminZkClient.changeTopicConfig writes /config/topics/<t> then a
    sequential /config/changes/config_change_ node naming topics/<t>."""
    cluster = Cluster()
    assert change_topic_config(cluster.store, "t", {"min.insync.replicas": 2}) == {"min.insync.replicas": 2}
    assert change_topic_config(cluster.store, "t", {"flush.messages": 1}) == {"flush.messages": 1,
                                                                             "min.insync.replicas": 2}
    assert decode_overrides(cluster.store.get(topic_config_path("t"))) == {"flush.messages": 1,
                                                                          "min.insync.replicas": 2}
    changes = sorted(cluster.store.znodes[CONFIG_CHANGES_PATH].children)
    assert changes == ["config_change_0000000000", "config_change_0000000001"]
    assert notified_topic(cluster.store.get(f"{CONFIG_CHANGES_PATH}/{changes[0]}")) == "t"
    assert change_topic_config(cluster.store, "nope", {"min.insync.replicas": 2}) is None


def test_config_nodes_hold_kafka_strings_and_notifications_of_either_version_parse():
    raw = encode_overrides({"unclean.leader.election.enable": True, "min.insync.replicas": 2})
    assert coord.decode_data(raw) == {"version": 1, "config": {"min.insync.replicas": "2",
                                                               "unclean.leader.election.enable": "true"}}
    assert decode_overrides(raw) == {"unclean.leader.election.enable": True, "min.insync.replicas": 2}
    assert decode_overrides(b'{"version":1,"config":{"preallocate":"true","flush.ms":"7"}}') == {"flush.ms": 7}
    assert decode_overrides(b'{"version":1,"config":{"retention.ms":"-1","retention.bytes":"5"}}') == {
        "retention.ms": -1, "retention.bytes": 5}
    assert decode_overrides(b'{"version":1,"config":{"min.insync.replicas":"two"}}') is None
    assert notified_topic(b'"t"') == "t"  # 0.8.2.2 AdminUtils.changeTopicConfig: Json.encode(topic)
    assert notified_topic(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "t"
    assert notified_topic(b'{"version":2,"entity_path":"brokers/1"}') is None
    assert notified_topic(b"not json") is None


def test_a_changed_min_insync_replicas_counts_at_the_next_acks_all_append():
    """2.7.0 Log.updateConfig via TopicConfigHandler.updateLogConfig (0.8.2.2
    TopicConfigManager: ``log.config =``): Partition.appendRecordsToLeader reads
    min.insync.replicas from the log's config at each append, so an ISR of 2 that was
    enough is not once the topic asks for 3."""
    cluster = Cluster(config=FAST)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    cluster.crash(3)
    assert cluster.wait_for(lambda: sorted(cluster.partition(1).isr) == [1, 2], 10000)
    assert cluster.produce_and_wait(1, ["a"]).name == "NONE"
    change_topic_config(cluster.store, "t", {"min.insync.replicas": 3})
    cluster.run_for(50)
    assert cluster.produce_and_wait(1, ["b"]).name == "NOT_ENOUGH_REPLICAS"


def test_a_broker_on_a_new_session_still_hears_of_changes():
    """2.7.0 ZkNodeChangeNotificationListener re-reads the notifications after a new
    session (its state-change handler), keeping lastExecutedChange; the watch set on the
    old session is gone with it."""
    cluster = Cluster(config=FAST)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    old = cluster.sessions[2]
    cluster.store.expire(old, reason="forced")
    assert cluster.wait_for(lambda: cluster.sessions.get(2, old) != old, 5000)
    cluster.run_for(500)
    change_topic_config(cluster.store, "t", {"flush.messages": 1})
    cluster.run_for(50)
    assert cluster.partition(2).config.log_flush_interval_messages == 1
    assert len(cluster.traced("topic_config_changed", topic="t")) == 3, "each broker once"
