"""Partition reassignment in the controller, as Kafka 2.7.0 does it (KIP-455:
KafkaController.onPartitionReassignment and its helpers).

Names as in 2.7: RS the replicas assigned now, ORS the original ones, TRS the target,
AR = TRS - ORS the replicas being added, RR = ORS - TRS the ones being removed. The
topic's assignment node holds RS with ``adding_replicas`` and ``removing_replicas``
while a reassignment runs, so that a new controller resumes it (ORS = RS - AR).

- Phase U: RS = TRS + ORS (distinct, target first), written to the topic's node before
  memory; a changed or cancelled reassignment stops the replicas it no longer needs.
- Phase A (TRS not all in the ISR): bump the leader epoch and send LeaderAndIsr to RS,
  which starts the new replicas; they fetch from the leader, catch up, and the leader's
  ISR expansion (AlterIsr, or its own write with ZooKeeper ISR changes, which the
  controller watches) brings the controller back here.
- Phase B (TRS in the ISR): RS = TRS; the leader moves to the first live TRS replica in
  the ISR if it is not in TRS or not alive, else its epoch is bumped (LeaderAndIsr to
  TRS); each RR replica goes offline (StopReplica, out of the ISR) and is deleted
  (StopReplica with delete); the node is rewritten with RS = TRS and the partition
  leaves /admin/reassign_partitions; UpdateMetadata to every broker.

Reassignments arrive through /admin/reassign_partitions (``kafka-reassign-partitions.sh
--zookeeper`` in 2.7: {"version": 1, "partitions": [{"topic", "partition", "replicas"}]}),
which the controller watches; writing the node again with other replicas changes a
running reassignment, and replicas equal to ORS cancel it (2.7 has no other cancel
through the node). The AlterPartitionReassignments API (broker_core/reassignment_api.py)
starts, changes and cancels them too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from broker_core import coordination as coord
from broker_core.messages import NO_LEADER_EPOCH, LeaderAndIsr, StopReplicaRequest
from broker_core.types import TopicPartition

REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"


@dataclass(frozen=True)
class ReplicaAssignment:
    """2.7.0 ControllerContext.ReplicaAssignment: RS with AR and RR."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> "ReplicaAssignment":
        """``reassignTo``: the full set is target then origin, without repeats."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


def watch_event(path: str) -> Any:
    """The controller event a watch on ``path`` stands for, or None: the admin node, or a
    reassigning partition's state node (watched with ZooKeeper ISR changes)."""
    if path == REASSIGN_PARTITIONS_PATH:
        return "partition_reassignment"
    parts = path.split("/")
    if path.startswith(coord.TOPICS_PATH + "/") and len(parts) == 7 and parts[6] == "state" and parts[5].isdigit():
        return ("reassignment_isr_change", TopicPartition(parts[3], int(parts[5])))
    return None


# -- the admin node ------------------------------------------------------------------------
def encode_reassignment(partitions: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """/admin/reassign_partitions's data (2.7.0 ReassignPartitionsZNode.encode)."""
    return coord.encode_data({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in sorted(partitions.items())]})


def decode_reassignment(raw: bytes | None) -> dict[TopicPartition, tuple[int, ...]] | None:
    """The node's partitions, or None when it does not parse (2.7 then deletes it:
    KafkaZkClient.getPartitionReassignment logs and answers empty)."""
    try:
        value = coord.decode_data(raw)
        return {TopicPartition(str(p["topic"]), int(p["partition"])): tuple(int(b) for b in p["replicas"])
                for p in value["partitions"]}
    except (ValueError, TypeError, KeyError):
        return None


def topic_node_reassignments(data: Mapping[str, Any], topic: str) -> dict[TopicPartition, ReplicaAssignment]:
    """A topic node's partitions as full assignments (2.7.0 TopicZNode.decode)."""
    adding = data.get("adding_replicas") or {}
    removing = data.get("removing_replicas") or {}
    return {TopicPartition(topic, int(p)): ReplicaAssignment(tuple(int(b) for b in r),
                                                             tuple(int(b) for b in adding.get(p, ())),
                                                             tuple(int(b) for b in removing.get(p, ())))
            for p, r in data.get("partitions", {}).items()}


def _topic_node_data(controller, topic: str) -> bytes:
    """2.7.0 TopicZNode.encode of the controller's full assignments for ``topic``."""
    tps = sorted(tp for tp in controller.assignments if tp.topic == topic)
    data: dict[str, Any] = {"version": 2, "partitions": {}, "adding_replicas": {}, "removing_replicas": {}}
    for tp in tps:
        full = controller.full_assignment(tp)
        data["partitions"][str(tp.partition)] = list(full.replicas)
        if full.adding:
            data["adding_replicas"][str(tp.partition)] = list(full.adding)
        if full.removing:
            data["removing_replicas"][str(tp.partition)] = list(full.removing)
    return coord.encode_data(data)


# -- controller events -----------------------------------------------------------------------
def on_zk_partition_reassignment(controller):
    """KafkaController.processZkPartitionReassignment (2.7.0): read the node (and watch
    it); each partition the controller knows starts or changes its reassignment; the
    rest (unknown, or its topic queued for deletion) are removed from the node."""
    reply = yield coord.GetData(REASSIGN_PARTITIONS_PATH, watch=True)
    if not reply.ok:
        return set()
    asked = decode_reassignment(reply.data)
    if asked is None:
        controller.ctx.trace("reassignment_refused", partitions=[], reason="the node does not parse")
        yield coord.Delete(REASSIGN_PARTITIONS_PATH)
        return set()
    started, failed = set(), set()
    for tp, target in sorted(asked.items()):
        reason = _refusal(controller, tp, target)
        if reason is not None:
            controller.ctx.trace("reassignment_refused", partitions=[str(tp)], replicas=list(target), reason=reason)
            failed.add(tp)
            continue
        yield from on_partition_reassignment(controller, tp, controller.full_assignment(tp).reassign_to(target))
        started.add(tp)
    if failed:
        yield from _remove_from_zk_reassignment(controller, lambda tp, _: tp in failed)
    return started


def _refusal(controller, tp: TopicPartition, target: Sequence[int]) -> str | None:
    if tp not in controller.assignments or controller.deletion.is_queued(tp.topic):
        return "The partition does not exist."  # UNKNOWN_TOPIC_OR_PARTITION
    if not target or len(set(target)) != len(target) or any(b < 0 for b in target):
        return "invalid replica list"  # the tool's and validateReplicas' checks
    return None


def resume_reassignments(controller, should_resume) -> Any:
    """``maybeResumeReassignments``: run the phases again for the partitions chosen."""
    for tp in sorted(controller.reassignments):
        full = controller.full_assignment(tp)
        if should_resume(tp, full):
            yield from on_partition_reassignment(controller, tp, full)


def on_isr_change(controller, tp: TopicPartition):
    """``processPartitionReassignmentIsrChange`` / the AlterIsr path's
    ``maybeCompleteReassignment``: complete the reassignment once TRS is in the ISR."""
    if tp not in controller.reassignments:
        return
    full = controller.full_assignment(tp)
    if (yield from _is_complete(controller, tp, full)):
        yield from on_partition_reassignment(controller, tp, full)


def on_partition_reassignment(controller, tp: TopicPartition, reassignment: ReplicaAssignment):
    """KafkaController.onPartitionReassignment (2.7.0): phase U, then A or B. False when
    phase U could not write the topic's node (another controller took over), which the
    AlterPartitionReassignments API answers as NOT_CONTROLLER."""
    if not (yield from _update_current_reassignment(controller, tp, reassignment)):
        return False
    if not (yield from _is_complete(controller, tp, reassignment)):
        yield from _bump_leader_epoch_and_send(controller, tp, reassignment.replicas)  # A1, A2
        return True
    yield from _complete(controller, tp, reassignment)
    return True


def _update_current_reassignment(controller, tp: TopicPartition, reassignment: ReplicaAssignment):
    """``updateCurrentReassignment``: U1 (the node first), U2 (memory), U3 (stop the
    replicas a changed reassignment no longer needs). False when the node's write
    failed (the controller was replaced)."""
    current = controller.full_assignment(tp)
    if current != reassignment:
        before = controller.reassignments.get(tp)
        controller.reassignments[tp] = reassignment
        controller.assignments[tp] = reassignment.replicas
        written = yield coord.SetData(coord.topic_path(tp.topic), _topic_node_data(controller, tp.topic),
                                      check_path=coord.CONTROLLER_EPOCH_PATH,
                                      check_version=controller.epoch_zk_version)
        if not written.ok:  # the store stays as it was, and so does memory
            controller.assignments[tp] = current.replicas
            if before is None:
                controller.reassignments.pop(tp, None)
            else:
                controller.reassignments[tp] = before
            return False
        controller.ctx.trace("reassignment_started", partition=str(tp), old_replicas=list(current.origin),
                             new_replicas=list(reassignment.target), replicas=list(reassignment.replicas),
                             adding=list(reassignment.adding), removing=list(reassignment.removing))
        unneeded = [r for r in current.replicas if r not in reassignment.replicas]
        if unneeded:
            yield from _stop_removed_replicas(controller, tp, unneeded)
    controller.reassignments[tp] = reassignment  # partitionsBeingReassigned
    return True


def _is_complete(controller, tp: TopicPartition, reassignment: ReplicaAssignment):
    """``isReassignmentComplete``: TRS within the ISR the store holds now. With
    ZooKeeper ISR changes the leader writes the ISR itself, so the controller watches
    the state node (``PartitionReassignmentIsrChangeHandler``)."""
    if not reassignment.is_being_reassigned:
        return True
    watch = controller.ctx.config.isr_change_protocol == "zookeeper"
    fresh = yield coord.GetData(coord.partition_state_path(*tp), watch=watch)
    if not fresh.ok:
        return False
    state = LeaderAndIsr.from_data(fresh.value, fresh.version)
    controller.states[tp] = state
    return set(reassignment.target) <= set(state.isr)


def _bump_leader_epoch_and_send(controller, tp: TopicPartition, recipients: Sequence[int]):
    """``updateLeaderEpochAndSendRequest``: the same leader and ISR at the next epoch, told
    to ``recipients`` (the new replicas learn their leader from it and start fetching)."""
    def decide(current: LeaderAndIsr):
        return LeaderAndIsr(current.leader, current.leader_epoch + 1, current.isr, controller.epoch)

    state = yield from controller._write_state(tp, decide)
    if state is not None:
        controller._send_leader_and_isr([tp], sorted(recipients))


def _complete(controller, tp: TopicPartition, reassignment: ReplicaAssignment):
    """Phase B, B1 to B8."""
    target = ReplicaAssignment(reassignment.target)
    controller.assignments[tp] = target.replicas  # B2
    controller.reassignments.pop(tp, None)
    yield from _move_leader_if_required(controller, tp, target.replicas)  # B3
    yield from _stop_removed_replicas(controller, tp, list(reassignment.removing))  # B4, B5
    written = yield coord.SetData(coord.topic_path(tp.topic), _topic_node_data(controller, tp.topic),  # B6
                                  check_path=coord.CONTROLLER_EPOCH_PATH, check_version=controller.epoch_zk_version)
    if not written.ok:
        return
    yield from _remove_from_zk_reassignment(controller, lambda p, r: p == tp and tuple(r) == target.replicas)  # B7
    state = controller.states.get(tp)
    controller.ctx.trace("reassignment_completed", partition=str(tp), old_replicas=list(reassignment.origin),
                         new_replicas=list(target.replicas), leader=state.leader if state else None,
                         leader_epoch=state.leader_epoch if state else None)
    controller._send_update_metadata()  # B8


def _move_leader_if_required(controller, tp: TopicPartition, replicas: tuple[int, ...]):
    """``moveReassignedPartitionLeaderIfRequired``: a leader outside TRS or not alive is
    replaced by ``reassignPartitionLeaderElection`` (the first TRS replica alive and in
    the ISR); a live leader in TRS keeps leading at the next epoch. LeaderAndIsr goes
    to the live replicas of TRS."""
    current = controller.states.get(tp)
    if current is not None and current.leader in replicas and current.leader in controller.live:
        yield from _bump_leader_epoch_and_send(controller, tp, replicas)
        return

    def decide(state: LeaderAndIsr):
        leader = next((r for r in replicas if r in controller.live and r in state.isr), None)
        if leader is None:
            return None  # 2.7 fails the election and leaves the partition as it is
        return LeaderAndIsr(leader, state.leader_epoch + 1, state.isr, controller.epoch)

    state = yield from controller._write_state(tp, decide)
    if state is not None:
        controller._trace_election(tp, state, "reassignment", unclean=False)
        controller._send_leader_and_isr([tp], sorted(replicas))


def _stop_removed_replicas(controller, tp: TopicPartition, removed: Sequence[int]):
    """``stopRemovedReplicasOfReassignedPartition``: each replica to OfflineReplica
    (StopReplica without delete, with the epoch known now; out of the ISR, LeaderAndIsr
    to the remaining replicas), then ReplicaDeletionStarted (StopReplica with delete).
    A replica on a dead broker gets no request and stays on its disk, as in 2.7."""
    for broker in removed:
        _send_stop_replica(controller, tp, broker, delete=False)
        if (yield from controller._remove_from_isr(tp, broker, "reassignment")):
            others = [r for r in controller.assignments[tp] if r != broker]
            controller._send_leader_and_isr([tp], others)
        _send_stop_replica(controller, tp, broker, delete=True)


def _send_stop_replica(controller, tp: TopicPartition, broker: int, delete: bool) -> None:
    if broker not in controller.live:
        return
    state = controller.states.get(tp)
    with_epoch = controller.ctx.config.stop_replica_leader_epoch and state is not None
    epochs = {tp: state.leader_epoch if with_epoch and state is not None else NO_LEADER_EPOCH}
    controller._enqueue_request(broker, lambda cid: StopReplicaRequest(
        cid, controller.ctx.broker_id, controller.epoch, delete, epochs))


def _remove_from_zk_reassignment(controller, should_remove):
    """``maybeRemoveFromZkReassignment``: drop the chosen partitions from the node, or
    delete it when none is left (and watch it again for the next reassignment)."""
    reply = yield coord.GetData(REASSIGN_PARTITIONS_PATH)
    if not reply.ok:
        return
    asked = decode_reassignment(reply.data) or {}
    left = {tp: r for tp, r in asked.items() if not should_remove(tp, r)}
    if left == asked:
        return
    if left:
        yield coord.SetData(REASSIGN_PARTITIONS_PATH, encode_reassignment(left), reply.version,
                            check_path=coord.CONTROLLER_EPOCH_PATH, check_version=controller.epoch_zk_version)
    else:
        yield coord.Delete(REASSIGN_PARTITIONS_PATH, reply.version)
        yield coord.GetData(REASSIGN_PARTITIONS_PATH, watch=True)
