"""The Fetch mapping's v12 fields (LastFetchedEpoch, DivergingEpoch). The served broker
offers Fetch up to v12 (real_io/protocol/apis.py SUPPORTED): followers send v12, as 2.7.0
does at IBP 2.7; a v11 request maps to -1 (no diverging-epoch check)."""
from __future__ import annotations

from broker_core.errors import ErrorCode
from broker_core.messages import FetchPartitionResult, FetchResponse
from broker_core.types import TopicPartition
from real_io import kafka_api
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey
from real_io.protocol.primitives import Reader

TP = TopicPartition("t", 0)


def _request(version: int, **partition) -> dict:
    wanted = {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 5, "log_start_offset": -1,
              "partition_max_bytes": 1 << 20, **partition}
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "t", "partitions": [wanted]}]}
    schema = apis.request_schema(ApiKey.FETCH)
    return schema.decode(version, Reader(schema.encode(version, body)))


def _response(version: int, result: FetchPartitionResult) -> tuple[bytes, dict]:
    schema = apis.response_schema(ApiKey.FETCH)
    encoded = schema.encode(version, kafka_api.fetch_response(FetchResponse(1, {TP: result})))
    return encoded, schema.decode(version, Reader(encoded))["responses"][0]["partition_responses"][0]


def test_a_v11_fetch_has_no_last_fetched_epoch_and_answers_no_diverging_epoch():
    """2.7.0 FetchRequest.json: LastFetchedEpoch is v12+; before, -1, so the core reads as
    before (Partition.readRecords with an empty lastFetchedEpoch)."""
    assert kafka_api.fetch_request(1, _request(11)).partitions[TP].last_fetched_epoch == -1
    _, answer = _response(11, FetchPartitionResult(ErrorCode.NONE, 4, 0, -1, (), 2, 3))
    assert "diverging_epoch" not in answer or answer["diverging_epoch"] == {"epoch": -1, "end_offset": -1}


def test_a_v12_last_fetched_epoch_reaches_the_core_and_a_diverging_epoch_goes_back():
    """3.0.0 FetchRequest v12 LastFetchedEpoch and FetchResponse DivergingEpoch (a tagged
    field, written only when set; consumers send -1)."""
    assert kafka_api.fetch_request(1, _request(12, last_fetched_epoch=2)).partitions[TP].last_fetched_epoch == 2
    assert kafka_api.fetch_request(1, _request(12)).partitions[TP].last_fetched_epoch == -1
    encoded, answer = _response(12, FetchPartitionResult(ErrorCode.NONE, 4, 0, -1, (), 2, 3))
    assert answer["diverging_epoch"] == {"epoch": 2, "end_offset": 3}
    plain, answer = _response(12, FetchPartitionResult(ErrorCode.NONE, 4, 0))
    assert answer["diverging_epoch"] == {"epoch": -1, "end_offset": -1} and len(plain) < len(encoded)
