"""The core's messages between brokers to wire bodies and back, both ways.

A broker is both ends: as a sender it turns the core's requests (the controller's
LeaderAndIsr, UpdateMetadata and StopReplica; a leader's AlterIsr; a stopping broker's
ControlledShutdown; a follower's Fetch and OffsetsForLeaderEpoch) into wire bodies and
the answers it reads back into the core's responses; as a receiver it turns those
bodies into the core's requests and the core's answers into wire bodies. Every
function is pure, like kafka_api.py (which holds the receiver side of Fetch and
OffsetsForLeaderEpoch, shared with clients). The field names are Kafka 2.7.0's
(clients/src/main/resources/common/message/<Name>Request.json / Response.json).

Where the two sides do not match, and why (docs/real-io.md lists these too):

- Fields of the wire the core has no value for are sent as Kafka sends "unknown":
  BrokerEpoch -1 in LeaderAndIsr, UpdateMetadata, StopReplica and ControlledShutdown
  (AbstractControlRequest.UNKNOWN_BROKER_EPOCH: the receiver does not check it), IsNew
  false, no adding/removing replicas, a follower's LogStartOffset -1 in Fetch.
- A replica fetch response's LastStableOffset carries the leader's log end offset
  (``FetchPartitionResult.log_end_offset``), which the core's follower reads when its
  offset is out of range, where a Kafka follower would ask ListOffsets; a Kafka follower
  ignores LastStableOffset (no transactions here: for consumers it is the high watermark).
- AlterIsr's proposed states and answered states have no controller epoch on the wire;
  the controller writes its own epoch and the leader reads only the leader epoch, ISR
  and version, so the receiver fills in ``NO_CONTROLLER_EPOCH`` (-1).
- StopReplica v3 has a delete flag per partition, the core one per request: a request
  is a deletion when every partition's flag is set; a mixed one (which isrlab's
  controller never sends) only stops its partitions.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from broker_core.errors import ErrorCode
from broker_core.messages import (
    NO_LEADER_EPOCH, AlterIsrPartitionResult, AlterIsrRequest, AlterIsrResponse, ControlledShutdownRequest,
    ControlledShutdownResponse, EpochEndOffset, FetchPartitionResult, FetchRequest, FetchResponse, LeaderAndIsr,
    LeaderAndIsrRequest, LeaderAndIsrResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse,
    PartitionState, StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest, UpdateMetadataResponse)
from broker_core.topic_admin import TopicCreationError, validate_topic_name
from broker_core.types import TopicPartition
from real_io import kafka_api
from real_io.protocol import record_batch
from real_io.protocol.apis import ApiKey
from real_io.protocol.errors import ProtocolError
from real_io.wire_batch import WireBatch

Endpoints = Mapping[int, tuple[str, int]]
NO_CONTROLLER_EPOCH = -1
UNKNOWN_BROKER_EPOCH = -1  # AbstractControlRequest.UNKNOWN_BROKER_EPOCH
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10485760  # replica.fetch.response.max.bytes (Kafka's default)
PLAINTEXT = 0  # SecurityProtocol.PLAINTEXT's id
_BATCH_LENGTH_END = 12  # a batch's base offset (8) and length (4): Records.LOG_OVERHEAD

# The version a sender uses: the newest 2.7.0 defines, as a 2.7.0 broker at
# inter.broker.protocol.version 2.7 sends (Fetch 12: ReplicaFetcherThread.fetchRequestVersion).
SEND_VERSIONS: dict[ApiKey, int] = {
    ApiKey.FETCH: 12, ApiKey.OFFSET_FOR_LEADER_EPOCH: 3, ApiKey.LEADER_AND_ISR: 4, ApiKey.STOP_REPLICA: 3,
    ApiKey.UPDATE_METADATA: 6, ApiKey.CONTROLLED_SHUTDOWN: 3, ApiKey.ALTER_ISR: 0,
}


def error_code(code: int) -> ErrorCode:
    """A peer's error code as the core's; one the core does not name is Kafka's
    UNKNOWN_SERVER_ERROR, never an exception."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _grouped(partitions: Mapping[TopicPartition, Any]) -> dict[str, list]:
    return kafka_api.tp_sorted(partitions)


def _hosted(topic: str, partition: int) -> TopicPartition:
    """A partition a controller request may create or stop: a legal topic name
    (2.7.0 Topic.validate) and an index from 0. Kafka's broker trusts its controller;
    here any client can send these requests, and a name like ``../x`` must not become a
    log directory: such a request does not parse (the connection closes)."""
    try:
        validate_topic_name(topic)
    except TopicCreationError as error:
        raise ProtocolError(f"partition state for an illegal topic name: {error}") from None
    if partition < 0:
        raise ProtocolError(f"partition state for partition {partition} of {topic}")
    return TopicPartition(topic, partition)


def _endpoint(endpoints: Endpoints, broker: int) -> tuple[str, int]:
    return endpoints.get(broker, ("", -1))  # an address nobody gave: an unreachable one


# -- LeaderAndIsr (API key 4) ---------------------------------------------------------------
def _partition_state(topic: str, partition: int, state: PartitionState) -> dict:
    lai = state.leader_and_isr
    return {"topic_name": topic, "partition_index": partition, "controller_epoch": lai.controller_epoch,
            "leader": lai.leader, "leader_epoch": lai.leader_epoch, "isr": list(lai.isr),
            "zk_version": lai.zk_version, "replicas": list(state.replicas), "adding_replicas": [],
            "removing_replicas": [], "is_new": False, "offline_replicas": []}


def _states_body(partitions: Mapping[TopicPartition, PartitionState], keep: tuple[str, ...]) -> tuple[list, list]:
    """The partition states both ways the versions group them: ungrouped (each naming its
    topic: LeaderAndIsr v0-1, UpdateMetadata v0-4) and by topic (later versions); the
    encoder writes the one the version has. ``keep``: the state fields the API defines."""
    ungrouped, by_topic = [], []
    for topic, parts in _grouped(partitions).items():
        states = [{k: v for k, v in _partition_state(topic, p, s).items() if k in keep} for p, s in parts]
        ungrouped += states
        by_topic.append({"topic_name": topic, "partition_states": states})
    return ungrouped, by_topic


_LEADER_AND_ISR_STATE = ("topic_name", "partition_index", "controller_epoch", "leader", "leader_epoch", "isr",
                         "zk_version", "replicas", "adding_replicas", "removing_replicas", "is_new")
_UPDATE_METADATA_STATE = ("topic_name", "partition_index", "controller_epoch", "leader", "leader_epoch", "isr",
                          "zk_version", "replicas", "offline_replicas")


def _states_from(body: dict, grouped_from: int, version: int) -> dict[TopicPartition, PartitionState]:
    if version >= grouped_from:
        rows = [(t["topic_name"], s) for t in body["topic_states"] for s in t["partition_states"]]
    else:
        rows = [(s["topic_name"], s) for s in body["ungrouped_partition_states"]]
    return {_hosted(topic, s["partition_index"]): PartitionState(
        LeaderAndIsr(s["leader"], s["leader_epoch"], tuple(s["isr"]), s["controller_epoch"], s["zk_version"]),
        tuple(s["replicas"])) for topic, s in rows}


def leader_and_isr_request_body(request: LeaderAndIsrRequest, endpoints: Endpoints) -> dict:
    """LiveLeaders name each leader's host and port: the sender's advertised ones."""
    ungrouped, by_topic = _states_body(request.partitions, _LEADER_AND_ISR_STATE)
    return {"controller_id": request.controller_id, "controller_epoch": request.controller_epoch,
            "broker_epoch": UNKNOWN_BROKER_EPOCH, "ungrouped_partition_states": ungrouped, "topic_states": by_topic,
            "live_leaders": [{"broker_id": b, "host_name": _endpoint(endpoints, b)[0],
                              "port": _endpoint(endpoints, b)[1]} for b in request.live_leaders]}


def leader_and_isr_request(correlation_id: int, version: int, body: dict) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(correlation_id, body["controller_id"], body["controller_epoch"],
                               _states_from(body, 2, version), tuple(b["broker_id"] for b in body["live_leaders"]))


def _partition_errors(errors: Mapping[TopicPartition, ErrorCode]) -> list:
    return [{"topic_name": topic, "partition_index": p, "error_code": int(code)}
            for topic, parts in _grouped(errors).items() for p, code in parts]


def _errors_from(rows: list) -> dict[TopicPartition, ErrorCode]:
    return {TopicPartition(r["topic_name"], r["partition_index"]): error_code(r["error_code"]) for r in rows}


def leader_and_isr_response_body(response: LeaderAndIsrResponse) -> dict:
    return {"error_code": int(response.error), "partition_errors": _partition_errors(response.partitions)}


def leader_and_isr_response(correlation_id: int, version: int, body: dict) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(correlation_id, error_code(body["error_code"]), _errors_from(body["partition_errors"]))


# -- UpdateMetadata (API key 6) -------------------------------------------------------------
def update_metadata_request_body(request: UpdateMetadataRequest, endpoints: Endpoints) -> dict:
    """LiveBrokers carry the sender's advertised endpoint of each broker (one PLAINTEXT
    listener). The receiver keeps only the ids: the addresses its Metadata answers name
    are its own --advertise map (docs/real-io.md)."""
    ungrouped, by_topic = _states_body(request.partitions, _UPDATE_METADATA_STATE)
    brokers = []
    for broker in request.live_brokers:
        host, port = _endpoint(endpoints, broker)
        brokers.append({"id": broker, "v0_host": host, "v0_port": port, "rack": None, "endpoints": [
            {"port": port, "host": host, "listener": "PLAINTEXT", "security_protocol": PLAINTEXT}]})
    return {"controller_id": request.controller_id, "controller_epoch": request.controller_epoch,
            "broker_epoch": UNKNOWN_BROKER_EPOCH, "ungrouped_partition_states": ungrouped, "topic_states": by_topic,
            "live_brokers": brokers}


def update_metadata_request(correlation_id: int, version: int, body: dict) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(correlation_id, body["controller_id"], body["controller_epoch"],
                                 tuple(b["id"] for b in body["live_brokers"]), _states_from(body, 5, version))


def update_metadata_response_body(response: UpdateMetadataResponse) -> dict:
    return {"error_code": int(response.error)}


def update_metadata_response(correlation_id: int, version: int, body: dict) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(correlation_id, error_code(body["error_code"]))


# -- StopReplica (API key 5) ----------------------------------------------------------------
def stop_replica_request_body(request: StopReplicaRequest, endpoints: Endpoints) -> dict:
    grouped = _grouped(request.partitions)
    delete = request.delete_partitions
    return {"controller_id": request.controller_id, "controller_epoch": request.controller_epoch,
            "broker_epoch": UNKNOWN_BROKER_EPOCH, "delete_partitions": delete,
            "ungrouped_partitions": [{"topic_name": t, "partition_index": p} for t, ps in grouped.items()
                                     for p, _ in ps],
            "topics": [{"name": t, "partition_indexes": [p for p, _ in ps]} for t, ps in grouped.items()],
            "topic_states": [{"topic_name": t, "partition_states": [
                {"partition_index": p, "leader_epoch": epoch, "delete_partition": delete} for p, epoch in ps]}
                for t, ps in grouped.items()]}


def stop_replica_request(correlation_id: int, version: int, body: dict) -> StopReplicaRequest:
    """Before v3 no leader epochs: NO_LEADER_EPOCH, which the core does not check."""
    if version >= 3:
        states = [(t["topic_name"], s) for t in body["topic_states"] for s in t["partition_states"]]
        partitions = {_hosted(t, s["partition_index"]): s["leader_epoch"] for t, s in states}
        # a mixed request (isrlab's controller sends none) only stops: deleting a
        # partition that was not asked for would lose its log
        delete = bool(states) and all(s["delete_partition"] for _, s in states)
    else:
        if version >= 1:
            names = [(t["name"], p) for t in body["topics"] for p in t["partition_indexes"]]
        else:
            names = [(p["topic_name"], p["partition_index"]) for p in body["ungrouped_partitions"]]
        partitions = {_hosted(t, p): NO_LEADER_EPOCH for t, p in names}
        delete = bool(body["delete_partitions"])
    return StopReplicaRequest(correlation_id, body["controller_id"], body["controller_epoch"], delete, partitions)


def stop_replica_response_body(response: StopReplicaResponse) -> dict:
    return {"error_code": int(response.error), "partition_errors": _partition_errors(response.partitions)}


def stop_replica_response(correlation_id: int, version: int, body: dict) -> StopReplicaResponse:
    return StopReplicaResponse(correlation_id, error_code(body["error_code"]), _errors_from(body["partition_errors"]))


# -- ControlledShutdown (API key 7) ---------------------------------------------------------
def controlled_shutdown_request_body(request: ControlledShutdownRequest, endpoints: Endpoints) -> dict:
    return {"broker_id": request.broker_id, "broker_epoch": UNKNOWN_BROKER_EPOCH}


def controlled_shutdown_request(correlation_id: int, version: int, body: dict) -> ControlledShutdownRequest:
    return ControlledShutdownRequest(correlation_id, body["broker_id"])


def controlled_shutdown_response_body(response: ControlledShutdownResponse) -> dict:
    return {"error_code": int(response.error), "remaining_partitions": [
        {"topic_name": tp.topic, "partition_index": tp.partition} for tp in response.remaining_partitions]}


def controlled_shutdown_response(correlation_id: int, version: int, body: dict) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(correlation_id, error_code(body["error_code"]), tuple(
        TopicPartition(r["topic_name"], r["partition_index"]) for r in body["remaining_partitions"]))


# -- AlterIsr (API key 56) ------------------------------------------------------------------
def alter_isr_request_body(request: AlterIsrRequest, endpoints: Endpoints) -> dict:
    return {"broker_id": request.broker_id, "broker_epoch": request.broker_epoch, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "leader_epoch": s.leader_epoch, "new_isr": list(s.isr),
                                        "current_isr_version": s.zk_version} for p, s in parts]}
        for topic, parts in _grouped(request.partitions).items()]}


def alter_isr_request(correlation_id: int, version: int, body: dict) -> AlterIsrRequest:
    """The proposing leader is the sender (2.7.0 AlterIsrManager sends its own partitions)."""
    leader = body["broker_id"]
    return AlterIsrRequest(correlation_id, leader, body["broker_epoch"], {
        TopicPartition(t["name"], p["partition_index"]): LeaderAndIsr(
            leader, p["leader_epoch"], tuple(p["new_isr"]), NO_CONTROLLER_EPOCH, p["current_isr_version"])
        for t in body["topics"] for p in t["partitions"]})


def alter_isr_response_body(response: AlterIsrResponse) -> dict:
    topics = []
    for topic, parts in _grouped(response.partitions).items():
        rows = []
        for p, result in parts:
            state = result.leader_and_isr or LeaderAndIsr(-1, -1, (), NO_CONTROLLER_EPOCH, -1)
            rows.append({"partition_index": p, "error_code": int(result.error), "leader_id": state.leader,
                         "leader_epoch": state.leader_epoch, "isr": list(state.isr),
                         "current_isr_version": state.zk_version})
        topics.append({"name": topic, "partitions": rows})
    return {"throttle_time_ms": 0, "error_code": int(response.error), "topics": topics}


def alter_isr_response(correlation_id: int, version: int, body: dict) -> AlterIsrResponse:
    """A partition's state only with no error, as 2.7.0 AlterIsrManager reads it."""
    results = {}
    for t in body["topics"]:
        for p in t["partitions"]:
            error = error_code(p["error_code"])
            state = None if error is not ErrorCode.NONE else LeaderAndIsr(
                p["leader_id"], p["leader_epoch"], tuple(p["isr"]), NO_CONTROLLER_EPOCH, p["current_isr_version"])
            results[TopicPartition(t["name"], p["partition_index"])] = AlterIsrPartitionResult(error, state)
    return AlterIsrResponse(correlation_id, error_code(body["error_code"]), results)


# -- a follower's Fetch (API key 1) and OffsetsForLeaderEpoch (API key 23) ---------------------
def fetch_request_body(request: FetchRequest, endpoints: Endpoints) -> dict:
    """A sessionless full fetch (session id 0, epoch -1: FetchMetadata.FINAL_EPOCH), as the
    leader keeps no sessions. The receiver is kafka_api.fetch_request."""
    return {"replica_id": request.replica_id, "max_wait_ms": request.max_wait_ms, "min_bytes": request.min_bytes,
            "max_bytes": REPLICA_FETCH_RESPONSE_MAX_BYTES, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "topics": [
                {"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": w.current_leader_epoch, "fetch_offset": w.fetch_offset,
                     "last_fetched_epoch": w.last_fetched_epoch, "log_start_offset": -1,
                     "partition_max_bytes": w.max_bytes} for p, w in parts]}
                for topic, parts in _grouped(request.partitions).items()]}


def fetched_batches(data: bytes | bytearray | memoryview | None) -> tuple[WireBatch, ...]:
    """The whole batches of a fetch response's records, each validated as a producer's
    (CRC-32C, codec, framing): a follower stores them as they are. A batch cut short at
    the end (a leader may send a partial last batch when a size limit falls inside it)
    is left out, as Kafka's ByteBufferLogInputStream stops at one; anything else wrong
    raises ProtocolError."""
    if not data:
        return ()
    view = memoryview(data)
    batches, position = [], 0
    while len(view) - position >= _BATCH_LENGTH_END:
        length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        if length < record_batch.HEADER_BYTES - _BATCH_LENGTH_END:
            raise ProtocolError(f"record batch length {length} is below the header's size")
        if len(view) - position < _BATCH_LENGTH_END + length:
            break
        batch, position = WireBatch.parse(view, position, True)
        batches.append(batch)
    return tuple(batches)


def fetch_response(correlation_id: int, version: int, body: dict) -> FetchResponse:
    """A partition whose records do not validate is CORRUPT_MESSAGE with no batches: the
    follower backs off and fetches again (2.7.0 AbstractFetcherThread marks the
    partition failed on a CorruptRecordException). LastStableOffset is the leader's log
    end offset (module docstring)."""
    results = {}
    for topic in body["responses"]:
        for r in topic["partition_responses"]:
            tp = TopicPartition(topic["topic"], r["partition"])
            try:
                batches = fetched_batches(r["record_set"])
            except ProtocolError:
                results[tp] = FetchPartitionResult(ErrorCode.CORRUPT_MESSAGE)
                continue
            diverging = r["diverging_epoch"]
            results[tp] = FetchPartitionResult(error_code(r["error_code"]), r["high_watermark"], r["log_start_offset"],
                                               r["last_stable_offset"], batches, diverging["epoch"],
                                               diverging["end_offset"])
    return FetchResponse(correlation_id, results, body["throttle_time_ms"])


def offsets_for_leader_epoch_request_body(request: OffsetsForLeaderEpochRequest, endpoints: Endpoints) -> dict:
    """The receiver is kafka_api.offset_for_leader_epoch_request."""
    return {"replica_id": request.replica_id, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": current, "leader_epoch": epoch}
                                       for p, (current, epoch) in parts]}
        for topic, parts in _grouped(request.partitions).items()]}


def offsets_for_leader_epoch_response(correlation_id: int, version: int, body: dict) -> OffsetsForLeaderEpochResponse:
    return OffsetsForLeaderEpochResponse(correlation_id, {
        TopicPartition(t["name"], p["partition_index"]): EpochEndOffset(error_code(p["error_code"]), p["leader_epoch"],
                                                                        p["end_offset"])
        for t in body["topics"] for p in t["partitions"]})


# -- the tables the runtime and the server use ------------------------------------------------
# Which connection a request goes on, as Kafka keeps them apart: a follower's
# ReplicaFetcherThread, the controller's RequestSendThread per broker, and a broker's
# BrokerToControllerChannelManager, so a long-poll fetch never delays a LeaderAndIsr.
FETCHER, CONTROLLER, TO_CONTROLLER = "replica-fetcher", "controller", "to-controller"

OUTBOUND: dict[type, tuple[ApiKey, str, Callable[[Any, Endpoints], dict]]] = {
    FetchRequest: (ApiKey.FETCH, FETCHER, fetch_request_body),
    OffsetsForLeaderEpochRequest: (ApiKey.OFFSET_FOR_LEADER_EPOCH, FETCHER, offsets_for_leader_epoch_request_body),
    LeaderAndIsrRequest: (ApiKey.LEADER_AND_ISR, CONTROLLER, leader_and_isr_request_body),
    UpdateMetadataRequest: (ApiKey.UPDATE_METADATA, CONTROLLER, update_metadata_request_body),
    StopReplicaRequest: (ApiKey.STOP_REPLICA, CONTROLLER, stop_replica_request_body),
    ControlledShutdownRequest: (ApiKey.CONTROLLED_SHUTDOWN, TO_CONTROLLER, controlled_shutdown_request_body),
    AlterIsrRequest: (ApiKey.ALTER_ISR, TO_CONTROLLER, alter_isr_request_body),
}

# A response body read back by the sender, to the core's response.
RESPONSES: dict[int, Callable[[int, int, dict], Any]] = {
    ApiKey.FETCH: fetch_response, ApiKey.OFFSET_FOR_LEADER_EPOCH: offsets_for_leader_epoch_response,
    ApiKey.LEADER_AND_ISR: leader_and_isr_response, ApiKey.UPDATE_METADATA: update_metadata_response,
    ApiKey.STOP_REPLICA: stop_replica_response, ApiKey.CONTROLLED_SHUTDOWN: controlled_shutdown_response,
    ApiKey.ALTER_ISR: alter_isr_response,
}

# The receiver's side of the controller APIs: (wire body -> core request, core response -> wire body).
INBOUND: dict[int, tuple[Callable[[int, int, dict], Any], Callable[[Any], dict]]] = {
    ApiKey.LEADER_AND_ISR: (leader_and_isr_request, leader_and_isr_response_body),
    ApiKey.UPDATE_METADATA: (update_metadata_request, update_metadata_response_body),
    ApiKey.STOP_REPLICA: (stop_replica_request, stop_replica_response_body),
    ApiKey.CONTROLLED_SHUTDOWN: (controlled_shutdown_request, controlled_shutdown_response_body),
    ApiKey.ALTER_ISR: (alter_isr_request, alter_isr_response_body),
}
