"""Adding partitions to a topic: the CreatePartitions API (the broker that handles it
writes the topic's new assignment) and the controller's side, which brings the new
partitions online (2.7.0 KafkaApis.handleCreatePartitionsRequest, AdminManager
.createPartitions, AdminZkClient.createNewPartitionsAssignment and
KafkaController.processPartitionModifications).

The request is answered through the topic purgatory (broker_core.topic_admin), once
this broker's metadata shows a leader for every partition of the new count, as 2.7's
DelayedCreatePartitions does.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.messages import CreatePartitionsRequest, CreatePartitionsResponse, TopicCreationResult
from broker_core.topic_admin import (
    MAX_PARTITIONS, TopicCreationError, TopicCreator, assign_replicas_to_brokers, assignment_data,
    validate_topic_name)
from broker_core.types import TopicPartition


def handle_create_partitions(creator: TopicCreator, is_controller: bool, queued_for_deletion: Callable[[str], bool],
                             src: Hashable, request: CreatePartitionsRequest) -> None:
    """KafkaApis.handleCreatePartitionsRequest (2.7.0): only the controller adds
    partitions (NOT_CONTROLLER); a topic named twice is INVALID_REQUEST, one queued for
    deletion INVALID_TOPIC_EXCEPTION; the rest go to AdminManager.createPartitions."""
    names = [name for name, _, _ in request.topics]
    if not is_controller:
        results = {name: TopicCreationResult(ErrorCode.NOT_CONTROLLER) for name in names}
        creator.ctx.send(src, CreatePartitionsResponse(request.correlation_id, dict(sorted(results.items()))))
        return
    pending = creator.open_pending(src, request.correlation_id, names, request.timeout_ms, CreatePartitionsResponse)
    todo = []
    for name, count, assignment in request.topics:
        if names.count(name) > 1:
            pending.results[name] = TopicCreationResult(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
        elif queued_for_deletion(name):
            pending.results[name] = TopicCreationResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                        "The topic is queued for deletion.")
        else:
            todo.append((name, count, assignment))
    creator.ctx.tasks.start(_create_all(creator, pending, todo, request.validate_only))


def _create_all(creator: TopicCreator, pending, todo: list, validate_only: bool):
    for name, count, asked in todo:
        try:
            assignment = yield from add_partitions(name, count, asked, validate_only)
        except TopicCreationError as failure:
            pending.results[name] = TopicCreationResult(failure.error, failure.message)
            continue
        pending.results[name] = TopicCreationResult(ErrorCode.NONE)
        if not validate_only:
            creator.ctx.trace("partitions_assigned", topic=name, partitions=count, by="create_partitions",
                              assignment={str(p): list(r) for p, r in sorted(assignment.items())})
            pending.waiting[name] = count
    creator.written_all(pending)


def add_partitions(topic: str, count: int, asked: Sequence[Sequence[int]] | None, validate_only: bool):
    """AdminManager.createPartitions with AdminZkClient.createNewPartitionsAssignment and
    createPartitionsWithAssignment (2.7.0): a task returning the new partitions'
    assignment, written unless ``validate_only``; failures raise TopicCreationError.
    The topic's node is rewritten against the version read, so that two requests that
    cross cannot both extend the same count (2.7 writes over any version)."""
    try:
        validate_topic_name(topic)  # a name that is no topic's must not become a store path
    except TopicCreationError:
        raise TopicCreationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.") from None
    node = yield coord.GetData(coord.topic_path(topic))
    if not node.ok or not isinstance(node.value, dict) or not node.value.get("partitions"):
        raise TopicCreationError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    existing = {int(p): tuple(int(b) for b in r) for p, r in node.value["partitions"].items()}
    registered = yield coord.GetChildren(coord.BROKER_IDS_PATH)
    brokers = sorted(int(b) for b in registered.children) if registered.ok else []
    new = new_partitions_assignment(topic, existing, brokers, count, asked)
    if validate_only:
        return new
    written = yield coord.SetData(coord.topic_path(topic), assignment_data({**existing, **new}), node.version)
    if not written.ok:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"The assignment of topic '{topic}' changed while partitions were added; try again.")
    return new


def new_partitions_assignment(topic: str, existing: dict[int, tuple[int, ...]], brokers: Sequence[int], count: int,
                              asked: Sequence[Sequence[int]] | None) -> dict[int, tuple[int, ...]]:
    """The checks of AdminManager.createPartitions and AdminZkClient
    .createNewPartitionsAssignment (2.7.0), in their order and with their messages, and
    the assignment of the new partitions: the one asked for, or Kafka's own starting at
    the first broker whose id is at least partition 0's first replica's."""
    old = len(existing)
    increment = count - old
    if increment < 0:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {old} partitions, which is higher than the requested {count}.")
    if increment == 0:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    if count > MAX_PARTITIONS:
        raise TopicCreationError(ErrorCode.INVALID_PARTITIONS,
                                 f"Number of partitions must not exceed {MAX_PARTITIONS} (isrlab's limit).")
    replication = len(existing.get(0, ()))
    if replication == 0:
        raise TopicCreationError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing.")
    if asked is not None:
        unknown = sorted({b for replicas in asked for b in replicas} - set(brokers))
        if unknown:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        if len(asked) != increment:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Increasing the number of partitions by {increment} but {len(asked)} "
                                     "assignments provided.")
        new = {old + i: tuple(replicas) for i, replicas in enumerate(asked)}
        _validate_replica_assignment(new, replication)
        return new
    start = next((i for i, b in enumerate(brokers) if b >= existing[0][0]), 0)
    return assign_replicas_to_brokers(brokers, increment, replication, start, old)


def _validate_replica_assignment(assignment: dict[int, tuple[int, ...]], replication: int) -> None:
    """AdminZkClient.validateReplicaAssignment (2.7.0); the brokers are known by now."""
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Duplicate brokers not allowed in replica assignment: "
                                     f"{', '.join(map(str, replicas))} for partition id {partition}.")
    bad = [(p, len(r)) for p, r in sorted(assignment.items()) if len(r) != replication]
    if bad:
        raise TopicCreationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Inconsistent replication factor between partitions, partition 0 has "
                                 f"{replication} while partitions [{', '.join(str(p) for p, _ in bad)}] have "
                                 f"replication factors [{', '.join(str(n) for _, n in bad)}], respectively.")


def on_partition_modifications(controller, topic: str):
    """KafkaController.processPartitionModifications (2.7.0): the topic's assignment
    node changed; partitions the controller does not know are new, brought online
    (NewPartition -> OnlinePartition: the first live replica leads) and told to their
    replicas through LeaderAndIsr and to every broker through UpdateMetadata. New
    partitions of a topic queued for deletion are skipped (2.7 also writes the old
    assignment back; isrlab leaves the node, which the deletion removes)."""
    data = yield coord.GetData(coord.topic_path(topic), watch=True)
    if not data.ok:
        return
    added = []
    for partition, replicas in sorted(data.value.get("partitions", {}).items(), key=lambda kv: int(kv[0])):
        tp = TopicPartition(topic, int(partition))
        if tp not in controller.assignments:
            added.append((tp, tuple(int(r) for r in replicas)))
    if not added:
        return
    if controller.deletion.is_queued(topic):
        controller.ctx.trace("partitions_add_skipped", topic=topic, partitions=[str(tp) for tp, _ in added],
                             reason="topic queued for deletion")
        return
    for tp, replicas in added:
        controller.assignments[tp] = replicas
    new = [tp for tp, _ in added]
    yield from controller._bring_partitions_online(new)
    controller.ctx.trace("partitions_added", topic=topic, partitions=[str(tp) for tp in new])
    controller._send_leader_and_isr(new, sorted(controller.live))
    controller._send_update_metadata()
