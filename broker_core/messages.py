"""Requests and responses between clients, brokers and the controller.

They mirror Kafka's APIs with only the fields the model needs: from clients, Produce,
InitProducerId (the idempotent producer), Fetch, Metadata, CreateTopics, ListOffsets,
FindCoordinator and OffsetsForLeaderEpoch (also a follower's); from the controller, LeaderAndIsr,
UpdateMetadata and StopReplica; to the controller, ControlledShutdown and AlterIsr
(KIP-497). The real binding translates the wire protocol to and from those it serves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from broker_core.config_describe import ConfigEntry
from broker_core.errors import ErrorCode
from broker_core.records import ClientBatch, Record
from broker_core.types import TopicPartition

CONSUMER_REPLICA_ID = -1
NO_LEADER_EPOCH = -1  # Kafka's LeaderAndIsr.NoEpoch: a StopReplica without epochs (before KIP-570)
# LeaderAndIsr.EpochDuringDelete: a deleting StopReplica's epoch, accepted whatever the
# broker's own (ReplicaManager.stopReplicas).
EPOCH_DURING_DELETE = -2
EARLIEST_TIMESTAMP = -2
ANONYMOUS = "ANONYMOUS"  # KafkaPrincipal.ANONYMOUS's name: the user of every PLAINTEXT connection
LATEST_TIMESTAMP = -1


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@dataclass(slots=True, init=False)
class ProduceRequest:
    correlation_id: int
    acks: int  # 0, 1 or -1 (all)
    timeout_ms: int
    # a Records, Record tuples, or a client's batch (offsets unset: a RecordBatch, or
    # the real binding's WireBatch) carrying an idempotent producer's producer_id,
    # producer_epoch and base_sequence
    partitions: Mapping[TopicPartition, Sequence[Record] | ClientBatch]
    # Who asks, for the client quotas (2.7.0 RequestChannel.Request: the header's client
    # id and the session's principal, ANONYMOUS on a PLAINTEXT listener).
    client_id: str = ""
    user: str = ANONYMOUS
    # The request's size as the wire carried it (KafkaApis' requestSize, what the produce
    # quota records); -1: the binding does not know it, the appended batches' bytes count.
    request_bytes: int = -1

    def __init__(self, correlation_id: int, acks: int, timeout_ms: int,
                 partitions: Mapping[TopicPartition, Sequence[Record] | ClientBatch], client_id: str = "",
                 user: str = ANONYMOUS, request_bytes: int = -1) -> None:
        self.correlation_id = correlation_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.partitions = partitions
        self.client_id = client_id
        self.user = user
        self.request_bytes = request_bytes


@dataclass(slots=True)
class InitProducerIdRequest:
    """Kafka's InitProducerId (API key 22), as an idempotent producer sends it."""
    correlation_id: int
    transactional_id: str | None = None
    transaction_timeout_ms: int = 2**31 - 1


@dataclass(slots=True)
class InitProducerIdResponse:
    correlation_id: int
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True, init=False)
class ProducePartitionResult:
    error: ErrorCode
    base_offset: int = -1

    def __init__(self, error: ErrorCode, base_offset: int = -1) -> None:
        self.error = error
        self.base_offset = base_offset


@dataclass(slots=True)
class RequestThrottle:
    """The node's answer to RequestHandled: the request quota's throttle time for that
    request (0: none), which the binding puts in the response (the larger of it and a
    byte quota's, 2.7.0 KafkaApis ``maxThrottleTimeMs``)."""
    correlation_id: int
    throttle_time_ms: int


@dataclass(slots=True, init=False)
class ProduceResponse:
    correlation_id: int
    partitions: Mapping[TopicPartition, ProducePartitionResult]
    throttle_time_ms: int = 0

    def __init__(self, correlation_id: int, partitions: Mapping[TopicPartition, ProducePartitionResult],
                 throttle_time_ms: int = 0) -> None:
        self.correlation_id = correlation_id
        self.partitions = partitions
        self.throttle_time_ms = throttle_time_ms


@dataclass(slots=True, init=False)
class FetchPartition:
    fetch_offset: int
    current_leader_epoch: int = -1  # -1: not checked (old clients)
    max_bytes: int = 1048576
    # The epoch of the asker's last record (Fetch v12's LastFetchedEpoch): the leader
    # answers a diverging epoch when its log differs there. -1: not sent.
    last_fetched_epoch: int = -1

    def __init__(self, fetch_offset: int, current_leader_epoch: int = -1, max_bytes: int = 1048576,
                 last_fetched_epoch: int = -1) -> None:
        self.fetch_offset = fetch_offset
        self.current_leader_epoch = current_leader_epoch
        self.max_bytes = max_bytes
        self.last_fetched_epoch = last_fetched_epoch


@dataclass(slots=True, init=False)
class FetchRequest:
    correlation_id: int
    replica_id: int  # CONSUMER_REPLICA_ID for consumers
    max_wait_ms: int
    min_bytes: int
    partitions: Mapping[TopicPartition, FetchPartition]
    client_id: str = ""  # as ProduceRequest's: for the client quotas
    user: str = ANONYMOUS
    # The whole response's limit (Fetch v3+ MaxBytes, a consumer's fetch.max.bytes).
    # Int.MaxValue: none, as the simulation's fetches model none.
    max_bytes: int = 2147483647

    def __init__(self, correlation_id: int, replica_id: int, max_wait_ms: int, min_bytes: int,
                 partitions: Mapping[TopicPartition, FetchPartition], client_id: str = "",
                 user: str = ANONYMOUS, max_bytes: int = 2147483647) -> None:
        self.correlation_id = correlation_id
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.partitions = partitions
        self.client_id = client_id
        self.user = user
        self.max_bytes = max_bytes


@dataclass(slots=True, init=False)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1  # for replica fetches: lets a follower that is ahead truncate
    # As the core sends it: the FileRegions holding the batches (broker_core.storage);
    # as a receiver gets it: the batches, resolved by the sender's runtime.
    batches: tuple[Any, ...] = ()
    # Fetch v12's DivergingEpoch: the largest epoch at most the asker's last fetched
    # epoch and where it ends in the leader's log, when that ends below the fetch offset
    # or is another epoch (no batches then). -1: none.
    diverging_epoch: int = -1
    diverging_end_offset: int = -1

    def __init__(self, error: ErrorCode, high_watermark: int = -1, log_start_offset: int = -1,
                 log_end_offset: int = -1, batches: tuple[Any, ...] = (), diverging_epoch: int = -1,
                 diverging_end_offset: int = -1) -> None:
        self.error = error
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.batches = batches
        self.diverging_epoch = diverging_epoch
        self.diverging_end_offset = diverging_end_offset


@dataclass(slots=True, init=False)
class FetchResponse:
    correlation_id: int
    partitions: Mapping[TopicPartition, FetchPartitionResult]
    throttle_time_ms: int = 0

    def __init__(self, correlation_id: int, partitions: Mapping[TopicPartition, FetchPartitionResult],
                 throttle_time_ms: int = 0) -> None:
        self.correlation_id = correlation_id
        self.partitions = partitions
        self.throttle_time_ms = throttle_time_ms


@dataclass(slots=True)
class MetadataRequest:
    correlation_id: int
    topics: tuple[str, ...] | None = None  # None: all topics
    allow_auto_topic_creation: bool = False  # the wire's field (v4+); the simulated clients never ask


@dataclass(slots=True)
class PartitionMetadata:
    error: ErrorCode
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class MetadataResponse:
    correlation_id: int
    brokers: tuple[int, ...]
    controller_id: int
    partitions: Mapping[TopicPartition, PartitionMetadata]
    # requested topics without partitions here: UNKNOWN_TOPIC_OR_PARTITION, or
    # LEADER_NOT_AVAILABLE while being created, or INVALID_TOPIC_EXCEPTION
    topic_errors: Mapping[str, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    """Kafka's CreateTopics (API key 19):
    ``topics`` is ((name, (num_partitions, replication_factor)), ...) in request order,
    -1 meaning the broker's default; ``configs`` the topic configs asked for, by topic
    (Kafka names, values as text; None: a null value, which Kafka refuses);
    ``assignments`` the explicit replica assignments, by topic, as the request's
    (partition, brokers) pairs in request order (a partition may be named twice, which
    the broker refuses)."""
    correlation_id: int
    topics: tuple[tuple[str, tuple[int, int]], ...]
    timeout_ms: int = 30000
    validate_only: bool = False
    configs: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    assignments: Mapping[str, tuple[tuple[int, tuple[int, ...]], ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    """Kafka's DeleteTopics (API key 20): topic names in request order."""
    correlation_id: int
    topics: tuple[str, ...]
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    """Kafka's CreatePartitions (API key 37): ``topics`` is ((name, count, assignment),
    ...) in request order, ``count`` the new total and ``assignment`` the brokers of each
    new partition in order, or None for the broker to assign them."""
    correlation_id: int
    topics: tuple[tuple[str, int, tuple[tuple[int, ...], ...] | None], ...]
    timeout_ms: int = 30000
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class ConfigResourceChange:
    """One resource of an AlterConfigs or IncrementalAlterConfigs request: its type
    (2 topic, 4 broker, 8 broker logger: Kafka's ConfigResource.Type ids), its name, and
    the operations (broker_core.config_keys.ConfigOp; AlterConfigs sends only SETs and
    replaces the whole set)."""
    resource_type: int
    name: str
    ops: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    correlation_id: int
    resources: tuple[ConfigResourceChange, ...]
    validate_only: bool = False
    incremental: bool = True  # False: AlterConfigs (API 33), which replaces the resource's configs


@dataclass(frozen=True, slots=True)
class ConfigResourceResult:
    resource_type: int
    name: str
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    correlation_id: int
    results: tuple[ConfigResourceResult, ...]


@dataclass(frozen=True, slots=True)
class TopicCreationResult:
    error: ErrorCode
    message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    # a created (or validated) topic's configs as DescribeConfigs shows them, without
    # synonyms (CreateTopics v5+, KIP-525); empty for a topic that failed
    configs: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    correlation_id: int
    topics: Mapping[str, TopicCreationResult]


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    correlation_id: int
    topics: Mapping[str, TopicCreationResult]  # only the error and message are used


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    correlation_id: int
    topics: Mapping[str, TopicCreationResult]  # only the error and message are used


# FindCoordinator's key types (2.7.0 clients/.../requests/FindCoordinatorRequest.CoordinatorType)
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
NO_NODE = -1  # Node.noNode's id: no coordinator in the answer


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    """Kafka's FindCoordinator (API key 10): which broker coordinates ``key``, a group id
    (``key_type`` COORDINATOR_GROUP) or a transactional id (COORDINATOR_TRANSACTION)."""
    correlation_id: int
    key: str
    key_type: int = COORDINATOR_GROUP


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    """The coordinator's broker id, or NO_NODE with the error. The core knows brokers by
    id only: the binding answers the host and port of ``node_id`` (what Metadata lists),
    and COORDINATOR_NOT_AVAILABLE if it knows no endpoint for it."""
    correlation_id: int
    error: ErrorCode
    node_id: int = NO_NODE
    message: str | None = None


@dataclass(slots=True)
class ListOffsetsRequest:
    correlation_id: int
    # EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, or a timestamp: the first offset at or after it
    partitions: Mapping[TopicPartition, int]


@dataclass(slots=True)
class ListOffsetsPartitionResult:
    error: ErrorCode
    offset: int = -1
    leader_epoch: int = -1  # the epoch the offset belongs to (the wire's ListOffsets v4+); -1: unknown
    timestamp: int = -1  # a lookup by timestamp: the found record's (-1 for earliest, latest, none found)


@dataclass(slots=True)
class ListOffsetsResponse:
    correlation_id: int
    partitions: Mapping[TopicPartition, ListOffsetsPartitionResult]


@dataclass(slots=True)
class OffsetsForLeaderEpochRequest:
    correlation_id: int
    replica_id: int
    partitions: Mapping[TopicPartition, tuple[int, int]]  # (current_leader_epoch, leader_epoch)


@dataclass(slots=True)
class EpochEndOffset:
    error: ErrorCode
    leader_epoch: int
    end_offset: int


@dataclass(slots=True)
class OffsetsForLeaderEpochResponse:
    correlation_id: int
    partitions: Mapping[TopicPartition, EpochEndOffset]


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:  # also the controller's state of a partition: kept immutable
    """The state of one partition as the coordination store holds it."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0  # the store's version of the state node

    def to_data(self) -> dict:
        return {"leader": self.leader, "leader_epoch": self.leader_epoch,
                "isr": list(self.isr), "controller_epoch": self.controller_epoch}

    @classmethod
    def from_data(cls, data: Mapping, zk_version: int) -> "LeaderAndIsr":
        return cls(int(data["leader"]), int(data["leader_epoch"]), tuple(int(b) for b in data["isr"]),
                   int(data["controller_epoch"]), zk_version)


@dataclass(slots=True)
class PartitionState:
    leader_and_isr: LeaderAndIsr
    replicas: tuple[int, ...]


@dataclass(slots=True)
class LeaderAndIsrRequest:
    correlation_id: int
    controller_id: int
    controller_epoch: int
    partitions: Mapping[TopicPartition, PartitionState]
    # Kafka's live leaders: the brokers alive (or shutting down) at the controller that
    # lead a partition named here. A follower ignores a partition whose leader is not one.
    live_leaders: tuple[int, ...]


@dataclass(slots=True)
class LeaderAndIsrResponse:
    correlation_id: int
    error: ErrorCode
    partitions: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(slots=True)
class UpdateMetadataRequest:
    correlation_id: int
    controller_id: int
    controller_epoch: int
    live_brokers: tuple[int, ...]
    partitions: Mapping[TopicPartition, PartitionState]


@dataclass(slots=True)
class UpdateMetadataResponse:
    correlation_id: int
    error: ErrorCode


@dataclass(slots=True)
class StopReplicaRequest:
    """The controller tells a broker to stop replicating partitions (Kafka's StopReplica,
    API key 5). With ``delete_partitions`` false the broker stops its fetchers and keeps
    the partitions and their logs. ``partitions`` maps each to the leader epoch the
    controller knows (KIP-570, 2.6+), or NO_LEADER_EPOCH: not checked (0.8.2's request)."""
    correlation_id: int
    controller_id: int
    controller_epoch: int
    delete_partitions: bool
    partitions: Mapping[TopicPartition, int]


@dataclass(slots=True)
class StopReplicaResponse:
    correlation_id: int
    error: ErrorCode
    partitions: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(slots=True)
class ControlledShutdownRequest:
    correlation_id: int
    broker_id: int


@dataclass(slots=True)
class ControlledShutdownResponse:
    correlation_id: int
    error: ErrorCode
    remaining_partitions: tuple[TopicPartition, ...] = ()


@dataclass(slots=True)
class AlterIsrRequest:
    """A leader asks the controller to change ISRs (KIP-497). ``broker_epoch`` names the
    leader's incarnation (its registration's session), so a bounced broker is fenced."""
    correlation_id: int
    broker_id: int
    broker_epoch: int
    partitions: Mapping[TopicPartition, LeaderAndIsr]  # proposed state, with the leader's zk_version


@dataclass(slots=True)
class AlterIsrPartitionResult:
    error: ErrorCode
    leader_and_isr: LeaderAndIsr | None = None  # the state now in the store, on success


@dataclass(slots=True)
class AlterIsrResponse:
    correlation_id: int
    error: ErrorCode
    partitions: Mapping[TopicPartition, AlterIsrPartitionResult] = field(default_factory=dict)
