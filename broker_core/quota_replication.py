"""Replication throttles as Kafka 2.7.0 applies them (server/ReplicationQuotaManager.scala).

A broker has a leader throttle and a follower throttle, each one rate (``SimpleRate``)
shared by all the partitions it throttles: ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` from this broker's dynamic config
(server/ConfigHandler.scala ``BrokerConfigHandler``), and per topic the replicas
listed in ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
(``TopicConfigHandler.parseThrottledPartitions``: "*" is every partition, else the
partitions whose listed broker is this one).

The leader counts the bytes it answers a follower's fetch with for throttled partitions
(KafkaApis ``sizeOfThrottledPartitions`` then ``quotas.leader.record``), the follower the
bytes it appends for them (ReplicaFetcherThread.processPartitionData). Either side holds
back a replica that is throttled, out of the ISR, while the rate is over the quota
(ReplicaManager.shouldLeaderThrottle: the leader answers no data for it;
ReplicaFetcherThread.shouldFollowerThrottle: the follower leaves it out of its fetch).
Unlike client quotas there is no throttle time: the check is made again at each fetch.
"""
from __future__ import annotations

from typing import Mapping

from broker_core.config import NEVER, THROTTLED_REPLICAS_KEYS, BrokerConfig
from broker_core.errors import ConfigError
from broker_core.quota_rate import QuotaSensor, RateConfig
from broker_core.quotas import INACTIVE_SENSOR_EXPIRATION_MS
from broker_core.throttled_replicas import ALL_REPLICAS, AllReplicas, ThrottledPartitions, parse_throttled_replicas
from broker_core.types import TopicPartition

__all__ = ["ALL_REPLICAS", "AllReplicas", "ThrottledPartitions", "parse_throttled_replicas"]  # their home before

LEADER_RATE_KEY = "leader.replication.throttled.rate"
FOLLOWER_RATE_KEY = "follower.replication.throttled.rate"
LEADER_REPLICAS_KEY, FOLLOWER_REPLICAS_KEY = THROTTLED_REPLICAS_KEYS
def parse_throttled_rate(key: str, value: object) -> int:
    """A throttled rate as 2.7 reads it (DynamicConfig.Broker: a LONG, atLeast(0))."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(key, f"must be an integer, not {value!r}")
    try:
        rate = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise ConfigError(key, f"must be an integer, not {value!r}") from None
    if not 0 <= rate <= NEVER:
        raise ConfigError(key, f"must be between 0 and {NEVER} bytes per second, not {value!r}")
    return rate


class ReplicationQuota:
    """One ``ReplicationQuotaManager`` (leader or follower)."""
    __slots__ = ("samples", "window_ms", "bound", "throttled", "_sensor")

    def __init__(self, samples: int = 11, window_seconds: int = 1):
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.bound: float | None = None  # no quota until this broker's config is read
        self.throttled: dict[str, ThrottledPartitions] = {}
        self._sensor: QuotaSensor | None = None

    def update_quota(self, rate: int) -> None:
        """``updateQuota``: the new bound, given at once to the existing sensor."""
        self.bound = float(rate)
        if self._sensor is not None:
            self._sensor.config = self._sensor.config.with_bound(self.bound)

    @property
    def upper_bound(self) -> int:
        # Java's double-to-long saturates: float(Long.MAX_VALUE) is 2^63, read back as Long.MAX_VALUE.
        return NEVER if self.bound is None else min(int(self.bound), NEVER)

    def mark_throttled(self, topic: str, partitions: ThrottledPartitions) -> None:
        self.throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self.throttled.pop(topic, None)

    def is_throttled(self, tp: TopicPartition) -> bool:
        partitions = self.throttled.get(tp.topic)
        if partitions is None:
            return False
        return isinstance(partitions, AllReplicas) or tp.partition in partitions

    def sensor(self, now_ms: int) -> QuotaSensor:
        """The one sensor, replaced after an hour without a record (as client sensors)."""
        sensor = self._sensor
        if sensor is None or now_ms - sensor.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS:
            sensor = QuotaSensor(RateConfig(self.samples, self.window_ms, self.bound), now_ms, simple=True)
            self._sensor = sensor
        return sensor

    def is_quota_exceeded(self, now_ms: int) -> bool:
        """``isQuotaExceeded``: the rate now above the bound (reading it purges samples)."""
        return self.sensor(now_ms).check(now_ms) is not None

    def record(self, value: int, now_ms: int) -> None:
        """``record``: bytes replicated, counted even when over the quota."""
        self.sensor(now_ms).record(float(value), now_ms, False)

    def should_throttle(self, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool:
        """``shouldLeaderThrottle`` / ``shouldFollowerThrottle``: in that order, so that
        the rate is only read (and its samples purged) for a throttled replica out of the ISR."""
        return not in_sync and self.is_throttled(tp) and self.is_quota_exceeded(now_ms)


class ReplicationQuotas:
    """A broker's leader and follower throttles, fed from its configs."""
    __slots__ = ("broker_id", "leader", "follower")

    def __init__(self, broker_id: int, samples: int = 11, window_seconds: int = 1):
        self.broker_id = broker_id
        self.leader = ReplicationQuota(samples, window_seconds)
        self.follower = ReplicationQuota(samples, window_seconds)

    @classmethod
    def from_config(cls, broker_id: int, config: BrokerConfig) -> "ReplicationQuotas":
        quotas = cls(broker_id, config.replication_quota_window_num, config.replication_quota_window_size_seconds)
        quotas.apply_broker_config({LEADER_RATE_KEY: config.leader_replication_throttled_rate,
                                    FOLLOWER_RATE_KEY: config.follower_replication_throttled_rate})
        return quotas

    def apply_broker_config(self, props: Mapping[str, object]) -> None:
        """``BrokerConfigHandler.processConfigChanges`` for this broker's node: a rate
        left out is Long.MaxValue again. Both are checked before either changes."""
        leader = parse_throttled_rate(LEADER_RATE_KEY, props.get(LEADER_RATE_KEY, NEVER))
        follower = parse_throttled_rate(FOLLOWER_RATE_KEY, props.get(FOLLOWER_RATE_KEY, NEVER))
        self.leader.update_quota(leader)
        self.follower.update_quota(follower)

    def apply_topic_config(self, topic: str, props: Mapping[str, str]) -> None:
        """``TopicConfigHandler``'s ``updateThrottledList`` for both lists: a list that is
        absent or empty removes the topic's throttle. Both are checked before either changes."""
        lists = []
        for key, quota in ((LEADER_REPLICAS_KEY, self.leader), (FOLLOWER_REPLICAS_KEY, self.follower)):
            value = props.get(key, "")
            lists.append((quota, parse_throttled_replicas(key, value, self.broker_id) if value else None))
        for quota, partitions in lists:
            if partitions is None:
                quota.remove_throttle(topic)
            else:
                quota.mark_throttled(topic, partitions)

    def apply_topic_configs(self, topic_configs: Mapping[str, BrokerConfig]) -> None:
        """The throttled lists of the topics configured at start (a runtime's topic configs)."""
        for topic, config in sorted(topic_configs.items()):
            self.apply_topic_config(topic, {LEADER_REPLICAS_KEY: config.leader_replication_throttled_replicas,
                                            FOLLOWER_REPLICAS_KEY: config.follower_replication_throttled_replicas})

    def has_throttles(self) -> bool:
        """Whether any topic is throttled here: when none is, fetches run as without quotas."""
        return bool(self.leader.throttled or self.follower.throttled)


def leader_read_throttled(quotas: ReplicationQuotas, tp: TopicPartition, replica_id: int, isr: tuple[int, ...],
                          now_ms: int) -> bool:
    """2.7.0 ReplicaManager.readFromLocalLog's ``shouldLeaderThrottle``: a follower out of
    the ISR (``isReplicaInSync``) of a throttled partition, while the leader's rate is over
    its quota, is answered no records."""
    return bool(quotas.leader.throttled) and quotas.leader.should_throttle(tp, replica_id in isr, now_ms)


def follower_fetch_throttled(quota: ReplicationQuota, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool:
    """2.7.0 ReplicaFetcherThread.buildFetch's ``shouldFollowerThrottle``: a partition not in
    sync (its last fetch left it below the leader's high watermark: PartitionFetchState
    .isReplicaInSync), throttled here, while the follower's rate is over its quota, is left
    out of the fetch."""
    return bool(quota.throttled) and quota.should_throttle(tp, in_sync, now_ms)
