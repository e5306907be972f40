"""The consumer protocol's bytes, sans I/O: what a consumer puts in JoinGroup's protocol
metadata (ConsumerProtocolSubscription), what the leader hands out in SyncGroup
(ConsumerProtocolAssignment), and the sticky assignor's user data.

The broker never looks inside these bytes (to it they are opaque, as in Kafka); the
simulated consumers write and read them as Kafka's clients do, and the real binding's
tests read what real clients sent. The formats are Kafka 2.7.0's
clients/src/main/resources/common/message/ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json (versions 0-1, not flexible: an int16 version, then the
fields; a newer version is read as version 1 and what follows is ignored, as
internals/ConsumerProtocol.java's checkSubscriptionVersion does) and StickyAssignor.java's
STICKY_ASSIGNOR_USER_DATA_V0/V1 (no version prefix: V1 is tried, then V0, and data that
fits neither is ignored). Malformed protocol bytes raise ConsumerProtocolError (2.7.0's
SchemaException), never another exception.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from broker_core import schema_types
from broker_core.assignors import STICKY, Subscription
from broker_core.schema_types import StructReader
from broker_core.types import TopicPartition

HIGHEST_VERSION = 1  # of both ConsumerProtocolSubscription and ConsumerProtocolAssignment in 2.7.0
PROTOCOL_TYPE = "consumer"  # JoinGroup's protocol_type for consumers (ConsumerProtocol.PROTOCOL_TYPE)


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer protocol message (2.7.0's SchemaException)."""


@dataclass(frozen=True)
class ProtocolSubscription:
    """A decoded ConsumerProtocolSubscription; ``version`` is the one the bytes declared."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProtocolAssignment:
    """A decoded ConsumerProtocolAssignment."""

    version: int
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None


@dataclass(frozen=True)
class StickyUserData:
    """StickyAssignor's MemberData: the member's prior assignment and its generation
    (None when the member sent none, or version 0 user data)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None


class _Reader(StructReader):
    """Kafka's primitive types (schema_types.StructReader) raising ConsumerProtocolError,
    and the protocol's []TopicPartition."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data, ConsumerProtocolError)

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        """[]TopicPartition: (topic, []int32) pairs, flattened in their order."""
        result: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string()
            result.extend(TopicPartition(topic, self.int32()) for _ in range(self.count()))
        return tuple(result)


def _topic_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    """Grouped by topic as CollectionUtils.groupPartitionsByTopic does (topics in the
    order they first appear here, partitions in their order)."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(grouped))]
    for topic, numbers in grouped.items():
        out.append(schema_types.string(topic) + struct.pack(f">i{len(numbers)}i", len(numbers), *numbers))
    return b"".join(out)


def _version(reader: _Reader, what: str) -> int:
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"unsupported {what} version {version}")
    return version


def _encode_version(version: int) -> bytes:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"consumer protocol version {version} not in 0-{HIGHEST_VERSION}")
    return struct.pack(">h", version)


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None,
                        owned_partitions: Iterable[TopicPartition] = (), version: int = HIGHEST_VERSION) -> bytes:
    """ConsumerProtocol.serializeSubscription; version 0 has no owned partitions."""
    topic_list = list(topics)
    body = [_encode_version(version), struct.pack(">i", len(topic_list)), *map(schema_types.string, topic_list),
            schema_types.nullable_bytes(user_data)]
    if version >= 1:
        body.append(_topic_partitions(owned_partitions))
    return b"".join(body)


def decode_subscription(data: bytes) -> ProtocolSubscription:
    """ConsumerProtocol.deserializeSubscription."""
    reader = _Reader(data)
    version = _version(reader, "subscription")
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned = reader.topic_partitions() if version >= 1 else ()
    return ProtocolSubscription(version, topics, user_data, owned)


def subscription_topics(data: bytes) -> tuple[str, ...]:
    """The topics of a subscription read as version 0 (its version, topics and user
    data; the prefix of every version), as GroupMetadata.computeSubscribedTopics reads
    a member's metadata: whatever follows is not looked at."""
    reader = _Reader(data)
    _version(reader, "subscription")
    topics = tuple(reader.string() for _ in range(reader.count()))
    reader.nullable_bytes()
    return topics


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None,
                      version: int = HIGHEST_VERSION) -> bytes:
    """ConsumerProtocol.serializeAssignment (versions 0 and 1 have the same fields)."""
    return _encode_version(version) + _topic_partitions(partitions) + schema_types.nullable_bytes(user_data)


def decode_assignment(data: bytes) -> ProtocolAssignment:
    """ConsumerProtocol.deserializeAssignment."""
    reader = _Reader(data)
    version = _version(reader, "assignment")
    partitions = reader.topic_partitions()
    return ProtocolAssignment(version, partitions, reader.nullable_bytes())


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """StickyAssignor.serializeTopicPartitionAssignment: always the V1 schema."""
    return _topic_partitions(partitions) + struct.pack(">i", generation)


def decode_sticky_user_data(data: bytes | None) -> StickyUserData:
    """StickyAssignor.memberData: no user data is no prior assignment and no generation;
    V1 is read, else V0; bytes that fit neither are ignored (no partitions, generation
    -1), as 2.7.0 ignores a prior assignment it cannot parse."""
    if not data:
        return StickyUserData((), None)
    try:
        reader = _Reader(data)
        return StickyUserData(reader.topic_partitions(), reader.int32())
    except ConsumerProtocolError:
        pass
    try:
        return StickyUserData(_Reader(data).topic_partitions(), None)
    except ConsumerProtocolError:
        return StickyUserData((), -1)


def member_subscription(metadata: bytes, protocol: str, group_instance_id: str | None = None) -> Subscription:
    """What the group leader hands its assignor for one member's JoinGroup metadata:
    for the sticky protocol the prior assignment comes from the user data (StickyAssignor
    reads its own user data, not OwnedPartitions), for the others from OwnedPartitions
    (which range and round-robin ignore). Raises ConsumerProtocolError on bad bytes."""
    subscription = decode_subscription(metadata)
    if protocol == STICKY:
        prior = decode_sticky_user_data(subscription.user_data)
        return Subscription(subscription.topics, prior.partitions, prior.generation, group_instance_id)
    return Subscription(subscription.topics, subscription.owned_partitions, None, group_instance_id)
