"""AlterPartitionReassignments / ListPartitionReassignments through the codec and the
mapping (real_io/reassign_apis.py): a body encoded as a 2.7.0 client frames it
(AlterPartitionReassignmentsRequest.json: flexible v0, nullable replicas;
ListPartitionReassignmentsRequest.json: nullable topics) decodes to the core's request,
and the core's answers come out grouped by topic as 2.7.0 KafkaApis
handleAlterPartitionReassignmentsRequest / handleListPartitionReassignmentsRequest build them."""
from broker_core.reassignment import ReplicaAssignment
from broker_core.reassignment_api import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse
from broker_core.types import TopicPartition
from real_io import reassign_apis
from real_io.protocol import apis
from real_io.protocol.apis import ApiKey, RequestHeader


def through_codec(key: int, body: dict) -> dict:
    frame = apis.encode_request(RequestHeader(key, 0, 7, "admin"), body)
    return apis.decode_request(frame[4:]).body


def test_alter_request_keeps_null_replicas_as_a_cancel():
    body = through_codec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [3, 1]},
                                     {"partition_index": 1, "replicas": None}]}]})
    request = reassign_apis.alter_request(5, 0, body)
    assert request.partitions == {TopicPartition("t", 0): (3, 1), TopicPartition("t", 1): None}


def test_list_request_null_topics_lists_everything():
    body = through_codec(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": None})
    assert reassign_apis.list_request(5, 0, body).partitions is None
    body = through_codec(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 1000, "topics": [
        {"name": "t", "partition_indexes": [2, 0]}]})
    assert reassign_apis.list_request(5, 0, body).partitions == {TopicPartition("t", 2), TopicPartition("t", 0)}


def test_answers_are_grouped_by_topic_and_encode():
    alter = reassign_apis.alter_response(AlterPartitionReassignmentsResponse(1, results={
        TopicPartition("t", 1): (39, "Empty replica list specified in partition reassignment."),
        TopicPartition("t", 0): (0, None), TopicPartition("u", 0): (3, "The partition does not exist.")}))
    assert alter["responses"] == [
        {"name": "t", "partitions": [{"partition_index": 0, "error_code": 0, "error_message": None},
                                     {"partition_index": 1, "error_code": 39,
                                      "error_message": "Empty replica list specified in partition reassignment."}]},
        {"name": "u", "partitions": [{"partition_index": 0, "error_code": 3,
                                      "error_message": "The partition does not exist."}]}]
    listed = reassign_apis.list_response(ListPartitionReassignmentsResponse(1, ongoing={
        TopicPartition("t", 0): ReplicaAssignment((4, 2, 3, 1), (4,), (1,))}))
    assert listed["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [4, 2, 3, 1], "adding_replicas": [4], "removing_replicas": [1]}]}]
    not_controller = reassign_apis.alter_response(AlterPartitionReassignmentsResponse(1, 41, "not"))
    assert (not_controller["error_code"], not_controller["responses"]) == (41, [])
    for key, body in ((ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter), (ApiKey.LIST_PARTITION_REASSIGNMENTS, listed)):
        assert apis.decode_response(key, 0, b"".join(apis.encode_response_parts(key, 0, 9, body))[4:])[1] == body
