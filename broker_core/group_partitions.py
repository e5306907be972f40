"""Where a group lives: the broker side of the group coordinator that places groups on
the partitions of ``__consumer_offsets`` and persists them there (issue 24).

Kafka 2.7.0 splits this between KafkaApis (handleFindCoordinatorRequest,
createInternalTopic, onLeadershipChange) and GroupMetadataManager (ownedPartitions,
loadingPartitions, scheduleLoadGroupAndOffsets, removeGroupsForPartition, storeOffsets,
storeGroup, appendForGroup). Here one object per node holds it:

- FindCoordinator: a group's coordinator is the leader of its partition
  (``group_records.partition_for``); the topic is created on the first request.
- Loading: a partition this broker starts to lead is loaded from its log (all of it, to
  the log end, as doLoadGroupsAndOffsets reads it) at a timer of 0 ms, Kafka's
  scheduler thread: the log is read synchronously through the storage port, so a load
  takes no simulated time, but requests that come before that timer answer
  COORDINATOR_LOAD_IN_PROGRESS. A partition it stops leading is dropped at once.
- Storing: records go through the broker's own produce path (``InternalAppend``) with
  ``offsets.commit.required.acks`` and ``offsets.commit.timeout.ms``; the caller gets
  the append's own error (the coordinator maps it as storeOffsets and storeGroup do:
  group_context.client_error).

The group state machine (JoinGroup, SyncGroup, OffsetCommit, ...) sits on top
(broker_core/group_host.py): it asks ``status`` before serving a group, stores through
``store`` and is handed what a load read (``on_loaded``) and told which partition it
lost (``on_unloaded``). The groups and their offsets are the coordinator's alone: this
module keeps which partitions it owns, not what they hold.
"""
from __future__ import annotations

from typing import Callable, Hashable, Mapping, Sequence

from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.group_loader import LoadedGroups, load_groups
from broker_core.group_records import OFFSETS_TOPIC, GroupRecordError, Record, partition_for
from broker_core.messages import (
    COORDINATOR_GROUP, COORDINATOR_TRANSACTION, NO_NODE, FindCoordinatorRequest, FindCoordinatorResponse,
    PartitionState, ProducePartitionResult, ProduceRequest)
from broker_core.partition import Partition
from broker_core.records import Records
from broker_core.replica_manager import InternalAppend, ReplicaManager
from broker_core.topic_admin import TopicCreator
from broker_core.types import NO_LEADER, TopicPartition

LOAD_TIMER = "group-load"
# RecordBatch attributes: a transactional batch (bit 4) and a control batch (bit 5).
# Transactional offset commits are not modelled; the loader is not given them.
_TRANSACTIONAL_OR_CONTROL = 0x10 | 0x20


def offsets_topic_configs(offsets_topic_segment_bytes: int) -> dict[str, str]:
    """GroupCoordinator.offsetsTopicConfigs (2.7.0): compacted, segments of
    offsets.topic.segment.bytes, the producer's compression."""
    return {"cleanup.policy": "compact", "segment.bytes": str(offsets_topic_segment_bytes),
            "compression.type": "producer"}


class GroupPartitions:
    """This broker's share of the group coordinator's partitions: which it owns (led and
    loaded) and which it is loading, and the appends that persist them."""

    def __init__(self, ctx: NodeContext, replicas: ReplicaManager, topics: TopicCreator,
                 metadata: Callable[[], Mapping[TopicPartition, PartitionState]],
                 live_brokers: Callable[[], Sequence[int]]):
        self.ctx = ctx
        self._replicas = replicas
        self._topics = topics
        self._metadata = metadata  # the controller's last UpdateMetadata (the metadata cache)
        self._live_brokers = live_brokers
        self.owned: set[int] = set()  # ownedPartitions: led and loaded
        self.loading: dict[int, int] = {}  # loadingPartitions: partition -> the leader epoch loading
        # set by the group state machine: what a partition's load read; a partition lost
        # (it answers how many groups left with it)
        self.on_loaded: Callable[[int, LoadedGroups], None] = lambda partition, groups: None
        self.on_unloaded: Callable[[int], int] = lambda partition: 0

    @property
    def partition_count(self) -> int:
        return self.ctx.config.offsets_topic_num_partitions

    def partition_of(self, group_id: str) -> int:
        """GroupMetadataManager.partitionFor. Kafka takes the count from the topic as it
        exists at startup, else the config; isrlab from the config."""
        return partition_for(group_id, self.partition_count)

    # -- FindCoordinator ---------------------------------------------------------------
    def handle_find_coordinator(self, src: Hashable, request: FindCoordinatorRequest) -> None:
        """KafkaApis.handleFindCoordinatorRequest (2.7.0) for groups: the leader of the
        group's partition if it is alive, COORDINATOR_NOT_AVAILABLE while the topic is
        missing (being created) or the partition has no live leader. Transactions are
        not modelled: their key type keeps the answer that fails a client at once."""
        if request.key_type == COORDINATOR_TRANSACTION:
            answer = FindCoordinatorResponse(request.correlation_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                             message="transactions are not supported by this broker")
        elif request.key_type != COORDINATOR_GROUP:  # CoordinatorType.forId throws InvalidRequestException
            answer = FindCoordinatorResponse(request.correlation_id, ErrorCode.INVALID_REQUEST,
                                             message="Unknown coordinator type in FindCoordinator request")
        else:
            error, node = self.coordinator_for(request.key)
            answer = FindCoordinatorResponse(request.correlation_id, error, node)
        self.ctx.send(src, answer)

    def coordinator_for(self, group_id: str) -> tuple[ErrorCode, int]:
        """getOrCreateInternalTopic, then the partition's leader among the alive brokers."""
        metadata = self._metadata()
        if not any(tp.topic == OFFSETS_TOPIC for tp in metadata):
            self._create_offsets_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        state = metadata.get(TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id)))
        leader = state.leader_and_isr.leader if state is not None else NO_LEADER
        if leader == NO_LEADER or leader not in self._live_brokers():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return ErrorCode.NONE, leader

    def metadata_for_missing_topic(self) -> ErrorCode:
        """KafkaApis.getTopicMetadata (2.7.0): a Metadata request naming __consumer_offsets
        while it does not exist creates it whatever auto.create.topics.enable says
        (LEADER_NOT_AVAILABLE meanwhile); too few brokers (createInternalTopic's
        COORDINATOR_NOT_AVAILABLE) is answered INVALID_REPLICATION_FACTOR."""
        created = self._create_offsets_topic()
        return ErrorCode.LEADER_NOT_AVAILABLE if created else ErrorCode.INVALID_REPLICATION_FACTOR

    def _create_offsets_topic(self) -> bool:
        """KafkaApis.createInternalTopic (2.7.0): refused while fewer brokers are alive
        than offsets.topic.replication.factor (Kafka logs "This error can be ignored if
        the cluster is starting up"; the client retries), else created with
        offsets.topic.num.partitions through AdminZkClient.createTopic, as auto-creation."""
        config = self.ctx.config
        alive = len(self._live_brokers())
        if alive < config.offsets_topic_replication_factor:
            self.ctx.trace("offsets_topic_not_created", alive_brokers=alive,
                           replication_factor=config.offsets_topic_replication_factor)
            return False
        self._topics.create_in_background(OFFSETS_TOPIC, config.offsets_topic_num_partitions,
                                          config.offsets_topic_replication_factor,
                                          offsets_topic_configs(config.offsets_topic_segment_bytes),
                                          by="internal_topic")
        return True

    # -- leadership: loading and unloading -----------------------------------------------
    def leadership_changed(self, partition: Partition, leading: bool) -> None:
        """KafkaApis.onLeadershipChange: GroupCoordinator.onElection for a partition of
        __consumer_offsets this broker now leads, onResignation for one it follows or
        deleted (handleStopReplicaRequest)."""
        if partition.tp.topic != OFFSETS_TOPIC:
            return
        number = partition.tp.partition
        if leading:
            self._schedule_load(number, partition.leader_epoch)
        else:
            self._unload(number)

    def _schedule_load(self, number: int, leader_epoch: int) -> None:
        """scheduleLoadGroupAndOffsets: loading from now on; the load itself runs on the
        scheduler (here: a timer of 0 ms)."""
        self._unload(number)
        self.loading[number] = leader_epoch
        self.ctx.trace("group_partition_loading", partition=number, leader_epoch=leader_epoch)
        self.ctx.set_timer((LOAD_TIMER, number), 0)

    def load_timer_fired(self, number: int) -> None:
        """loadGroupsAndOffsets: read the partition from its log start to its log end and
        replay it. A broker that no longer leads it at that epoch loads nothing (Kafka's
        loop stops when the log end becomes -1). A malformed record fails the load, as in
        Kafka (the error is logged, the partition is owned with nothing loaded)."""
        epoch = self.loading.get(number)
        partition = self._replicas.partitions.get(TopicPartition(OFFSETS_TOPIC, number))
        if epoch is None:
            return
        del self.loading[number]
        if partition is None or not partition.is_leader or partition.leader_epoch != epoch:
            return
        log = partition.log
        try:
            groups = load_groups(stored_group_records(log.load(log.log_start_offset)))
        except (GroupRecordError, UnicodeEncodeError) as failure:
            self.ctx.trace("group_load_failed", partition=number, reason=str(failure))
            groups = LoadedGroups()
        self.owned.add(number)
        self.ctx.trace("group_partition_loaded", partition=number, leader_epoch=epoch,
                       log_end_offset=log.log_end_offset, groups=len(groups.group_ids()),
                       offsets=sum(len(o) for o in groups.offsets.values()))
        self.on_loaded(number, groups)

    def _unload(self, number: int) -> None:
        """removeGroupsForPartition: the partition's groups leave the cache; a load not
        yet run is dropped."""
        if self.loading.pop(number, None) is not None:
            self.ctx.cancel_timer((LOAD_TIMER, number))
        if number in self.owned:
            self.owned.discard(number)
            groups = self.on_unloaded(number)
            self.ctx.trace("group_partition_unloaded", partition=number, groups=groups)

    # -- queries ---------------------------------------------------------------------
    def status(self, group_id: str) -> ErrorCode:
        """GroupCoordinator.validateGroupStatus (2.7.0) after the group id's own check:
        COORDINATOR_LOAD_IN_PROGRESS while the group's partition loads, NOT_COORDINATOR
        when this broker does not own it, NONE when it serves the group."""
        number = self.partition_of(group_id)
        if number in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if number not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # -- storing -----------------------------------------------------------------------
    def store(self, group_id: str, records: Sequence[Record], done: Callable[[ErrorCode], None]) -> None:
        """appendForGroup (2.7.0): append ``records`` (group_records' (key, value) pairs)
        to the group's partition through the produce path, as this broker's own append,
        with offsets.commit.required.acks and offsets.commit.timeout.ms. ``done`` gets the
        append's error as the produce path gives it (NONE once acknowledged); what the
        group's client is told is the coordinator's to decide (group_context.client_error)."""
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        now = self.ctx.now_ms
        rows = Records([_text(value) for _, value in records], [_text(key) for key, _ in records],
                       timestamps=[now] * len(records))  # CREATE_TIME, as storeOffsets sets it
        storage = self._replicas.storage  # the binding's batch format (the real one: record batch v2)
        batch = rows if storage is None else storage.own_batch(rows)

        def appended(results: Mapping[TopicPartition, ProducePartitionResult]) -> None:
            done(results[tp].error)

        config = self.ctx.config
        request = ProduceRequest(0, config.offsets_commit_required_acks, config.offsets_commit_timeout_ms,
                                 {tp: batch})
        self._replicas.handle_produce(InternalAppend(appended), request)


def _text(data: bytes | None) -> str | None:
    """The core holds record bytes as text, one code point per byte (latin-1), as the
    real binding's record batches decode them."""
    return None if data is None else data.decode("latin-1")


def stored_group_records(batches: Sequence) -> list[tuple[bytes | None, bytes | None]]:
    """The (key, value) bytes of a partition's stored batches, skipping transactional and
    control batches (not modelled, see group_loader)."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for batch in batches:
        if getattr(batch, "attributes", 0) & _TRANSACTIONAL_OR_CONTROL:
            continue
        for record in batch.records:
            key, value = record.key, record.value
            out.append((None if key is None else key.encode("latin-1"),
                        None if value is None else value.encode("latin-1")))
    return out
