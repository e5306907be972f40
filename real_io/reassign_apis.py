"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the wire:
bodies to the core's requests (broker_core/reassignment_api.py) and its answers back,
field by field from Kafka 2.7.0's AlterPartitionReassignments*/ListPartitionReassignments*
.json, grouped by topic as KafkaApis handleAlterPartitionReassignmentsRequest /
handleListPartitionReassignmentsRequest group them. The core decides everything; this
only maps. A null replica list (cancel) and a null topic list (list everything) stay
None. ``throttle_time_ms`` is 0 here: the server puts the request quota's throttle in."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping

from broker_core.reassignment_api import (
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse)
from broker_core.types import TopicPartition
from real_io.protocol.apis import ApiKey


def alter_request(correlation_id: int, version: int, body: dict) -> AlterPartitionReassignmentsRequest:
    """A partition named twice keeps its last entry, as 2.7's ``.toMap`` does."""
    partitions = {TopicPartition(topic["name"], p["partition_index"]):
                  None if p["replicas"] is None else tuple(p["replicas"])
                  for topic in body["topics"] for p in topic["partitions"]}
    return AlterPartitionReassignmentsRequest(correlation_id, partitions)


def _by_topic(results: Mapping[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for tp, value in sorted(results.items()):
        grouped[tp.topic].append((tp.partition, value))
    return grouped


def alter_response(response: AlterPartitionReassignmentsResponse) -> dict:
    responses = [{"name": topic, "partitions": [
        {"partition_index": p, "error_code": int(code), "error_message": message} for p, (code, message) in parts]}
        for topic, parts in _by_topic(response.results or {}).items()]
    return {"throttle_time_ms": 0, "error_code": int(response.error), "error_message": response.message,
            "responses": responses}


def list_request(correlation_id: int, version: int, body: dict) -> ListPartitionReassignmentsRequest:
    topics = body["topics"]
    partitions = None if topics is None else frozenset(
        TopicPartition(topic["name"], p) for topic in topics for p in topic["partition_indexes"])
    return ListPartitionReassignmentsRequest(correlation_id, partitions)


def list_response(response: ListPartitionReassignmentsResponse) -> dict:
    topics = [{"name": topic, "partitions": [
        {"partition_index": p, "replicas": list(full.replicas), "adding_replicas": list(full.adding),
         "removing_replicas": list(full.removing)} for p, full in parts]}
        for topic, parts in _by_topic(response.ongoing or {}).items()]
    return {"throttle_time_ms": 0, "error_code": int(response.error), "error_message": response.message,
            "topics": topics}


INBOUND: dict[int, tuple[Callable[[int, int, dict], Any], Callable[[Any], dict]]] = {
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (alter_request, alter_response),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (list_request, list_response),
}
