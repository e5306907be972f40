"""Cross-checks of the codec against kafka-python 3.x's two codecs: its hand-written
protocol classes (``kafka.protocol.old``) and its classes generated from Kafka's newer
JSON definitions (``kafka.protocol.{metadata,producer,consumer,admin}``): what one side
encodes, the other decodes and re-encodes to the same bytes. The spec both follow is apache/kafka's
clients/src/main/resources/common/message/*.json (2.7.0)."""
from __future__ import annotations

import importlib
import pkgutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.records import RecordBatch, Records
from real_io.protocol import apis
from real_io.protocol.record_batch import decode_batches, encode_batch
from real_io.protocol.schemas import MESSAGES
from tests.real_io.protocol_strategies import message_value

_MODULES = {0: ("produce", "Produce"), 1: ("fetch", "Fetch"), 2: ("list_offsets", "ListOffsets"),
            3: ("metadata", "Metadata"), 10: ("find_coordinator", "FindCoordinator"),
            18: ("api_versions", "ApiVersions"), 19: ("admin", "CreateTopics"), 20: ("admin", "DeleteTopics"),
            22: ("init_producer_id", "InitProducerId"), 23: ("offset_for_leader_epoch", "OffsetForLeaderEpoch"),
            32: ("admin", "DescribeConfigs")}


def kafka_python_classes(api_key: int, is_response: bool) -> list:
    module_name, name = _MODULES[api_key]
    module = importlib.import_module(f"kafka.protocol.old.{module_name}")
    return getattr(module, name + ("Response" if is_response else "Request"))


# kafka-python is a client: it has no classes for the inter-broker APIs (LeaderAndIsr,
# StopReplica, UpdateMetadata, ControlledShutdown, AlterIsr), which
# test_inter_broker_api.py round-trips instead.
CLIENT_SUPPORTED = {key: versions for key, versions in apis.SUPPORTED.items() if key in _MODULES}
CASES = [(key, version, is_response) for key, (lo, hi) in sorted(CLIENT_SUPPORTED.items())
         for is_response in (False, True) for version in range(lo, hi + 1)
         if version < len(kafka_python_classes(key, is_response))]


def test_kafka_python_covers_most_of_the_offered_versions():
    assert len(CASES) >= 90
    assert {(key, is_response) for key, _, is_response in ALL_CASES} <= set(JSON_DRIVEN)


@pytest.mark.parametrize("key, version, is_response", CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_decodes_our_encoding_and_reencodes_the_same_bytes(key, version, is_response, data):
    message = MESSAGES[(key, is_response)]
    value = data.draw(message_value(message, version))
    if key == apis.ApiKey.API_VERSIONS and is_response:
        value["error_code"] = 0  # on an error kafka-python reads v0, as Kafka answers one (below)
    ours = message.encode(version, value)
    theirs = kafka_python_classes(key, is_response)[version].decode(ours)
    assert theirs.encode() == ours
    assert message.decode(version, theirs.encode()) == value


def _json_driven_classes() -> dict:
    found = {}
    for package_name in ("metadata", "producer", "consumer", "admin"):
        package = importlib.import_module(f"kafka.protocol.{package_name}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"kafka.protocol.{package_name}.{info.name}")
            for name in dir(module):
                cls = getattr(module, name)
                if name.endswith(("Request", "Response")) and isinstance(cls, type) and hasattr(cls, "is_request"):
                    found[(cls.API_KEY, not cls.is_request())] = cls
    return found


JSON_DRIVEN = _json_driven_classes()
ALL_CASES = [(key, version, is_response) for key, (lo, hi) in sorted(CLIENT_SUPPORTED.items())
             for is_response in (False, True) for version in range(lo, hi + 1)]


@pytest.mark.parametrize("key, version, is_response", ALL_CASES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_pythons_json_driven_codec_reencodes_every_offered_version_identically(key, version, is_response,
                                                                                      data):
    """Covers the flexible versions the hand-written classes lack (Metadata 9, CreateTopics
    4-6, DeleteTopics 4-5, InitProducerId 2-4, FindCoordinator 3, DescribeConfigs 3)."""
    message = MESSAGES[(key, is_response)]
    value = data.draw(message_value(message, version))
    if key == apis.ApiKey.API_VERSIONS and is_response:
        value["error_code"] = 0
    ours = message.encode(version, value)
    theirs = JSON_DRIVEN[(int(key), is_response)].decode(ours, version=version)
    object.__setattr__(theirs, "_header", None)  # kafka-python 3.0.12 leaves it unset when decoding a body alone
    assert theirs.encode(version=version) == ours


def _frame(request, correlation_id=5, client_id="kp"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return request.encode(header=True, framed=True)


def test_kafka_python_metadata_and_api_versions_requests_decode_with_their_headers():
    metadata = kafka_python_classes(3, False)
    api_versions = kafka_python_classes(18, False)
    for version in range(len(metadata)):
        request = apis.decode_request(_frame(metadata[version](topics=["t"]))[4:])
        assert request.header == apis.RequestHeader(3, version, 5, "kp")
        assert [t["name"] for t in request.body["topics"]] == ["t"]
    request = apis.decode_request(_frame(api_versions[3](client_software_name="kafka-python",
                                                          client_software_version="3.0", tags={}))[4:])
    assert request.header.api_version == 3  # a flexible request: header v2
    assert request.body["client_software_name"] == "kafka-python"


@pytest.mark.parametrize("version", range(3, 9))
def test_kafka_python_produce_requests_carry_batches_we_decode(version):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=7,
                                        producer_epoch=1, base_sequence=10, batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=b"k", value=b"v\xff", headers=[("h", b"x")])
    builder.append(1, timestamp=1002, key=None, value=None, headers=[])
    produce = kafka_python_classes(0, False)[version]
    fields = [1, 3000, [("t", [(0, bytes(builder.build()))])]]
    request = apis.decode_request(_frame(produce(None, *fields))[4:])
    assert (request.body["acks"], request.body["timeout_ms"]) == (1, 3000)
    (batch,) = decode_batches(request.body["topics"][0]["partitions"][0]["records"])
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 10)
    assert list(batch.records) == [("k", "v\xff", 0), (None, None, 0)]
    assert batch.records.timestamps == (1000, 1002)
    assert batch.records.headers == ((("h", "x"),), ())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_our_api_versions_answers(version):
    frame = apis.encode_response(18, version, 11, apis.api_versions_response())
    response = kafka_python_classes(18, True)[version].decode(frame, header=True, framed=True)
    assert response.header.correlation_id == 11
    assert sorted(tuple(e[:3]) for e in response.api_keys) == sorted(
        (int(k), lo, hi) for k, (lo, hi) in apis.SUPPORTED.items())


def test_an_unsupported_api_versions_version_is_answered_at_v0_with_the_supported_table():
    """Kafka 2.7.0 RequestContext.apiVersion: an ApiVersions request of an unknown version
    gets a v0 response carrying UNSUPPORTED_VERSION and the supported versions, which
    kafka-python reads as v0 whatever version it asked for."""
    request = kafka_python_classes(18, False)[4](client_software_name="kafka-python",
                                                 client_software_version="3.0", tags={})
    payload = _frame(request, correlation_id=3)[4:]
    with pytest.raises(apis.UnsupportedVersionError) as caught:
        apis.decode_request(payload)
    frame = apis.unsupported_api_versions_response(caught.value.correlation_id)
    response = kafka_python_classes(18, True)[4].decode(frame, header=True, framed=True)
    assert response.error_code == apis.UNSUPPORTED_VERSION and response.header.correlation_id == 3
    assert (18, 0, 3) in [tuple(e[:3]) for e in response.api_keys]
    # What kafka-python 3.x's connection does with it: read it at the version it asked.
    response = JSON_DRIVEN[(18, True)].decode(frame, version=4, header=True, framed=True)
    assert response.error_code == apis.UNSUPPORTED_VERSION
    assert (18, 3) in [(entry.api_key, entry.max_version) for entry in response.api_keys]


@pytest.mark.parametrize("version", range(4, 12))
def test_kafka_python_reads_our_fetch_responses_and_batches(version):
    batch = RecordBatch(5, 2, Records(["a", "b"], ["k", None], 0, [10, 11]), first_timestamp=10, max_timestamp=11)
    body = {"responses": [{"topic": "t", "partition_responses": [{"partition": 0, "high_watermark": 7,
                                                                 "last_stable_offset": 7,
                                                                 "record_set": encode_batch(batch)}]}]}
    frame = apis.encode_response(1, version, 9, body)
    response = kafka_python_classes(1, True)[version].decode(frame, header=True, framed=True)
    from kafka.record import MemoryRecords
    topic, partitions = response.topics[0][:2]
    records = MemoryRecords(partitions[0][-1]).next_batch()
    assert topic == "t" and [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (5, b"k", b"a", 10), (6, None, b"b", 11)]
