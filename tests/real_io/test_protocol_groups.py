"""The consumer-group APIs' codec (issue 24), before any handler: JoinGroup, Heartbeat,
LeaveGroup, SyncGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete at every version of apache/kafka 2.7.0's
clients/src/main/resources/common/message/*.json (real_io/protocol/group_schemas.py).

They round-trip through apis.encode_request / decode_request and encode_response /
decode_response; the bytes kafka-python produces (its hand-written classes, moved to
``kafka.protocol.old.{group,commit}`` in kafka-python 3.x, and the JSON-driven classes its
consumer really sends, ``kafka.protocol.consumer`` / ``kafka.protocol.admin``) decode with
their headers; truncated or garbled bodies give ProtocolError and nothing else. And the
broker does not offer them until apis.GROUPS_SERVED is set (test_group_api.py)."""
from __future__ import annotations

import importlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from real_io.protocol import apis
from real_io.protocol.apis import GROUP_APIS, ApiKey, RequestHeader
from real_io.protocol.errors import ProtocolError, UnsupportedVersionError
from tests.real_io.protocol_strategies import message_value

VERSIONS = [(key, version) for key, (lo, hi) in sorted(GROUP_APIS.items()) for version in range(lo, hi + 1)]
CASES = [(key, version, is_response) for key, version in VERSIONS for is_response in (False, True)]
_FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_group_apis_are_codec_only_and_span_every_2_7_0_version(groups_not_served):
    """Not served (apis.GROUPS_SERVED off), ApiVersions offers none of them and a request
    for one is refused as an unknown API is (the broker closes the connection:
    test_serve_malformed.py); tests/real_io/test_group_api.py checks the switch on."""
    assert set(GROUP_APIS).isdisjoint(apis.SUPPORTED)
    assert {e["api_key"] for e in apis.api_versions_response()["api_keys"]}.isdisjoint(GROUP_APIS)
    for key, (lo, hi) in GROUP_APIS.items():
        assert apis.request_schema(key).valid == apis.response_schema(key).valid == (lo, hi)
        payload = struct.pack(">hhih", key, hi, 4, -1)
        with pytest.raises(UnsupportedVersionError):
            apis.decode_request(payload)
        with pytest.raises(UnsupportedVersionError):  # past 2.7.0's newest, even where the codec is asked
            apis.decode_request(struct.pack(">hhih", key, hi + 1, 4, -1), offered=GROUP_APIS)
    assert {ApiKey(k).name for k in GROUP_APIS} == {
        "OFFSET_COMMIT", "OFFSET_FETCH", "JOIN_GROUP", "HEARTBEAT", "LEAVE_GROUP", "SYNC_GROUP",
        "DESCRIBE_GROUPS", "LIST_GROUPS", "DELETE_GROUPS", "OFFSET_DELETE"}


def test_flexible_versions_follow_the_definitions():
    """flexibleVersions at 2.7.0; OffsetDelete has none. A flexible version takes request
    header v2 and response header v1."""
    first_flexible = {key: next((v for v in range(lo, hi + 1) if apis.request_schema(key).is_flexible(v)), None)
                      for key, (lo, hi) in GROUP_APIS.items()}
    assert first_flexible == {
        ApiKey.JOIN_GROUP: 6, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 4, ApiKey.SYNC_GROUP: 4,
        ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6, ApiKey.DESCRIBE_GROUPS: 5, ApiKey.LIST_GROUPS: 3,
        ApiKey.DELETE_GROUPS: 2, ApiKey.OFFSET_DELETE: None}
    for key, version in VERSIONS:
        flexible = first_flexible[key] is not None and version >= first_flexible[key]
        assert apis.response_schema(key).is_flexible(version) == flexible
        assert (apis.request_header_version(key, version), apis.response_header_version(key, version)) == (
            (2, 1) if flexible else (1, 0))


@pytest.mark.parametrize("key, version, is_response", CASES)
@_FEW
@given(data=st.data())
def test_every_version_round_trips_through_the_frame_codec(key, version, is_response, data):
    if is_response:
        body = data.draw(message_value(apis.response_schema(key), version))
        frame = apis.encode_response(key, version, 21, body)
        assert apis.decode_response(key, version, frame[4:], offered=GROUP_APIS) == (21, body)
    else:
        body = data.draw(message_value(apis.request_schema(key), version))
        header = RequestHeader(key, version, 21, data.draw(st.none() | st.text(max_size=5)))
        frame = apis.encode_request(header, body)
        assert apis.frame_size(frame[:4]) == len(frame) - 4
        request = apis.decode_request(frame[4:], offered=GROUP_APIS)
        assert (request.header, request.body) == (header, body)


def test_fields_a_version_lacks_read_as_their_defaults_and_are_not_written():
    """OffsetCommit: generation and member from v1, the commit timestamp only in v1,
    the retention time in v2-4, the leader epoch from v6, the static member id from v7."""
    request = {"group_id": "g", "generation_id": 3, "member_id": "m", "group_instance_id": "s",
               "retention_time_ms": 60000, "topics": [{"name": "t", "partitions": [
                   {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 5,
                    "commit_timestamp": 1000, "committed_metadata": None}]}]}
    schema = apis.request_schema(ApiKey.OFFSET_COMMIT)
    seen = {}
    for version in range(0, 9):
        body = schema.decode(version, schema.encode(version, request))
        partition = body["topics"][0]["partitions"][0]
        seen[version] = (body["generation_id"], body["member_id"], body["retention_time_ms"],
                         partition["commit_timestamp"], partition["committed_leader_epoch"],
                         body["group_instance_id"])
    assert seen[0] == (-1, "", -1, -1, -1, None)
    assert seen[1] == (3, "m", -1, 1000, -1, None)
    assert seen[2] == seen[4] == (3, "m", 60000, -1, -1, None)
    assert seen[5] == (3, "m", -1, -1, -1, None)
    assert seen[6] == (3, "m", -1, -1, 5, None)
    assert seen[7] == seen[8] == (3, "m", -1, -1, 5, "s")


# --- kafka-python's hand-written classes (kafka.protocol.old.group / .commit) ---------

_OLD = {ApiKey.JOIN_GROUP: ("group", "JoinGroup"), ApiKey.SYNC_GROUP: ("group", "SyncGroup"),
        ApiKey.HEARTBEAT: ("group", "Heartbeat"), ApiKey.LEAVE_GROUP: ("group", "LeaveGroup"),
        ApiKey.OFFSET_COMMIT: ("commit", "OffsetCommit"), ApiKey.OFFSET_FETCH: ("commit", "OffsetFetch")}


def old_classes(key: int, is_response: bool) -> list:
    module_name, name = _OLD[key]
    module = importlib.import_module(f"kafka.protocol.old.{module_name}")
    return getattr(module, name + ("Response" if is_response else "Request"))


OLD_CASES = [(key, version, is_response) for key in sorted(_OLD) for is_response in (False, True)
             for version in range(len(old_classes(key, is_response)))]


def test_kafka_python_has_the_classes_this_file_checks():
    """JoinGroupRequest_v0..v5, SyncGroup/Heartbeat/LeaveGroup v0..v3, OffsetCommit v0..v7,
    OffsetFetch v0..v5: each inside GROUP_APIS."""
    counts = {key: len(old_classes(key, False)) for key in _OLD}
    assert counts == {ApiKey.JOIN_GROUP: 6, ApiKey.SYNC_GROUP: 4, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 4,
                      ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6}
    assert all(apis.is_supported(key, version, GROUP_APIS) for key, version, _ in OLD_CASES)


def _framed(request, correlation_id: int = 5, client_id: str = "kp", version: int | None = None) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    if version is None:
        return bytes(request.encode(header=True, framed=True))
    return bytes(request.encode(version=version, header=True, framed=True))


@pytest.mark.parametrize("key, version, is_response", OLD_CASES)
@_FEW
@given(data=st.data())
def test_kafka_python_old_classes_read_ours_and_we_read_theirs_with_the_header(key, version, is_response, data):
    cls = old_classes(key, is_response)[version]
    if is_response:
        body = data.draw(message_value(apis.response_schema(key), version))
        frame = apis.encode_response(key, version, 8, body)
        theirs = cls.decode(frame, header=True, framed=True)
        assert theirs.header.correlation_id == 8
        assert theirs.encode() == apis.response_schema(key).encode(version, body)
    else:
        body = data.draw(message_value(apis.request_schema(key), version))
        theirs = cls.decode(apis.request_schema(key).encode(version, body))
        request = apis.decode_request(_framed(theirs)[4:], offered=GROUP_APIS)
        assert (request.header, request.body) == (RequestHeader(key, version, 5, "kp"), body)


@pytest.mark.parametrize("version", range(6))
def test_kafka_python_join_group_requests_decode_with_their_headers(version):
    fields = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000, "member_id": "",
              "group_instance_id": "static-1", "protocol_type": "consumer",
              "protocols": [("range", b"\x00\x01r"), ("roundrobin", b"\x00\x01rr")]}
    cls = old_classes(ApiKey.JOIN_GROUP, False)[version]
    request = apis.decode_request(_framed(cls(**{n: fields[n] for n in cls.SCHEMA.names}))[4:], offered=GROUP_APIS)
    assert request.header == RequestHeader(ApiKey.JOIN_GROUP, version, 5, "kp")
    body = request.body
    assert (body["group_id"], body["session_timeout_ms"], body["member_id"], body["protocol_type"]) == (
        "g", 10000, "", "consumer")
    assert body["rebalance_timeout_ms"] == (300000 if version >= 1 else -1)
    assert body["group_instance_id"] == ("static-1" if version >= 5 else None)
    assert [(p["name"], bytes(p["metadata"])) for p in body["protocols"]] == fields["protocols"]


@pytest.mark.parametrize("key", [ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP])
def test_kafka_python_sync_heartbeat_and_leave_requests_decode_with_their_headers(key):
    fields = {"group_id": "g", "generation_id": 4, "member_id": "m-1", "group_instance_id": None,
              "assignments": [("m-1", b"\x00\x00a"), ("m-2", b"")], "members": [("m-1", None), ("m-2", "s-2")]}
    for version, cls in enumerate(old_classes(key, False)):
        request = apis.decode_request(_framed(cls(**{n: fields[n] for n in cls.SCHEMA.names}), 9)[4:],
                                      offered=GROUP_APIS)
        assert request.header == RequestHeader(key, version, 9, "kp")
        body = request.body
        assert body["group_id"] == "g"
        if key == ApiKey.LEAVE_GROUP and version >= 3:  # a batch of members (KIP-345)
            assert [(m["member_id"], m["group_instance_id"]) for m in body["members"]] == fields["members"]
        else:
            assert body["member_id"] == "m-1"
        if key != ApiKey.LEAVE_GROUP:
            assert body["generation_id"] == 4 and body["group_instance_id"] is None
        if key == ApiKey.SYNC_GROUP:
            assert [(a["member_id"], bytes(a["assignment"])) for a in body["assignments"]] == fields["assignments"]


@pytest.mark.parametrize("version", range(8))
def test_kafka_python_offset_commit_requests_decode_with_their_headers(version):
    partition = {"partition_index": 2, "committed_offset": 1234, "commit_timestamp": 999,
                 "committed_leader_epoch": 7, "committed_metadata": "meta"}
    fields = {"group_id": "g", "generation_id_or_member_epoch": 6, "member_id": "m-1", "group_instance_id": None,
              "retention_time_ms": 86400000}
    cls = old_classes(ApiKey.OFFSET_COMMIT, False)[version]
    partition_names = [n for n, _ in _array_fields(cls, "topics", "partitions")]
    topics = [("t", [tuple(partition[n] for n in partition_names)])]
    request = apis.decode_request(
        _framed(cls(**{n: fields.get(n, topics) for n in cls.SCHEMA.names}))[4:], offered=GROUP_APIS)
    assert request.header == RequestHeader(ApiKey.OFFSET_COMMIT, version, 5, "kp")
    body = request.body
    (read,) = body["topics"][0]["partitions"]
    assert (body["group_id"], body["topics"][0]["name"], read["partition_index"], read["committed_offset"],
            read["committed_metadata"]) == ("g", "t", 2, 1234, "meta")
    assert (body["generation_id"], body["member_id"]) == ((6, "m-1") if version >= 1 else (-1, ""))
    assert read["commit_timestamp"] == (999 if version == 1 else -1)
    assert body["retention_time_ms"] == (86400000 if 2 <= version <= 4 else -1)
    assert read["committed_leader_epoch"] == (7 if version >= 6 else -1)


def _array_fields(cls, *path: str) -> list:
    """The (name, type) pairs of a nested array's elements in a kafka-python Schema."""
    schema = cls.SCHEMA
    for name in path:
        array = schema.fields[schema.names.index(name)]
        schema = array.array_of
    return list(zip(schema.names, schema.fields))


@pytest.mark.parametrize("version", range(6))
def test_kafka_python_offset_fetch_requests_decode_with_their_headers(version):
    cls = old_classes(ApiKey.OFFSET_FETCH, False)[version]
    request = apis.decode_request(_framed(cls("g", [("t", [0, 3])]))[4:], offered=GROUP_APIS)
    assert request.header == RequestHeader(ApiKey.OFFSET_FETCH, version, 5, "kp")
    assert request.body["group_id"] == "g" and request.body["topics"] == [{"name": "t", "partition_indexes": [0, 3]}]
    if version >= 2:  # KIP-88: null topics, every committed partition
        request = apis.decode_request(_framed(cls("g", None))[4:], offered=GROUP_APIS)
        assert request.body["topics"] is None


# --- kafka-python 3.x's JSON-driven classes: what its consumer and admin client send ---

def _json_driven_classes() -> dict:
    from kafka.protocol.admin import groups
    from kafka.protocol.consumer import group
    return {(cls.API_KEY, not cls.is_request()): cls
            for module in (group, groups) for cls in vars(module).values()
            if isinstance(cls, type) and hasattr(cls, "is_request") and cls.__module__ == module.__name__}


JSON_DRIVEN = _json_driven_classes()
# Their tables are newer than 2.7.0 (OffsetCommit from v2, OffsetFetch from v1, after
# KIP-896): the versions both define are the ones a client can pick against this broker.
JSON_CASES = [(key, version, is_response) for key, version, is_response in CASES
              if JSON_DRIVEN[(key, is_response)].valid_versions[0] <= version]


def test_kafka_python_has_a_json_driven_class_for_every_group_api_and_most_versions():
    assert set(JSON_DRIVEN) == {(int(key), is_response) for key in GROUP_APIS for is_response in (False, True)}
    assert len(JSON_CASES) == len(CASES) - 2 * 3  # OffsetCommit 0-1, OffsetFetch 0
    assert all(JSON_DRIVEN[(key, False)].valid_versions[1] >= hi for key, (_, hi) in GROUP_APIS.items())


@pytest.mark.parametrize("key, version, is_response", JSON_CASES)
@_FEW
@given(data=st.data())
def test_kafka_pythons_json_driven_classes_read_ours_and_we_read_theirs_with_the_header(key, version, is_response,
                                                                                         data):
    """DescribeGroups' authorized_operations is a set of bits to kafka-python (its
    json_patch); any int32, INT32_MIN ('not asked') included, comes back the same."""
    cls = JSON_DRIVEN[(int(key), is_response)]
    if is_response:
        body = data.draw(message_value(apis.response_schema(key), version))
        frame = apis.encode_response(key, version, 8, body)
        theirs = cls.decode(frame, version=version, header=True, framed=True)
        assert theirs.header.correlation_id == 8
        object.__setattr__(theirs, "_header", None)  # kafka-python 3.0.12 re-encodes a response only without it
        assert bytes(theirs.encode(version=version)) == apis.response_schema(key).encode(version, body)
    else:
        body = data.draw(message_value(apis.request_schema(key), version))
        theirs = cls.decode(apis.request_schema(key).encode(version, body), version=version)
        request = apis.decode_request(_framed(theirs, version=version)[4:], offered=GROUP_APIS)
        assert (request.header, request.body) == (RequestHeader(key, version, 5, "kp"), body)


def test_a_kafka_python_flexible_join_group_v7_request_decodes_with_header_v2():
    """JoinGroup 7 is what kafka-python 3.x sends a 2.7.0 broker (its tables reach v9)."""
    cls = JSON_DRIVEN[(ApiKey.JOIN_GROUP, False)]
    protocol = cls.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x03x")
    theirs = cls(group_id="g", session_timeout_ms=45000, rebalance_timeout_ms=300000, member_id="",
                 group_instance_id=None, protocol_type="consumer", protocols=[protocol])
    frame = _framed(theirs, 12, "kafka-python-3", version=7)
    assert frame[12:14] == len("kafka-python-3").to_bytes(2, "big")  # the client id stays an int16 string
    request = apis.decode_request(frame[4:], offered=GROUP_APIS)
    assert request.header == RequestHeader(ApiKey.JOIN_GROUP, 7, 12, "kafka-python-3")
    assert request.body["protocols"] == [{"name": "range", "metadata": b"\x00\x03x"}]
    assert apis.encode_request(request.header, request.body) == frame  # and ours is byte for byte theirs


# --- bad input: ProtocolError and nothing else ----------------------------------------

@pytest.mark.parametrize("key, version", VERSIONS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_of_a_request_body_is_a_protocol_error(key, version, data):
    """The decoder consumes a body exactly, so any shorter prefix runs out of bytes."""
    body = data.draw(message_value(apis.request_schema(key), version))
    frame = apis.encode_request(RequestHeader(key, version, 3, "c"), body)
    header_size = 4 + 10 + 1 + (apis.request_header_version(key, version) == 2)
    for cut in range(header_size, len(frame)):
        with pytest.raises(ProtocolError):
            apis.decode_request(frame[4:cut], offered=GROUP_APIS)


@pytest.mark.parametrize("key, version", VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_garbled_request_body_decodes_or_is_a_protocol_error(key, version, data):
    body = data.draw(message_value(apis.request_schema(key), version))
    frame = bytearray(apis.encode_request(RequestHeader(key, version, 3, "c"), body))
    start = 4 + 10 + 1 + (apis.request_header_version(key, version) == 2)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(start, max(start, len(frame) - 1)))
        if position < len(frame):
            frame[position] = data.draw(st.integers(0, 255))
    header = bytes(frame[4:start])
    for payload in (bytes(frame[4:]), header + data.draw(st.binary(max_size=60))):
        try:
            apis.decode_request(payload, offered=GROUP_APIS)
        except ProtocolError:
            pass


@pytest.mark.parametrize("key, version", VERSIONS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_truncated_or_random_response_body_is_a_protocol_error(key, version, data):
    schema = apis.response_schema(key)
    encoded = schema.encode(version, data.draw(message_value(schema, version)))
    with pytest.raises(ProtocolError):
        schema.decode(version, encoded[:data.draw(st.integers(0, len(encoded) - 1))])
    try:
        schema.decode(version, data.draw(st.binary(max_size=60)))
    except ProtocolError:
        pass
