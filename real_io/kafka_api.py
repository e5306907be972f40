"""Wire requests to the core's messages and the core's answers back to wire bodies.

Every function is pure: decoded request bodies (dicts, as real_io.protocol decodes
them) in, ``broker_core.messages`` out, and back. The server (real_io/server.py) owns
connections and correlation; this module owns the field-by-field mapping, written from
Kafka 2.7.0's message definitions (clients/src/main/resources/common/message/*.json).

Where the core has no counterpart the answer is local (real_io/local_apis.py).
"""
from __future__ import annotations

from typing import Mapping

from broker_core.config_describe import ConfigEntry
from broker_core.config_keys import SET, ConfigOp
from broker_core.messages import (
    AlterConfigsRequest, AlterConfigsResponse, ConfigResourceChange, CONSUMER_REPLICA_ID, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    FetchPartition, FetchPartitionResult, FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, ProduceRequest, ProduceResponse)
from broker_core.errors import ErrorCode
from broker_core.replica_manager import INTERNAL_TOPICS
from broker_core.types import TopicPartition
from real_io.protocol.errors import ProtocolError
from real_io.protocol.primitives import Splice
from real_io.wire_batch import WireBatch, parse_records

# Kafka's error codes the binding answers itself (the core's ErrorCode has the rest).
CORRUPT_MESSAGE = 2
INVALID_REQUEST = 42
INVALID_CONFIG = 40
INVALID_RECORD = 87
CLUSTER_ID = "isrlab-cluster"


def tp_sorted(partitions: Mapping[TopicPartition, object]) -> dict[str, list]:
    """topic -> [(partition, value)] in partition order, topics in name order."""
    grouped: dict[str, list] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append((tp.partition, partitions[tp]))
    return grouped


# -- Produce ---------------------------------------------------------------------------
def produce_request(correlation_id: int, body: dict, client_id: str = "",
                    request_bytes: int = -1) -> tuple[ProduceRequest, dict[TopicPartition, int]]:
    """The core's request for the partitions whose records decode, and the wire error
    for the others: a batch whose CRC-32C or framing is wrong is CORRUPT_MESSAGE, and v3+
    must carry exactly one batch v2 per partition (2.7.0 LogValidator
    validateRecordBatchForMessageFormat / ProduceRequest.validateRecords) else
    INVALID_RECORD. ``client_id`` (the header's) and ``request_bytes`` (the request's
    size, header and body, as KafkaApis' ``requestSize``) are for the produce quota."""
    batches: dict[TopicPartition, WireBatch] = {}
    errors: dict[TopicPartition, int] = {}
    for topic in body["topics"]:
        for partition in topic["partitions"]:
            tp = TopicPartition(topic["name"], partition["partition_index"])
            try:
                decoded = parse_records(partition["records"] or b"")
            except ProtocolError:
                errors[tp] = CORRUPT_MESSAGE
                continue
            if len(decoded) != 1:
                errors[tp] = INVALID_RECORD
                continue
            batches[tp] = decoded[0]
    return ProduceRequest(correlation_id, body["acks"], body["timeout_ms"], batches, client_id,
                          request_bytes=request_bytes), errors


def produce_response(response: ProduceResponse | None, local_errors: Mapping[TopicPartition, int]) -> dict:
    results: dict[TopicPartition, tuple[int, int]] = {tp: (code, -1) for tp, code in local_errors.items()}
    if response is not None:
        for tp, result in response.partitions.items():
            results[tp] = (int(result.error), result.base_offset)
    return {"responses": [{"name": topic, "partitions": [
        {"partition_index": p, "error_code": code, "base_offset": offset, "log_append_time_ms": -1,
         "log_start_offset": -1, "record_errors": [], "error_message": None} for p, (code, offset) in parts]}
        for topic, parts in tp_sorted(results).items()],
        "throttle_time_ms": response.throttle_time_ms if response is not None else 0}


# -- Fetch -----------------------------------------------------------------------------
def fetch_request(correlation_id: int, body: dict, client_id: str = "") -> FetchRequest:
    partitions = {}
    for topic in body["topics"]:
        for wanted in topic["partitions"]:
            tp = TopicPartition(topic["topic"], wanted["partition"])
            # LastFetchedEpoch (v12+, -1 before and from consumers): the core answers a
            # diverging epoch for it, as 2.7.0/3.0.0 Partition.readRecords does.
            partitions[tp] = FetchPartition(wanted["fetch_offset"], wanted["current_leader_epoch"],
                                            max(wanted["partition_max_bytes"], 0), wanted["last_fetched_epoch"])
    replica_id = body["replica_id"] if body["replica_id"] >= 0 else CONSUMER_REPLICA_ID
    return FetchRequest(correlation_id, replica_id, max(body["max_wait_ms"], 0), body["min_bytes"], partitions,
                        client_id, max_bytes=max(body["max_bytes"], 0))


def fetch_records(result: FetchPartitionResult) -> bytes | Splice:
    """A partition's fetched records: the Splice of pinned file regions the runtime made
    of the core's regions (real_io/runtime.py), which the server sends with sendfile;
    or batches as objects (a follower's decoded WireBatch, in tests), their bytes joined;
    empty when there is nothing to read."""
    batches = result.batches
    if not batches:
        return b""
    if type(batches[0]) is Splice:  # the runtime's only element
        return batches[0]
    return b"".join(bytes(batch.encode()) for batch in batches)


def fetch_response(response: FetchResponse, replica: bool = False) -> dict:
    """Fetch sessions (KIP-227) are not kept: session_id 0 tells the client every
    response is a full one. ``replica``: the answer to a follower's fetch, whose
    LastStableOffset carries the leader's log end offset (real_io/inter_broker_api.py);
    a consumer's is the high watermark (no transactions)."""
    return {"throttle_time_ms": response.throttle_time_ms, "error_code": 0, "session_id": 0, "responses": [
        {"topic": topic, "partition_responses": [
            {"partition": p, "error_code": int(r.error), "high_watermark": r.high_watermark,
             "last_stable_offset": r.log_end_offset if replica else r.high_watermark,
             "log_start_offset": r.log_start_offset,
             "aborted_transactions": None, "preferred_read_replica": -1, "record_set": fetch_records(r),
             "diverging_epoch": {"epoch": r.diverging_epoch, "end_offset": r.diverging_end_offset}}
            for p, r in parts]}
        for topic, parts in tp_sorted(response.partitions).items()]}


# -- ListOffsets -----------------------------------------------------------------------
def list_offsets_request(correlation_id: int, body: dict) -> tuple[ListOffsetsRequest, dict[TopicPartition, int]]:
    """The core answers the earliest (-2) and latest (-1) offsets and, for any other
    value, the first offset at or after it as a timestamp (2.7.0 takes every other
    value as one: broker_core.timestamp_lookup). A partition named twice answers
    INVALID_REQUEST, as 2.7.0 KafkaApis answers ``duplicatePartitions``."""
    wanted: dict[TopicPartition, int] = {}
    errors: dict[TopicPartition, int] = {}
    for topic in body["topics"]:
        for partition in topic["partitions"]:
            tp = TopicPartition(topic["name"], partition["partition_index"])
            if tp in wanted or tp in errors:
                wanted.pop(tp, None)
                errors[tp] = INVALID_REQUEST
            else:
                wanted[tp] = partition["timestamp"]
    return ListOffsetsRequest(correlation_id, wanted), errors


def list_offsets_response(response: ListOffsetsResponse | None, local_errors: Mapping[TopicPartition, int],
                          version: int) -> dict:
    """The offset's leader epoch goes on the wire from v4 (the encoder leaves the field
    out below). 2.7.0 KafkaApis.handleListOffsetRequestV1AndAbove answers
    OFFSET_NOT_AVAILABLE only to v5+; older versions get LEADER_NOT_AVAILABLE."""
    results: dict[TopicPartition, tuple[int, int, int, int]] = {
        tp: (code, -1, -1, -1) for tp, code in local_errors.items()}
    if response is not None:
        for tp, result in response.partitions.items():
            error = result.error
            if error is ErrorCode.OFFSET_NOT_AVAILABLE and version < 5:
                error = ErrorCode.LEADER_NOT_AVAILABLE
            results[tp] = (int(error), result.offset, result.leader_epoch, result.timestamp)
    return {"throttle_time_ms": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "error_code": code, "old_style_offsets": [], "timestamp": timestamp, "offset": offset,
         "leader_epoch": epoch} for p, (code, offset, epoch, timestamp) in parts]}
        for topic, parts in tp_sorted(results).items()]}


# -- Metadata --------------------------------------------------------------------------
def metadata_request(correlation_id: int, version: int, body: dict) -> MetadataRequest:
    topics = body["topics"]
    if topics is None or (version == 0 and not topics):  # v0: an empty list means every topic
        names = None
    else:
        names = tuple(t["name"] for t in topics)
    return MetadataRequest(correlation_id, names, bool(body["allow_auto_topic_creation"]))


def metadata_response(response: MetadataResponse, endpoints: Mapping[int, tuple[str, int]]) -> dict:
    """Brokers without a known endpoint are left out (a client could not reach them).
    __consumer_offsets is marked internal (MetadataCache, Topic.isInternal), which
    clients use to leave it out of pattern subscriptions."""
    brokers = [{"node_id": b, "host": endpoints[b][0], "port": endpoints[b][1], "rack": None}
               for b in sorted(response.brokers) if b in endpoints]
    topics = [{"error_code": 0, "name": topic, "is_internal": topic in INTERNAL_TOPICS,
               "topic_authorized_operations": -2147483648,
               "partitions": [{"error_code": int(m.error), "partition_index": p, "leader_id": m.leader,
                               "leader_epoch": m.leader_epoch, "replica_nodes": list(m.replicas),
                               "isr_nodes": list(m.isr), "offline_replicas": []} for p, m in parts]}
              for topic, parts in tp_sorted(response.partitions).items()]
    topics += [{"error_code": int(error), "name": topic, "is_internal": topic in INTERNAL_TOPICS, "partitions": [],
                "topic_authorized_operations": -2147483648} for topic, error in sorted(response.topic_errors.items())]
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": CLUSTER_ID,
            "controller_id": response.controller_id, "topics": topics,
            "cluster_authorized_operations": -2147483648}


# -- InitProducerId, OffsetForLeaderEpoch, CreateTopics ---------------------------------
def init_producer_id_request(correlation_id: int, body: dict) -> InitProducerIdRequest:
    return InitProducerIdRequest(correlation_id, body["transactional_id"], body["transaction_timeout_ms"])


def init_producer_id_response(response: InitProducerIdResponse) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(response.error), "producer_id": response.producer_id,
            "producer_epoch": response.producer_epoch}


def offset_for_leader_epoch_request(correlation_id: int, body: dict) -> OffsetsForLeaderEpochRequest:
    partitions = {TopicPartition(t["name"], p["partition_index"]): (p["current_leader_epoch"], p["leader_epoch"])
                  for t in body["topics"] for p in t["partitions"]}
    replica_id = body["replica_id"] if body["replica_id"] >= 0 else CONSUMER_REPLICA_ID
    return OffsetsForLeaderEpochRequest(correlation_id, replica_id, partitions)


def offset_for_leader_epoch_response(response: OffsetsForLeaderEpochResponse) -> dict:
    return {"throttle_time_ms": 0, "topics": [{"name": topic, "partitions": [
        {"error_code": int(r.error), "partition_index": p, "leader_epoch": r.leader_epoch, "end_offset": r.end_offset}
        for p, r in parts]} for topic, parts in tp_sorted(response.partitions).items()]}


def create_topics_request(correlation_id: int, body: dict) -> tuple[CreateTopicsRequest, dict[str, tuple[int, str]]]:
    """Counts, explicit replica assignments and topic configs all go to the core, which
    validates them (broker_core/topic_admin.py); nothing is answered here."""
    topics, configs, assignments = [], {}, {}
    for topic in body["topics"]:
        topics.append((topic["name"], (topic["num_partitions"], topic["replication_factor"])))
        if topic["configs"]:
            configs[topic["name"]] = {c["name"]: c["value"] for c in topic["configs"]}
        if topic["assignments"]:
            assignments[topic["name"]] = tuple((a["partition_index"], tuple(a["broker_ids"]))
                                               for a in topic["assignments"])
    return CreateTopicsRequest(correlation_id, tuple(topics), body["timeout_ms"], bool(body["validate_only"]),
                               configs, assignments), {}


def create_topics_response(response: CreateTopicsResponse | None, local_errors: Mapping[str, tuple[int, str]]) -> dict:
    """v5+ carries each created topic's counts and configs (KIP-525; the encoder leaves
    them out below v5): the core's entries, the same DescribeConfigs encodes."""
    rows: dict[str, dict] = {name: _created_topic(name, code, message)
                             for name, (code, message) in local_errors.items()}
    if response is not None:
        for name, result in response.topics.items():
            rows[name] = _created_topic(name, int(result.error), result.message, result.num_partitions,
                                        result.replication_factor, result.configs)
    return {"throttle_time_ms": 0, "topics": [rows[name] for name in sorted(rows)]}


def _created_topic(name: str, code: int, message: str | None, partitions: int = -1, replication: int = -1,
                   configs: tuple[ConfigEntry, ...] = ()) -> dict:
    return {"name": name, "error_code": code, "error_message": message, "topic_config_error_code": 0,
            "num_partitions": partitions, "replication_factor": replication,
            "configs": [config_entry_fields(entry) for entry in configs]}


def config_entry_fields(entry: ConfigEntry) -> dict:
    """The fields a config entry has in both DescribeConfigs (real_io/local_apis.py adds
    its own) and CreateTopics v5+ (CreatableTopicConfigs)."""
    return {"name": entry.name, "value": entry.value, "read_only": entry.read_only,
            "config_source": entry.source, "is_sensitive": entry.sensitive}


# -- DeleteTopics (20) and CreatePartitions (37) ----------------------------------------
def delete_topics_request(correlation_id: int, body: dict) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(correlation_id, tuple(body["topic_names"]), body["timeout_ms"])


def delete_topics_response(response: DeleteTopicsResponse | None, version: int) -> dict:
    """KafkaApis.handleDeleteTopicsRequest (2.7.0): with deletion disabled a request
    below version 3 is answered INVALID_REQUEST, TOPIC_DELETION_DISABLED from 3 on."""
    rows = []
    for name, result in sorted((response.topics if response is not None else {}).items()):
        error = result.error
        if error is ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
            error = ErrorCode.INVALID_REQUEST
        rows.append({"name": name, "error_code": int(error), "error_message": result.message})
    return {"throttle_time_ms": 0, "responses": rows}


def create_partitions_request(correlation_id: int, body: dict) -> CreatePartitionsRequest:
    topics = tuple((t["name"], t["count"],
                    None if t["assignments"] is None else tuple(tuple(a["broker_ids"]) for a in t["assignments"]))
                   for t in body["topics"])
    return CreatePartitionsRequest(correlation_id, topics, body["timeout_ms"], bool(body["validate_only"]))


def create_partitions_response(response: CreatePartitionsResponse) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"name": name, "error_code": int(result.error), "error_message": result.message}
        for name, result in sorted(response.topics.items())]}


# -- AlterConfigs (33) and IncrementalAlterConfigs (44) ---------------------------------
def alter_configs_request(correlation_id: int, body: dict, incremental: bool) -> AlterConfigsRequest:
    """AlterConfigs' entries are SETs of a set that replaces the resource's;
    IncrementalAlterConfigs' carry their operation (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)."""
    resources = tuple(
        ConfigResourceChange(r["resource_type"], r["resource_name"], tuple(
            ConfigOp(c["name"], c["config_operation"] if incremental else SET, c["value"]) for c in r["configs"]))
        for r in body["resources"])
    return AlterConfigsRequest(correlation_id, resources, bool(body["validate_only"]), incremental)


def alter_configs_response(response: AlterConfigsResponse) -> dict:
    return {"throttle_time_ms": 0, "responses": [
        {"error_code": int(r.error), "error_message": r.message, "resource_type": r.resource_type,
         "resource_name": r.name} for r in response.results]}


# -- FindCoordinator ---------------------------------------------------------------------
COORDINATOR_NOT_AVAILABLE_MESSAGE = "The coordinator is not available."  # 2.7.0 Errors.java


def find_coordinator_request(correlation_id: int, body: dict) -> FindCoordinatorRequest:
    """v0 has no key type: a group's."""
    return FindCoordinatorRequest(correlation_id, body["key"], body.get("key_type", 0))


def find_coordinator_response(response: FindCoordinatorResponse, endpoints: Mapping[int, tuple[str, int]]) -> dict:
    """KafkaApis.handleFindCoordinatorRequest (2.7.0): the coordinator's node as Metadata
    names it; a coordinator without a known endpoint is COORDINATOR_NOT_AVAILABLE with
    Node.noNode (-1, "", -1), as Kafka answers a leader with no endpoint on the listener."""
    error, message, node = int(response.error), response.message, response.node_id
    if response.error is ErrorCode.NONE and node not in endpoints:
        error, message = int(ErrorCode.COORDINATOR_NOT_AVAILABLE), COORDINATOR_NOT_AVAILABLE_MESSAGE
    if error != int(ErrorCode.NONE):
        return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "node_id": -1, "host": "",
                "port": -1}
    host, port = endpoints[node]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": node, "host": host, "port": port}
