"""The consumer-group APIs on the wire, to the core's group messages and back (issue 24).

Pure functions, as in real_io/kafka_api.py: a decoded request body (a dict, every field
of its version present, the others at their defaults) in, a
``broker_core.group_messages`` request out; the coordinator's response in, a body the
codec encodes at the request's version out. The field-by-field rules are Kafka 2.7.0's
message definitions (clients/src/main/resources/common/message/*.json) and what
KafkaApis (core/src/main/scala/kafka/server/KafkaApis.scala, handleJoinGroupRequest and
the seven after it, handleDeleteGroupsRequest, handleOffsetDeleteRequest) and the request and response classes
(clients/src/main/java/org/apache/kafka/common/requests/) do per version before or after
the coordinator. Each function names the Kafka code it follows.

KafkaApis downgrades no group error for older versions; what differs by version is
where an error goes: OffsetFetch v0-1 have no top-level error (each requested partition
carries it), LeaveGroup v0-2 no member list (the top level carries the first member's
error). The coordinator itself answers MEMBER_ID_REQUIRED only to JoinGroup v4+, which
is why JoinGroupRequest and LeaveGroupRequest carry the version.

Differences from Kafka: OffsetCommit v0 and OffsetFetch v0 go to the coordinator like v1
(Kafka 2.7.0 reads and writes them in ZooKeeper, /consumers/<group>/offsets, which
isrlab does not model): a v0 commit is one with generation -1 and no member, taken
while the group is Empty.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from broker_core.errors import ErrorCode
from broker_core.group_messages import (
    AUTHORIZED_OPERATIONS_OMITTED, INVALID_OFFSET, NO_LEADER_EPOCH, DeleteGroupsRequest, DeleteGroupsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteTopic,
    HeartbeatRequest, HeartbeatResponse, JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, MemberIdentity, OffsetCommitPartition,
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic, OffsetFetchRequest, OffsetFetchResponse,
    OffsetFetchTopic, SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse)
from real_io.protocol.apis import ApiKey

# 2.7.0 AclEntry.supportedOperations(GROUP) = READ (3), DESCRIBE (8), DELETE (6), as
# Utils.to32BitField sets them: what KafkaApis.authorizedOperations answers without an
# authorizer (isrlab has none).
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


@dataclass(frozen=True)
class Client:
    """Who sent the request: the header's client id and the connection's address as
    Java's InetAddress.toString writes it ("/127.0.0.1"), which JoinGroup keeps for
    DescribeGroups (KafkaApis: request.context.clientAddress.toString)."""
    client_id: str = ""
    client_host: str = ""


# -- JoinGroup (11) ---------------------------------------------------------------------
def join_group_request(correlation_id: int, version: int, body: dict, client: Client) -> JoinGroupRequest:
    """v0 has no rebalance timeout: it is the session timeout (JoinGroupRequest
    .maybeOverrideRebalanceTimeout). group_instance_id exists from v5 (null before)."""
    rebalance_timeout = body["session_timeout_ms"] if version == 0 else body["rebalance_timeout_ms"]
    protocols = tuple(JoinGroupProtocol(p["name"], bytes(p["metadata"])) for p in body["protocols"])
    return JoinGroupRequest(correlation_id, body["group_id"], body["session_timeout_ms"], body["member_id"],
                            body["protocol_type"], protocols, rebalance_timeout, body["group_instance_id"], version,
                            client.client_id, client.client_host)


def join_group_response(response: JoinGroupResponse, version: int) -> dict:
    """KafkaApis.handleJoinGroupRequest: the protocol name is nullable from v7, before
    that an unchosen one is GroupCoordinator.NoProtocol (""); the protocol type is on
    the wire from v7, members' instance ids from v5, the throttle time from v2 (the
    encoder leaves out what a version lacks)."""
    name = response.protocol_name if version >= 7 else (response.protocol_name or "")
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(response.error_code),
            "generation_id": response.generation_id, "protocol_type": response.protocol_type,
            "protocol_name": name, "leader": response.leader, "member_id": response.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in response.members]}


# -- SyncGroup (14) ---------------------------------------------------------------------
def sync_group_request(correlation_id: int, version: int, body: dict, client: Client) -> SyncGroupRequest:
    """The leader's assignments go as they came; the coordinator ignores a follower's."""
    assignments = tuple(SyncGroupAssignment(a["member_id"], bytes(a["assignment"])) for a in body["assignments"])
    return SyncGroupRequest(correlation_id, body["group_id"], body["generation_id"], body["member_id"], assignments,
                            body["group_instance_id"], body["protocol_type"], body["protocol_name"])


def sync_group_refusal(request: SyncGroupRequest, version: int) -> SyncGroupResponse | None:
    """KafkaApis.handleSyncGroupRequest answers without the coordinator when
    ``areMandatoryProtocolTypeAndNamePresent`` fails: from v5 both are mandatory,
    INCONSISTENT_GROUP_PROTOCOL."""
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return SyncGroupResponse(request.correlation_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    return None


def sync_group_response(response: SyncGroupResponse, version: int) -> dict:
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(response.error_code),
            "protocol_type": response.protocol_type, "protocol_name": response.protocol_name,
            "assignment": response.assignment}


# -- Heartbeat (12) ---------------------------------------------------------------------
def heartbeat_request(correlation_id: int, version: int, body: dict, client: Client) -> HeartbeatRequest:
    return HeartbeatRequest(correlation_id, body["group_id"], body["generation_id"], body["member_id"],
                            body["group_instance_id"])


def heartbeat_response(response: HeartbeatResponse, version: int) -> dict:
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(response.error_code)}


# -- LeaveGroup (13) --------------------------------------------------------------------
def leave_group_request(correlation_id: int, version: int, body: dict, client: Client) -> LeaveGroupRequest:
    """LeaveGroupRequest.members(): v0-2 leave one member, the body's member id, as a
    batch of one; v3+ a batch (KIP-345)."""
    if version <= 2:
        members: tuple[MemberIdentity, ...] = (MemberIdentity(body["member_id"]),)
    else:
        members = tuple(MemberIdentity(m["member_id"], m["group_instance_id"]) for m in body["members"])
    return LeaveGroupRequest(correlation_id, body["group_id"], members, version)


def leave_group_response(response: LeaveGroupResponse, version: int) -> dict:
    """LeaveGroupResponse(memberResponses, topLevelError, throttle, version): v0-2 carry
    one error, the top level's, else the first member's that is not NONE (getError)."""
    error = response.error_code
    if version <= 2:
        if error == ErrorCode.NONE:
            error = next((m.error_code for m in response.members if m.error_code != ErrorCode.NONE),
                         ErrorCode.NONE)
        return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(error), "members": []}
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(error), "members": [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": int(m.error_code)}
        for m in response.members]}


# -- OffsetCommit (8) -------------------------------------------------------------------
def offset_commit_request(correlation_id: int, version: int, body: dict, client: Client) -> OffsetCommitRequest:
    """Fields a version lacks hold the JSON's defaults as decoded: generation -1 and
    member "" (v0), commit timestamp -1 (all but v1), retention -1 (all but v2-4), leader
    epoch -1 (before v6), instance id null (before v7); the coordinator turns them into
    an OffsetAndMetadata as KafkaApis.handleOffsetCommitRequest does."""
    topics = tuple(OffsetCommitTopic(t["name"], tuple(
        OffsetCommitPartition(p["partition_index"], p["committed_offset"], p["committed_leader_epoch"],
                              p["commit_timestamp"], p["committed_metadata"]) for p in t["partitions"]))
        for t in body["topics"])
    return OffsetCommitRequest(correlation_id, body["group_id"], topics, body["generation_id"], body["member_id"],
                               body["group_instance_id"], body["retention_time_ms"])


def offset_commit_response(response: OffsetCommitResponse, version: int) -> dict:
    return {"throttle_time_ms": response.throttle_time_ms, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": int(p.error_code)}
                                        for p in t.partitions]} for t in response.topics]}


# -- OffsetFetch (9) --------------------------------------------------------------------
def offset_fetch_request(correlation_id: int, version: int, body: dict, client: Client) -> OffsetFetchRequest:
    """Null topics (v2+; the field is not nullable before) ask for every partition the
    group committed; require_stable is v7's (false before)."""
    topics = body["topics"]
    wanted = None if topics is None else tuple(
        OffsetFetchTopic(t["name"], tuple(t["partition_indexes"])) for t in topics)
    return OffsetFetchRequest(correlation_id, body["group_id"], wanted, bool(body["require_stable"]))


def offset_fetch_response(response: OffsetFetchResponse, version: int, request: OffsetFetchRequest) -> dict:
    """From v2 a group error is the top-level error with no partitions; v0-1 have no
    top-level error, so each requested partition carries it with offset -1 and metadata
    "" (OffsetFetchRequest.getErrorResponse). Leader epochs from v5, throttle from v3."""
    if version < 2 and response.error_code != ErrorCode.NONE:
        topics = [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": INVALID_OFFSET, "committed_leader_epoch": NO_LEADER_EPOCH,
             "metadata": "", "error_code": int(response.error_code)} for p in t.partition_indexes]}
            for t in request.topics or ()]
        return {"throttle_time_ms": response.throttle_time_ms, "error_code": 0, "topics": topics}
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(response.error_code), "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "committed_offset": p.committed_offset,
             "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,
             "error_code": int(p.error_code)} for p in t.partitions]} for t in response.topics]}


# -- DescribeGroups (15) and ListGroups (16) --------------------------------------------
def describe_groups_request(correlation_id: int, version: int, body: dict,
                            client: Client) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(correlation_id, tuple(body["groups"]), bool(body["include_authorized_operations"]))


def describe_groups_response(response: DescribeGroupsResponse, version: int, request: DescribeGroupsRequest) -> dict:
    """KafkaApis.handleDescribeGroupRequest: from v3, a group described without error to
    a request that asks gets its authorized operations (every one a group supports: no
    authorizer); otherwise INT32_MIN, the JSON's default."""
    groups = []
    for g in response.groups:
        operations = g.authorized_operations
        if (version >= 3 and request.include_authorized_operations and g.error_code == ErrorCode.NONE
                and operations == AUTHORIZED_OPERATIONS_OMITTED):
            operations = GROUP_AUTHORIZED_OPERATIONS
        groups.append({"error_code": int(g.error_code), "group_id": g.group_id, "group_state": g.group_state,
                       "protocol_type": g.protocol_type, "protocol_data": g.protocol_data,
                       "authorized_operations": operations, "members": [
                           {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "member_metadata": m.member_metadata, "member_assignment": m.member_assignment}
                           for m in g.members]})
    return {"throttle_time_ms": response.throttle_time_ms, "groups": groups}


def list_groups_request(correlation_id: int, version: int, body: dict, client: Client) -> ListGroupsRequest:
    """The states filter is v4's; empty (every group) before."""
    return ListGroupsRequest(correlation_id, tuple(body["states_filter"]))


def list_groups_response(response: ListGroupsResponse, version: int) -> dict:
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": int(response.error_code), "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state}
        for g in response.groups]}


# -- DeleteGroups (42) and OffsetDelete (47) ---------------------------------------------
def delete_groups_request(correlation_id: int, version: int, body: dict, client: Client) -> DeleteGroupsRequest:
    """v0-2 carry the same list of group ids (v2 is the flexible encoding); KafkaApis
    hands each id to the coordinator once (``distinct``), which the core does too."""
    return DeleteGroupsRequest(correlation_id, tuple(body["groups_names"]))


def delete_groups_response(response: DeleteGroupsResponse, version: int) -> dict:
    return {"throttle_time_ms": response.throttle_time_ms, "results": [
        {"group_id": r.group_id, "error_code": int(r.error_code)} for r in response.results]}


def offset_delete_request(correlation_id: int, version: int, body: dict, client: Client) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(correlation_id, body["group_id"], tuple(
        OffsetDeleteTopic(t["name"], tuple(p["partition_index"] for p in t["partitions"])) for t in body["topics"]))


def offset_delete_response(response: OffsetDeleteResponse, version: int) -> dict:
    """KafkaApis.handleOffsetDeleteRequest: a group error is the top-level error with no
    topics (OffsetDeleteRequest.getErrorResponse), else each partition's error."""
    return {"error_code": int(response.error_code), "throttle_time_ms": response.throttle_time_ms, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": int(p.error_code)}
                                        for p in t.partitions]} for t in response.topics]}


# -- the table the server dispatches by -------------------------------------------------
@dataclass(frozen=True)
class GroupApi:
    """One API's conversions. ``refusal`` is KafkaApis' answer given before the
    coordinator sees the request (None: the coordinator answers); ``to_wire`` gets the
    core request too, for the versions whose answer repeats what was asked."""
    to_core: Callable[[int, int, dict, Client], Any]
    to_wire: Callable[[Any, int, Any], dict]
    refusal: Callable[[Any, int], Any] = lambda request, version: None


def _plain(to_wire: Callable[[Any, int], dict]) -> Callable[[Any, int, Any], dict]:
    return lambda response, version, request: to_wire(response, version)


INBOUND: dict[int, GroupApi] = {
    ApiKey.JOIN_GROUP: GroupApi(join_group_request, _plain(join_group_response)),
    ApiKey.SYNC_GROUP: GroupApi(sync_group_request, _plain(sync_group_response), sync_group_refusal),
    ApiKey.HEARTBEAT: GroupApi(heartbeat_request, _plain(heartbeat_response)),
    ApiKey.LEAVE_GROUP: GroupApi(leave_group_request, _plain(leave_group_response)),
    ApiKey.OFFSET_COMMIT: GroupApi(offset_commit_request, _plain(offset_commit_response)),
    ApiKey.OFFSET_FETCH: GroupApi(offset_fetch_request, offset_fetch_response),
    ApiKey.DESCRIBE_GROUPS: GroupApi(describe_groups_request, describe_groups_response),
    ApiKey.LIST_GROUPS: GroupApi(list_groups_request, _plain(list_groups_response)),
    ApiKey.DELETE_GROUPS: GroupApi(delete_groups_request, _plain(delete_groups_response)),
    ApiKey.OFFSET_DELETE: GroupApi(offset_delete_request, _plain(offset_delete_response)),
}
