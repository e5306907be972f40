"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455, as the
2.7.0 controller answers them (KafkaController.processApiPartitionReassignment and
processListPartitionReassignments, reached through KafkaApis
handleAlterPartitionReassignmentsRequest / handleListPartitionReassignmentsRequest).

Both run as controller events, so they are ordered with the reassignments that arrive
through /admin/reassign_partitions and with the ISR changes that complete them; a broker
that is not the controller answers NOT_CONTROLLER at once, as does a controller that
resigns before it reached the request (2.7's ``preempt``). The answer to Alter says the
reassignment started, not that it finished (2.7 answers after phase U and A); List shows
it until phase B has run. A null replica list cancels: the partition goes back to its
original replicas (ORS) and the replicas being added are stopped and deleted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from broker_core.errors import ErrorCode
from broker_core import reassignment
from broker_core.reassignment import ReplicaAssignment
from broker_core.types import TopicPartition

NO_REASSIGNMENT_IN_PROGRESS = 85  # Errors.NO_REASSIGNMENT_IN_PROGRESS (2.7.0), not in the core's ErrorCode
# 2.7.0 Errors' default messages, which ApiError(error) carries when no message is given
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
NO_REASSIGNMENT_MESSAGE = "No partition reassignment is in progress."
UNKNOWN_PARTITION_MESSAGE = "The partition does not exist."

PartitionError = tuple[int, "str | None"]  # an error code (Kafka's number) and its message


@dataclass(slots=True)
class AlterPartitionReassignmentsRequest:
    correlation_id: int
    partitions: Mapping[TopicPartition, tuple[int, ...] | None]  # None cancels


@dataclass(slots=True)
class AlterPartitionReassignmentsResponse:
    correlation_id: int
    error: int = 0
    message: str | None = None
    results: Mapping[TopicPartition, PartitionError] | None = None


@dataclass(slots=True)
class ListPartitionReassignmentsRequest:
    correlation_id: int
    partitions: frozenset[TopicPartition] | None  # None lists every reassignment in progress


@dataclass(slots=True)
class ListPartitionReassignmentsResponse:
    correlation_id: int
    error: int = 0
    message: str | None = None
    ongoing: Mapping[TopicPartition, ReplicaAssignment] | None = None


REQUESTS = (AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest)
EVENTS = ("api_partition_reassignment", "list_partition_reassignments")


def handle(controller, src, request) -> None:
    """Queue the request as a controller event; a broker that is not the controller
    answers NOT_CONTROLLER (the client's admin then looks the controller up again)."""
    if not controller.active:
        answer_not_controller(controller, src, request)
        return
    kind = EVENTS[0] if isinstance(request, AlterPartitionReassignmentsRequest) else EVENTS[1]
    controller.enqueue((kind, src, request))


def answer_not_controller(controller, src, request) -> None:
    response = (AlterPartitionReassignmentsResponse if isinstance(request, AlterPartitionReassignmentsRequest)
                else ListPartitionReassignmentsResponse)
    controller.ctx.send(src, response(request.correlation_id, int(ErrorCode.NOT_CONTROLLER), NOT_CONTROLLER_MESSAGE))


def preempt(controller, events) -> None:
    """2.7.0 ApiPartitionReassignment / ListPartitionReassignments ``preempt``: the
    requests still queued when the controller resigns are answered NOT_CONTROLLER."""
    for event in events:
        if isinstance(event, tuple) and event[0] in EVENTS:
            answer_not_controller(controller, event[1], event[2])


def run(controller, kind: str, src, request):
    if kind == EVENTS[0]:
        yield from on_api_partition_reassignment(controller, src, request)
    else:
        on_list_partition_reassignments(controller, src, request)


def _full(controller, tp: TopicPartition) -> ReplicaAssignment:
    """``partitionFullReplicaAssignment``: an unknown partition has no replicas."""
    return controller.full_assignment(tp) if tp in controller.assignments else ReplicaAssignment(())


def validate_replicas(controller, tp: TopicPartition, replicas: tuple[int, ...]) -> PartitionError | None:
    """KafkaController.validateReplicas (2.7.0): a target must be non-empty, without
    duplicates or negative ids, and the replicas it adds must be on live brokers."""
    bad = int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    shown = f"List({', '.join(map(str, replicas))})"
    if not replicas:
        return bad, "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return bad, f"Duplicate replica ids in partition reassignment replica list: {shown}"
    if any(b < 0 for b in replicas):
        return bad, f"Invalid broker id in replica list: {shown}"
    adding = _full(controller, tp).reassign_to(replicas).adding
    if not set(adding) <= controller.live:
        return bad, (f"Replica assignment has brokers that are not alive. Replica list: "
                     f"{list(adding)}, live broker list: {sorted(controller.live)}")
    return None


def _build(controller, tp: TopicPartition, target: tuple[int, ...] | None) -> ReplicaAssignment | None:
    """``maybeBuildReassignment``: a cancellation of a partition not being reassigned
    builds nothing (NO_REASSIGNMENT_IN_PROGRESS)."""
    current = _full(controller, tp)
    if current.is_being_reassigned:
        return current.reassign_to(target if target is not None else current.origin)
    return None if target is None else current.reassign_to(target)


def on_api_partition_reassignment(controller, src, request: AlterPartitionReassignmentsRequest):
    """``processApiPartitionReassignment``: check each partition, take those it starts
    out of /admin/reassign_partitions (the newest request wins), then run phase U and
    A (or B) for each (``maybeTriggerPartitionReassignment``)."""
    results: dict[TopicPartition, PartitionError] = {}
    started: dict[TopicPartition, ReplicaAssignment] = {}
    for tp, target in sorted(request.partitions.items()):
        error = validate_replicas(controller, tp, target) if target is not None else None
        built = _build(controller, tp, target) if error is None else None
        if error is not None:
            results[tp] = error
        elif built is None:
            results[tp] = (NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE)
        else:
            started[tp] = built
    yield from reassignment._remove_from_zk_reassignment(controller, lambda tp, _: tp in started)
    for tp, built in started.items():
        if controller.deletion.is_queued(tp.topic) or not controller.assignments.get(tp):
            results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), UNKNOWN_PARTITION_MESSAGE)
            continue
        if not (yield from reassignment.on_partition_reassignment(controller, tp, built)):
            # the topic node's write failed: another controller took over (2.7's
            # ControllerMovedException, after which the client asks the new one)
            answer_not_controller(controller, src, request)
            return
        results[tp] = (int(ErrorCode.NONE), None)
    controller.ctx.send(src, AlterPartitionReassignmentsResponse(request.correlation_id, results=results))


def on_list_partition_reassignments(controller, src, request: ListPartitionReassignmentsRequest) -> None:
    """``processListPartitionReassignments``: the partitions asked for (or all being
    reassigned) that are being reassigned now; an unknown one is simply left out."""
    asked = request.partitions if request.partitions is not None else set(controller.reassignments)
    ongoing = {tp: _full(controller, tp) for tp in sorted(asked)}
    ongoing = {tp: full for tp, full in ongoing.items() if full.is_being_reassigned}
    controller.ctx.send(src, ListPartitionReassignmentsResponse(request.correlation_id, ongoing=ongoing))
