"""Replication throttles wired into the broker (broker_core/quota_replication.py's
ReplicationQuotas in the fetcher and the leader's read), with the 2.7.0 function each
follows. A new replica of a reassignment catches up at the throttled rate."""
from __future__ import annotations

from broker_core.records import Record
from broker_core.types import TopicPartition
from tests.broker_core.test_reassignment import reassign
from tests.harness import Cluster

RATE = 2000  # bytes per second


def loaded(config: dict, topic_config: dict, records: int = 2000) -> Cluster:
    """~40 KB in partition t-0 on [1, 2, 3]; fetches of at most 1000 bytes, so that the
    throttle is checked many times during a catch-up (it is checked before each fetch)."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [1, 2, 3]},
                      config={"replica_fetch_max_bytes": 1000, **config})
    cluster.topic_configs = {"t": cluster.topic_configs["t"].with_overrides(
        {k.replace(".", "_"): v for k, v in topic_config.items()})}
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[1, 2, 3]))
    for i in range(0, records, 20):
        assert cluster.produce_and_wait(1, [f"{i + j:0100d}" for j in range(20)]) is not None
    return cluster


def catch_up_ms(cluster: Cluster) -> tuple[int, int]:
    """Time from the reassignment's start to broker 4 in the ISR, and the bytes it fetched."""
    reassign(cluster, [4, 2, 3])
    assert cluster.wait_for(lambda: cluster.traced("reassignment_completed"), 120000)
    started = cluster.traced("reassignment_started")[0][0]
    joined = min(t for t, _, f in cluster.traced("isr_expanded") if 4 in f.get("isr", []))
    size = sum(segment.log_bytes for segment in cluster.partition(4).log.segments)
    return joined - started, size


def test_follower_throttle_limits_the_new_replica_to_the_rate():
    """2.7.0 ReplicaFetcherThread.buildFetch (shouldFollowerThrottle: not in sync,
    throttled, quota exceeded -> left out of the fetch) and processPartitionData
    (quota.record of the appended bytes), with ReplicationQuotaManager's SimpleRate over
    11 one-second windows: the catch-up of ~30 KB at 2000 B/s takes the size over the rate,
    within 15 % (measured: 22.1 s for 40,100 bytes, 10 % over: the fetch backoff of 1 s after a
    throttled round and the first window)."""
    cluster = loaded({"follower_replication_throttled_rate": RATE}, {"follower.replication.throttled.replicas": "0:4"})
    took_ms, size = catch_up_ms(cluster)
    expected_ms = size / RATE * 1000
    assert abs(took_ms - expected_ms) <= 0.15 * expected_ms, (took_ms, expected_ms, size)


def test_leader_throttle_limits_what_it_sends_to_a_replica_out_of_the_isr():
    """2.7.0 ReplicaManager.readFromLocalLog (shouldLeaderThrottle: a replica not in
    inSyncReplicaIds of a throttled partition gets no records while the leader's rate is
    over the quota) and KafkaApis sizeOfThrottledPartitions -> quotas.leader.record."""
    cluster = loaded({"leader_replication_throttled_rate": RATE}, {"leader.replication.throttled.replicas": "*"})
    took_ms, size = catch_up_ms(cluster)
    expected_ms = size / RATE * 1000
    assert abs(took_ms - expected_ms) <= 0.15 * expected_ms, (took_ms, expected_ms, size)


def test_without_a_throttled_list_the_rate_changes_nothing():
    """A rate alone throttles nothing (ReplicationQuotaManager.isThrottled: no topic
    listed), so the new replica catches up within a few fetches."""
    cluster = loaded({"follower_replication_throttled_rate": 1, "leader_replication_throttled_rate": 1}, {})
    took_ms, _ = catch_up_ms(cluster)
    assert took_ms < 1000


def test_in_sync_replicas_are_not_throttled():
    """shouldLeaderThrottle / shouldFollowerThrottle skip a replica in the ISR: with every
    replica throttled at 1 B/s, produces keep being acknowledged by the whole ISR."""
    cluster = loaded({"follower_replication_throttled_rate": 1, "leader_replication_throttled_rate": 1},
                     {"follower.replication.throttled.replicas": "*", "leader.replication.throttled.replicas": "*"},
                     records=100)
    assert cluster.produce_and_wait(1, ["more"] * 50) is not None
    assert cluster.settled(replicas=[1, 2, 3]) or cluster.wait_for(lambda: cluster.settled(replicas=[1, 2, 3]), 2000)
    assert cluster.partition(2).log.log_end_offset == cluster.partition(1).log.log_end_offset
    assert TopicPartition("t", 0) in cluster.nodes[1].replicas.partitions
    assert Record  # the records' values are what loaded() produced
