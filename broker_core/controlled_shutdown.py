"""The controller's handling of a controlled shutdown: a broker about to stop asks the
controller to move its leaderships away and take it out of the ISRs it is in
(2.7.0 KafkaController.doControlledShutdown; 0.8.2.2 KafkaController.shutdownBroker).

These are steps of the controller (``controller.py``), kept apart because the shutdown
is a protocol of its own: each function takes the controller and works on its state
through its methods, and the generators run inside its event, as its other handlers do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.election import controlled_shutdown_leader
from broker_core.errors import ErrorCode
from broker_core.messages import ControlledShutdownResponse, LeaderAndIsr, NO_LEADER_EPOCH, StopReplicaRequest
from broker_core.types import TopicPartition

if TYPE_CHECKING:  # the controller imports this module
    from broker_core.controller import Controller


def on_controlled_shutdown(controller: Controller, src, correlation_id: int, broker: int):
    """Kafka's controlled shutdown (2.7.0 KafkaController.doControlledShutdown; 0.8.2.2
    shutdownBroker does the same one partition at a time). Only replicated partitions
    count (partitionsToActOn; replicatedPartitionsBrokerLeads): one replica has
    nowhere to move. Partitions the broker leads get a new leader, the first live ISR
    member not shutting down, and an ISR without every shutting-down broker, told to
    all their live replicas, this broker too. For the partitions it follows it gets
    StopReplica (without delete) and leaves their ISRs (OfflineReplica), which is told
    to the other replicas only. The answer lists the partitions it still leads."""
    controller.shutting_down.add(broker)
    controller.ctx.trace("controlled_shutdown_started", broker=broker)
    acted_on = [tp for tp in sorted(controller.assignments)
                if tp in controller.states and broker in controller.assignments[tp]
                and len(controller.assignments[tp]) > 1]
    led = [tp for tp in acted_on if controller.states[tp].leader == broker]
    followed = [tp for tp in acted_on if controller.states[tp].leader != broker]
    moved = []
    for tp in led:
        if (yield from move_leader_off(controller, tp, broker)):
            moved.append(tp)
    controller._send_leader_and_isr(moved, sorted(controller.live))
    send_stop_replica(controller, broker, followed)
    removed = []
    for tp in followed:
        if (yield from controller._remove_from_isr(tp, broker, "controlled_shutdown")):
            removed.append(tp)
    controller._send_leader_and_isr(removed, [b for b in sorted(controller.live) if b != broker])
    controller._send_update_metadata()
    remaining = tuple(tp for tp in sorted(controller.states)
                      if controller.states[tp].leader == broker and len(controller.assignments.get(tp, ())) > 1)
    controller.ctx.send(src, ControlledShutdownResponse(correlation_id, ErrorCode.NONE, remaining))


def move_leader_off(controller: Controller, tp: TopicPartition, broker: int):
    """The controlled-shutdown election (2.7.0 Election.leaderForControlledShutdown;
    0.8.2.2 ControlledShutdownLeaderSelector): the new ISR drops every broker that
    is shutting down, not only the one asking."""
    def decide(current: LeaderAndIsr):
        if current.leader != broker:
            return None
        election = controlled_shutdown_leader(controller.assignments[tp], current.isr, controller.live,
                                              controller.shutting_down)
        if election.leader is None:
            return None
        isr = tuple(r for r in current.isr if r not in controller.shutting_down)
        return LeaderAndIsr(election.leader, current.leader_epoch + 1, isr, controller.epoch)

    new = yield from controller._write_state(tp, decide)
    if new is not None:
        controller._trace_election(tp, new, "controlled_shutdown", unclean=False)
    return new is not None


def send_stop_replica(controller: Controller, broker: int, tps) -> None:
    """StopReplica without delete, each partition with the leader epoch the controller
    knows now (KIP-570; before the ISR change that follows, as Kafka's batch is
    built), or none for 0.8.2's request."""
    if not tps or broker not in controller.live:
        return
    with_epoch = controller.ctx.config.stop_replica_leader_epoch
    epochs = {tp: controller.states[tp].leader_epoch if with_epoch else NO_LEADER_EPOCH for tp in tps}
    controller._enqueue_request(broker, lambda cid: StopReplicaRequest(
        cid, controller.ctx.broker_id, controller.epoch, False, epochs))
