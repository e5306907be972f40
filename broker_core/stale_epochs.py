"""StaleEpochChangesNothing: a request whose controller epoch, leader epoch or producer
epoch is stale changes nothing it names, checked around the request's handling::

    before = stale_request_state(node, message)   # None: nothing in it is stale
    effects = node.handle(MessageReceived(src, message), now_ms)
    violations = stale_request_changed(node, before, effects) if before else []

Staleness is judged here, from the state before the request and Kafka's rules, not
from the core's answer, so a core that forgets to fence is caught:

- LeaderAndIsr, UpdateMetadata, StopReplica with a controller epoch below the broker's
  (2.7.0 ReplicaManager.becomeLeaderOrFollower, stopReplicas, KafkaApis
  .handleUpdateMetadataRequest: STALE_CONTROLLER_EPOCH): no partition it names changes,
  nor the broker's controller epoch or metadata.
- LeaderAndIsr naming a leader epoch not above the replica's (becomeLeaderOrFollower:
  FENCED_LEADER_EPOCH, "matches" or "is smaller than" the current one), StopReplica
  likewise (KIP-570) unless it carries none (0.8.2.2's) or the deletion's: that
  partition's replica does not change.
- Fetch and OffsetsForLeaderEpoch whose current leader epoch is below the replica's
  (KIP-320, 2.7.0 Partition.getLocalLog: FENCED_LEADER_EPOCH): the leader's state of that
  partition (high watermark, ISR, what it knows of the asker) does not change.
- Produce of an idempotent producer's batch with an epoch below the one the partition
  knows for its producer id (2.7.0 ProducerAppendInfo.checkProducerEpoch:
  INVALID_PRODUCER_EPOCH, PRODUCER_FENCED in 2.7's newer clients): the log and the
  producer's state do not change.
- AlterIsr to the active controller with a leader epoch below the controller's state
  (2.7.0 KafkaController.processAlterIsr: FENCED_LEADER_EPOCH): no write of the
  proposed state to the store is issued while handling it (the controller processes it
  at once unless an event is queued before it; a queued one is not followed here).

Holds under every profile: 0.8.2.2's requests carry no leader epoch (they are never
stale by one), and its controller-epoch checks are 2.7.0's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker_core import coordination as coord
from broker_core.effects import CoordRequest
from broker_core.invariants import STALE_EPOCH_CHANGES_NOTHING, Violation
from broker_core.messages import (
    EPOCH_DURING_DELETE, NO_LEADER_EPOCH, AlterIsrRequest, FetchRequest, LeaderAndIsrRequest,
    OffsetsForLeaderEpochRequest, ProduceRequest, StopReplicaRequest, UpdateMetadataRequest)
from broker_core.types import TopicPartition

if TYPE_CHECKING:
    from broker_core.broker import BrokerNode

_CONTROLLER_REQUESTS = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


@dataclass
class StaleState:
    """What a stale request must leave as it was: per named partition, the replica's
    state before; the broker-wide part when the controller epoch is stale."""
    request: str
    reason: str
    partitions: dict[TopicPartition, Any] = field(default_factory=dict)
    broker: Any = None
    proposals: dict[TopicPartition, tuple] = field(default_factory=dict)  # AlterIsr: what must not be written
    asker: int | None = None  # a follower's fetch: its progress at the leader is compared too


def replica_state(node: BrokerNode, tp: TopicPartition, asker: int | None = None) -> tuple | None:
    """A replica's state as a comparable value (None: not hosted); ``asker``: also what
    the leader knows of that follower."""
    p = node.replicas.partitions.get(tp)
    if p is None:
        return None
    log = p.log
    fetching = next((leader for leader, f in sorted(node.fetchers.fetchers.items()) if tp in f.states), None)
    state: tuple = (p.role.value, p.leader, p.leader_epoch, p.isr, p.pending_isr, p.zk_version, p.controller_epoch,
                    log.log_start_offset, log.log_end_offset, log.high_watermark, fetching)
    if asker is not None and asker in p.followers:
        f = p.followers[asker]
        state += (f.log_end_offset, f.last_caught_up_ms, f.last_fetch_ms)
    if log.producers:
        state += (tuple((pid, e.producer_epoch, tuple(e.batches)) for pid, e in sorted(log.producers.entries.items())),)
    return state


def _broker_state(node: BrokerNode) -> tuple:
    return (node.replicas.controller_epoch, node.metadata_live, node.metadata_controller,
            tuple(sorted(node.metadata.items())))


def stale_request_state(node: BrokerNode, message: Any) -> StaleState | None:
    """The state ``message`` must not change if it is stale at ``node``, else None."""
    kind = type(message)
    if kind in _CONTROLLER_REQUESTS:
        return _controller_request(node, message)
    if kind is FetchRequest:
        stale = [tp for tp, want in message.partitions.items() if _is_fenced(node, tp, want.current_leader_epoch)]
        asker = message.replica_id if message.replica_id >= 0 else None
        return _per_partition(node, "fetch", "current_leader_epoch", stale, asker)
    if kind is OffsetsForLeaderEpochRequest:
        stale = [tp for tp, (current, _) in message.partitions.items() if _is_fenced(node, tp, current)]
        return _per_partition(node, "offsets_for_leader_epoch", "current_leader_epoch", stale)
    if kind is ProduceRequest:
        return _per_partition(node, "produce", "producer_epoch",
                              [tp for tp, batch in message.partitions.items() if _stale_producer(node, tp, batch)])
    if kind is AlterIsrRequest and node.controller.active:
        return _alter_isr(node, message)
    return None


def _is_fenced(node: BrokerNode, tp: TopicPartition, current_leader_epoch: int) -> bool:
    p = node.replicas.partitions.get(tp)
    return p is not None and 0 <= current_leader_epoch < p.leader_epoch


def _stale_producer(node: BrokerNode, tp: TopicPartition, batch: Any) -> bool:
    p = node.replicas.partitions.get(tp)
    producer_id = getattr(batch, "producer_id", -1)
    if p is None or not isinstance(producer_id, int) or producer_id < 0:
        return False
    entry = p.log.producers.entries.get(producer_id)
    return entry is not None and batch.producer_epoch < entry.producer_epoch


def _per_partition(node: BrokerNode, request: str, reason: str, stale: list[TopicPartition],
                   asker: int | None = None) -> StaleState | None:
    if not stale:
        return None
    return StaleState(request, f"stale {reason}", {tp: replica_state(node, tp, asker) for tp in sorted(stale)},
                      asker=asker)


def _controller_request(node: BrokerNode, message: Any) -> StaleState | None:
    name = {LeaderAndIsrRequest: "leader_and_isr", UpdateMetadataRequest: "update_metadata",
            StopReplicaRequest: "stop_replica"}[type(message)]
    if message.controller_epoch < node.replicas.controller_epoch:
        return StaleState(name, "stale controller_epoch",
                          {tp: replica_state(node, tp) for tp in sorted(message.partitions)}, _broker_state(node))
    stale = []
    for tp in sorted(message.partitions) if type(message) is not UpdateMetadataRequest else ():
        p = node.replicas.partitions.get(tp)
        if p is None:
            continue
        if type(message) is LeaderAndIsrRequest:
            epoch = message.partitions[tp].leader_and_isr.leader_epoch
        else:
            epoch = message.partitions[tp]
            if epoch in (NO_LEADER_EPOCH, EPOCH_DURING_DELETE) or not p.config.stop_replica_leader_epoch:
                continue
        if epoch <= p.leader_epoch:
            stale.append(tp)
    return _per_partition(node, name, "leader_epoch", stale)


def _alter_isr(node: BrokerNode, message: AlterIsrRequest) -> StaleState | None:
    states = node.controller.states
    proposals = {}
    for tp, proposed in sorted(message.partitions.items()):
        current = states.get(tp)
        if current is not None and proposed.leader_epoch < current.leader_epoch:
            path = coord.partition_state_path(tp.topic, tp.partition)
            proposals[tp] = (path, proposed.leader, proposed.leader_epoch, proposed.isr)
    if not proposals:
        return None
    return StaleState("alter_isr", "stale leader_epoch", proposals=proposals)


def stale_request_changed(node: BrokerNode | None, before: StaleState, effects: list) -> list[Violation]:
    """The violations of a stale request handled: what it changed that it must not have.
    ``node`` None: the request stopped the broker (a halt changes nothing of state)."""
    if node is None:
        return []
    out = []
    if before.broker is not None and _broker_state(node) != before.broker:
        out.append(Violation(STALE_EPOCH_CHANGES_NOTHING, None, (node.broker_id,),
                             {"request": before.request, "reason": before.reason, "changed": "broker state"}))
    for tp, state in before.partitions.items():
        after = replica_state(node, tp, before.asker)
        if after != state:
            out.append(Violation(STALE_EPOCH_CHANGES_NOTHING, str(tp), (node.broker_id,),
                                 {"request": before.request, "reason": before.reason,
                                  "before": _plain(state), "after": _plain(after)}))
    for tp, (path, leader, epoch, isr) in before.proposals.items():
        for effect in effects:
            op = effect.op if type(effect) is CoordRequest else None
            if type(op) is coord.SetData and op.path == path:
                data = coord.decode_data(op.data)
                if (data.get("leader"), data.get("leader_epoch"), tuple(data.get("isr", ()))) == (leader, epoch, isr):
                    out.append(Violation(STALE_EPOCH_CHANGES_NOTHING, str(tp), (node.broker_id,),
                                         {"request": before.request, "reason": before.reason,
                                          "written": {"leader": leader, "leader_epoch": epoch, "isr": list(isr)}}))
    return out


def _plain(state: tuple | None) -> list | None:
    return None if state is None else [list(v) if isinstance(v, tuple) else v for v in state]
