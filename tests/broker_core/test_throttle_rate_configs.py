"""The replication throttle rates through AlterConfigs / IncrementalAlterConfigs on a
broker resource. In 2.7.0 they are DynamicConfig.Broker's keys
(core/src/main/scala/kafka/server/DynamicConfig.scala: LONG, atLeast(0), added to
DynamicBrokerConfig.AllDynamicConfigs by ``addDynamicConfigs``), which KafkaConfig
does not define; BrokerConfigHandler.processConfigChanges (ConfigHandler.scala) gives
them to the replication quota managers for the broker's own entity only."""
from broker_core.config_keys import SET, ConfigOp, validate_broker_configs
from broker_core.dynamic_config import BROKER_CONFIG_PATH, entity_config
from broker_core.errors import ErrorCode
from broker_core.messages import AlterConfigsRequest, ConfigResourceChange
from tests.harness import Cluster

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"


def alter(cluster: Cluster, broker: int, entity: str, configs: dict, incremental=True):
    change = ConfigResourceChange(4, entity, tuple(ConfigOp(k, SET, v) for k, v in configs.items()))
    answer = cluster.request_and_wait(broker, lambda cid: AlterConfigsRequest(cid, (change,), False, incremental))
    return answer.results[0]


def test_the_rates_are_known_dynamic_keys_checked_at_least_zero():
    """DynamicConfig.Broker.validate: a LONG at least 0; at the cluster default too
    (they are not in DynamicBrokerConfig.PerBrokerConfigs)."""
    validate_broker_configs({LEADER: "1000", FOLLOWER: "0"}, per_broker=True)
    validate_broker_configs({LEADER: "1000"}, per_broker=False)
    for bad in ("-1", "fast"):
        try:
            validate_broker_configs({FOLLOWER: bad}, per_broker=True)
        except Exception as refused:
            assert not getattr(refused, "unknown", True) and FOLLOWER in str(refused)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_a_rate_set_through_the_api_is_applied_by_that_broker_only():
    """AdminManager.alterConfigs (broker resource) writes /config/brokers/<id>; the
    broker's own BrokerConfigHandler updates its quota managers' bounds; a bad value is
    INVALID_REQUEST and changes nothing; a value at <default> is stored and applied by
    no broker (2.7 applies the rates only for ``brokerConfig.brokerId == brokerId``)."""
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert alter(cluster, 2, "2", {LEADER: "2000", FOLLOWER: "3000"}).error is ErrorCode.NONE
    assert entity_config(cluster.store.get(f"{BROKER_CONFIG_PATH}/2")) == {LEADER: "2000", FOLLOWER: "3000"}
    quotas = cluster.nodes[2].replicas.replication_quotas
    assert cluster.wait_for(lambda: (quotas.leader.upper_bound, quotas.follower.upper_bound) == (2000, 3000), 2000)
    assert cluster.nodes[1].replicas.replication_quotas.leader.upper_bound != 2000
    refused = alter(cluster, 2, "2", {LEADER: "-5"})
    assert refused.error is ErrorCode.INVALID_REQUEST
    assert alter(cluster, 1, "", {LEADER: "700"}, incremental=False).error is ErrorCode.NONE
    cluster.run_for(1000)
    assert quotas.leader.upper_bound == 2000
    assert cluster.nodes[1].replicas.replication_quotas.leader.upper_bound != 700
