"""The produce quota counts the same bytes in both bindings (issue 22): 2.7.0
KafkaApis.handleProduceRequest records ``request.header.toStruct.sizeOf +
request.sizeOfBodyInBytes``; the real broker takes the frame's length
(real_io/server.py), and the simulation computes it (quota_enforcement
``produce_request_bytes``). Both must agree for the same request."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.messages import ProduceRequest
from broker_core.quota_enforcement import produce_request_bytes
from broker_core.records import RecordBatch, Records
from broker_core.types import TopicPartition
from real_io import kafka_api
from real_io.protocol import apis, record_batch
from real_io.protocol.apis import ApiKey, RequestHeader
from tests.real_io.test_v2_sizes import as_encoded, simulated_batches

topics = st.sampled_from(["t", "topic-é", "a" * 40])


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.tuples(topics, st.integers(0, 3)), simulated_batches(max_records=8), min_size=1, max_size=4),
       st.text(max_size=20), st.sampled_from([0, 1, -1]))
def test_the_simulations_produce_size_is_the_wire_requests(partitions, client_id, acks):
    wanted = {TopicPartition(topic, p): batch for (topic, p), batch in partitions.items()}
    as_records = {tp: batch.records for tp, batch in wanted.items()}  # a workload's plain records
    by_topic: dict[str, list] = {}
    for tp, batch in sorted(wanted.items()):
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "records": record_batch.encode_batch(as_encoded(batch))})
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}
    frame = apis.encode_request(RequestHeader(ApiKey.PRODUCE, 8, 7, client_id), body)
    simulated = ProduceRequest(7, acks, 30000, wanted, client_id)
    assert produce_request_bytes(simulated) == len(frame)
    plain = ProduceRequest(7, acks, 30000, {tp: Records(list(r.values), r.keys, r.sizes, r.timestamps, r.headers)
                                            for tp, r in as_records.items()}, client_id)
    assert produce_request_bytes(plain) == sum(RecordBatch(0, -1, r).size_bytes for r in as_records.values()) + (
        len(frame) - sum(b.size_bytes for b in wanted.values()))
    # the real binding's count: the payload the server read, plus the frame's size field
    decoded = apis.decode_request(frame[4:])
    real, _ = kafka_api.produce_request(1, decoded.body, client_id, len(frame) - 4 + 4)
    assert produce_request_bytes(real) == len(frame)
