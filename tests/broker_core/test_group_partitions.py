"""Where a group lives: FindCoordinator, the __consumer_offsets topic, loading a
coordinator's partitions and storing records there (broker_core/group_partitions.py),
with the core driven in the in-test router (tests/harness.py)."""
from __future__ import annotations

from broker_core import coordination as coord
from broker_core.effects import SetTimer
from broker_core.errors import ErrorCode
from broker_core.group_partitions import LOAD_TIMER, offsets_topic_configs
from broker_core.group_records import (
    OFFSETS_TOPIC, CommittedOffset, GroupRecord, group_metadata_record, offset_commit_record, partition_for)
from broker_core.group_messages import OffsetFetchRequest, OffsetFetchTopic
from broker_core.inputs import TimerFired
from broker_core.messages import (
    COORDINATOR_TRANSACTION, NO_NODE, FindCoordinatorRequest, LeaderAndIsr, LeaderAndIsrRequest, MetadataRequest,
    PartitionState, ProduceRequest)
from broker_core.records import Record, Records
from broker_core.replica_manager import InternalAppend
from broker_core.types import NO_LEADER, TopicPartition
from tests.harness import Cluster

PARTITIONS = 5  # offsets.topic.num.partitions, small to keep the cluster quick
BASE = {"offsets.topic.num.partitions": PARTITIONS}
ORDERS = TopicPartition("orders", 0)


def find(cluster: Cluster, broker: int, group: str, key_type: int = 0):
    return cluster.request_and_wait(broker, lambda cid: FindCoordinatorRequest(cid, group, key_type), 2000)


def started(brokers=(1, 2, 3), config=None, start=None) -> Cluster:
    cluster = Cluster(brokers=brokers, replication_factor=len(brokers), config={**BASE, **(config or {})})
    for broker in start or brokers:
        cluster.start(broker)
    assert cluster.wait_for(lambda: cluster.leader() is not None, 10000)
    assert cluster.wait_for(lambda: all(cluster.nodes[b].live_brokers() for b in cluster.nodes), 10000)
    return cluster


def offsets_partition(cluster: Cluster, broker: int, number: int):
    node = cluster.nodes.get(broker)
    return node.replicas.partitions.get(TopicPartition(OFFSETS_TOPIC, number)) if node else None


def offsets_leader(cluster: Cluster, number: int) -> int | None:
    leaders = [b for b in sorted(cluster.nodes)
               if offsets_partition(cluster, b, number) and offsets_partition(cluster, b, number).is_leader]
    return leaders[-1] if leaders else None


def with_offsets_topic(config=None) -> Cluster:
    """A 3-broker cluster whose __consumer_offsets exists, every partition led and
    loaded by its leader."""
    cluster = started(config=config)
    assert find(cluster, 1, "g").error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert cluster.wait_for(lambda: all(offsets_leader(cluster, p) is not None for p in range(PARTITIONS)), 10000)
    assert cluster.wait_for(lambda: all(p in cluster.nodes[offsets_leader(cluster, p)].groups.owned
                                        for p in range(PARTITIONS)), 1000)
    return cluster


def call(cluster: Cluster, broker: int, action) -> None:
    """A test-only call into a node (as the group state machine will call it while it
    handles a request): its effects are carried out as a handled input's are."""
    node = cluster.nodes[broker]
    node.ctx.now_ms = cluster.now
    action(node)
    out, node.ctx.out = node.ctx.out, []
    cluster._apply(broker, out)


def commit(cluster: Cluster, broker: int, group: str, offset: int) -> list[ErrorCode]:
    """Store one offset commit record of ``group`` at ``broker``, below the group
    coordinator (broker_core/group_host.py drives the same call); the list gets the
    append's error."""
    answers: list[ErrorCode] = []
    committed = CommittedOffset(offset, 1, "", cluster.now)
    record = offset_commit_record(group, ORDERS, committed)
    call(cluster, broker, lambda node: node.groups.store(group, [record], answers.append))
    return answers


def fetched(cluster: Cluster, broker: int, group: str) -> tuple[ErrorCode, int | None]:
    """What an OffsetFetch of ``ORDERS`` answers at ``broker``: the top-level error and
    the committed offset (None when the request failed as a whole)."""
    answer = cluster.request_and_wait(broker, lambda cid: OffsetFetchRequest(
        cid, group, (OffsetFetchTopic(ORDERS.topic, (ORDERS.partition,)),)), 1000)
    if answer.error_code is not ErrorCode.NONE:
        return answer.error_code, None
    return answer.error_code, answer.topics[0].partitions[0].committed_offset


def two_groups_on_different_leaders(cluster: Cluster) -> tuple[str, str]:
    by_leader: dict[int, str] = {}
    for i in range(100):
        group = f"group-{i}"
        by_leader.setdefault(offsets_leader(cluster, partition_for(group, PARTITIONS)), group)
        if len(by_leader) >= 2:
            break
    first, second = sorted(by_leader.values())[:2]
    return first, second


def test_find_coordinator_creates_the_offsets_topic_and_answers_not_available_meanwhile():
    """2.7.0 core/src/main/scala/kafka/server/KafkaApis.scala handleFindCoordinatorRequest
    with getOrCreateInternalTopic and createInternalTopic: no topic yet, so it is created
    (offsets.topic.num.partitions, offsets.topic.replication.factor, and
    GroupCoordinator.offsetsTopicConfigs) and the answer is COORDINATOR_NOT_AVAILABLE."""
    cluster = started()
    answer = find(cluster, 2, "my-group")
    assert (answer.error, answer.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE)
    assert cluster.wait_for(lambda: coord.topic_path(OFFSETS_TOPIC) in cluster.store.znodes, 1000)
    assignment = coord.decode_data(cluster.store.znodes[coord.topic_path(OFFSETS_TOPIC)].data)["partitions"]
    assert sorted(assignment) == [str(p) for p in range(PARTITIONS)]
    assert all(len(replicas) == 3 for replicas in assignment.values())
    config = coord.decode_data(cluster.store.znodes[f"/config/topics/{OFFSETS_TOPIC}"].data)["config"]
    assert config == offsets_topic_configs(104857600) and config["cleanup.policy"] == "compact"
    assert [f["by"] for _, _, f in cluster.traced("topic_created", topic=OFFSETS_TOPIC)] == ["internal_topic"]


def test_find_coordinator_answers_the_leader_of_the_groups_partition_at_every_broker():
    """KafkaApis.handleFindCoordinatorRequest: the leader of partition
    GroupMetadataManager.partitionFor(group) (Utils.abs(groupId.hashCode) % partitions),
    as the metadata cache knows it; every broker gives the same answer. Two groups whose
    Java hashes put them on partitions led by different brokers get those brokers."""
    cluster = with_offsets_topic()
    first, second = two_groups_on_different_leaders(cluster)
    for group in (first, second):
        leader = offsets_leader(cluster, partition_for(group, PARTITIONS))
        for broker in (1, 2, 3):
            answer = find(cluster, broker, group)
            assert (answer.error, answer.node_id) == (ErrorCode.NONE, leader)
    assert offsets_leader(cluster, partition_for(first, PARTITIONS)) != \
        offsets_leader(cluster, partition_for(second, PARTITIONS))
    assert len(cluster.traced("topic_created", topic=OFFSETS_TOPIC)) == 1  # created once


def test_fewer_live_brokers_than_the_replication_factor_creates_nothing():
    """2.7.0 KafkaApis.createInternalTopic: "Number of alive brokers '2' does not meet the
    required replication factor '3' for the offsets topic": COORDINATOR_NOT_AVAILABLE and
    no topic (Kafka does not lower the factor); once the third broker is alive the next
    request creates it."""
    cluster = started(start=(1, 2))
    for _ in range(2):
        assert find(cluster, 1, "g").error is ErrorCode.COORDINATOR_NOT_AVAILABLE
        cluster.run_for(100)
    assert coord.topic_path(OFFSETS_TOPIC) not in cluster.store.znodes
    assert cluster.traced("offsets_topic_not_created", alive_brokers=2, replication_factor=3)
    cluster.start(3)
    assert cluster.wait_for(lambda: len(cluster.nodes[1].live_brokers()) == 3, 10000)
    assert find(cluster, 1, "g").error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert cluster.wait_for(lambda: find(cluster, 1, "g").error is ErrorCode.NONE, 10000)


def test_metadata_naming_the_offsets_topic_creates_it_whatever_auto_creation_says():
    """2.7.0 KafkaApis.getTopicMetadata: an unknown internal topic goes to
    createInternalTopic even with auto.create.topics.enable false and the request not
    allowing it: LEADER_NOT_AVAILABLE while it is created, INVALID_REPLICATION_FACTOR
    (its COORDINATOR_NOT_AVAILABLE) while too few brokers are alive."""
    few = started(start=(1, 2), config={"auto.create.topics.enable": False})
    answer = few.request_and_wait(1, lambda cid: MetadataRequest(cid, (OFFSETS_TOPIC,)), 1000)
    assert answer.topic_errors == {OFFSETS_TOPIC: ErrorCode.INVALID_REPLICATION_FACTOR}
    cluster = started(config={"auto.create.topics.enable": False})
    answer = cluster.request_and_wait(1, lambda cid: MetadataRequest(cid, (OFFSETS_TOPIC,)), 1000)
    assert answer.topic_errors == {OFFSETS_TOPIC: ErrorCode.LEADER_NOT_AVAILABLE}
    assert cluster.wait_for(lambda: offsets_leader(cluster, 0) is not None, 10000)
    assert find(cluster, 1, "g").error is ErrorCode.NONE


def test_other_key_types_keep_their_answers():
    """Transactions are not modelled: key type 1 answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (what the real binding answered, a client fails at once); an unknown type is
    CoordinatorType.forId's InvalidRequestException (KafkaApis.handleFindCoordinatorRequest)."""
    cluster = started(brokers=(1,))
    assert find(cluster, 1, "tx", COORDINATOR_TRANSACTION).error is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert find(cluster, 1, "g", 7).error is ErrorCode.INVALID_REQUEST
    assert coord.topic_path(OFFSETS_TOPIC) not in cluster.store.znodes


def test_clients_cannot_produce_to_the_offsets_topic():
    """2.7.0 ReplicaManager.appendToLocalLog: "Cannot append to internal topic"
    (InvalidTopicException) unless the coordinator appends (internalTopicsAllowed)."""
    cluster = with_offsets_topic()
    leader = offsets_leader(cluster, 0)
    tp = TopicPartition(OFFSETS_TOPIC, 0)
    response = cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, -1, 1000, {tp: (Record("k", "v"),)}))
    assert response.partitions[tp].error is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert offsets_partition(cluster, leader, 0).log.log_end_offset == 0


def test_a_stored_commit_is_acknowledged_only_once_the_followers_have_it():
    """2.7.0 GroupMetadataManager.appendForGroup -> ReplicaManager.appendRecords with
    offsets.commit.required.acks = -1: a DelayedProduce, complete when the high watermark
    passes the records. With the followers cut off the answer waits (and the cache is
    not updated); after the heal it is NONE and every replica holds the record."""
    cluster = with_offsets_topic({"replica.socket.timeout.ms": 1000})  # fetches lost to the cut are sent again soon
    group = "waiting-group"
    number = partition_for(group, PARTITIONS)
    leader = offsets_leader(cluster, number)
    followers = [b for b in (1, 2, 3) if b != leader]
    for follower in followers:
        cluster.block(leader, follower)
    answers = commit(cluster, leader, group, 42)
    cluster.run_for(1000)
    assert answers == []
    cluster.heal()
    assert cluster.wait_for(lambda: answers, 3000)
    assert answers == [ErrorCode.NONE]
    end = offsets_partition(cluster, leader, number).log.log_end_offset
    assert all(offsets_partition(cluster, b, number).log.log_end_offset == end for b in followers)


def test_a_store_below_min_insync_replicas_gets_the_appends_error():
    """2.7.0 GroupMetadataManager.appendForGroup -> ReplicaManager.appendRecords:
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below min.insync.replicas while the
    commit waited: Partition.checkEnoughReplicasReachOffset) and NOT_ENOUGH_REPLICAS (it
    was below already: Partition.appendRecordsToLeader, nothing appended). The store
    hands them on as they are; storeOffsets' mapping to COORDINATOR_NOT_AVAILABLE is the
    coordinator's (tests/broker_core/test_group_wiring.py)."""
    # the leader shrinks the ISR itself (zookeeper protocol): no AlterIsr to a cut-off controller
    cluster = with_offsets_topic({"min.insync.replicas": 2, "replica.lag.time.max.ms": 1000,
                                  "isr_change_protocol": "zookeeper"})
    group = "lonely-group"
    number = partition_for(group, PARTITIONS)
    leader = offsets_leader(cluster, number)
    for follower in (b for b in (1, 2, 3) if b != leader):
        cluster.block(leader, follower)
    first = commit(cluster, leader, group, 6)  # the followers fall behind it: the ISR shrinks
    assert cluster.wait_for(lambda: offsets_partition(cluster, leader, number).isr == (leader,), 10000)
    assert first == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
    end = offsets_partition(cluster, leader, number).log.log_end_offset
    assert commit(cluster, leader, group, 7) == [ErrorCode.NOT_ENOUGH_REPLICAS]
    assert offsets_partition(cluster, leader, number).log.log_end_offset == end


def test_a_store_that_times_out_gets_request_timed_out():
    """offsets.commit.timeout.ms bounds the DelayedProduce (2.7.0
    GroupMetadataManager.appendForGroup's timeout): REQUEST_TIMED_OUT for a commit's
    records and a group's metadata alike, at that timeout and not before (storeGroup's
    mapping to REBALANCE_IN_PROGRESS is the coordinator's: group_context.client_error)."""
    cluster = with_offsets_topic({"offsets.commit.timeout.ms": 500})
    group = "slow-group"
    number = partition_for(group, PARTITIONS)
    leader = offsets_leader(cluster, number)
    for follower in (b for b in (1, 2, 3) if b != leader):
        cluster.block(leader, follower)
    offsets_answers = commit(cluster, leader, group, 5)
    metadata = GroupRecord("consumer", 1, "range", "m-1", cluster.now, ())
    group_answers: list[ErrorCode] = []
    record = group_metadata_record(group, metadata)
    call(cluster, leader, lambda node: node.groups.store(group, [record], group_answers.append))
    cluster.run_for(499)
    assert offsets_answers == [] and group_answers == []
    cluster.run_for(10)
    assert offsets_answers == [ErrorCode.REQUEST_TIMED_OUT]
    assert group_answers == [ErrorCode.REQUEST_TIMED_OUT]


def hold_load_timers(cluster: Cluster, brokers) -> list[tuple[int, tuple]]:
    """Keep the load timers of ``brokers`` from being set (they would fire at the next
    dispatch: a timer of 0 ms), so that a test tells when a load runs; returns the list
    of (broker, timer key) held."""
    held: list[tuple[int, tuple]] = []
    apply = cluster._apply

    def holding(target, effects):
        if target in brokers:
            timers = [e for e in effects if type(e) is SetTimer and e.key[0] == LOAD_TIMER]
            held.extend((target, e.key) for e in timers)
            effects = [e for e in effects if e not in timers]
        apply(target, effects)
    cluster._apply = holding
    return held


def test_the_coordinator_moves_with_leadership_and_the_new_one_loads_the_stored_offsets():
    """2.7.0 KafkaApis onLeadershipChange -> GroupCoordinator.onElection ->
    GroupMetadataManager.scheduleLoadGroupAndOffsets: the new leader of the group's
    partition answers COORDINATOR_LOAD_IN_PROGRESS (GroupCoordinator.validateGroupStatus,
    isCoordinatorLoadInProgress) until loadGroupsAndOffsets has replayed the partition,
    then serves the offsets the crashed coordinator stored; FindCoordinator names it."""
    cluster = with_offsets_topic()
    group = "moving-group"
    number = partition_for(group, PARTITIONS)
    old = offsets_leader(cluster, number)
    for offset in (10, 11):
        answers = commit(cluster, old, group, offset)
        assert cluster.wait_for(lambda: answers == [ErrorCode.NONE], 2000)
    survivors = [b for b in (1, 2, 3) if b != old]
    held = hold_load_timers(cluster, survivors)
    cluster.crash(old)
    assert cluster.wait_for(lambda: offsets_leader(cluster, number) in survivors, 30000)
    new = offsets_leader(cluster, number)
    assert cluster.nodes[new].groups.status(group) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fetched(cluster, new, group) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    assert cluster.wait_for(lambda: find(cluster, survivors[0], group).node_id == new, 5000)
    assert (new, (LOAD_TIMER, number)) in held
    cluster._apply(new, cluster.nodes[new].handle(TimerFired((LOAD_TIMER, number)), cluster.now))
    assert fetched(cluster, new, group) == (ErrorCode.NONE, 11)
    assert cluster.traced("group_partition_loaded", partition=number, groups=1, offsets=1)


def test_a_deposed_coordinator_answers_not_coordinator_also_to_a_store_in_flight():
    """2.7.0 onLeadershipChange -> GroupCoordinator.onResignation ->
    GroupMetadataManager.removeGroupsForPartition: the groups leave the cache and
    validateGroupStatus answers NOT_COORDINATOR; a commit waiting for its followers is
    completed by makeFollowers (completeDelayedFetchOrProduceRequests) with
    NOT_LEADER_OR_FOLLOWER (which storeOffsets maps to NOT_COORDINATOR, the
    coordinator's part), as is a store made afterwards."""
    cluster = with_offsets_topic()
    group = "deposed-group"
    number = partition_for(group, PARTITIONS)
    leader = offsets_leader(cluster, number)
    other = next(b for b in (1, 2, 3) if b != leader)
    for follower in (b for b in (1, 2, 3) if b != leader):
        cluster.block(leader, follower)
    answers = commit(cluster, leader, group, 3)
    cluster.run_for(100)
    assert answers == []
    move_leadership(cluster, leader, number, other)
    assert answers == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert cluster.nodes[leader].groups.status(group) is ErrorCode.NOT_COORDINATOR
    assert fetched(cluster, leader, group) == (ErrorCode.NOT_COORDINATOR, None)
    assert commit(cluster, leader, group, 4) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert cluster.traced("group_partition_unloaded", partition=number)


def move_leadership(cluster: Cluster, broker: int, number: int, new_leader: int) -> None:
    """Tell ``broker`` that ``new_leader`` leads the partition at the next epoch, as a
    LeaderAndIsr of the current controller epoch would (only ``broker`` hears it)."""
    state = offsets_partition(cluster, broker, number)
    controller_epoch = cluster.nodes[broker].replicas.controller_epoch
    moved = LeaderAndIsr(new_leader, state.leader_epoch + 1, tuple(sorted(state.isr)), controller_epoch)
    cluster.request_and_wait(broker, lambda cid: LeaderAndIsrRequest(
        cid, cluster.controller() or NO_LEADER, controller_epoch,
        {TopicPartition(OFFSETS_TOPIC, number): PartitionState(moved, state.replicas)}, (new_leader,)), 100)


def test_a_malformed_record_fails_the_load_and_the_broker_goes_on():
    """2.7.0 GroupMetadataManager.loadGroupsAndOffsets catches what doLoadGroupsAndOffsets
    throws (readMessageKey's SchemaException, "unknown version"), logs it and still owns
    the partition, with nothing loaded: the broker goes on serving. Records only the
    broker itself appended can be there (clients cannot produce to the topic), so the
    bad one is appended by the broker's own path here."""
    cluster = with_offsets_topic()
    group = "damaged-group"
    number = partition_for(group, PARTITIONS)
    leader = offsets_leader(cluster, number)
    other = next(b for b in (1, 2, 3) if b != leader)
    tp = TopicPartition(OFFSETS_TOPIC, number)
    answers = commit(cluster, leader, group, 9)
    assert cluster.wait_for(lambda: answers == [ErrorCode.NONE], 2000)
    garbage = ProduceRequest(0, 1, 1000, {tp: Records(["v"], ["\x00\x09not a key"])})
    call(cluster, leader, lambda node: node.replicas.handle_produce(InternalAppend(lambda results: None), garbage))
    move_leadership(cluster, leader, number, other)
    assert cluster.nodes[leader].groups.status(group) is ErrorCode.NOT_COORDINATOR
    move_leadership(cluster, leader, number, leader)  # leads again: a new load
    assert cluster.wait_for(lambda: cluster.nodes[leader].groups.status(group) is ErrorCode.NONE, 100)
    assert cluster.traced("group_load_failed", partition=number)
    assert fetched(cluster, leader, group) == (ErrorCode.NONE, -1)
    assert find(cluster, leader, group).error is ErrorCode.NONE  # still serving
