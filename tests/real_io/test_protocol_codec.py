"""The table-driven codec: primitives, every supported message and version, headers,
frames and the ApiVersions table (apache/kafka 2.7.0
clients/src/main/resources/common/message/*.json are the spec)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from real_io.protocol import apis, produce_codec
from real_io.protocol.apis import ApiKey
from real_io.protocol.errors import ProtocolError, UnsupportedVersionError
from real_io.protocol.primitives import Reader, Writer
from real_io.protocol.schemas import MESSAGES
from tests.real_io.protocol_strategies import message_value

# The consumer-group APIs join SUPPORTED when served (apis.GROUPS_SERVED); their tables
# are group_schemas.py's, checked at every version by test_protocol_groups.py.
CORE_SUPPORTED = {key: versions for key, versions in apis.SUPPORTED.items() if key not in apis.GROUP_APIS}
SUPPORTED_CASES = [(key, version, is_response) for key, (lo, hi) in sorted(CORE_SUPPORTED.items())
                   for version in range(lo, hi + 1) for is_response in (False, True)]


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 2**31 - 1, -2**31])
def test_varint_zigzag_round_trip_and_known_bytes(value):
    """Kafka's ByteUtils.writeVarint: zigzag then LEB128."""
    writer = Writer()
    writer.varint(value)
    assert Reader(writer.getvalue()).varint() == value
    known = {0: b"\x00", -1: b"\x01", 1: b"\x02", 63: b"\x7e", -64: b"\x7f", 64: b"\x80\x01"}
    if value in known:
        assert writer.getvalue() == known[value]


@given(st.integers(-2**63, 2**63 - 1))
def test_varlong_round_trip(value):
    writer = Writer()
    writer.varlong(value)
    assert Reader(writer.getvalue()).varlong() == value


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value):
    writer = Writer()
    writer.unsigned_varint(value)
    assert Reader(writer.getvalue()).unsigned_varint() == value


def test_an_overlong_varint_is_refused():
    with pytest.raises(ProtocolError, match="longer than 5"):
        Reader(b"\xff" * 6).unsigned_varint()


@pytest.mark.parametrize("compact", [False, True])
def test_strings_bytes_and_nulls_round_trip(compact):
    writer = Writer()
    for text in ("", "kafka", None, "ünï"):
        (writer.compact_string if compact else writer.string)(text)
    (writer.compact_bytes if compact else writer.bytes32)(b"\x00\x01")
    (writer.compact_bytes if compact else writer.bytes32)(None)
    reader = Reader(writer.getvalue())
    read_string = reader.compact_string if compact else reader.string
    assert [read_string(True) for _ in range(4)] == ["", "kafka", None, "ünï"]
    read_bytes = reader.compact_bytes if compact else reader.bytes32
    assert (read_bytes(True), read_bytes(True), reader.remaining) == (b"\x00\x01", None, 0)


@pytest.mark.parametrize("data, what", [
    (b"\xff\xfe", "negative string length"),   # int16 -2
    (b"\xff\xff", "null where not nullable"),   # int16 -1, not nullable
    (b"\x7f\xff" + b"x" * 10, "huge string length"),
])
def test_bad_string_lengths_are_protocol_errors(data, what):
    with pytest.raises(ProtocolError):
        Reader(data).string(nullable=False)


def test_a_huge_array_count_is_refused_before_any_allocation():
    with pytest.raises(ProtocolError, match="exceeds"):
        Reader(b"\x7f\xff\xff\xff\x00").array_length(compact=False)
    with pytest.raises(ProtocolError, match="negative"):
        Reader(b"\xff\xff\xff\xfe").array_length(compact=False, nullable=True)


def test_tagged_fields_round_trip_and_must_be_in_order():
    writer = Writer()
    writer.tagged_fields({3: b"abc", 0: b""})
    assert Reader(writer.getvalue()).tagged_fields() == {0: b"", 3: b"abc"}
    with pytest.raises(ProtocolError, match="out of order"):
        Reader(b"\x02\x03\x00\x01\x00").tagged_fields()


@pytest.mark.parametrize("key, version, is_response", SUPPORTED_CASES)
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_every_supported_message_and_version_round_trips(key, version, is_response, data):
    message = MESSAGES[(key, is_response)]
    value = data.draw(message_value(message, version))
    assert message.decode(version, message.encode(version, value)) == value


@pytest.mark.parametrize("key, version, is_response", SUPPORTED_CASES)
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_decoding_random_or_truncated_bytes_raises_only_protocol_error(key, version, is_response, data):
    message = MESSAGES[(key, is_response)]
    encoded = message.encode(version, data.draw(message_value(message, version)))
    cut = data.draw(st.integers(0, max(len(encoded) - 1, 0)))
    for sample in (encoded[:cut], data.draw(st.binary(max_size=64))):
        try:
            message.decode(version, sample)
        except ProtocolError:
            pass


def test_flexible_versions_follow_the_definitions():
    """flexibleVersions in ApiVersions/Metadata/Fetch/CreateTopics/DeleteTopics/InitProducerId/
    FindCoordinator/LeaderAndIsr/StopReplica/UpdateMetadata/ControlledShutdown/AlterIsr/
    IncrementalAlterConfigs/CreatePartitions/AlterPartitionReassignments/ListPartitionReassignments
    *.json at 2.7.0; Produce, ListOffset, OffsetForLeaderEpoch,
    DescribeConfigs, AlterConfigs, DescribeClientQuotas and AlterClientQuotas are never
    flexible at 2.7.0."""
    first_flexible = {key: next((v for v in range(lo, hi + 1) if apis.request_schema(key).is_flexible(v)), None)
                      for key, (lo, hi) in CORE_SUPPORTED.items()}
    assert first_flexible == {
        apis.ApiKey.PRODUCE: None, apis.ApiKey.FETCH: 12, apis.ApiKey.LIST_OFFSETS: None,
        apis.ApiKey.METADATA: 9, apis.ApiKey.FIND_COORDINATOR: 3, apis.ApiKey.API_VERSIONS: 3,
        apis.ApiKey.CREATE_TOPICS: 5, apis.ApiKey.DELETE_TOPICS: 4, apis.ApiKey.INIT_PRODUCER_ID: 2,
        apis.ApiKey.OFFSET_FOR_LEADER_EPOCH: None, apis.ApiKey.DESCRIBE_CONFIGS: None,
        apis.ApiKey.LEADER_AND_ISR: 4, apis.ApiKey.STOP_REPLICA: 2, apis.ApiKey.UPDATE_METADATA: 6,
        apis.ApiKey.CONTROLLED_SHUTDOWN: 3, apis.ApiKey.ALTER_ISR: 0,
        apis.ApiKey.ALTER_CONFIGS: None, apis.ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
        apis.ApiKey.CREATE_PARTITIONS: 2,
        apis.ApiKey.DESCRIBE_CLIENT_QUOTAS: None, apis.ApiKey.ALTER_CLIENT_QUOTAS: None,
        apis.ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0, apis.ApiKey.LIST_PARTITION_REASSIGNMENTS: 0}


def test_request_header_v2_for_flexible_versions_and_v1_otherwise():
    """RequestHeader.json: v2 adds tagged fields; the client id is never compact."""
    body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": True}
    for version, header_version in ((8, 1), (9, 2)):
        header = apis.RequestHeader(apis.ApiKey.METADATA, version, 42, "client-1")
        frame = apis.encode_request(header, body)
        assert apis.frame_size(frame[:4]) == len(frame) - 4
        assert frame[12:22] == b"\x00\x08client-1"  # a classic int16-length string in both
        # v2: an empty tagged-field section, then the compact topics array (1 + 1);
        # v1: the body's int32 topics count right away.
        assert frame[22:24] == b"\x00\x02" if header_version == 2 else frame[22:26] == b"\x00\x00\x00\x01"
        request = apis.decode_request(frame[4:])
        assert request.header == header
        assert request.body["topics"] == [{"name": "t"}]


def test_api_versions_response_has_header_v0_even_when_flexible():
    """ResponseHeader: ApiVersionsResponse always uses header v0 (Kafka's
    ApiKeys.API_VERSIONS.responseHeaderVersion), other flexible responses header v1."""
    frame = apis.encode_response(apis.ApiKey.API_VERSIONS, 3, 7, apis.api_versions_response())
    assert frame[4:8] == b"\x00\x00\x00\x07" and frame[8:10] == b"\x00\x00"  # then error_code 0
    correlation_id, body = apis.decode_response(apis.ApiKey.API_VERSIONS, 3, frame[4:])
    assert correlation_id == 7
    assert {(e["api_key"], e["min_version"], e["max_version"]) for e in body["api_keys"]} == {
        (int(k), lo, hi) for k, (lo, hi) in apis.SUPPORTED.items()}
    flexible = apis.encode_response(apis.ApiKey.METADATA, 9, 7, {})
    assert flexible[8:9] == b"\x00"  # the header's empty tagged fields


def test_unknown_api_keys_and_versions_keep_the_correlation_id():
    for key, version in ((apis.ApiKey.API_VERSIONS, 4), (apis.ApiKey.PRODUCE, 2), (999, 0), (-1, 0)):
        payload = key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big") + b"\x00\x00\x00\x09\xff\xff"
        with pytest.raises(UnsupportedVersionError) as caught:
            apis.decode_request(payload)
        assert (caught.value.api_key, caught.value.api_version, caught.value.correlation_id) == (key, version, 9)


@pytest.mark.parametrize("prefix", [b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x7f\xff\xff\xff", b"\x00\x00"])
def test_negative_huge_or_short_frame_sizes_are_refused(prefix):
    with pytest.raises(ProtocolError):
        apis.frame_size(prefix)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_request_payloads_raise_only_protocol_errors(payload):
    try:
        apis.decode_request(payload)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted((k, v) for k, (lo, hi) in CORE_SUPPORTED.items() for v in range(lo, hi + 1))),
       st.binary(max_size=60))
def test_random_bodies_behind_a_valid_header_raise_only_protocol_errors(key_version, body):
    key, version = key_version
    header = key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00"
    if apis.request_header_version(key, version) == 2:
        header += b"\x00"
    try:
        apis.decode_request(header + body)
    except ProtocolError:
        pass


def test_fixed_width_primitives_round_trip_and_refuse_what_they_cannot_hold():
    import uuid
    writer = Writer()
    writer.int8(-128)
    writer.int16(-2)
    writer.int32(2**31 - 1)
    writer.int64(-2**63)
    writer.uint32(2**32 - 1)
    writer.boolean(True)
    writer.uuid(uuid.UUID(int=12345))
    reader = Reader(writer.getvalue())
    assert (reader.int8(), reader.int16(), reader.int32(), reader.int64(), reader.uint32(), reader.boolean(),
            reader.uuid(), reader.remaining) == (-128, -2, 2**31 - 1, -2**63, 2**32 - 1, True, uuid.UUID(int=12345), 0)
    for method, value in (("int8", 128), ("uint32", -1), ("varint", 2**31), ("unsigned_varint", -1)):
        with pytest.raises(ProtocolError):
            getattr(Writer(), method)(value)
    with pytest.raises(ProtocolError, match="need 8 bytes"):
        Reader(b"\x00" * 7).int64()


def test_encoding_a_misspelt_or_wrongly_typed_field_is_a_protocol_error():
    produce = MESSAGES[(apis.ApiKey.PRODUCE, False)]
    with pytest.raises(ProtocolError, match="unknown fields"):
        produce.encode(3, {"acks": 1, "timeout": 5})
    with pytest.raises(ProtocolError, match="cannot encode"):
        produce.encode(3, {"acks": "one"})
    with pytest.raises(ProtocolError, match="not nullable"):
        produce.encode(3, {"topics": [{"name": None}]})


def test_the_codec_is_pure():
    """Only real_io touches sockets and event loops (tests/test_architecture.py), and the
    codec needs neither (nor the simulation): bytes in, values out."""
    from tests.test_architecture import imports_of
    forbidden = {"asyncio", "socket", "selectors", "select", "kazoo", "threading", "sim", "time", "random"}
    bad = [f"{path.name}:{line} imports {name}" for path, line, name in imports_of("real_io/protocol")
           if name in forbidden]
    assert bad == []


_PRODUCE_VERSIONS = range(produce_codec.FIRST_VERSION, produce_codec.LAST_VERSION + 1)


@pytest.mark.parametrize("version", _PRODUCE_VERSIONS)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_the_produce_fast_paths_give_what_the_generic_codec_gives(version, data):
    """real_io/protocol/produce_codec.py against the generic codec over the same table:
    the same request body read to the same position, the same response bytes (or, for
    what the fast encoder does not expect, the generic encoder's), whole or truncated."""
    request, response = MESSAGES[(ApiKey.PRODUCE, False)], MESSAGES[(ApiKey.PRODUCE, True)]
    encoded = request.encode(version, data.draw(message_value(request, version)))
    cut = data.draw(st.sampled_from([len(encoded), data.draw(st.integers(0, len(encoded)))]))
    outcomes = []
    for decode in (lambda r: request.decode(version, r), produce_codec.decode_request_body):
        reader = Reader(encoded[:cut])
        try:
            outcomes.append((decode(reader), reader.pos))
        except ProtocolError:
            outcomes.append(ProtocolError)
    assert outcomes[0] == outcomes[1]
    body = data.draw(message_value(response, version))
    generic = response.encode(version, body)
    fast = Writer()
    if produce_codec.encode_response_body(fast, version, body):
        assert fast.getvalue() == generic
    else:
        assert fast.getvalue() == b""
    assert apis.encode_response(ApiKey.PRODUCE, version, 9, body) == apis.frame((9).to_bytes(4, "big") + generic)


def test_the_produce_response_fast_path_leaves_what_it_does_not_expect_to_the_generic_encoder():
    body = {"responses": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "base_offset": 1, "log_append_time_ms": -1, "log_start_offset": -1,
         "record_errors": [], "error_message": None, "misspelt": 1}]}], "throttle_time_ms": 0}
    with pytest.raises(ProtocolError, match="misspelt"):
        apis.encode_response(ApiKey.PRODUCE, 8, 1, body)
    body["responses"][0]["partitions"][0].pop("misspelt")
    body["responses"][0]["partitions"][0]["base_offset"] = 2**63  # too large for an int64
    with pytest.raises(ProtocolError):
        apis.encode_response(ApiKey.PRODUCE, 8, 1, body)
