"""When a leader drops a follower from its ISR, how often it checks, what it keeps of its
followers across a leader epoch, and when an ISR change moves the high watermark: per
profile, each test naming the Kafka code it follows (issue 20)."""
from __future__ import annotations

import pytest

from broker_core.config import broker_config
from broker_core.errors import ConfigError, ErrorCode
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.partition import Partition
from broker_core.records import Record
from broker_core.replica_manager import ReplicaManager
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog
from tests.harness import Cluster, started_cluster

TP = TopicPartition("t", 0)


def leading(profile: str, isr=(1, 2, 3), **config) -> Partition:
    partition = Partition(1, TP, AppliedLog(TP, 1 << 30), broker_config(profile, config))
    partition.make_leader(PartitionState(LeaderAndIsr(1, 0, tuple(isr), 1), (1, 2, 3)), now_ms=0)
    return partition


def append(partition: Partition, n: int) -> None:
    error, _, _ = partition.append_as_leader(tuple(Record(None, f"v{i}") for i in range(n)), 1)
    assert error is ErrorCode.NONE


def _a_follower_stops_fetching(profile: str, **config) -> tuple[Cluster, int, int]:
    """Leader and controller apart, so cutting one follower off from the leader leaves the
    coordination service and the controller alone (the follower stays alive)."""
    cluster = Cluster(brokers=(1, 2, 3, 4), assignment={0: [2, 3, 4]}, profile=profile,
                      config={"replica.lag.time.max.ms": 1000, **config})
    cluster.start_all()
    assert cluster.wait_for(lambda: cluster.settled(replicas=[2, 3, 4]), 5000)
    leader = cluster.leader()
    assert leader == 2 and cluster.controller() == 1
    cluster.block(3, leader)
    return cluster, leader, 3


def test_the_leaders_isr_rules_follow_the_profile():
    """Each profile's defaults (docs/scenarios.md, Profiles); KAFKA-13091's fix (3.1.0) is
    off in every profile, kafka-3.0 standing for 3.0.0."""
    rules = ("isr_lag_rule", "isr_expiration_period", "same_leader_keeps_follower_state",
             "alter_isr_commit_advances_high_watermark")
    expected = {"kafka-0.8": ("last_fetch", "lag_time", False, False),
                "kafka-2.7": ("last_caught_up_unless_at_log_end", "half_lag_time", True, False),
                "kafka-3.0": ("last_caught_up_unless_at_log_end", "half_lag_time", True, False)}
    for profile, values in expected.items():
        assert tuple(getattr(broker_config(profile), rule) for rule in rules) == values
    assert broker_config("kafka-0.8").isr_expiration_interval_ms == 10000
    assert broker_config("kafka-2.7").isr_expiration_interval_ms == 15000


@pytest.mark.parametrize("key,value", [("isr_lag_rule", "sometimes"), ("isr_expiration_period", "daily"),
                                       ("same_leader_keeps_follower_state", "yes"),
                                       ("alter_isr_commit_advances_high_watermark", 1)])
def test_bad_isr_rule_values_name_their_key(key, value):
    with pytest.raises(ConfigError) as info:
        broker_config("kafka-2.7", {key: value})
    assert info.value.key == key


# -- item 1: which followers are out of sync --------------------------------------------

@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-3.0"])
def test_an_idle_follower_that_stopped_fetching_stays_in_the_isr(profile):
    """2.7.0 core/src/main/scala/kafka/cluster/Partition.scala isFollowerOutOfSync (from
    getOutOfSyncReplicas; KAFKA-7152, 2.1+): a follower is out of sync only when its log end
    differs from the leader's AND it has not caught up within replica.lag.time.max.ms. With
    nothing produced, a follower cut off from the leader keeps its place; the first record
    it lacks makes it lag, and it is dropped."""
    cluster, leader, follower = _a_follower_stops_fetching(profile)
    cluster.run_for(10000)  # ten lag times without a fetch
    assert 3 in cluster.partition(leader).isr and not cluster.traced("isr_shrunk")
    assert cluster.produce_and_wait(leader, ["lacked"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 3000)


def test_kafka_08_drops_a_follower_that_sent_no_fetch_within_the_lag_time_even_when_idle():
    """0.8.2.2 core/src/main/scala/kafka/cluster/Partition.scala getOutOfSyncReplicas, its
    "stuck" case: now - Replica.logEndOffsetUpdateTimeMs > replica.lag.time.max.ms, whatever
    the log ends are."""
    cluster, leader, follower = _a_follower_stops_fetching("kafka-0.8")
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 5000)
    shrunk = cluster.traced("isr_shrunk")
    assert shrunk and shrunk[0][2]["protocol"] == "zookeeper"


def test_the_kip_16_rule_drops_an_idle_follower_by_time_alone():
    """0.9.0.0 to 2.0.0 Partition.getOutOfSyncReplicas (KIP-16): lastCaughtUpTimeMs alone,
    so an idle follower that stopped fetching is dropped (isr_lag_rule: last_caught_up)."""
    cluster, leader, follower = _a_follower_stops_fetching("kafka-2.7", isr_lag_rule="last_caught_up")
    assert cluster.wait_for(lambda: follower not in cluster.partition(leader).isr, 5000)


def test_kafka_08_keeps_a_follower_that_keeps_fetching_however_far_behind():
    """0.8.2.2 Partition.getOutOfSyncReplicas: every fetch sets the follower's log end
    offset and with it Replica.logEndOffsetUpdateTimeMs, so a follower that fetches is
    never "stuck"; only replica.lag.max.messages (off here) drops a slow one. 2.7.0
    isFollowerOutOfSync drops it once it has not caught up for the lag time."""
    old = leading("kafka-0.8", **{"replica.lag.time.max.ms": 1000, "replica.lag.max.messages": None})
    new = leading("kafka-2.7", **{"replica.lag.time.max.ms": 1000})
    for partition in (old, new):
        append(partition, 5)
        for now_ms in range(100, 3001, 100):
            partition.record_follower_fetch(2, 5, now_ms)
            partition.record_follower_fetch(3, 0, now_ms)  # fetches, never gets further
    assert old.out_of_sync_replicas(now_ms=3000) == ()
    assert new.out_of_sync_replicas(now_ms=3000) == (3,)
    assert old.out_of_sync_replicas(now_ms=4101) == (2, 3)  # no fetch for longer than the lag time


# -- item 9: how often the leader checks -----------------------------------------------

@pytest.mark.parametrize("profile,expected_ms", [("kafka-0.8", [10000, 20000, 30000]),
                                                 ("kafka-2.7", [15000, 30000]),
                                                 ("kafka-3.0", [15000, 30000])])
def test_the_isr_expiration_task_runs_every_lag_time_in_08_and_every_half_of_it_later(profile, expected_ms,
                                                                                       monkeypatch):
    """0.8.2.2 core/src/main/scala/kafka/server/ReplicaManager.scala startup schedules
    "isr-expiration" with period = replicaLagTimeMaxMs; 2.7.0 ReplicaManager.startup with
    replicaLagTimeMaxMs / 2 (replica.lag.time.max.ms: 10 s in the 0.8 profile, 30 s later)."""
    calls: list[int] = []
    original = ReplicaManager.check_isr

    def counting(self):
        if self.ctx.broker_id == 1:
            calls.append(self.ctx.now_ms)
        original(self)

    monkeypatch.setattr(ReplicaManager, "check_isr", counting)
    cluster = Cluster(profile=profile)
    cluster.start_all()
    cluster.run_until(35000)
    assert calls == expected_ms


# -- item 14: a same-leader epoch bump ----------------------------------------------------

@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-3.0", "kafka-0.8"])
def test_a_same_leader_epoch_bump_keeps_the_followers_log_ends_from_2_7_on(profile):
    """2.7.0 core/src/main/scala/kafka/cluster/Partition.scala makeLeader resets the remote
    replicas' fetch state only `if (isNewLeader)`; every follower gets resetLastCaughtUpTime
    (caught up now if in the ISR, else 0) and the high watermark is tried at once. So when
    the controller drops a follower with a new epoch and the same leader, the high
    watermark moves to the remaining follower's log end without waiting for its next
    fetch. 0.8.2.2 Partition.makeLeader sets every remote log end offset to unknown each
    time, so there it waits."""
    partition = leading(profile)
    append(partition, 5)
    partition.record_follower_fetch(2, 5, now_ms=10)
    partition.record_follower_fetch(3, 3, now_ms=10)
    assert partition.maybe_advance_high_watermark() and partition.log.high_watermark == 3
    partition.make_leader(PartitionState(LeaderAndIsr(1, 1, (1, 2), 1, 1), (1, 2, 3)), now_ms=20)
    followers = partition.followers
    if profile == "kafka-0.8":
        assert [followers[r].log_end_offset for r in (2, 3)] == [-1, -1]
        assert not partition.maybe_advance_high_watermark() and partition.log.high_watermark == 3
    else:
        assert [followers[r].log_end_offset for r in (2, 3)] == [5, 3]
        assert [followers[r].last_caught_up_ms for r in (2, 3)] == [20, 0]  # resetLastCaughtUpTime
        assert partition.maybe_advance_high_watermark() and partition.log.high_watermark == 5


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_a_new_leader_forgets_what_it_knew_of_its_followers(profile):
    """2.7.0 Partition.makeLeader with isNewLeader, and 0.8.2.2 makeLeader: a broker that
    leads again after following starts with every follower's log end unknown."""
    partition = leading(profile)
    append(partition, 5)
    partition.record_follower_fetch(2, 5, now_ms=10)
    partition.make_follower(PartitionState(LeaderAndIsr(2, 1, (1, 2, 3), 1, 1), (1, 2, 3)))
    partition.make_leader(PartitionState(LeaderAndIsr(1, 2, (1, 2, 3), 1, 2), (1, 2, 3)), now_ms=20)
    assert [partition.followers[r].log_end_offset for r in (2, 3)] == [-1, -1]


def test_the_controller_dropping_a_dead_follower_lets_the_high_watermark_move_at_once():
    """The same rule end to end (2.7.0 Partition.makeLeader via ReplicaManager.makeLeaders):
    a follower stops fetching with a record it lacks, then dies; the controller's
    LeaderAndIsr drops it (new epoch, same leader) and the leader advances the high
    watermark and acknowledges the waiting produce as it applies that request, not after
    the other follower's next fetch."""
    cluster = started_cluster(config={"replica.lag.time.max.ms": 120000})
    leader, controller = cluster.leader(), cluster.controller()
    follower = [b for b in cluster.brokers if b not in (leader, controller)][0]
    epoch = cluster.partition(leader).leader_epoch
    cluster.block(follower, leader)
    cid = cluster.produce(leader, ["waits"], acks=-1, timeout_ms=60000)
    cluster.run_for(1000)
    assert cid not in cluster.responses
    cluster.crash(follower)
    assert cluster.wait_for(lambda: cid in cluster.responses, 60000)
    assert cluster.responses[cid].partitions[TP].error is ErrorCode.NONE
    bumped = [t for t, b, f in cluster.traced("became_leader") if b == leader and f["leader_epoch"] == epoch + 1]
    advanced = [t for t, b, f in cluster.traced("high_watermark_advanced") if b == leader and f["leader_epoch"] == epoch + 1]
    assert bumped and advanced and advanced[0] == bumped[0]


# -- item 2: an ISR commit and the high watermark ---------------------------------------

@pytest.mark.parametrize("profile,config,advances", [
    ("kafka-2.7", {}, False),
    ("kafka-3.0", {}, False),
    ("kafka-2.7", {"alter_isr_commit_advances_high_watermark": True}, True),
    ("kafka-2.7", {"isr_change_protocol": "zookeeper"}, True),
    ("kafka-0.8", {}, True),
])
def test_an_isr_shrink_moves_the_high_watermark_at_once_only_through_zookeeper_or_3_1(profile, config, advances):
    """2.7.0 core/src/main/scala/kafka/cluster/Partition.scala handleAlterIsrResponse sets the
    committed ISR and nothing else (KAFKA-13091, the same in 3.0.0): the high watermark waits
    for the next append or a fetch that moves a follower's log end (updateFollowerFetchState).
    maybeShrinkIsr calls maybeIncrementLeaderHW right after shrinkIsrWithZk (0.8.2.2 after
    updateIsr), and 3.1.0's handleAlterIsrResponse does in the callback."""
    cluster, leader, follower = _a_follower_stops_fetching(profile, **config)
    assert cluster.produce_and_wait(leader, ["lacked"], acks=1) is ErrorCode.NONE
    partition = cluster.partition(leader)
    assert cluster.wait_for(lambda: follower not in partition.isr, 5000)
    cluster.run_for(3000)  # the other follower fetches on, its log end at the leader's
    assert partition.followers[4].log_end_offset == partition.log.log_end_offset
    assert (partition.log.high_watermark == partition.log.log_end_offset) is advances
    assert cluster.produce_and_wait(leader, ["next"], acks=1) is ErrorCode.NONE
    assert cluster.wait_for(lambda: partition.log.high_watermark == partition.log.log_end_offset, 3000)
