"""FindCoordinator in the real binding: the mapping between the wire and the core's
messages (real_io/kafka_api.py), and the switch (real_io/protocol/apis.py
GROUPS_SERVED) that keeps the binding's own answer until the core serves JoinGroup."""
from __future__ import annotations

import asyncio
import time

import pytest

from broker_core.effects import Fsync
from broker_core.errors import ErrorCode
from broker_core.group_loader import load_groups
from broker_core.group_partitions import stored_group_records
from broker_core.group_records import CommittedOffset, offset_commit_record
from broker_core.log import PartitionLog
from broker_core.messages import FindCoordinatorResponse, MetadataResponse, PartitionMetadata
from broker_core.records import Records
from broker_core.types import TopicPartition
from real_io import kafka_api
from real_io.files import DataDir
from real_io.protocol import apis, record_batch
from real_io.protocol.apis import ApiKey
from real_io.serve import ServeOptions, serve

ENDPOINTS = {1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093)}


def test_requests_of_every_version_map_to_the_core_message():
    """clients/src/main/resources/common/message/FindCoordinatorRequest.json (2.7.0): v0
    has only the key (a group); v1+ the key type."""
    assert kafka_api.find_coordinator_request(5, {"key": "g"}).key_type == 0
    request = kafka_api.find_coordinator_request(5, {"key": "tx", "key_type": 1})
    assert (request.correlation_id, request.key, request.key_type) == (5, "tx", 1)


def test_the_answer_names_the_coordinators_endpoint_or_no_node():
    """KafkaApis.handleFindCoordinatorRequest (2.7.0): the node as the listener names it;
    a coordinator without an endpoint, or an error, is Node.noNode (-1, "", -1)."""
    found = kafka_api.find_coordinator_response(FindCoordinatorResponse(1, ErrorCode.NONE, 2), ENDPOINTS)
    assert (found["error_code"], found["node_id"], found["host"], found["port"]) == (0, 2, "127.0.0.1", 9093)
    unknown = kafka_api.find_coordinator_response(FindCoordinatorResponse(1, ErrorCode.NONE, 7), ENDPOINTS)
    assert (unknown["error_code"], unknown["node_id"], unknown["host"], unknown["port"]) == (
        int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1)
    assert unknown["error_message"] == "The coordinator is not available."
    failed = kafka_api.find_coordinator_response(
        FindCoordinatorResponse(1, ErrorCode.COORDINATOR_NOT_AVAILABLE), ENDPOINTS)
    assert (failed["error_code"], failed["node_id"]) == (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1)
    for version in range(4):  # every version encodes
        apis.encode_response(ApiKey.FIND_COORDINATOR, version, 1, found)


def test_find_coordinator_goes_to_the_core_exactly_when_join_group_is_served():
    """A coordinator found but JoinGroup not served would make clients hang (see
    local_apis.find_coordinator): one switch decides both."""
    assert (ApiKey.JOIN_GROUP in apis.SUPPORTED) == apis.GROUPS_SERVED


async def _find(port: int, group: str, version: int = 3) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = {"key": group, "key_type": 0}
        writer.write(apis.encode_request(apis.RequestHeader(ApiKey.FIND_COORDINATOR, version, 1, "t"), body))
        size = int.from_bytes(await reader.readexactly(4), "big")
        return apis.decode_response(ApiKey.FIND_COORDINATOR, version, await reader.readexactly(size))[1]
    finally:
        writer.close()


async def _serve_and_find(data_dir, switch: bool) -> list[dict]:
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    options = ServeOptions(1, data_dir, port=0, config={"offsets.topic.replication.factor": 1,
                                                        "offsets.topic.num.partitions": 3})
    task = asyncio.create_task(serve(options, lambda host, port: ready.set_result(port)))
    try:
        port = await asyncio.wait_for(ready, 20)
        answers = [await _find(port, "my-group")]
        deadline = time.monotonic() + 10
        while switch and answers[-1]["error_code"] != 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            answers.append(await _find(port, "my-group"))
        return answers + [{"port": port}]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_with_the_switch_on_the_real_broker_names_itself_once_the_topic_is_up(tmp_path, groups_served):
    """One real broker (embedded coordination) with offsets.topic.replication.factor 1:
    the first answer is COORDINATOR_NOT_AVAILABLE (the topic is being created), then the
    broker itself, with its listener's address."""
    answers = asyncio.run(_serve_and_find(tmp_path / "data", True))
    port = answers.pop()["port"]
    assert answers[0]["error_code"] == int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert (answers[-1]["error_code"], answers[-1]["node_id"], answers[-1]["port"]) == (0, 1, port)


def test_with_the_switch_off_the_binding_keeps_its_own_answer(tmp_path, groups_not_served):
    """The binding's answer (real_io/local_apis.py find_coordinator): GROUP_AUTHORIZATION_FAILED."""
    answers = asyncio.run(_serve_and_find(tmp_path / "data", False))
    assert answers[0]["error_code"] == int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_request_version_decodes(version):
    """2.7.0 clients/src/main/resources/common/message/FindCoordinatorRequest.json:
    versions 0-3 (3 flexible), each decoded and mapped to the core's request."""
    body = {"key": "g"} if version == 0 else {"key": "g", "key_type": 0}
    frame = apis.encode_request(apis.RequestHeader(ApiKey.FIND_COORDINATOR, version, 1, "t"), body)
    request = apis.decode_request(frame[4:])
    assert kafka_api.find_coordinator_request(1, request.body).key == "g"


def test_metadata_marks_the_offsets_topic_internal():
    """2.7.0 MetadataCache.getPartitionMetadata: isInternal is Topic.isInternal(topic), so
    that clients leave __consumer_offsets out of pattern subscriptions."""
    partitions = {TopicPartition(t, 0): PartitionMetadata(ErrorCode.NONE, 1, 0, (1,), (1,))
                  for t in ("__consumer_offsets", "orders")}
    body = kafka_api.metadata_response(MetadataResponse(1, (1,), 1, partitions), ENDPOINTS)
    assert {t["name"]: t["is_internal"] for t in body["topics"]} == {"__consumer_offsets": True, "orders": False}


def test_the_coordinators_own_batches_are_stored_as_record_batch_v2_and_load_back(tmp_path):
    """The group coordinator's appends (GroupPartitions.store) go through the storage
    port's own_batch: in the real binding a v2 batch, so that the segment holds Kafka's
    format (2.7.0 GroupMetadataManager.storeOffsets builds MemoryRecords), with its CRC
    valid after the leader stamps offset and epoch; reading it back gives the record
    bytes exactly (keys and values are not UTF-8 text), as a load reads them."""
    storage = DataDir(tmp_path)
    log = PartitionLog(TopicPartition("__consumer_offsets", 0), 1 << 30, storage)
    pairs = [offset_commit_record("g", TopicPartition("orders", p), CommittedOffset(1000 + p, 2, "", 7)) for p in (0, 1)]
    for base in (0, 2):
        rows = Records([v.decode("latin-1") for _, v in pairs], [k.decode("latin-1") for k, _ in pairs],
                       timestamps=[7, 7])
        _, effects = log.append_as_leader(storage.own_batch(rows), 4)
        for effect in effects:
            storage.fsync(effect.path) if isinstance(effect, Fsync) else storage.carry_out(effect)
    segment = (tmp_path / "__consumer_offsets-0" / f"{0:020d}.log").read_bytes()
    first, end = record_batch.decode_batch(segment, 0)  # checks the CRC-32C
    second, _ = record_batch.decode_batch(segment, end)
    assert (first.base_offset, second.base_offset, second.leader_epoch) == (0, 2, 4)
    records = stored_group_records(log.load(0))
    assert records == pairs + pairs
    assert load_groups(records).offsets["g"][TopicPartition("orders", 1)].offset == 1001
