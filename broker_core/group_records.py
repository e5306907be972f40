"""The records of __consumer_offsets, sans I/O, as Kafka 2.7.0 writes and reads them
(core/src/main/scala/kafka/coordinator/group/GroupMetadataManager.scala), and which
partition of that topic a group lives in.

Every record has a key; its int16 version says what it is:

- versions 0 and 1: an offset commit, key (group, topic, partition); the value is the
  committed offset (OFFSET_COMMIT_VALUE_SCHEMA v0-v3);
- version 2: a group's metadata, key (group); the value is the group's generation,
  protocol, leader and members (GROUP_METADATA_VALUE_SCHEMA v0-v3, MEMBER_METADATA v0-v3).

A record without a value (a tombstone) removes what its key names: an expired or deleted
offset, a deleted group. Which value version is written depends on
inter.broker.protocol.version (broker_core/api_version.py), so that older brokers of a
cluster being upgraded can still read what a newer one wrote.

Malformed keys and values raise ``GroupRecordError`` (Kafka: SchemaException,
KafkaException or IllegalStateException from the same functions) and nothing else. As in
Kafka, bytes after the last field are ignored. The loader is broker_core/group_loader.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from broker_core import schema_types as w
from broker_core.api_version import LATEST_2_7, at_least
from broker_core.schema_types import StructReader
from broker_core.types import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME
OFFSET_KEY_VERSION = 1  # CURRENT_OFFSET_KEY_SCHEMA_VERSION: 2.7.0 writes 1; 0 (0.8.2) reads alike
GROUP_KEY_VERSION = 2  # CURRENT_GROUP_KEY_SCHEMA_VERSION
NO_TIMESTAMP = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP: v1's expire_timestamp when there is none
NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH


class GroupRecordError(ValueError):
    """Bytes that are not a __consumer_offsets key or value."""


# -- the coordinator's partition ------------------------------------------------------

def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in
    32-bit two's complement (a character beyond U+FFFF counts as its two surrogates)."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs: Math.abs, but 0 for Integer.MIN_VALUE
    (whose Math.abs is itself, negative)."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int = 50) -> int:
    """GroupMetadataManager.partitionFor: the partition of __consumer_offsets whose
    leader coordinates ``group_id``, out of offsets.topic.num.partitions."""
    if partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be at least 1, not {partitions}")
    return java_abs(java_string_hash(group_id)) % partitions


# -- keys -----------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic_partition: TopicPartition


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


def encode_offset_commit_key(group: str, tp: TopicPartition, version: int = OFFSET_KEY_VERSION) -> bytes:
    """GroupMetadataManager.offsetCommitKey (2.7.0 writes version 1; version 0, which
    0.8.2's OffsetManager wrote, has the same fields)."""
    if version not in (0, 1):
        raise ValueError(f"offset commit key version {version} not in 0-1")
    return w.int16(version) + w.string(group) + w.string(tp.topic) + w.int32(tp.partition)


def encode_group_metadata_key(group: str) -> bytes:
    """GroupMetadataManager.groupMetadataKey."""
    return w.int16(GROUP_KEY_VERSION) + w.string(group)


def decode_key(data: bytes | None) -> OffsetCommitKey | GroupMetadataKey:
    """GroupMetadataManager.readMessageKey. A record of __consumer_offsets without a key
    is refused too (doLoadGroupsAndOffsets' require(record.hasKey))."""
    if data is None:
        raise GroupRecordError("Group metadata/offset entry key should not be null")
    reader = StructReader(data, GroupRecordError)
    version = reader.int16()
    if version in (0, 1):
        group = reader.string()
        return OffsetCommitKey(group, TopicPartition(reader.string(), reader.int32()))
    if version == GROUP_KEY_VERSION:
        return GroupMetadataKey(reader.string())
    raise GroupRecordError(f"Unknown message key schema version {version}")


# -- offset commit values --------------------------------------------------------------

@dataclass(frozen=True)
class CommittedOffset:
    """OffsetAndMetadata: a group's committed offset of one partition (the next offset
    it will read). ``expire_timestamp`` is set only by OffsetCommit v1 requests with an
    explicit retention (KIP-211 dropped it from 2.1's value v2)."""
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


def offset_commit_value_version(committed: CommittedOffset, inter_broker_protocol: str = LATEST_2_7) -> int:
    """offsetCommitValue's choice: v1 before 2.1-IV0 or whenever there is an expire
    timestamp, v2 before 2.1-IV1, else v3 (with the leader epoch)."""
    if not at_least(inter_broker_protocol, "2.1-IV0") or committed.expire_timestamp is not None:
        return 1
    return 2 if not at_least(inter_broker_protocol, "2.1-IV1") else 3


def encode_offset_commit_value(committed: CommittedOffset, inter_broker_protocol: str = LATEST_2_7) -> bytes:
    """GroupMetadataManager.offsetCommitValue."""
    return encode_offset_commit_value_version(committed, offset_commit_value_version(committed, inter_broker_protocol))


def encode_offset_commit_value_version(committed: CommittedOffset, version: int) -> bytes:
    """The value at a given version. 2.7.0 never writes v0 (0.8.2 and 0.9 did: their
    "timestamp" is the commit timestamp); the leader epoch is dropped below v3, as
    offsetCommitValue does. A version that cannot carry the expire timestamp is refused
    (2.7.0 always writes v1 for one)."""
    c = committed
    if c.expire_timestamp is not None and version != 1:
        raise ValueError(f"offset commit value v{version} has no expire_timestamp; only v1 does")
    if version == 0 or version == 2:
        body = w.int64(c.offset) + w.string(c.metadata) + w.int64(c.commit_timestamp)
    elif version == 1:
        expire = NO_TIMESTAMP if c.expire_timestamp is None else c.expire_timestamp
        body = w.int64(c.offset) + w.string(c.metadata) + w.int64(c.commit_timestamp) + w.int64(expire)
    elif version == 3:
        epoch = NO_LEADER_EPOCH if c.leader_epoch is None else c.leader_epoch
        body = w.int64(c.offset) + w.int32(epoch) + w.string(c.metadata) + w.int64(c.commit_timestamp)
    else:
        raise ValueError(f"offset commit value version {version} not in 0-3")
    return w.int16(version) + body


def decode_offset_commit_value(data: bytes | None) -> CommittedOffset | None:
    """GroupMetadataManager.readOffsetMessageValue: None for a tombstone; v1's expire
    timestamp -1 and v3's negative leader epoch mean none."""
    if data is None:
        return None
    reader = StructReader(data, GroupRecordError)
    version = reader.int16()
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"Unknown offset schema version {version}")
    offset = reader.int64()
    epoch = reader.int32() if version == 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire = reader.int64() if version == 1 else NO_TIMESTAMP
    return CommittedOffset(offset, None if epoch < 0 else epoch, metadata, commit_timestamp,
                           None if expire == NO_TIMESTAMP else expire)


# -- group metadata values ---------------------------------------------------------------

@dataclass(frozen=True)
class MemberRecord:
    """One member in a group's metadata record: its subscription (the protocol metadata
    it joined with, for the group's chosen protocol) and the assignment it was given."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    """A group's metadata as written after each rebalance (and, with no members, when
    the group empties). ``current_state_timestamp`` is None when unknown (-1, or v0/v1)."""
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[MemberRecord, ...]

    @property
    def initial_state(self) -> str:
        """The state readGroupMessageValue loads the group in: Empty without members,
        else Stable."""
        return "Stable" if self.members else "Empty"


def group_metadata_value_version(inter_broker_protocol: str = LATEST_2_7) -> int:
    """groupMetadataValue's choice: v0 before 0.10.1-IV0, v1 before 2.1-IV0, v2 before
    2.3-IV0, else v3."""
    for version, threshold in ((0, "0.10.1-IV0"), (1, "2.1-IV0"), (2, "2.3-IV0")):
        if not at_least(inter_broker_protocol, threshold):
            return version
    return 3


def encode_group_metadata_value(group: GroupRecord, inter_broker_protocol: str = LATEST_2_7) -> bytes:
    """GroupMetadataManager.groupMetadataValue."""
    return encode_group_metadata_value_version(group, group_metadata_value_version(inter_broker_protocol))


def encode_group_metadata_value_version(group: GroupRecord, version: int) -> bytes:
    """The value at a given version. What a version has no field for is dropped, as
    groupMetadataValue does: the rebalance timeout below v1, the state timestamp below
    v2, group.instance.id below v3 (2.7.0 refuses static members before IBP 2.3)."""
    if not 0 <= version <= 3:
        raise ValueError(f"group metadata value version {version} not in 0-3")
    if group.members and group.protocol is None:
        raise ValueError("Attempted to write non-empty group metadata with no defined protocol")
    out = [w.int16(version), w.string(group.protocol_type), w.int32(group.generation),
           w.nullable_string(group.protocol), w.nullable_string(group.leader)]
    if version >= 2:
        out.append(w.int64(NO_TIMESTAMP if group.current_state_timestamp is None else group.current_state_timestamp))
    out.append(w.int32(len(group.members)))
    out.extend(_encode_member(member, version) for member in group.members)
    return b"".join(out)


def _encode_member(m: MemberRecord, version: int) -> bytes:
    out = [w.string(m.member_id)]
    if version >= 3:
        out.append(w.nullable_string(m.group_instance_id))
    out += [w.string(m.client_id), w.string(m.client_host)]
    if version >= 1:
        out.append(w.int32(m.rebalance_timeout))
    out += [w.int32(m.session_timeout), w.bytes_(m.subscription), w.bytes_(m.assignment)]
    return b"".join(out)


def decode_group_metadata_value(data: bytes | None) -> GroupRecord | None:
    """GroupMetadataManager.readGroupMessageValue: None for a tombstone; a v0 member's
    rebalance timeout is its session timeout; a state timestamp of -1 means none."""
    if data is None:
        return None
    reader = StructReader(data, GroupRecordError)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise GroupRecordError(f"Unknown group metadata version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else NO_TIMESTAMP
    members = tuple(_decode_member(reader, version) for _ in range(reader.count()))
    return GroupRecord(protocol_type, generation, protocol, leader,
                       None if timestamp == NO_TIMESTAMP else timestamp, members)


def _decode_member(reader: StructReader, version: int) -> MemberRecord:
    member_id = reader.string()
    instance_id = reader.nullable_string() if version >= 3 else None
    client_id = reader.string()
    client_host = reader.string()
    rebalance_timeout = reader.int32() if version >= 1 else None
    session_timeout = reader.int32()
    subscription = reader.bytes_()
    assignment = reader.bytes_()
    return MemberRecord(member_id, instance_id, client_id, client_host,
                        session_timeout if rebalance_timeout is None else rebalance_timeout,
                        session_timeout, subscription, assignment)


# -- whole records --------------------------------------------------------------------

Record = tuple[bytes, bytes | None]  # (key, value); a value of None is a tombstone


def offset_commit_record(group: str, tp: TopicPartition, committed: CommittedOffset,
                         inter_broker_protocol: str = LATEST_2_7) -> Record:
    """The record a commit appends (GroupMetadataManager.storeOffsets)."""
    return encode_offset_commit_key(group, tp), encode_offset_commit_value(committed, inter_broker_protocol)


def offset_tombstone(group: str, tp: TopicPartition) -> Record:
    """The record that removes an expired or deleted offset (cleanupGroupMetadata)."""
    return encode_offset_commit_key(group, tp), None


def group_metadata_record(group_id: str, group: GroupRecord, inter_broker_protocol: str = LATEST_2_7) -> Record:
    """The record a rebalance (storeGroup) or an emptied group appends."""
    return encode_group_metadata_key(group_id), encode_group_metadata_value(group, inter_broker_protocol)


def group_tombstone(group_id: str) -> Record:
    """The record that removes a dead group (cleanupGroupMetadata, DeleteGroups)."""
    return encode_group_metadata_key(group_id), None
