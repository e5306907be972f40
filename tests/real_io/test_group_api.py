"""The consumer-group APIs between the wire and the core (real_io/group_api.py), and the
switch that serves them (real_io/protocol/apis.py GROUPS_SERVED).

Requests: for every version in apis.GROUP_APIS of the ten APIs the coordinator
answers, the bytes kafka-python's own classes encode (its JSON-driven classes,
``kafka.protocol.consumer.group`` / ``kafka.protocol.admin.groups``; the hand-written
``kafka.protocol.old.commit`` for the versions the JSON ones no longer have) decode and
convert to the core message with the fields Kafka 2.7.0 gives them at that version.
Responses: every core response converts to a body our codec encodes at each version and
kafka-python decodes back with the values that version carries."""
from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.errors import ErrorCode
from broker_core.group_messages import (
    AUTHORIZED_OPERATIONS_OMITTED, DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup, DescribedGroupMember, DescribeGroupsRequest,
    DescribeGroupsResponse, HeartbeatResponse, JoinGroupResponse, JoinGroupResponseMember, LeaveGroupResponse,
    LeaveMemberResponse, ListedGroup, ListGroupsResponse, MemberIdentity, OffsetCommitResponse,
    OffsetCommitResponsePartition, OffsetCommitResponseTopic, OffsetFetchRequest, OffsetFetchResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
    OffsetDeleteTopic, OffsetFetchResponsePartition, OffsetFetchResponseTopic, OffsetFetchTopic, SyncGroupResponse)
from real_io import group_api
from real_io.group_api import Client
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader
from real_io.serve import ServeOptions, serve
from tests.real_io.protocol_strategies import message_value

CLIENT = Client("kp", "/127.0.0.1")


def versions(key: int) -> list[int]:
    lo, hi = apis.GROUP_APIS[key]
    return list(range(lo, hi + 1))


# -- kafka-python's classes ------------------------------------------------------------
def _json_class(key: int, response: bool):
    from kafka.protocol.admin import groups
    from kafka.protocol.consumer import group
    for module in (group, groups):
        for cls in vars(module).values():
            if (isinstance(cls, type) and hasattr(cls, "is_request") and cls.__module__ == module.__name__
                    and cls.API_KEY == key and cls.is_request() != response):
                return cls
    raise LookupError(key)


def _build(cls, values: dict):
    """A kafka-python JSON-driven object from a dict, nested structs included."""
    fields = cls.fields if isinstance(getattr(cls, "fields", None), dict) else cls._struct.fields
    kwargs = {}
    for name, value in values.items():
        field = fields[name]
        if field.is_struct_array() and value is not None:
            element = getattr(cls, field.type_str)
            value = [_build(element, v) for v in value]
        kwargs[name] = value
    return cls(**kwargs)


def theirs_request(key: int, version: int, values: dict) -> dict:
    """kafka-python's bytes for ``values`` at ``version``, framed with its header,
    decoded by our codec: the body the server hands group_api."""
    obj = _build(_json_class(key, False), values)
    obj.with_header(correlation_id=5, client_id="kp")
    frame = bytes(obj.encode(version=version, header=True, framed=True))
    request = apis.decode_request(frame[4:], offered=apis.GROUP_APIS)
    assert request.header == RequestHeader(key, version, 5, "kp")
    return request.body


def theirs_old_request(key: int, version: int, obj) -> dict:
    obj.with_header(correlation_id=5, client_id="kp")
    request = apis.decode_request(bytes(obj.encode(header=True, framed=True))[4:], offered=apis.GROUP_APIS)
    assert request.header == RequestHeader(key, version, 5, "kp")
    return request.body


def theirs_response(key: int, version: int, body: dict):
    """Our encoding of ``body`` at ``version``, decoded by kafka-python."""
    frame = apis.encode_response(key, version, 8, body)
    if (key, version) in ((ApiKey.OFFSET_COMMIT, 0), (ApiKey.OFFSET_COMMIT, 1), (ApiKey.OFFSET_FETCH, 0)):
        from kafka.protocol.old import commit
        old = getattr(commit, "OffsetCommitResponse" if key == ApiKey.OFFSET_COMMIT else "OffsetFetchResponse")
        return old[version].decode(frame, header=True, framed=True)
    decoded = _json_class(key, True).decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 8
    return decoded


def _throttle(theirs, version: int, first: int) -> None:
    assert theirs.throttle_time_ms == (7 if version >= first else 0)


# -- the switch -------------------------------------------------------------------------
def _advertised() -> dict[int, tuple[int, int]]:
    return {e["api_key"]: (e["min_version"], e["max_version"]) for e in apis.api_versions_response()["api_keys"]}


def test_not_served_api_versions_lists_no_group_api_and_find_coordinator_stays_local(groups_not_served):
    assert set(_advertised()).isdisjoint(apis.GROUP_APIS)
    with pytest.raises(apis.UnsupportedVersionError):
        apis.decode_request(struct.pack(">hhih", ApiKey.JOIN_GROUP, 5, 1, -1))


def test_served_api_versions_lists_the_ten_the_coordinator_answers_at_every_2_7_0_version(groups_served):
    """With DeleteGroups and OffsetDelete (broker_core/group_admin.py) every group API
    the codec reads is offered, at every version of 2.7.0's definitions."""
    advertised = _advertised()
    served = {key: versions for key, versions in advertised.items() if key in apis.GROUP_APIS}
    assert served == apis.GROUP_APIS
    assert set(served) == set(group_api.INBOUND)
    assert {k: v for k, v in advertised.items() if k not in served} == {
        k: v for k, v in apis.SUPPORTED.items() if k not in apis.GROUP_APIS}
    assert apis.decode_request(apis.encode_request(RequestHeader(ApiKey.HEARTBEAT, 4, 1, "c"), {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})[4:]).body["group_id"] == "g"


def test_switching_back_off_takes_exactly_the_group_apis_out(groups_served):
    with_groups = dict(apis.SUPPORTED)
    apis.serve_groups(False)
    assert apis.SUPPORTED == {k: v for k, v in with_groups.items() if k not in apis.GROUP_APIS}
    apis.serve_groups(True)
    assert apis.SUPPORTED == with_groups


# -- JoinGroup --------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group_requests_of_every_version(version):
    values = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000, "member_id": "m-1",
              "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x01r"},
                                                         {"name": "roundrobin", "metadata": b""}]}
    if version >= 5:
        values["group_instance_id"] = "static-1"
    request = group_api.join_group_request(3, version, theirs_request(ApiKey.JOIN_GROUP, version, values), CLIENT)
    assert (request.correlation_id, request.group_id, request.session_timeout_ms, request.member_id,
            request.protocol_type, request.version) == (3, "g", 10000, "m-1", "consumer", version)
    assert [(p.name, p.metadata) for p in request.protocols] == [("range", b"\x00\x01r"), ("roundrobin", b"")]
    assert all(type(p.metadata) is bytes for p in request.protocols)  # not a view of the frame
    # JoinGroupRequest.maybeOverrideRebalanceTimeout: v0's is its session timeout
    assert request.rebalance_timeout_ms == (10000 if version == 0 else 300000)
    assert request.group_instance_id == ("static-1" if version >= 5 else None)
    assert (request.client_id, request.client_host) == ("kp", "/127.0.0.1")


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group_responses_of_every_version(version):
    members = (JoinGroupResponseMember("m-1", "static-1", b"meta1"), JoinGroupResponseMember("m-2", None, b""))
    response = JoinGroupResponse(3, ErrorCode.NONE, 4, "consumer", "range", "m-1", "m-1", members, 7)
    theirs = theirs_response(ApiKey.JOIN_GROUP, version, group_api.join_group_response(response, version))
    assert (theirs.error_code, theirs.generation_id, theirs.protocol_name, theirs.leader, theirs.member_id) == (
        0, 4, "range", "m-1", "m-1")
    assert [(m.member_id, bytes(m.metadata)) for m in theirs.members] == [("m-1", b"meta1"), ("m-2", b"")]
    assert [m.group_instance_id for m in theirs.members] == (["static-1", None] if version >= 5 else [None, None])
    assert theirs.protocol_type == ("consumer" if version >= 7 else None)
    _throttle(theirs, version, 2)


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_a_join_group_error_has_no_protocol_name_before_v7_an_empty_one(version):
    """KafkaApis.handleJoinGroupRequest: protocolName.getOrElse(GroupCoordinator.NoProtocol)
    below v7 (the field is not nullable there), null from v7."""
    response = JoinGroupResponse(3, ErrorCode.MEMBER_ID_REQUIRED, member_id="kp-1")
    body = group_api.join_group_response(response, version)
    theirs = theirs_response(ApiKey.JOIN_GROUP, version, body)
    assert (theirs.error_code, theirs.generation_id, theirs.member_id) == (79, -1, "kp-1")
    assert theirs.protocol_name == (None if version >= 7 else "")


# -- SyncGroup --------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group_requests_of_every_version(version):
    values = {"group_id": "g", "generation_id": 4, "member_id": "m-1",
              "assignments": [{"member_id": "m-1", "assignment": b"\x00\x01a"}, {"member_id": "m-2", "assignment": b""}]}
    if version >= 3:
        values["group_instance_id"] = "static-1"
    if version >= 5:
        values.update(protocol_type="consumer", protocol_name="range")
    request = group_api.sync_group_request(3, version, theirs_request(ApiKey.SYNC_GROUP, version, values), CLIENT)
    assert (request.correlation_id, request.group_id, request.generation_id, request.member_id) == (3, "g", 4, "m-1")
    assert [(a.member_id, a.assignment) for a in request.assignments] == [("m-1", b"\x00\x01a"), ("m-2", b"")]
    assert all(type(a.assignment) is bytes for a in request.assignments)
    assert request.group_instance_id == ("static-1" if version >= 3 else None)
    assert (request.protocol_type, request.protocol_name) == (("consumer", "range") if version >= 5 else (None, None))
    assert group_api.sync_group_refusal(request, version) is None


@pytest.mark.parametrize("missing", ["protocol_type", "protocol_name"])
def test_a_v5_sync_group_without_protocol_type_or_name_is_refused_before_the_coordinator(missing):
    """KafkaApis.handleSyncGroupRequest: areMandatoryProtocolTypeAndNamePresent (v5+),
    INCONSISTENT_GROUP_PROTOCOL; older versions have neither field and pass."""
    values = {"group_id": "g", "generation_id": 4, "member_id": "m-1", "assignments": [],
              "protocol_type": "consumer", "protocol_name": "range", missing: None}
    request = group_api.sync_group_request(3, 5, theirs_request(ApiKey.SYNC_GROUP, 5, values), CLIENT)
    refusal = group_api.sync_group_refusal(request, 5)
    assert refusal == SyncGroupResponse(3, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    theirs = theirs_response(ApiKey.SYNC_GROUP, 5, group_api.sync_group_response(refusal, 5))
    assert (theirs.error_code, bytes(theirs.assignment)) == (23, b"")
    assert group_api.sync_group_refusal(group_api.sync_group_request(3, 4, theirs_request(
        ApiKey.SYNC_GROUP, 4, values), CLIENT), 4) is None


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group_responses_of_every_version(version):
    response = SyncGroupResponse(3, ErrorCode.NONE, "consumer", "range", b"\x00\x01assigned", 7)
    theirs = theirs_response(ApiKey.SYNC_GROUP, version, group_api.sync_group_response(response, version))
    assert (theirs.error_code, bytes(theirs.assignment)) == (0, b"\x00\x01assigned")
    assert (theirs.protocol_type, theirs.protocol_name) == (("consumer", "range") if version >= 5 else (None, None))
    _throttle(theirs, version, 1)


# -- Heartbeat --------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat_requests_and_responses_of_every_version(version):
    values = {"group_id": "g", "generation_id": 4, "member_id": "m-1"}
    if version >= 3:
        values["group_instance_id"] = "static-1"
    request = group_api.heartbeat_request(3, version, theirs_request(ApiKey.HEARTBEAT, version, values), CLIENT)
    assert (request.correlation_id, request.group_id, request.generation_id, request.member_id,
            request.group_instance_id) == (3, "g", 4, "m-1", "static-1" if version >= 3 else None)
    theirs = theirs_response(ApiKey.HEARTBEAT, version, group_api.heartbeat_response(
        HeartbeatResponse(3, ErrorCode.REBALANCE_IN_PROGRESS, 7), version))
    assert theirs.error_code == 27
    _throttle(theirs, version, 1)


# -- LeaveGroup -------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group_requests_of_every_version(version):
    """LeaveGroupRequest.members(): v0-2 leave the body's member id, v3+ a batch."""
    values = {"group_id": "g", "member_id": "m-1"} if version <= 2 else {
        "group_id": "g", "members": [{"member_id": "m-1", "group_instance_id": None},
                                     {"member_id": "", "group_instance_id": "static-2"}]}
    request = group_api.leave_group_request(3, version, theirs_request(ApiKey.LEAVE_GROUP, version, values), CLIENT)
    assert (request.correlation_id, request.group_id, request.version) == (3, "g", version)
    assert request.members == ((MemberIdentity("m-1"),) if version <= 2 else
                               (MemberIdentity("m-1"), MemberIdentity("", "static-2")))


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group_responses_of_every_version(version):
    """v0-2 carry one error: the top level's, else the first member's that is not NONE
    (LeaveGroupResponse's constructor and getError, 2.7.0); v3+ each member's."""
    members = (LeaveMemberResponse("m-1", None, ErrorCode.NONE),
               LeaveMemberResponse("", "static-2", ErrorCode.UNKNOWN_MEMBER_ID))
    theirs = theirs_response(ApiKey.LEAVE_GROUP, version, group_api.leave_group_response(
        LeaveGroupResponse(3, ErrorCode.NONE, members, 7), version))
    _throttle(theirs, version, 1)
    if version <= 2:
        assert theirs.error_code == 25
    else:
        assert theirs.error_code == 0
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in theirs.members] == [
            ("m-1", None, 0), ("", "static-2", 25)]
    top = theirs_response(ApiKey.LEAVE_GROUP, version, group_api.leave_group_response(
        LeaveGroupResponse(3, ErrorCode.NOT_COORDINATOR, members), version))
    assert top.error_code == 16


# -- OffsetCommit -----------------------------------------------------------------------
def _commit_values(version: int) -> dict:
    partition = {"partition_index": 2, "committed_offset": 1234, "committed_metadata": "meta"}
    if version >= 6:
        partition["committed_leader_epoch"] = 5
    values = {"group_id": "g", "generation_id_or_member_epoch": 6, "member_id": "m-1",
              "topics": [{"name": "t", "partitions": [partition, {"partition_index": 0, "committed_offset": 7,
                                                                 "committed_metadata": None}]}]}
    if 2 <= version <= 4:
        values["retention_time_ms"] = 86400000
    if version >= 7:
        values["group_instance_id"] = "static-1"
    return values


def _offset_commit_body(version: int) -> dict:
    if version >= 2:
        return theirs_request(ApiKey.OFFSET_COMMIT, version, _commit_values(version))
    from kafka.protocol.old.commit import OffsetCommitRequest
    if version == 0:
        obj = OffsetCommitRequest[0]("g", [("t", [(2, 1234, "meta"), (0, 7, None)])])
    else:
        obj = OffsetCommitRequest[1]("g", 6, "m-1", [("t", [(2, 1234, 999, "meta"), (0, 7, -1, None)])])
    return theirs_old_request(ApiKey.OFFSET_COMMIT, version, obj)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_requests_of_every_version(version):
    request = group_api.offset_commit_request(3, version, _offset_commit_body(version), CLIENT)
    assert (request.correlation_id, request.group_id) == (3, "g")
    # v0 has neither: a commit from outside group management (and Kafka's went to ZooKeeper)
    assert (request.generation_id, request.member_id) == ((6, "m-1") if version >= 1 else (-1, ""))
    assert request.group_instance_id == ("static-1" if version >= 7 else None)
    assert request.retention_time_ms == (86400000 if 2 <= version <= 4 else -1)
    ((topic),) = request.topics
    first, second = topic.partitions
    assert (topic.name, first.partition_index, first.committed_offset, first.committed_metadata) == ("t", 2, 1234, "meta")
    assert (second.partition_index, second.committed_offset, second.committed_metadata) == (0, 7, None)
    assert first.commit_timestamp == (999 if version == 1 else -1)
    assert first.committed_leader_epoch == (5 if version >= 6 else -1)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_responses_of_every_version(version):
    response = OffsetCommitResponse(3, (OffsetCommitResponseTopic("t", (
        OffsetCommitResponsePartition(2, ErrorCode.NONE), OffsetCommitResponsePartition(0, ErrorCode.ILLEGAL_GENERATION))),
        OffsetCommitResponseTopic("u", (OffsetCommitResponsePartition(1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),))), 7)
    theirs = theirs_response(ApiKey.OFFSET_COMMIT, version, group_api.offset_commit_response(response, version))
    if version <= 1:  # kafka-python's old Struct: tuples
        assert theirs.topics == [("t", [(2, 0), (0, 22)]), ("u", [(1, 3)])]
        return
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in theirs.topics] == [
        ("t", [(2, 0), (0, 22)]), ("u", [(1, 3)])]
    _throttle(theirs, version, 3)


# -- OffsetFetch ------------------------------------------------------------------------
def _offset_fetch_body(version: int, topics) -> dict:
    if version >= 1:
        values = {"group_id": "g", "topics": None if topics is None else [
            {"name": name, "partition_indexes": parts} for name, parts in topics]}
        if version >= 7:
            values["require_stable"] = True
        return theirs_request(ApiKey.OFFSET_FETCH, version, values)
    from kafka.protocol.old.commit import OffsetFetchRequest
    return theirs_old_request(ApiKey.OFFSET_FETCH, 0, OffsetFetchRequest[0]("g", topics))


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_requests_of_every_version(version):
    request = group_api.offset_fetch_request(3, version, _offset_fetch_body(version, [("t", [0, 3]), ("u", [])]),
                                             CLIENT)
    assert request == OffsetFetchRequest(3, "g", (OffsetFetchTopic("t", (0, 3)), OffsetFetchTopic("u", ())),
                                         version >= 7)
    if version >= 2:  # KIP-88: null topics, every partition the group committed
        assert group_api.offset_fetch_request(3, version, _offset_fetch_body(version, None), CLIENT).topics is None


_FETCHED = OffsetFetchResponse(3, ErrorCode.NONE, (OffsetFetchResponseTopic("t", (
    OffsetFetchResponsePartition(0, 42, "meta", ErrorCode.NONE, 5),
    OffsetFetchResponsePartition(3, -1, None, ErrorCode.NONE))),), 7)


def _fetched(theirs, version: int) -> list:
    if version == 0:
        return [(name, [tuple(p) for p in parts]) for name, parts in theirs.topics]
    return [(t.name, [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
            for t in theirs.topics]


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_responses_of_every_version(version):
    request = OffsetFetchRequest(3, "g", (OffsetFetchTopic("t", (0, 3)),))
    theirs = theirs_response(ApiKey.OFFSET_FETCH, version, group_api.offset_fetch_response(_FETCHED, version, request))
    assert _fetched(theirs, version) == [("t", [(0, 42, "meta", 0), (3, -1, None, 0)])]
    if version >= 5:
        assert [p.committed_leader_epoch for p in theirs.topics[0].partitions] == [5, -1]
    if version >= 2:
        assert theirs.error_code == 0
    if version >= 1:
        _throttle(theirs, version, 3)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_an_offset_fetch_group_error_goes_in_every_requested_partition_before_v2(version):
    """OffsetFetchRequest.getErrorResponse (2.7.0): v0-1 have no top-level error, so
    each requested partition carries it, offset -1, metadata ""; v2+ the top level,
    with no partitions."""
    request = OffsetFetchRequest(3, "g", (OffsetFetchTopic("t", (0, 3)), OffsetFetchTopic("u", (1,))))
    response = OffsetFetchResponse(3, ErrorCode.NOT_COORDINATOR)
    theirs = theirs_response(ApiKey.OFFSET_FETCH, version, group_api.offset_fetch_response(response, version, request))
    if version < 2:
        assert _fetched(theirs, version) == [("t", [(0, -1, "", 16), (3, -1, "", 16)]), ("u", [(1, -1, "", 16)])]
    else:
        assert (theirs.error_code, _fetched(theirs, version)) == (16, [])


# -- DescribeGroups and ListGroups ------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
def test_describe_groups_requests_and_responses_of_every_version(version):
    values = {"groups": ["g", "h"]}
    if version >= 3:
        values["include_authorized_operations"] = True
    request = group_api.describe_groups_request(3, version, theirs_request(ApiKey.DESCRIBE_GROUPS, version, values),
                                                CLIENT)
    assert request == DescribeGroupsRequest(3, ("g", "h"), version >= 3)
    member = DescribedGroupMember("m-1", "static-1", "kp", "/127.0.0.1", b"sub", b"assigned")
    response = DescribeGroupsResponse(3, (DescribedGroup(ErrorCode.NONE, "g", "Stable", "consumer", "range", (member,)),
                                          DescribedGroup(ErrorCode.NONE, "h", "Dead", "", "")), 7)
    theirs = theirs_response(ApiKey.DESCRIBE_GROUPS, version, group_api.describe_groups_response(
        response, version, request))
    _throttle(theirs, version, 1)
    g, h = theirs.groups
    assert (g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data) == (
        0, "g", "Stable", "consumer", "range")
    (m,) = g.members
    assert (m.member_id, m.client_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment)) == (
        "m-1", "kp", "/127.0.0.1", b"sub", b"assigned")
    assert m.group_instance_id == ("static-1" if version >= 4 else None)
    assert (h.group_id, h.group_state, h.members) == ("h", "Dead", [])
    if version >= 3:  # KafkaApis.authorizedOperations with no authorizer: READ, DELETE, DESCRIBE
        assert g.authorized_operations == {3, 6, 8}  # kafka-python reads the bits as AclOperation codes


def test_describe_groups_leaves_authorized_operations_out_unless_asked_or_on_error():
    request = DescribeGroupsRequest(3, ("g",), False)
    response = DescribeGroupsResponse(3, (DescribedGroup(ErrorCode.NONE, "g", "Empty", "consumer", ""),))
    assert group_api.describe_groups_response(response, 5, request)["groups"][0]["authorized_operations"] == \
        AUTHORIZED_OPERATIONS_OMITTED
    failed = DescribeGroupsResponse(3, (DescribedGroup(ErrorCode.NOT_COORDINATOR, "g", "", "", ""),))
    assert group_api.describe_groups_response(failed, 5, DescribeGroupsRequest(3, ("g",), True))[
        "groups"][0]["authorized_operations"] == AUTHORIZED_OPERATIONS_OMITTED


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
def test_list_groups_requests_and_responses_of_every_version(version):
    values = {"states_filter": ["Stable", "Empty"]} if version >= 4 else {}
    request = group_api.list_groups_request(3, version, theirs_request(ApiKey.LIST_GROUPS, version, values), CLIENT)
    assert request.states_filter == (("Stable", "Empty") if version >= 4 else ())
    response = ListGroupsResponse(3, ErrorCode.NONE, (ListedGroup("g", "consumer", "Stable"),
                                                      ListedGroup("h", "", "Empty")), 7)
    theirs = theirs_response(ApiKey.LIST_GROUPS, version, group_api.list_groups_response(response, version))
    assert theirs.error_code == 0
    assert [(g.group_id, g.protocol_type) for g in theirs.groups] == [("g", "consumer"), ("h", "")]
    if version >= 4:
        assert [g.group_state for g in theirs.groups] == ["Stable", "Empty"]
    _throttle(theirs, version, 1)


# -- the server, served, with no coordinator needed --------------------------------------
async def _exchange(port: int, frames: list[bytes]) -> list[bytes | None]:
    """Each frame on its own connection: the response payload, or None if closed."""
    answers: list[bytes | None] = []
    for frame in frames:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(frame)
            size = await asyncio.wait_for(reader.readexactly(4), 10)
            answers.append(await asyncio.wait_for(reader.readexactly(int.from_bytes(size, "big")), 10))
        except asyncio.IncompleteReadError:
            answers.append(None)
        finally:
            writer.close()
    return answers


async def _serve_and_send(data_dir, frames: list[bytes]) -> list[bytes | None]:
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(ServeOptions(1, data_dir, port=0), lambda host, port: ready.set_result(port)))
    try:
        return await _exchange(await asyncio.wait_for(ready, 20), frames)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _api_versions_frame() -> bytes:
    return apis.encode_request(RequestHeader(ApiKey.API_VERSIONS, 3, 1, "c"),
                               {"client_software_name": "t", "client_software_version": "1"})


def test_a_served_broker_refuses_bad_group_requests_and_goes_on_serving(tmp_path, groups_served):
    """Served (the switch on in this process): a truncated JoinGroup closes its
    connection, as any body that does not parse; a v5 SyncGroup without a protocol name
    is answered INCONSISTENT_GROUP_PROTOCOL by the binding, as KafkaApis does; ApiVersions
    lists the group APIs, and the broker answers throughout."""
    join = apis.encode_request(RequestHeader(ApiKey.JOIN_GROUP, 7, 2, "c"), {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"x"}]})
    truncated = apis.frame(join[4:-3])
    sync = apis.encode_request(RequestHeader(ApiKey.SYNC_GROUP, 5, 3, "c"), {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": None, "assignments": [{"member_id": "m", "assignment": b"a"}]})
    answers = asyncio.run(_serve_and_send(tmp_path / "data", [truncated, sync, _api_versions_frame()]))
    assert answers[0] is None
    assert apis.decode_response(ApiKey.SYNC_GROUP, 5, answers[1]) == (3, {
        "throttle_time_ms": 0, "error_code": 23, "protocol_type": None, "protocol_name": None, "assignment": b""})
    _, versions_body = apis.decode_response(ApiKey.API_VERSIONS, 3, answers[2])
    assert {k["api_key"] for k in versions_body["api_keys"]} >= set(apis.SERVED_GROUP_APIS)


def test_a_broker_not_serving_groups_closes_a_group_request_and_lists_none(tmp_path, groups_not_served):
    sync = apis.encode_request(RequestHeader(ApiKey.SYNC_GROUP, 3, 3, "c"), {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None, "assignments": []})
    answers = asyncio.run(_serve_and_send(tmp_path / "data", [sync, _api_versions_frame()]))
    assert answers[0] is None
    _, versions_body = apis.decode_response(ApiKey.API_VERSIONS, 3, answers[1])
    assert {k["api_key"] for k in versions_body["api_keys"]}.isdisjoint(apis.GROUP_APIS)


# -- any body the codec accepts converts -------------------------------------------------
SERVED_VERSIONS = [(key, version) for key in sorted(group_api.INBOUND) for version in versions(key)]


@pytest.mark.parametrize("key, version", SERVED_VERSIONS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_request_the_codec_decodes_converts_without_an_exception(key, version, data):
    """Bad input is the coordinator's to refuse with an error code: whatever a client
    sends that decodes (nulls where a version allows them, empty and odd strings, any
    numbers) becomes a core request, with bytes the core can keep (not views of the
    frame), and hashable, as the core's frozen messages are."""
    body = data.draw(message_value(apis.request_schema(key), version))
    frame = apis.encode_request(RequestHeader(key, version, 4, "c"), body)
    decoded = apis.decode_request(frame[4:], offered=apis.GROUP_APIS).body
    api = group_api.INBOUND[key]
    request = api.to_core(4, version, decoded, CLIENT)
    hash(request)
    assert "memoryview" not in repr(request)
    refusal = api.refusal(request, version)
    assert refusal is None or refusal.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


# -- DeleteGroups and OffsetDelete -------------------------------------------------------
@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
def test_delete_groups_requests_and_responses_of_every_version(version):
    """KafkaApis.handleDeleteGroupsRequest: the ids go to the coordinator as sent (it
    asks each once); every result carries its group and error, throttle at every
    version."""
    body = theirs_request(ApiKey.DELETE_GROUPS, version, {"groups_names": ["g", "h", "g"]})
    assert group_api.delete_groups_request(3, version, body, CLIENT) == DeleteGroupsRequest(3, ("g", "h", "g"))
    response = DeleteGroupsResponse(3, (DeletableGroupResult("g", ErrorCode.NONE),
                                        DeletableGroupResult("h", ErrorCode.NON_EMPTY_GROUP)), 7)
    theirs = theirs_response(ApiKey.DELETE_GROUPS, version, group_api.delete_groups_response(response, version))
    assert [(r.group_id, r.error_code) for r in theirs.results] == [("g", 0), ("h", 68)]
    _throttle(theirs, version, 0)


def test_offset_delete_requests_and_responses():
    """KafkaApis.handleOffsetDeleteRequest: per partition errors, or a group error with
    no topics (OffsetDeleteRequest.getErrorResponse)."""
    body = theirs_request(ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 2}]}]})
    assert group_api.offset_delete_request(3, 0, body, CLIENT) == \
        OffsetDeleteRequest(3, "g", (OffsetDeleteTopic("t", (0, 2)),))
    response = OffsetDeleteResponse(3, ErrorCode.NONE, (OffsetDeleteResponseTopic("t", (
        OffsetDeleteResponsePartition(0, ErrorCode.NONE),
        OffsetDeleteResponsePartition(2, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))),), 7)
    theirs = theirs_response(ApiKey.OFFSET_DELETE, 0, group_api.offset_delete_response(response, 0))
    assert (theirs.error_code, theirs.throttle_time_ms) == (0, 7)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in theirs.topics] == \
        [("t", [(0, 0), (2, 86)])]
    refused = OffsetDeleteResponse(3, ErrorCode.GROUP_ID_NOT_FOUND)
    theirs = theirs_response(ApiKey.OFFSET_DELETE, 0, group_api.offset_delete_response(refused, 0))
    assert (theirs.error_code, list(theirs.topics)) == (69, [])
