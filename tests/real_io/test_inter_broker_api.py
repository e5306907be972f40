"""Round trips of every inter-broker message: the core's message -> wire body -> frame
bytes (header included) -> wire body -> the core's message, equal to the original, at
every offered version. Kafka 2.7.0's definitions are the spec
(clients/src/main/resources/common/message/{LeaderAndIsr,UpdateMetadata,StopReplica,
ControlledShutdown,AlterIsr,Fetch,OffsetForLeaderEpoch}{Request,Response}.json); the
deviations named in real_io/inter_broker_api.py's docstring are asserted as such."""
from __future__ import annotations

import dataclasses

import pytest

from broker_core.errors import ErrorCode
from broker_core.messages import (
    NO_LEADER_EPOCH, AlterIsrPartitionResult, AlterIsrRequest, AlterIsrResponse, ControlledShutdownRequest,
    ControlledShutdownResponse, EpochEndOffset, FetchPartition, FetchPartitionResult, FetchRequest, FetchResponse,
    LeaderAndIsr, LeaderAndIsrRequest, LeaderAndIsrResponse, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, PartitionState, StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest,
    UpdateMetadataResponse)
from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io import inter_broker_api as iba
from real_io import kafka_api
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey
from real_io.protocol.errors import ProtocolError
from real_io.protocol.record_batch import encode_batch

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
ENDPOINTS = {1: ("127.0.0.1", 9091), 2: ("127.0.0.1", 9092), 3: ("10.0.0.3", 9093)}


def _versions(key: ApiKey) -> list[int]:
    lo, hi = apis.SUPPORTED[key]
    return list(range(lo, hi + 1))


def _states() -> dict:
    return {A0: PartitionState(LeaderAndIsr(1, 4, (1, 2, 3), 7, 12), (1, 2, 3)),
            A1: PartitionState(LeaderAndIsr(2, 0, (2,), 6, 0), (2, 3, 1)),
            B0: PartitionState(LeaderAndIsr(-1, 9, (3,), 7, 3), (3,))}


def _request_round_trip(message, version: int, receive):
    key, _, encode = iba.OUTBOUND[type(message)]
    frame = apis.encode_request(apis.RequestHeader(key, version, 77, "broker-1"), encode(message, ENDPOINTS))
    request = apis.decode_request(frame[4:])
    assert (request.header.api_key, request.header.api_version) == (key, version)
    return receive(message.correlation_id, version, request.body)


def _inbound(key: ApiKey):
    return iba.INBOUND[key][0]


def _client_api(receive):
    """kafka_api's receivers (shared with clients) take no version."""
    return lambda correlation_id, version, body: receive(correlation_id, body)


def _response_round_trip(key: ApiKey, version: int, body: dict, correlation_id: int):
    frame = apis.encode_response(key, version, correlation_id, body)
    correlation_id, decoded = apis.decode_response(key, version, frame[4:])
    return iba.RESPONSES[key](correlation_id, version, decoded)


@pytest.mark.parametrize("version", _versions(ApiKey.LEADER_AND_ISR))
def test_leader_and_isr_round_trips(version):
    """LeaderAndIsrRequest.json: UngroupedPartitionStates v0-1, TopicStates v2+; LiveLeaders."""
    request = LeaderAndIsrRequest(5, 1, 7, _states(), (1, 2))
    assert _request_round_trip(request, version, _inbound(ApiKey.LEADER_AND_ISR)) == request
    response = LeaderAndIsrResponse(5, ErrorCode.NONE, {A0: ErrorCode.NONE, B0: ErrorCode.FENCED_LEADER_EPOCH})
    assert _response_round_trip(ApiKey.LEADER_AND_ISR, version, iba.leader_and_isr_response_body(response),
                                response.correlation_id) == response


def test_leader_and_isr_names_the_live_leaders_advertised_endpoints():
    body = iba.leader_and_isr_request_body(LeaderAndIsrRequest(1, 1, 7, _states(), (1, 3)), ENDPOINTS)
    assert body["live_leaders"] == [{"broker_id": 1, "host_name": "127.0.0.1", "port": 9091},
                                    {"broker_id": 3, "host_name": "10.0.0.3", "port": 9093}]


@pytest.mark.parametrize("version", _versions(ApiKey.UPDATE_METADATA))
def test_update_metadata_round_trips(version):
    """UpdateMetadataRequest.json: UngroupedPartitionStates v0-4, TopicStates v5+;
    LiveBrokers with V0Host/V0Port (v0) or Endpoints (v1+)."""
    request = UpdateMetadataRequest(9, 2, 8, (1, 2, 3), _states())
    assert _request_round_trip(request, version, _inbound(ApiKey.UPDATE_METADATA)) == request
    response = UpdateMetadataResponse(9, ErrorCode.STALE_CONTROLLER_EPOCH)
    assert _response_round_trip(ApiKey.UPDATE_METADATA, version, iba.update_metadata_response_body(response),
                                response.correlation_id) == response


def test_update_metadata_carries_every_live_brokers_endpoint():
    body = iba.update_metadata_request_body(UpdateMetadataRequest(1, 1, 1, (2, 4), {}), ENDPOINTS)
    assert [(b["id"], b["endpoints"][0]["host"], b["endpoints"][0]["port"]) for b in body["live_brokers"]] == [
        (2, "127.0.0.1", 9092), (4, "", -1)]  # broker 4: no address known to the sender


@pytest.mark.parametrize("version", _versions(ApiKey.STOP_REPLICA))
def test_stop_replica_round_trips(version):
    """StopReplicaRequest.json: UngroupedPartitions v0, Topics v1-2, TopicStates with a
    LeaderEpoch per partition v3+ (KIP-570); before v3 the epochs are not on the wire."""
    with_epochs = StopReplicaRequest(3, 1, 7, False, {A0: 4, A1: 0, B0: 9})
    without = StopReplicaRequest(3, 1, 7, False, {A0: NO_LEADER_EPOCH, A1: NO_LEADER_EPOCH, B0: NO_LEADER_EPOCH})
    receive = _inbound(ApiKey.STOP_REPLICA)
    assert _request_round_trip(without, version, receive) == without
    expected = with_epochs if version >= 3 else without
    assert _request_round_trip(with_epochs, version, receive) == expected
    deleting = dataclasses.replace(without, delete_partitions=True)
    assert _request_round_trip(deleting, version, receive) == deleting
    response = StopReplicaResponse(3, ErrorCode.NONE, {A0: ErrorCode.NONE, A1: ErrorCode.FENCED_LEADER_EPOCH})
    assert _response_round_trip(ApiKey.STOP_REPLICA, version, iba.stop_replica_response_body(response),
                                response.correlation_id) == response


def test_stop_replica_with_mixed_delete_flags_only_stops():
    """A v3 request deleting some of its partitions only (Kafka's controller may batch
    them so; isrlab's never does) deletes none: deleting a partition that was not asked
    for would lose its log. Every flag set is a deletion."""
    body = iba.stop_replica_request_body(StopReplicaRequest(1, 1, 1, False, {A0: 1, A1: 1}), ENDPOINTS)
    body["topic_states"][0]["partition_states"][1]["delete_partition"] = True
    assert iba.stop_replica_request(1, 3, body).delete_partitions is False
    body["topic_states"][0]["partition_states"][0]["delete_partition"] = True
    assert iba.stop_replica_request(1, 3, body).delete_partitions is True


@pytest.mark.parametrize("version", _versions(ApiKey.CONTROLLED_SHUTDOWN))
def test_controlled_shutdown_round_trips(version):
    request = ControlledShutdownRequest(11, 3)
    assert _request_round_trip(request, version, _inbound(ApiKey.CONTROLLED_SHUTDOWN)) == request
    response = ControlledShutdownResponse(11, ErrorCode.NONE, (B0, A1, A0))  # order kept
    assert _response_round_trip(ApiKey.CONTROLLED_SHUTDOWN, version,
                                iba.controlled_shutdown_response_body(response), response.correlation_id) == response


def test_controlled_shutdown_v0_is_not_offered():
    """v0 alone has request header v0 (no client id): not offered."""
    assert not apis.is_supported(ApiKey.CONTROLLED_SHUTDOWN, 0)


def test_alter_isr_round_trips_but_for_the_controller_epoch_the_wire_lacks():
    """AlterIsrRequest.json / AlterIsrResponse.json v0: no controller epoch; the leader is
    the sender (BrokerId)."""
    proposed = {A0: LeaderAndIsr(2, 4, (2, 3), 7, 12), B0: LeaderAndIsr(2, 1, (2,), 6, 3)}
    request = AlterIsrRequest(13, 2, 72057594037927936 + 5, proposed)
    received = _request_round_trip(request, 0, _inbound(ApiKey.ALTER_ISR))
    assert received == dataclasses.replace(request, partitions={
        tp: dataclasses.replace(s, controller_epoch=iba.NO_CONTROLLER_EPOCH) for tp, s in proposed.items()})
    response = AlterIsrResponse(13, ErrorCode.NONE, {
        A0: AlterIsrPartitionResult(ErrorCode.NONE, LeaderAndIsr(2, 4, (2, 3), iba.NO_CONTROLLER_EPOCH, 13)),
        B0: AlterIsrPartitionResult(ErrorCode.FENCED_LEADER_EPOCH)})
    assert _response_round_trip(ApiKey.ALTER_ISR, 0, iba.alter_isr_response_body(response),
                                response.correlation_id) == response
    fenced = AlterIsrResponse(13, ErrorCode.STALE_BROKER_EPOCH)
    assert _response_round_trip(ApiKey.ALTER_ISR, 0, iba.alter_isr_response_body(fenced),
                                fenced.correlation_id) == fenced


def _batch(base_offset: int, values: list[str], epoch: int = 3) -> bytes:
    return encode_batch(RecordBatch(base_offset, epoch, Records(values, [None] * len(values), 0,
                                                                [100 + i for i in range(len(values))]),
                                    first_timestamp=100, max_timestamp=99 + len(values)))


def _plain(response: FetchResponse) -> FetchResponse:
    """Batches as their bytes, to compare."""
    return FetchResponse(response.correlation_id, {
        tp: dataclasses.replace(r, batches=tuple(bytes(b.encode()) for b in r.batches))
        for tp, r in response.partitions.items()}, response.throttle_time_ms)


@pytest.mark.parametrize("version", [11, 12])
def test_replica_fetch_round_trips_with_the_log_end_offset_in_last_stable_offset(version):
    """FetchRequest.json: ReplicaId, CurrentLeaderEpoch, LastFetchedEpoch (v12);
    FetchResponse.json: LastStableOffset carries the leader's log end offset, DivergingEpoch
    (v12, tagged). The follower's batches come back as WireBatch objects."""
    last_fetched = 3 if version >= 12 else -1
    request = FetchRequest(21, 2, 500, 1, {A0: FetchPartition(10, 4, 1048576, last_fetched),
                                           B0: FetchPartition(0, 1, 65536, -1)})
    # A follower sends replica.fetch.response.max.bytes as MaxBytes; the leader reads it
    # back (and applies only the partitions' limits to a follower: replica_manager)
    received = dataclasses.replace(request, max_bytes=iba.REPLICA_FETCH_RESPONSE_MAX_BYTES)
    assert _request_round_trip(request, version, _client_api(kafka_api.fetch_request)) == received
    batches = iba.fetched_batches(_batch(10, ["x", "y"]) + _batch(12, ["z"]))
    response = FetchResponse(21, {
        A0: FetchPartitionResult(ErrorCode.NONE, 12, 0, 13, batches),
        A1: FetchPartitionResult(ErrorCode.OFFSET_OUT_OF_RANGE, 40, 5, 57),
        B0: FetchPartitionResult(ErrorCode.NONE, 8, 0, 9, (), *((2, 7) if version >= 12 else (-1, -1)))})
    body = kafka_api.fetch_response(response, replica=True)
    assert body["responses"][0]["partition_responses"][1]["last_stable_offset"] == 57
    received = _response_round_trip(ApiKey.FETCH, version, body, 21)
    assert _plain(received) == _plain(response)
    assert [(b.base_offset, b.next_offset, b.leader_epoch) for b in received.partitions[A0].batches] == [
        (10, 12, 3), (12, 13, 3)]


def test_a_consumer_fetch_answers_the_high_watermark_as_last_stable_offset():
    body = kafka_api.fetch_response(FetchResponse(1, {A0: FetchPartitionResult(ErrorCode.NONE, 12, 0, -1)}))
    assert body["responses"][0]["partition_responses"][0]["last_stable_offset"] == 12


def test_a_partial_last_batch_is_left_out_and_a_corrupt_one_fails_the_partition():
    """ByteBufferLogInputStream stops at a batch cut short; a bad CRC is CORRUPT_MESSAGE."""
    whole = _batch(0, ["a"]) + _batch(1, ["b", "c"])
    assert [b.base_offset for b in iba.fetched_batches(whole + _batch(3, ["d"])[:30])] == [0, 1]
    assert [b.base_offset for b in iba.fetched_batches(whole + b"\x00" * 5)] == [0, 1]
    corrupt = bytearray(whole)
    corrupt[-1] ^= 0xFF
    body = kafka_api.fetch_response(FetchResponse(1, {A0: FetchPartitionResult(ErrorCode.NONE, 3, 0, 3)}), True)
    body["responses"][0]["partition_responses"][0]["record_set"] = bytes(corrupt)
    answer = iba.fetch_response(1, 12, body)
    assert answer.partitions[A0] == FetchPartitionResult(ErrorCode.CORRUPT_MESSAGE)


@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offsets_for_leader_epoch_round_trips(version):
    """OffsetForLeaderEpochRequest.json: ReplicaId v3+, CurrentLeaderEpoch v2+."""
    request = OffsetsForLeaderEpochRequest(31, 3, {A0: (5, 4), B0: (2, 2)})
    received = _request_round_trip(request, version, _client_api(kafka_api.offset_for_leader_epoch_request))
    expected = request
    if version < 3:  # no ReplicaId: a consumer's
        expected = dataclasses.replace(expected, replica_id=-1)
    if version < 2:  # no CurrentLeaderEpoch: -1, not checked
        expected = dataclasses.replace(expected, partitions={tp: (-1, e) for tp, (_, e) in request.partitions.items()})
    assert received == expected
    response = OffsetsForLeaderEpochResponse(31, {A0: EpochEndOffset(ErrorCode.NONE, 4, 120),
                                                  B0: EpochEndOffset(ErrorCode.FENCED_LEADER_EPOCH, -1, -1)})
    got = _response_round_trip(ApiKey.OFFSET_FOR_LEADER_EPOCH, version,
                               kafka_api.offset_for_leader_epoch_response(response), response.correlation_id)
    if version == 0:  # no LeaderEpoch in v0 answers: -1
        response = OffsetsForLeaderEpochResponse(31, {tp: dataclasses.replace(r, leader_epoch=-1)
                                                      for tp, r in response.partitions.items()})
    assert got == response


@pytest.mark.parametrize("topic, partition", [("../x", 0), ("", 0), ("a", -1), ("a" * 250, 0)])
def test_a_controller_request_naming_an_illegal_partition_does_not_parse(topic, partition):
    """Topic.validate (2.7.0): such a name never becomes a log directory."""
    states = {TopicPartition(topic, partition): PartitionState(LeaderAndIsr(1, 1, (1,), 1, 0), (1,))}
    for request in (LeaderAndIsrRequest(1, 1, 1, states, (1,)), UpdateMetadataRequest(1, 1, 1, (1,), states),
                    StopReplicaRequest(1, 1, 1, False, {TopicPartition(topic, partition): 1})):
        key, _, encode = iba.OUTBOUND[type(request)]
        for version in _versions(key):
            with pytest.raises(ProtocolError):
                iba.INBOUND[key][0](1, version, encode(request, ENDPOINTS))


def test_an_error_code_the_core_does_not_name_is_unknown_server_error():
    body = {"error_code": 10000, "partition_errors": [{"topic_name": "a", "partition_index": 0, "error_code": -7}]}
    response = iba.leader_and_isr_response(1, 4, body)
    assert response.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert response.partitions == {A0: ErrorCode.UNKNOWN_SERVER_ERROR}


def test_every_core_request_between_brokers_has_a_wire_mapping():
    """Each request type the core sends to another broker is in OUTBOUND, with a
    decoder for its answer, and every controller API has its receiving side."""
    sent = {FetchRequest, OffsetsForLeaderEpochRequest, LeaderAndIsrRequest, UpdateMetadataRequest,
            StopReplicaRequest, ControlledShutdownRequest, AlterIsrRequest}
    assert set(iba.OUTBOUND) == sent
    assert {key for key, _, _ in iba.OUTBOUND.values()} == set(iba.RESPONSES)
    assert set(iba.INBOUND) == {ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA,
                                ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_ISR}
    for key, version in iba.SEND_VERSIONS.items():
        assert apis.is_supported(key, version)
