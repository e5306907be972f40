"""The group coordinator's requests and responses (issue 24).

Fields follow Kafka 2.7.0's message definitions,
clients/src/main/resources/common/message/{JoinGroup,SyncGroup,Heartbeat,LeaveGroup,
OffsetCommit,OffsetFetch,DescribeGroups,ListGroups,DeleteGroups,
OffsetDelete}{Request,Response}.json, at their
newest version there, named in snake case; a field a version lacks takes the JSON's
default, and the real binding's codec maps older versions onto these (which is why
some requests carry ``version``: the coordinator's rules differ by version, as
KafkaApis' do). Throttle times are left to the broker's quotas and default to 0.
Every request and response carries the correlation id, so that a response the
coordinator holds (a JoinGroup waiting for the rebalance, a SyncGroup waiting for the
leader) finds its request when it is sent later.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker_core.errors import ErrorCode

NO_GENERATION = -1  # GroupCoordinator.NoGeneration; also OffsetCommit's "not a member" generation
UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
INVALID_OFFSET = -1  # OffsetFetchResponse.INVALID_OFFSET: nothing committed
NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH: an offset committed without one
AUTHORIZED_OPERATIONS_OMITTED = -2147483648  # DescribeGroupsResponse's default (Integer.MIN_VALUE)


# -- JoinGroup (API 11) ---------------------------------------------------------------
@dataclass(frozen=True)
class JoinGroupProtocol:
    name: str
    metadata: bytes = b""


@dataclass(frozen=True)
class JoinGroupRequest:
    correlation_id: int
    group_id: str
    session_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    rebalance_timeout_ms: int = -1  # v1+; v0's is its session timeout (JoinGroupRequest's constructor)
    group_instance_id: str | None = None  # v5+ (KIP-345 static membership)
    version: int = 7  # v4+ makes a dynamic member without an id come back with one (KIP-394)
    client_id: str = ""  # from the request header
    client_host: str = ""  # from the connection


@dataclass(frozen=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    correlation_id: int
    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()  # only the leader's lists the members
    throttle_time_ms: int = 0


# -- SyncGroup (API 14) ---------------------------------------------------------------
@dataclass(frozen=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True)
class SyncGroupRequest:
    correlation_id: int
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupAssignment, ...] = ()  # the leader's; a follower's are ignored
    group_instance_id: str | None = None  # v3+
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+


@dataclass(frozen=True)
class SyncGroupResponse:
    correlation_id: int
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
    throttle_time_ms: int = 0


# -- Heartbeat (API 12) ---------------------------------------------------------------
@dataclass(frozen=True)
class HeartbeatRequest:
    correlation_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None  # v3+


@dataclass(frozen=True)
class HeartbeatResponse:
    correlation_id: int
    error_code: ErrorCode
    throttle_time_ms: int = 0


# -- LeaveGroup (API 13) --------------------------------------------------------------
@dataclass(frozen=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    """v3+ leaves a batch of members; v0-2 one member, its ``MemberId`` the batch's only
    entry (LeaveGroupRequest.members() in 2.7.0 does the same)."""
    correlation_id: int
    group_id: str
    members: tuple[MemberIdentity, ...]
    version: int = 4


@dataclass(frozen=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResponse:
    """``error_code`` is the top-level one; v0-2 carry only it, and the codec gives them
    the single member's error when the top level has none (LeaveGroupResponse's
    constructor, 2.7.0)."""
    correlation_id: int
    error_code: ErrorCode
    members: tuple[LeaveMemberResponse, ...] = ()
    throttle_time_ms: int = 0


# -- OffsetCommit (API 8) -------------------------------------------------------------
@dataclass(frozen=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = NO_LEADER_EPOCH  # v6+
    commit_timestamp: int = -1  # v1 only
    committed_metadata: str | None = ""


@dataclass(frozen=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True)
class OffsetCommitRequest:
    correlation_id: int
    group_id: str
    topics: tuple[OffsetCommitTopic, ...]
    generation_id: int = NO_GENERATION  # v1+; -1: a commit from outside group management
    member_id: str = UNKNOWN_MEMBER_ID  # v1+
    group_instance_id: str | None = None  # v7+
    retention_time_ms: int = -1  # v2-4


@dataclass(frozen=True)
class OffsetCommitResponsePartition:
    partition_index: int
    error_code: ErrorCode


@dataclass(frozen=True)
class OffsetCommitResponseTopic:
    name: str
    partitions: tuple[OffsetCommitResponsePartition, ...]


@dataclass(frozen=True)
class OffsetCommitResponse:
    correlation_id: int
    topics: tuple[OffsetCommitResponseTopic, ...]
    throttle_time_ms: int = 0


# -- OffsetFetch (API 9) --------------------------------------------------------------
@dataclass(frozen=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True)
class OffsetFetchRequest:
    correlation_id: int
    group_id: str
    topics: tuple[OffsetFetchTopic, ...] | None  # None (v2+): every partition the group committed
    require_stable: bool = False  # v7+ (KIP-447)


@dataclass(frozen=True)
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int
    metadata: str | None
    error_code: ErrorCode
    committed_leader_epoch: int = NO_LEADER_EPOCH  # v5+


@dataclass(frozen=True)
class OffsetFetchResponseTopic:
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]


@dataclass(frozen=True)
class OffsetFetchResponse:
    correlation_id: int
    error_code: ErrorCode  # v2+; older versions carry it in each partition (the codec's job)
    topics: tuple[OffsetFetchResponseTopic, ...] = ()
    throttle_time_ms: int = 0


# -- DescribeGroups (API 15) ----------------------------------------------------------
@dataclass(frozen=True)
class DescribeGroupsRequest:
    correlation_id: int
    groups: tuple[str, ...]
    include_authorized_operations: bool = False  # v3+


@dataclass(frozen=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error_code: ErrorCode
    group_id: str
    group_state: str  # "" (NoState) when the error is not NONE
    protocol_type: str
    protocol_data: str  # the chosen protocol's name, when Stable
    members: tuple[DescribedGroupMember, ...] = ()
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True)
class DescribeGroupsResponse:
    correlation_id: int
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0


# -- ListGroups (API 16) --------------------------------------------------------------
@dataclass(frozen=True)
class ListGroupsRequest:
    correlation_id: int
    states_filter: tuple[str, ...] = ()  # v4+; empty: every group


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str  # v4+


@dataclass(frozen=True)
class ListGroupsResponse:
    correlation_id: int
    error_code: ErrorCode
    groups: tuple[ListedGroup, ...] = field(default=())
    throttle_time_ms: int = 0


# -- DeleteGroups (API 42) ------------------------------------------------------------
@dataclass(frozen=True)
class DeleteGroupsRequest:
    correlation_id: int
    groups_names: tuple[str, ...]


@dataclass(frozen=True)
class DeletableGroupResult:
    group_id: str
    error_code: ErrorCode


@dataclass(frozen=True)
class DeleteGroupsResponse:
    correlation_id: int
    results: tuple[DeletableGroupResult, ...]
    throttle_time_ms: int = 0


# -- OffsetDelete (API 47) ------------------------------------------------------------
@dataclass(frozen=True)
class OffsetDeleteTopic:
    name: str
    partitions: tuple[int, ...]  # partition indexes


@dataclass(frozen=True)
class OffsetDeleteRequest:
    correlation_id: int
    group_id: str
    topics: tuple[OffsetDeleteTopic, ...]


@dataclass(frozen=True)
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: ErrorCode


@dataclass(frozen=True)
class OffsetDeleteResponseTopic:
    name: str
    partitions: tuple[OffsetDeleteResponsePartition, ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    """A group error (not NONE) comes without partitions (OffsetDeleteRequest.getErrorResponse)."""
    correlation_id: int
    error_code: ErrorCode
    topics: tuple[OffsetDeleteResponseTopic, ...] = ()
    throttle_time_ms: int = 0


GroupRequest = (JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest | OffsetCommitRequest
                | OffsetFetchRequest | DescribeGroupsRequest | ListGroupsRequest | DeleteGroupsRequest
                | OffsetDeleteRequest)
GroupResponse = (JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse | OffsetCommitResponse
                 | OffsetFetchResponse | DescribeGroupsResponse | ListGroupsResponse | DeleteGroupsResponse
                 | OffsetDeleteResponse)
