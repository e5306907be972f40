"""Creating topics: Kafka's top-level coordination paths, replica assignment, the
CreateTopics API and auto-creation on a Metadata request.

Kafka 2.7.0 writes a topic's assignment to ``/brokers/topics/<t>`` (AdminZkClient
createTopic -> createTopicWithAssignment, after AdminUtils.assignReplicasToBrokers);
the controller's topic watch then brings the new partitions online and sends
LeaderAndIsr and UpdateMetadata (the core's Controller._on_topic_change). A CreateTopics
request is answered once every new partition has a leader in this broker's metadata, or
at its timeout (KafkaApis.handleCreateTopicsRequest with DelayedCreatePartitions).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, Sequence

from broker_core import coordination as coord
from broker_core.config_describe import ConfigEntry, ConfigLayers, describe_topic
from broker_core.config_keys import InvalidConfig, validate_topic_configs
from broker_core.context import NodeContext
from broker_core.errors import ErrorCode
from broker_core.messages import CreateTopicsRequest, CreateTopicsResponse, PartitionState, TopicCreationResult
from broker_core.types import NO_LEADER, TopicPartition

# 2.7.0 ZkData.PersistentZkPaths (with ConfigType.all's entity paths): what
# KafkaZkClient.createTopLevelPaths creates at every broker start.
TOP_LEVEL_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
                   "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
                   "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
                   "/config/brokers")
TOPIC_CONFIG_PATH = "/config/topics"
CONFIG_CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"  # 2.7.0 ConfigEntityChangeNotificationSequenceZNode; 0.8.2.2 TopicConfigChangeZnodePrefix
MAX_TOPIC_NAME_LENGTH = 249  # Topic.MAX_NAME_LENGTH
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
USE_DEFAULT = -1  # CreateTopics: -1 partitions or replication factor means the broker's default
# isrlab's own bound (Kafka has none short of ZooKeeper's 1 MB node limit): a request
# for millions of partitions must be refused, not tie the broker up assigning them.
MAX_PARTITIONS = 1000


class TopicCreationError(Exception):
    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error = error
        self.message = message


def create_top_level_path(path: str):
    """One path of KafkaZkClient.createTopLevelPaths (2.7.0): createRecursive, an
    existing node being fine. A task of its own; the broker starts one per path."""
    yield coord.Create(path, b"", make_parents=True)


def validate_topic_name(topic: str) -> None:
    """Topic.validate (2.7.0 clients/.../common/internals/Topic.java)."""
    if not topic:
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise TopicCreationError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic name {topic!r} is illegal, it contains a character other than "
                                 "ASCII alphanumerics, '.', '_' and '-'")


def start_index_for(topic: str, brokers: int) -> int:
    """Kafka picks the first replica's start index and the replica shift at random;
    isrlab derives them from the topic's name (CRC-32: the same on every run)."""
    return zlib.crc32(topic.encode()) % brokers


def assign_replicas_to_brokers(brokers: Sequence[int], num_partitions: int, replication_factor: int,
                               fixed_start_index: int = 0, start_partition_id: int = 0) -> dict[int, tuple[int, ...]]:
    """AdminUtils.assignReplicasToBrokers, rack-unaware (2.7.0
    AdminUtils.assignReplicasToBrokersRackUnaware): partition p's first replica is broker
    (p + start) mod n; the others follow at a shift that grows by one after every n
    partitions, so leaders and followers spread evenly."""
    if num_partitions <= 0:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if num_partitions > MAX_PARTITIONS:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"Number of partitions must not exceed {MAX_PARTITIONS} (isrlab's limit).")
    if replication_factor <= 0:
        raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    ordered = sorted(brokers)
    count = len(ordered)
    start_index = fixed_start_index
    next_replica_shift = fixed_start_index
    assignment = {}
    partition = max(0, start_partition_id)
    for _ in range(num_partitions):
        if partition > 0 and partition % count == 0:
            next_replica_shift += 1
        first = (partition + start_index) % count
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            shift = 1 + (next_replica_shift + j) % (count - 1)
            replicas.append(ordered[(first + shift) % count])
        assignment[partition] = tuple(replicas)
        partition += 1
    return assignment


def explicit_assignment(pairs: Sequence[tuple[int, Sequence[int]]], num_partitions: int,
                        replication_factor: int) -> dict[int, tuple[int, ...]]:
    """A CreateTopics topic's own assignment, checked as 2.7.0 checks it
    (AdminManager.createTopics, then AdminZkClient.validateTopicCreate). 2.7 does not
    check that the brokers exist ("this follows the existing logic in TopicCommand"): a
    partition on unknown brokers has no leader and the request times out waiting for
    one. isrlab also refuses what 2.7's checks let through by accident and its
    controller could not bring online: a partition with no replica (AdminZkClient
    .validateReplicaAssignment's message, which 2.7 uses for CreatePartitions) and a
    negative partition id (2.7 sums only the ids >= 0)."""
    if num_partitions != USE_DEFAULT or replication_factor != USE_DEFAULT:
        raise TopicCreationError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
    assignment = {int(p): tuple(int(b) for b in brokers) for p, brokers in pairs}  # a later entry wins, as a HashMap
    for partition, brokers in sorted(assignment.items()):
        if not brokers:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Cannot have replication factor of 0 for partition id {partition}.")
    if len({len(brokers) for brokers in assignment.values()}) != 1:
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "All partitions should have the same number of replicas")
    for brokers in assignment.values():
        if len(set(brokers)) != len(brokers):
            shown = ", ".join(f"{p} -> List({', '.join(map(str, b))})" for p, b in sorted(assignment.items()))
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Duplicate replica assignment found: Map({shown})")
    if sorted(assignment) != list(range(len(assignment))):
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
    if len(assignment) > MAX_PARTITIONS:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"Number of partitions must not exceed {MAX_PARTITIONS} (isrlab's limit).")
    return assignment


def assignment_data(assignment: Mapping[int, Sequence[int]]) -> bytes:
    """/brokers/topics/<t>'s data (2.7.0 TopicZNode.encode, version 2)."""
    return coord.encode_data({"version": 2, "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
                              "adding_replicas": {}, "removing_replicas": {}})


def check_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs of a CreateTopics topic (2.7.0 AdminManager.createTopics: a null value
    is INVALID_REQUEST; AdminZkClient.validateTopicCreate -> LogConfig.validate: an
    unknown name or a bad value is INVALID_CONFIG)."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise TopicCreationError(ErrorCode.INVALID_REQUEST,
                                 f"Null value not supported for topic configs : {','.join(nulls)}")
    checked = {name: value for name, value in configs.items() if value is not None}
    try:
        validate_topic_configs(checked)
    except InvalidConfig as invalid:
        raise TopicCreationError(ErrorCode.INVALID_CONFIG, invalid.message) from None
    return dict(sorted(checked.items()))


def created_topic_configs(layers: ConfigLayers, overrides: Mapping[str, str]) -> tuple[ConfigEntry, ...]:
    """What a CreateTopics v5+ answer carries of a topic it created or validated (2.7.0
    AdminManager.maybePopulateMetadataAndConfigs, KIP-525): every LogConfig key through
    createTopicConfigEntry, as DescribeConfigs would describe the topic with the
    request's configs as its overrides, without synonyms. Filled before the topic is
    written, as Kafka fills it; a topic that then fails answers none (KafkaApis
    handleCreateTopicsRequest resets them), which the error results do by default."""
    return tuple(describe_topic(layers, overrides, False, None))


def create_topic(topic: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None,
                 assignment: Mapping[int, tuple[int, ...]] | None = None):
    """AdminZkClient.createTopic (2.7.0): assign over the registered brokers (unless the
    request gave its own ``assignment``), refuse a topic that exists, write its config
    node, then its assignment (the node the controller watches). A task returning the
    assignment; failures raise
    TopicCreationError. A topic created with configs also gets a change notification
    (Kafka's brokers read a new topic's config node when they create its logs; isrlab's
    read configs through their listener only), written before the assignment so that
    brokers have read it, as a rule, before the controller asks them to create the logs;
    a log created first takes the config when the notification is read."""
    validate_topic_name(topic)
    if assignment is None:
        registered = yield coord.GetChildren(coord.BROKER_IDS_PATH)
        brokers = sorted(int(b) for b in registered.children) if registered.ok else []
        if not brokers:
            raise TopicCreationError(ErrorCode.INVALID_REPLICATION_FACTOR, "no broker is registered")
        start = start_index_for(topic, len(brokers))
        assignment = assign_replicas_to_brokers(brokers, num_partitions, replication_factor, start)
    exists = yield coord.Exists(coord.topic_path(topic))
    if exists.ok:
        raise TopicCreationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    config_data = coord.encode_data({"version": 1, "config": dict(sorted((configs or {}).items()))})
    made = yield coord.Create(f"{TOPIC_CONFIG_PATH}/{topic}", config_data, make_parents=True)
    if not made.ok and configs:  # a half-done earlier create left the node: the configs asked for now win
        yield coord.SetData(f"{TOPIC_CONFIG_PATH}/{topic}", config_data)
    if configs:
        note = coord.encode_data({"version": 2, "entity_path": f"topics/{topic}"})
        yield coord.Create(f"{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}", note, make_parents=True, sequential=True)
    written = yield coord.Create(coord.topic_path(topic), assignment_data(assignment), make_parents=True)
    if not written.ok:
        if written.error == coord.NODE_EXISTS:
            raise TopicCreationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
        raise TopicCreationError(ErrorCode.UNKNOWN_SERVER_ERROR, f"coordination store: {written.error}")
    return assignment


@dataclass
class _PendingCreate:
    """One request in Kafka's topic purgatory (DelayedCreatePartitions for CreateTopics
    and CreatePartitions, DelayedDeleteTopics for DeleteTopics): answered once this
    broker's metadata shows every ``waiting`` topic with a leader for each of its first
    n partitions and none of the ``gone`` topics, or at its timeout."""
    src: Hashable
    correlation_id: int
    results: dict[str, TopicCreationResult]
    waiting: dict[str, int]  # topic -> partition count still to appear with a leader
    timer_key: tuple
    topics: tuple[str, ...] = ()
    written: bool = False  # every topic's creation was tried
    response_type: type = CreateTopicsResponse
    gone: set[str] = field(default_factory=set)  # topics still to leave the metadata
    expired: bool = False  # the timeout passed while the writes were still in flight


class TopicCreator:
    """CreateTopics requests and Metadata auto-creation for one node, and the purgatory
    that CreatePartitions and DeleteTopics (broker_core.partition_admin,
    broker_core.topic_deletion) answer through."""

    def __init__(self, ctx: NodeContext, is_controller: Callable[[], bool],
                 metadata: Callable[[], Mapping[TopicPartition, PartitionState]],
                 config_layers: Callable[[], ConfigLayers]):
        self.ctx = ctx
        self._is_controller = is_controller
        self._metadata = metadata
        self._config_layers = config_layers  # the broker's, as DescribeConfigs shows them
        self._pending: dict[int, _PendingCreate] = {}
        self._next_id = 1
        self.auto_creating: set[str] = set()

    def open_pending(self, src: Hashable, correlation_id: int, topics, timeout_ms: int,
                     response_type: type = CreateTopicsResponse) -> _PendingCreate:
        """A request waiting in the purgatory; its task fills ``results``, ``waiting`` and
        ``gone``, then calls ``written_all``."""
        pending = _PendingCreate(src, correlation_id, {}, {}, ("create-topics", self._next_id),
                                 tuple(dict.fromkeys(topics)), response_type=response_type)
        self._next_id += 1
        self._pending[pending.timer_key[1]] = pending
        self.ctx.set_timer(pending.timer_key, timeout_ms)
        return pending

    def written_all(self, pending: _PendingCreate) -> None:
        pending.written = True
        key = pending.timer_key[1]
        if pending.expired and key in self._pending:
            self.ctx.cancel_timer(pending.timer_key)
            self._answer(key, timed_out=True)
            return
        self.metadata_updated()

    def handle_create_topics(self, src: Hashable, request: CreateTopicsRequest) -> None:
        """KafkaApis.handleCreateTopicsRequest (2.7.0): only the controller creates
        (others answer NOT_CONTROLLER); a topic named twice is INVALID_REQUEST."""
        config = self.ctx.config
        if not self._is_controller():
            results = {topic: TopicCreationResult(ErrorCode.NOT_CONTROLLER, "This is not the correct controller")
                       for topic, _ in request.topics}
            self.ctx.send(src, CreateTopicsResponse(request.correlation_id, results))
            return
        names = [topic for topic, _ in request.topics]
        pending = self.open_pending(src, request.correlation_id, names, request.timeout_ms)
        todo: list[tuple] = []
        for topic, (partitions, replication) in request.topics:
            if names.count(topic) > 1:
                pending.results[topic] = TopicCreationResult(
                    ErrorCode.INVALID_REQUEST, "Create topics request from client contains duplicate topic")
                continue
            pairs = request.assignments.get(topic)
            if pairs:
                todo.append((topic, partitions, replication, request.configs.get(topic, {}), pairs))
                continue
            partitions = config.num_partitions if partitions == USE_DEFAULT else partitions
            replication = config.default_replication_factor if replication == USE_DEFAULT else replication
            todo.append((topic, partitions, replication, request.configs.get(topic, {}), None))
        self.ctx.tasks.start(self._create_all(pending, todo, request.validate_only))

    def _create_all(self, pending: _PendingCreate, todo: list, validate_only: bool):
        """Every topic's own checks first, before any write is in flight (the task runs
        to its first yield when started), then the writes one topic after another.
        2.7.0 AdminManager.createTopics checks and writes each topic on the handler thread
        before its purgatory's timeout starts: however short the timeout, an invalid topic
        is answered with its own error. Checked inside the writing loop, a topic after the
        first was still unchecked when a timeout of 0 expired and was answered
        REQUEST_TIMED_OUT, which librdkafka reads as success when it asked for no wait
        (its 0081 saw an unknown config accepted on a cluster on ZooKeeper)."""
        checked = []
        for topic, partitions, replication, asked, pairs in todo:
            try:
                configs = check_topic_configs(asked)
                assignment = None if pairs is None else explicit_assignment(pairs, partitions, replication)
                if assignment is not None:
                    partitions, replication = len(assignment), len(assignment[0])
                shown = created_topic_configs(self._config_layers(), configs)
                validate_topic_name(topic)
            except TopicCreationError as failure:
                pending.results[topic] = TopicCreationResult(failure.error, failure.message)
                continue
            checked.append((topic, partitions, replication, configs, assignment, shown))
        for topic, partitions, replication, configs, assignment, shown in checked:
            try:
                if validate_only:
                    exists = yield coord.Exists(coord.topic_path(topic))
                    if exists.ok:
                        raise TopicCreationError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
                    pending.results[topic] = TopicCreationResult(ErrorCode.NONE, None, partitions, replication, shown)
                    continue
                assignment = yield from create_topic(topic, partitions, replication, configs, assignment)
            except TopicCreationError as failure:
                pending.results[topic] = TopicCreationResult(failure.error, failure.message)
                continue
            self.ctx.trace("topic_created", topic=topic, partitions=len(assignment),
                           replication_factor=replication, by="create_topics")
            pending.results[topic] = TopicCreationResult(ErrorCode.NONE, None, partitions, replication, shown)
            pending.waiting[topic] = partitions
        self.written_all(pending)

    def metadata_updated(self) -> None:
        """Answer the requests whose topics now all have a leader for every partition
        (and whose deleted topics are gone)."""
        metadata = self._metadata()
        known = {tp.topic for tp in metadata}
        for key in sorted(self._pending):
            pending = self._pending[key]
            if (pending.written and not pending.gone & known
                    and all(_has_leaders(metadata, topic, count) for topic, count in pending.waiting.items())):
                self._answer(key, timed_out=False)

    def timed_out(self, key: int) -> None:
        """The request's timeout. 2.7.0 AdminManager writes every topic to ZooKeeper on
        the handler thread before its purgatory's timeout starts, so an answer, even to
        a timeout of 0, comes only once the writes are done: a client's next request (a
        CreatePartitions after a CreateTopics that did not wait, librdkafka's 0081) finds
        the topics. Writes still in flight here are waited for, up to a ZooKeeper
        session's timeout more (Kafka's thread would wait for ZooKeeper; isrlab bounds
        it, so a store that never answers still gets the request answered)."""
        pending = self._pending.get(key)
        if pending is None:
            return
        if not pending.written and not pending.expired:
            pending.expired = True
            self.ctx.set_timer(pending.timer_key, self.ctx.config.zookeeper_session_timeout_ms)
            return
        self._answer(key, timed_out=True)

    def _answer(self, key: int, timed_out: bool) -> None:
        pending = self._pending.pop(key)
        if not timed_out:
            self.ctx.cancel_timer(pending.timer_key)
        results = dict(pending.results)
        if timed_out:  # DelayedCreatePartitions / DelayedDeleteTopics.onComplete: unfinished topics time out
            metadata = self._metadata()
            known = {tp.topic for tp in metadata}
            for topic in pending.topics:
                count = pending.waiting.get(topic)
                if (topic not in results or (count is not None and not _has_leaders(metadata, topic, count))
                        or (topic in pending.gone and topic in known)):
                    results[topic] = TopicCreationResult(ErrorCode.REQUEST_TIMED_OUT, "Operation timed out")
        self.ctx.send(pending.src, pending.response_type(pending.correlation_id, dict(sorted(results.items()))))

    def auto_create(self, topic: str) -> ErrorCode:
        """KafkaApis.getTopicMetadata -> createTopic (2.7.0): a Metadata request naming an
        unknown topic creates it with num.partitions and default.replication.factor
        when auto.create.topics.enable (and the request allows it); the topic is
        answered LEADER_NOT_AVAILABLE meanwhile. An invalid name is answered at once."""
        try:
            validate_topic_name(topic)
        except TopicCreationError as failure:
            return failure.error
        config = self.ctx.config
        self.create_in_background(topic, config.num_partitions, config.default_replication_factor)
        return ErrorCode.LEADER_NOT_AVAILABLE

    def create_in_background(self, topic: str, partitions: int, replication_factor: int,
                             configs: Mapping[str, str] | None = None, by: str = "auto_create") -> None:
        """KafkaApis.createTopic (2.7.0): AdminZkClient.createTopic with nobody waiting for
        the answer, as auto-creation and the coordinators' internal topics
        (createInternalTopic) do; a topic already being created here is not created twice,
        one that exists is fine."""
        if topic not in self.auto_creating:
            self.auto_creating.add(topic)
            self.ctx.tasks.start(self._auto_create(topic, partitions, replication_factor, configs, by))

    def _auto_create(self, topic: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str] | None, by: str):
        try:
            assignment = yield from create_topic(topic, partitions, replication_factor, configs)
            self.ctx.trace("topic_created", topic=topic, partitions=len(assignment),
                           replication_factor=replication_factor, by=by)
        except TopicCreationError as failure:
            if failure.error is not ErrorCode.TOPIC_ALREADY_EXISTS:
                self.ctx.trace("topic_creation_failed", topic=topic, error=failure.error.name, reason=failure.message)
        finally:
            self.auto_creating.discard(topic)


def _has_leaders(metadata: Mapping[TopicPartition, PartitionState], topic: str, count: int) -> bool:
    for partition in range(count):
        state = metadata.get(TopicPartition(topic, partition))
        if state is None or state.leader_and_isr.leader == NO_LEADER:
            return False
    return True
