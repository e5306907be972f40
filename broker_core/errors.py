"""Kafka error codes (the numbers are Kafka's) and the core's own exceptions."""
from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    OFFSET_METADATA_TOO_LARGE = 12
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    NOT_CONTROLLER = 41
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    # The group coordinator's (Kafka 2.7.0 clients/.../common/protocol/Errors.java).
    # Kafka has no UNKNOWN_GROUP: a group id it does not know is GROUP_ID_NOT_FOUND.
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    GROUP_AUTHORIZATION_FAILED = 30
    TOPIC_ALREADY_EXISTS = 36
    INVALID_CONFIG = 40
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    UNSUPPORTED_VERSION = 35
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86  # OffsetDelete of a topic the group's members consume
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    INVALID_UPDATE_VERSION = 95

    @property
    def is_retriable(self) -> bool:
        return self in _RETRIABLE


_RETRIABLE = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OFFSET_NOT_AVAILABLE,
})

# Errors a broker returns for a produce only before appending anything (the request
# was rejected, or the partition's checks refused it): a history can record the
# operation as failed. Any other error leaves the outcome unknown, because Kafka can
# return it after the records were appended: REQUEST_TIMED_OUT and
# NOT_LEADER_OR_FOLLOWER from a delayed produce (acks=all), and
# NOT_ENOUGH_REPLICAS_AFTER_APPEND. KAFKA_STORAGE_ERROR is not here either: the log dir
# may fail half way through writing the batch, whose bytes a restart can recover.
DEFINITE_PRODUCE_FAILURES = frozenset({
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.INVALID_REQUIRED_ACKS,
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.INVALID_RECORD,  # LogValidator refused a record (a keyless one on a compacted topic)
    # The leader's producer-state check rejected the batch before appending it.
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
})


def is_definite_produce_failure(error: ErrorCode, acks: int) -> bool:
    """Whether a produce that ended with ``error`` certainly appended nothing, judged
    from what the client knows. NOT_LEADER_OR_FOLLOWER is certain only for acks 0 and 1:
    with acks=all the broker also returns it from the delayed produce of records it
    already appended (kafka.cluster.Partition.checkEnoughReplicasReachOffset, called by
    DelayedProduce.tryComplete, the same in 0.8.2.2 and 2.7.0), and the client cannot
    tell the two apart."""
    if error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return acks != -1
    return error in DEFINITE_PRODUCE_FAILURES


class CoreError(Exception):
    """The runtime misused the core (a programming error in a binding)."""


class InvariantViolation(Exception):
    """A broken internal invariant: always a bug in the core."""


class ConfigError(ValueError):
    """A configuration key or value the core does not accept; ``key`` names it."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
