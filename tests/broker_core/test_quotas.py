"""Client quotas and replication throttles in the core (broker_core/quotas.py,
quota_replication.py, quota_rate.py) against Kafka 2.7.0: each test names the Kafka source
file and function whose rule it checks. Paths are under core/src/main/scala/kafka/ unless
they name clients/."""
import pytest

from broker_core.config import broker_config
from broker_core.errors import ConfigError
from broker_core.quota_rate import QuotaSensor, RateConfig, java_long_to_int, java_round
from broker_core.quota_replication import ALL_REPLICAS, ReplicationQuota, ReplicationQuotas, parse_throttled_replicas
from broker_core.quotas import (
    DEFAULT, INACTIVE_SENSOR_EXPIRATION_MS, UNLIMITED, ClientQuotaManager, ClientQuotas, QuotaEntity,
    RequestQuotaManager, entity_of_path, sanitize,
)
from broker_core.types import TopicPartition

T0 = 1_000_000  # any start: the core's time is whatever the runtime hands it

# The eight levels of server/ClientQuotaManager.scala's precedence, most specific first,
# for user "alice" and client-id "app", with the metric tags (which sensor the usage goes
# to) that DefaultQuotaCallback.quotaMetricTags gives once several levels are in use.
LEVELS = [
    ("/config/users/alice/clients/app", ("alice", "app")),
    ("/config/users/alice/clients/<default>", ("alice", "app")),
    ("/config/users/alice", ("alice", "")),
    ("/config/users/<default>/clients/app", ("alice", "app")),
    ("/config/users/<default>/clients/<default>", ("alice", "app")),
    ("/config/users/<default>", ("alice", "")),
    ("/config/clients/app", ("", "app")),
    ("/config/clients/<default>", ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_level_wins(level):
    """2.7.0 server/ClientQuotaManager.scala, DefaultQuotaCallback.quotaLimit and
    quotaMetricTags: with quotas at this level and at every less specific one, this
    level's quota applies and the usage is recorded under its tags."""
    quotas = ClientQuotas()
    for i in range(level, len(LEVELS)):
        quotas.apply_config(LEVELS[i][0], {"producer_byte_rate": 1000 * (i + 1)})
    manager = quotas.produce
    assert manager.quota("alice", "app") == 1000 * (level + 1)
    assert manager.metric_tags("alice", "app") == LEVELS[level][1]
    manager.record_and_throttle("alice", "app", 10, T0)
    assert list(manager.sensors) == [LEVELS[level][1]]


def test_the_static_default_is_the_last_level():
    """2.7.0 server/ClientQuotaManager.scala, DefaultQuotaCallback.quotaLimit
    (staticConfigClientIdQuota) and the quotaTypesEnabled start value: quota.producer.default
    applies per client-id when no node matches, and enables quotas from the start."""
    quotas = ClientQuotas.from_config(broker_config(overrides={"quota.producer.default": 500}))
    assert quotas.produce.quotas_enabled and not quotas.fetch.quotas_enabled
    assert quotas.produce.quota("alice", "app") == 500
    quotas.apply_config("/config/clients/<default>", {"producer_byte_rate": 700})
    assert quotas.produce.quota("alice", "app") == 700
    # A user-level quota elsewhere does not reach this user: its tags fall to the client level.
    quotas.apply_config("/config/users/bob", {"producer_byte_rate": 9})
    assert quotas.produce.quota("alice", "app") == 700 and quotas.produce.quota("bob", "app") == 9


def test_with_one_level_in_use_the_tags_are_that_levels():
    """2.7.0 server/ClientQuotaManager.scala, DefaultQuotaCallback.quotaMetricTags (the
    QuotaTypes.UserQuotaEnabled case): with user quotas only, all clients of a user share
    one sensor, so one client's bytes throttle the other; another user has its own."""
    quotas = ClientQuotas()
    quotas.apply_config("/config/users/<default>", {"producer_byte_rate": 100})
    produce = quotas.produce
    assert produce.metric_tags("alice", "a") == produce.metric_tags("alice", "b") == ("alice", "")
    assert produce.record_and_throttle("alice", "a", 1000, T0) == 0  # 1000 B over 10 s: at quota
    assert produce.record_and_throttle("alice", "b", 100, T0) > 0
    assert produce.record_and_throttle("carol", "a", 1000, T0) == 0
    # No user node at all: the user sensor has no quota (quotaLimit gives null).
    quotas.apply_config("/config/users/<default>", {})
    assert produce.quota("dave", "a") == UNLIMITED


def test_quota_violation_as_kafkas_own_test():
    """2.7.0 server/ClientQuotaManager.scala, recordAndGetThrottleTimeMs with
    utils/QuotaUtils.scala throttleTime, as 2.7.0's ClientQuotaManagerTest.testQuotaViolation
    computes it: 400 B/s for 10 s under a 500 B/s quota, then 2300 B half a second later is
    6300 B over 10.5 s = 600 B/s, throttled (600 - 500) / 500 * 10.5 s = 2100 ms."""
    manager = ClientQuotaManager("producer_byte_rate", 11, 1, static_default=500)
    now = T0
    for _ in range(10):
        assert manager.record_and_throttle("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    now += 500
    assert manager.record_and_throttle("ANONYMOUS", "unknown", 2300, now) == 2100
    now += 2100
    for _ in range(10):
        manager.record_and_throttle("ANONYMOUS", "unknown", 400, now)
        now += 1000
    assert manager.record_and_throttle("ANONYMOUS", "unknown", 0, now) == 0


def test_request_percentage_as_kafkas_own_test():
    """2.7.0 server/ClientRequestQuotaManager.scala, maybeRecordAndGetThrottleTimeMs
    (nanoseconds to percent) and throttleTime (QuotaUtils.boundedThrottleTime), as
    ClientRequestQuotaManagerTest.testRequestPercentageQuotaViolation: a 1% quota, 4 ms per
    second for 10 s, then 67.1 ms: 107.1 ms over 10.5 s, throttled 210 ms."""
    manager = RequestQuotaManager(11, 1)
    manager.update_quota(QuotaEntity("ANONYMOUS", "test-client"), 1.0)
    now = T0
    for _ in range(10):
        assert manager.record_request_time("ANONYMOUS", "test-client", 4_000_000, now) == 0
        now += 1000
    now += 500
    assert manager.record_request_time("ANONYMOUS", "test-client", 67_100_000, now) == 210
    # A far larger spike is throttled for one window at most (maxThrottleTimeMs).
    assert manager.record_request_time("ANONYMOUS", "test-client", 10**12, now) == 1000
    # Network thread time counts for the next check without a check of its own.
    manager.record_network_time("ANONYMOUS", "test-client", 10**12, now + 1)
    assert manager.record_request_time("ANONYMOUS", "test-client", 0, now + 1) == 1000


def test_nothing_is_recorded_before_any_quota():
    """2.7.0 server/ClientQuotaManager.scala, maybeRecordAndGetThrottleTimeMs and
    quotasEnabled: a manager that never had a quota records nothing; once a quota was set,
    even after it is removed, it records (until the broker restarts)."""
    quotas = ClientQuotas()
    assert quotas.fetch.record_and_throttle("u", "c", 10**9, T0) == 0 and not quotas.fetch.sensors
    quotas.apply_config("/config/clients/c", {"consumer_byte_rate": 10})
    quotas.apply_config("/config/clients/c", {})
    assert quotas.fetch.record_and_throttle("u", "c", 10**9, T0) == 0  # unlimited again
    assert list(quotas.fetch.sensors) == [("", "c")]


def test_a_quota_change_applies_to_the_next_request():
    """2.7.0 server/ClientQuotaManager.scala, updateQuota and updateQuotaMetricConfigs:
    the sensor keeps its samples and gets the new quota in place."""
    quotas = ClientQuotas()
    quotas.apply_config("/config/clients/app", {"producer_byte_rate": 1000})
    produce = quotas.produce
    assert produce.record_and_throttle("u", "app", 9000, T0) == 0  # 900 B/s
    quotas.apply_config("/config/clients/app", {"producer_byte_rate": 450})
    assert produce.record_and_throttle("u", "app", 0, T0) == 10000  # (900-450)/450 * 10 s
    quotas.apply_config("/config/clients/<default>", {"producer_byte_rate": 2000})
    assert produce.record_and_throttle("u", "app", 0, T0) == 10000  # the named client still wins
    quotas.apply_config("/config/clients/app", {})
    assert produce.record_and_throttle("u", "app", 0, T0) == 0  # now the default's 2000 B/s


def test_a_removed_user_quota_stays_on_its_sensor_until_it_expires():
    """2.7.0 server/ClientQuotaManager.scala, updateQuotaMetricConfigs: a sensor whose tags
    resolve to no quota any more keeps the one it had (``Option(quotaLimit(...)).foreach``
    skips null); a sensor idle for over InactiveSensorExpirationTimeSeconds is made anew."""
    quotas = ClientQuotas()
    quotas.apply_config("/config/users/alice", {"producer_byte_rate": 100})
    produce = quotas.produce
    assert produce.record_and_throttle("alice", "c", 2000, T0) > 0
    quotas.apply_config("/config/users/alice", {})
    assert produce.quota("alice", "c") == UNLIMITED
    assert produce.record_and_throttle("alice", "c", 0, T0 + 1) > 0  # still the old 100 B/s
    later = T0 + 1 + INACTIVE_SENSOR_EXPIRATION_MS + 1
    assert produce.record_and_throttle("alice", "c", 10**9, later) == 0


def test_a_throttled_fetch_is_unrecorded_and_capped():
    """2.7.0 server/ClientQuotaManager.scala, unrecordQuotaSensor and
    getMaxValueInQuotaWindow (quota x (samples - 1) x window)."""
    quotas = ClientQuotas(samples=11, window_seconds=2)
    quotas.apply_config("/config/clients/c", {"consumer_byte_rate": 100})
    fetch = quotas.fetch
    assert fetch.max_value_in_quota_window("u", "c", T0) == 100 * 10 * 2
    throttle = fetch.record_and_throttle("u", "c", 3000, T0)
    assert throttle == 10000  # 3000 B over 20 s is 150 B/s
    fetch.unrecord("u", "c", 3000, T0)
    assert fetch.sensor("u", "c", T0).measure(T0) == 0


def test_java_rounding_and_int_wrap():
    """2.7.0 utils/QuotaUtils.scala throttleTime (Math.round) and ClientQuotaManager's
    ``throttleTime(e, timeMs).toInt``: a throttle beyond 2^31 - 1 ms wraps, as in 2.7."""
    assert java_round(2.5) == 3 and java_round(-2.5) == -2 and java_round(0.49999999999999994) == 0
    assert java_round(float("nan")) == 0 and java_round(float("inf")) == 2**63 - 1
    assert java_long_to_int(2**31) == -2**31 and java_long_to_int(2**63 - 1) == -1
    quotas = ClientQuotas()
    quotas.apply_config("/config/clients/c", {"producer_byte_rate": 1})
    # 3e6 B over 10 s against 1 B/s: (3e5 - 1) / 1 * 10000 ms = 2999990000, past int range.
    assert quotas.produce.record_and_throttle("u", "c", 3_000_000, T0) == 2999990000 - 2**32


def test_a_young_rate_is_spread_over_samples_minus_one_windows():
    """clients/.../metrics/stats/Rate.java windowSize and SampledStat.java record /
    purgeObsoleteSamples: the elapsed time is padded to samples - 1 whole windows; a
    sample opens when a record finds the current one complete; samples past samples x
    window are reset to now when read."""
    sensor = QuotaSensor(RateConfig(3, 1000, None), T0)
    sensor.record(600, T0 + 100, False)
    assert sensor.rate.window_size(sensor.config, T0 + 100) == 2000  # 0 ms elapsed, 2 windows
    assert sensor.measure(T0 + 100) == 300
    sensor.record(300, T0 + 1500, False)  # opens a second sample at T0 + 1500
    assert [s.start_ms for s in sensor.rate.stat.samples] == [T0 + 100, T0 + 1500]
    assert sensor.rate.window_size(sensor.config, T0 + 2600) == 2500  # 2 full windows: no padding
    # The first sample expired (age 3000) and restarted now; the oldest is the second:
    # 1600 ms elapsed, one full window, padded by one: 300 B over 2.6 s.
    assert sensor.measure(T0 + 3100) == 300 / 2.6
    assert [s.start_ms for s in sensor.rate.stat.samples] == [T0 + 3100, T0 + 1500]


def test_replication_throttle_as_kafkas_own_test():
    """2.7.0 server/ReplicationQuotaManager.scala, isQuotaExceeded and record over
    clients/.../metrics/stats/SimpleRate.java, as ReplicationQuotaManagerTest
    .shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses: 10 samples, 100 B/s."""
    quota = ReplicationQuota(samples=10, window_seconds=1)
    quota.update_quota(100)
    now = T0
    assert not quota.is_quota_exceeded(now)  # and opens the first sample now
    now += 1500
    quota.record(1, now)
    assert not quota.is_quota_exceeded(now)
    quota.record(149, now)
    assert not quota.is_quota_exceeded(now)
    quota.record(1, now)
    assert quota.sensor(now).measure(now) == 151 / 1.5 and quota.is_quota_exceeded(now)
    now += 500
    assert not quota.is_quota_exceeded(now)


def test_throttled_replicas_and_who_is_held_back():
    """2.7.0 server/ConfigHandler.scala, TopicConfigHandler.parseThrottledPartitions and
    BrokerConfigHandler; server/ReplicaManager.scala shouldLeaderThrottle (the same rule as
    ReplicaFetcherThread.shouldFollowerThrottle): only a listed replica out of the ISR,
    and only while the rate is over the quota."""
    assert parse_throttled_replicas("k", "*", 1) is ALL_REPLICAS
    assert parse_throttled_replicas("k", "0:1, 1:2,2:1", 1) == frozenset({0, 2})
    quotas = ReplicationQuotas.from_config(1, broker_config(overrides={"leader.replication.throttled.rate": 10}))
    quotas.apply_topic_config("t", {"leader.replication.throttled.replicas": "0:1",
                                    "follower.replication.throttled.replicas": "*"})
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert quotas.leader.is_throttled(tp0) and not quotas.leader.is_throttled(tp1)
    assert quotas.follower.is_throttled(tp1) and quotas.follower.upper_bound == 2**63 - 1
    quotas.leader.record(1000, T0)
    assert quotas.leader.should_throttle(tp0, in_sync=False, now_ms=T0)
    assert not quotas.leader.should_throttle(tp0, in_sync=True, now_ms=T0)
    assert not quotas.leader.should_throttle(tp1, in_sync=False, now_ms=T0)
    quotas.apply_broker_config({"leader.replication.throttled.rate": "1000000"})  # in place
    assert not quotas.leader.should_throttle(tp0, in_sync=False, now_ms=T0)
    quotas.apply_topic_config("t", {})
    assert not quotas.leader.is_throttled(tp0) and not quotas.follower.is_throttled(tp1)


def test_quota_nodes_and_paths():
    """2.7.0 server/ConfigHandler.scala, UserConfigHandler / ClientIdConfigHandler (entity
    paths, client-ids desanitized) and utils/Sanitizer (user names URL-encoded)."""
    assert entity_of_path("/config/users/<default>/clients/a%20b") == QuotaEntity(DEFAULT, "a b")
    assert entity_of_path("clients/<default>") == QuotaEntity(None, DEFAULT)
    assert entity_of_path("/config/users/%3Cdefault%3E") != QuotaEntity(DEFAULT, None)
    assert sanitize("CN=a b,O=*~") == "CN%3Da%20b%2CO%3D%2A%7E"
    quotas = ClientQuotas()
    quotas.apply_config("/config/users/" + sanitize("CN=x y"), {"producer_byte_rate": 5})
    assert quotas.produce.quota("CN=x y", "c") == 5
    assert QuotaEntity(sanitize("CN=x y"), "a/b").path == "/config/users/CN%3Dx%20y/clients/a%2Fb"


@pytest.mark.parametrize("path, props, key", [
    ("/config/clients/c", {"producer_byte_rate": -1}, "producer_byte_rate"),
    ("/config/clients/c", {"consumer_byte_rate": "0"}, "consumer_byte_rate"),
    ("/config/clients/c", {"consumer_byte_rate": "1.5"}, "consumer_byte_rate"),
    ("/config/users/u", {"request_percentage": 0}, "request_percentage"),
    ("/config/users/u", {"request_percentage": "-3"}, "request_percentage"),
    ("/config/users/u", {"request_percentage": "nan"}, "request_percentage"),
    ("/config/clients/c", {"fetch_rate": 1}, "fetch_rate"),
    ("/config/groups/g", {"producer_byte_rate": 1}, "/config/groups/g"),
    ("/config/users/u/groups/g", {}, "/config/users/u/groups/g"),
    ("/config/clients/", {}, "/config/clients/"),
])
def test_invalid_quota_configs_are_refused_by_name(path, props, key):
    """2.7.0 server/DynamicConfig.scala Client/User (typed, no unknown keys) and
    ConfigHandler's entity paths; the core also refuses quotas of 0 or less, which 2.7's
    throttle formula divides by. A refused node changes nothing."""
    quotas = ClientQuotas()
    quotas.apply_config("/config/clients/c", {"producer_byte_rate": 7})
    with pytest.raises(ConfigError) as refused:
        quotas.apply_config(path, props)
    assert refused.value.key == key
    if path == "/config/clients/c":  # a bad key beside a good one: the good one is not applied
        with pytest.raises(ConfigError):
            quotas.apply_config(path, {"producer_byte_rate": 3, **props})
    assert quotas.produce.quota("u", "c") == 7


@pytest.mark.parametrize("overrides, key", [
    ({"quota.window.num": 0}, "quota.window.num"),
    ({"replication.quota.window.size.seconds": 0}, "replication.quota.window.size.seconds"),
    ({"quota.consumer.default": 0}, "quota.consumer.default"),
    ({"leader.replication.throttled.rate": -1}, "leader.replication.throttled.rate"),
])
def test_invalid_quota_broker_keys_are_refused_by_name(overrides, key):
    """2.7.0 server/KafkaConfig.scala (atLeast(1)) and DynamicConfig.Broker (atLeast(0))."""
    with pytest.raises(ConfigError) as refused:
        broker_config(overrides=overrides)
    assert refused.value.key == key


def test_invalid_replication_configs_are_refused_by_name():
    """2.7.0 server/ConfigHandler.scala ThrottledReplicaListValidator; DynamicConfig.Broker."""
    quotas = ReplicationQuotas(1)
    for bad in ("0:1,*", "a:1", "0:1,,1:1", "0-1"):
        with pytest.raises(ConfigError) as refused:
            quotas.apply_topic_config("t", {"follower.replication.throttled.replicas": bad})
        assert refused.value.key == "follower.replication.throttled.replicas"
    with pytest.raises(ConfigError) as refused:
        quotas.apply_broker_config({"follower.replication.throttled.rate": "fast"})
    assert refused.value.key == "follower.replication.throttled.rate"
