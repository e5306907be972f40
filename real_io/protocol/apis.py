"""The APIs and versions this broker offers, request/response headers and frames.

``SUPPORTED`` is the one table of offered versions; the ApiVersions response is built
from it (``api_versions_response``). The ranges, and why:

- Produce 3-8, Fetch 4-12, ListOffsets 1-5: the versions that carry record batch v2
  (magic 2) and leader epochs; older ones need the legacy message formats. Fetch 12 is
  what a 2.7.0 follower sends at inter.broker.protocol.version 2.7 (ReplicaFetcherThread
  .fetchRequestVersion), and the only version with LastFetchedEpoch / DivergingEpoch,
  which the kafka-3.0 profile's followers truncate by; clients may use it too.
- ApiVersions 0-3, Metadata 0-9, CreateTopics 0-6, DeleteTopics 0-5, InitProducerId 0-4,
  OffsetForLeaderEpoch 0-3, DescribeConfigs 0-3, AlterConfigs 0-1, IncrementalAlterConfigs
  0-1, FindCoordinator 0-3, CreatePartitions 0-3, DescribeClientQuotas 0, AlterClientQuotas 0,
  AlterPartitionReassignments 0, ListPartitionReassignments 0: every version of
  Kafka 2.7.0's definitions, which the generic codec handles alike.
- The inter-broker APIs the core's controller and replicas send each other
  (real_io/inter_broker_api.py maps every one of these versions): LeaderAndIsr 0-4,
  StopReplica 0-3, UpdateMetadata 0-6, AlterIsr 0 -- every version of 2.7.0's
  definitions; the sender uses the newest, as a 2.7.0 broker at IBP 2.7 does.
  ControlledShutdown 1-3: v0 alone has the header without a client id (request header
  v0), which nothing sends since Kafka 0.10; it is not offered, so it closes the
  connection like any unsupported version.

``GROUP_APIS`` holds the consumer-group APIs' versions (issue 24), which the codec reads
and writes (``group_schemas.py``). ``GROUPS_SERVED`` is the one switch: while it is False
none of them is in SUPPORTED (ApiVersions does not advertise them, a request for one is
refused like any unknown API, and FindCoordinator keeps the binding's own refusal: see
real_io/server.py); set, ``SERVED_GROUP_APIS`` (all ten, which the core's coordinator
answers, real_io/group_api.py) join SUPPORTED and FindCoordinator goes to the core.
The ranges are every version of 2.7.0's definitions: JoinGroup
0-7, Heartbeat 0-4, LeaveGroup 0-4, SyncGroup 0-5, OffsetCommit 0-8, OffsetFetch 0-7,
DescribeGroups 0-5, ListGroups 0-4, DeleteGroups 0-2, OffsetDelete 0. Both clients pick
the newest version both sides speak: kafka-python 3.x's newer tables reach past them
(JoinGroup 9, OffsetCommit 10, OffsetFetch 10, ...) and so use 2.7.0's newest; librdkafka
2.x stops below some (JoinGroup 5, SyncGroup 3, Heartbeat 3, LeaveGroup 1:
src/rdkafka_request.c), which lie inside them.

Headers (RequestHeader.json / ResponseHeader.json): request header v1 (api key, version,
correlation id, nullable client id) for non-flexible API versions and v2 (v1 + tagged
fields) for flexible ones; the client id stays a classic int16 string even in v2.
Response header v0 (correlation id) and v1 (+ tagged fields) likewise, except that an
ApiVersions response always has header v0, since a client cannot know which versions
are flexible before it has the answer. Frames are an int32 size and that many bytes.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from real_io.protocol import produce_codec
from real_io.protocol.errors import ProtocolError, UnsupportedVersionError
from real_io.protocol.primitives import Reader, Writer
from real_io.protocol.schema import Message
from real_io.protocol.group_schemas import MESSAGES as GROUP_MESSAGES
from real_io.protocol.schemas import MESSAGES as CORE_MESSAGES

MESSAGES = {**CORE_MESSAGES, **GROUP_MESSAGES}


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    INCREMENTAL_ALTER_CONFIGS = 44
    CREATE_PARTITIONS = 37
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    ALTER_ISR = 56
    # The consumer-group APIs: in GROUP_APIS; in SUPPORTED while GROUPS_SERVED (below).
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47


# Keyed by ApiKey; typed by int (ApiKey is an IntEnum) as it is looked up by the frame's plain int.
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 8),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 6),
    ApiKey.DELETE_TOPICS: (0, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 3),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 0),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 0),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LEADER_AND_ISR: (0, 4),
    ApiKey.STOP_REPLICA: (0, 3),
    ApiKey.UPDATE_METADATA: (0, 6),
    ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
    ApiKey.ALTER_ISR: (0, 0),
}

# What the codec reads and writes; SERVED_GROUP_APIS is the part offered when served.
GROUP_APIS: dict[int, tuple[int, int]] = {
    ApiKey.OFFSET_COMMIT: (0, 8),
    ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}

# The switch for the consumer-group APIs (here, nowhere else): on, since BrokerNode's
# coordinator answers the group messages (broker_core/group_host.py). Off, a client with a group.id fails at once
# (FindCoordinator: GROUP_AUTHORIZATION_FAILED); on with no coordinator behind it, clients
# would wait out their timeouts.
GROUPS_SERVED = True
SERVED_GROUP_APIS: dict[int, tuple[int, int]] = dict(GROUP_APIS)


def serve_groups(served: bool) -> None:
    """Set GROUPS_SERVED and SUPPORTED with it, in place (modules and tests hold
    SUPPORTED itself). Called once below with the module's setting; tests call it to
    check both positions and put the setting back."""
    global GROUPS_SERVED
    GROUPS_SERVED = served
    for key in SERVED_GROUP_APIS:
        SUPPORTED.pop(key, None)
    if served:
        SUPPORTED.update(SERVED_GROUP_APIS)


serve_groups(GROUPS_SERVED)

UNSUPPORTED_VERSION = 35  # Kafka's Errors.UNSUPPORTED_VERSION
DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes


def request_schema(api_key: int) -> Message:
    return MESSAGES[(api_key, False)]


def response_schema(api_key: int) -> Message:
    return MESSAGES[(api_key, True)]


def is_supported(api_key: int, api_version: int, offered: Mapping[int, tuple[int, int]] | None = None) -> bool:
    versions = (SUPPORTED if offered is None else offered).get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if request_schema(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if response_schema(api_key).is_flexible(api_version) else 0


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclass(frozen=True)
class Request:
    header: RequestHeader
    body: dict


def decode_request(payload: bytes | bytearray | memoryview,
                   offered: Mapping[int, tuple[int, int]] | None = None) -> Request:
    """A request from a frame's payload (the bytes after the size). An unknown API key
    or an unsupported version raises UnsupportedVersionError (with the correlation id,
    for ``unsupported_api_versions_response``); anything malformed raises ProtocolError.
    ``offered`` replaces SUPPORTED as the versions accepted (a codec-only table such as
    GROUP_APIS, which the broker does not serve yet)."""
    reader = Reader(payload)
    api_key, api_version, correlation_id = reader.int16(), reader.int16(), reader.int32()
    if not is_supported(api_key, api_version, offered):
        raise UnsupportedVersionError(f"API key {api_key} version {api_version} is not supported",
                                      api_key, api_version, correlation_id)
    client_id = reader.string(nullable=True)
    if request_header_version(api_key, api_version) >= 2:
        reader.tagged_fields()
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if api_key == ApiKey.PRODUCE and produce_codec.FIRST_VERSION <= api_version <= produce_codec.LAST_VERSION:
        return Request(header, produce_codec.decode_request_body(reader))
    return Request(header, request_schema(api_key).decode(api_version, reader))


def encode_request(header: RequestHeader, body: dict) -> bytes:
    """A whole frame (size included), as a client sends it."""
    writer = Writer()
    writer.int16(header.api_key)
    writer.int16(header.api_version)
    writer.int32(header.correlation_id)
    writer.string(header.client_id)
    if request_header_version(header.api_key, header.api_version) >= 2:
        writer.tagged_fields({})
    writer.raw(request_schema(header.api_key).encode(header.api_version, body))
    return frame(writer.getvalue())


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    """A whole response frame (size included)."""
    parts = encode_response_parts(api_key, api_version, correlation_id, body)
    if len(parts) != 1:
        raise ProtocolError("a response with spliced fields is sent in parts")
    return parts[0]


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: dict) -> list:
    """A whole response frame as bytes and, where a bytes field held a ``Splice``, the
    splice: the frame's size counts the splices' sizes, and the caller sends each
    splice's bytes in its place."""
    writer = Writer()
    writer.int32(0)  # the frame size, filled in below
    writer.int32(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        writer.tagged_fields({})
    if not (api_key == ApiKey.PRODUCE and produce_codec.FIRST_VERSION <= api_version <= produce_codec.LAST_VERSION
            and produce_codec.encode_response_body(writer, api_version, body)):
        response_schema(api_key).encode_into(writer, api_version, body)
    out = writer.out
    out[0:4] = (len(out) - 4 + sum(s.size for _, s in writer.splices)).to_bytes(4, "big")
    parts: list = []
    start = 0
    for position, splice in writer.splices:
        parts += [bytes(out[start:position]), splice]
        start = position
    parts.append(bytes(out[start:]))
    return [p for p in parts if not isinstance(p, bytes) or p]


def decode_response(api_key: int, api_version: int, payload: bytes | bytearray | memoryview,
                    offered: Mapping[int, tuple[int, int]] | None = None) -> tuple[int, dict]:
    """(correlation id, body) from a response frame's payload, as a client reads it
    (``offered`` as for decode_request)."""
    if not is_supported(api_key, api_version, offered):
        raise ProtocolError(f"API key {api_key} version {api_version} is not supported")
    reader = Reader(payload)
    correlation_id = reader.int32()
    if response_header_version(api_key, api_version) >= 1:
        reader.tagged_fields()
    return correlation_id, response_schema(api_key).decode(api_version, reader)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> int:
    """The payload size announced by a frame's 4-byte prefix, checked against the limit
    before the broker reads (or allocates) that many bytes."""
    if len(prefix) != 4:
        raise ProtocolError(f"a frame size is 4 bytes, got {len(prefix)}")
    size = int.from_bytes(prefix, "big", signed=True)
    if size < 0 or size > max_bytes:
        raise ProtocolError(f"frame size {size} outside 0..{max_bytes} (socket.request.max.bytes)")
    return size


def api_versions_response(error_code: int = 0, throttle_time_ms: int = 0) -> dict:
    """The ApiVersions response body for SUPPORTED (encode it at the request's version,
    or at v0 when answering an unsupported ApiVersions version)."""
    return {"error_code": error_code, "throttle_time_ms": throttle_time_ms,
            "api_keys": [{"api_key": int(key), "min_version": lo, "max_version": hi}
                         for key, (lo, hi) in sorted(SUPPORTED.items())]}


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request of a version this broker does not offer: a
    v0 body with UNSUPPORTED_VERSION and the supported table (Kafka 2.7.0
    RequestContext.apiVersion), from which the client picks a version both speak. Any
    other request of an unsupported version gets no answer: Kafka closes the connection."""
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, api_versions_response(UNSUPPORTED_VERSION))


def _check_table() -> None:
    for key, (lo, hi) in [*SUPPORTED.items(), *GROUP_APIS.items()]:
        for schema in (request_schema(key), response_schema(key)):
            if not (schema.valid[0] <= lo and (schema.valid[1] is None or hi <= schema.valid[1])):
                raise AssertionError(f"{schema.name} does not define versions {lo}-{hi}")


_check_table()
