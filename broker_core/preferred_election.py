"""The controller's preferred-replica elections: the automatic rebalance
(``auto.leader.rebalance.enable``) and the one an admin asks for through
/admin/preferred_replica_election. Both make each partition's first assigned replica
its leader again when it is alive and in the ISR (``election.py`` holds the choices).

These are steps of the controller (``controller.py``): each function takes the
controller and works on its state through its methods, and the generators run inside
its events, as its other handlers do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core import coordination as coord
from broker_core.election import imbalanced_partitions, preferred_replica_leader
from broker_core.messages import LeaderAndIsr
from broker_core.types import TopicPartition

if TYPE_CHECKING:  # the controller imports this module
    from broker_core.controller import Controller


def schedule_auto_rebalance(controller: Controller, delay_ms: int) -> None:
    epoch = controller.epoch

    def wait():
        yield coord.Sleep(delay_ms)
        if controller.active and controller.epoch == epoch:
            controller.enqueue("auto_rebalance")

    controller.ctx.tasks.start(wait())


def on_auto_rebalance(controller: Controller):
    """KafkaController.processAutoPreferredReplicaLeaderElection: elect the preferred
    replicas of the brokers whose leader imbalance exceeds
    leader.imbalance.per.broker.percentage, then check again after
    leader.imbalance.check.interval.seconds."""
    config = controller.ctx.config
    leaders = {tp: state.leader for tp, state in sorted(controller.states.items())}
    candidates = imbalanced_partitions(controller.assignments, leaders, config.leader_imbalance_per_broker_percentage)
    # canPreferredReplicaBeLeader: AR[0] alive here; in the ISR is judged on the store's state
    yield from elect_preferred(controller, [tp for tp in candidates
                                            if controller.assignments[tp][0] in controller.live])
    schedule_auto_rebalance(controller, config.leader_imbalance_check_interval_seconds * 1000)


def on_preferred_replica_election(controller: Controller):
    """An admin asked for a preferred election by creating /admin/preferred_replica_election
    (kafka-preferred-replica-election.sh): elect the listed partitions' preferred
    replicas, delete the node, and watch for the next request."""
    path = coord.PREFERRED_REPLICA_ELECTION_PATH
    data = yield coord.GetData(path)
    if data.ok:
        requested = [tp for tp in requested_partitions(data.data) if tp in controller.assignments]
        yield from elect_preferred(controller, requested)
        yield coord.Delete(path)
    exists = yield coord.Exists(path, watch=True)
    if exists.ok:  # written again while this one ran
        controller.enqueue("preferred_replica_election")


def elect_preferred(controller: Controller, tps):
    """The preferred-replica election (PreferredReplicaPartitionLeaderElectionStrategy):
    AR[0] leads if it is alive and in the store's ISR; the ISR stays as it is."""
    changed = []
    for tp in tps:
        if tp not in controller.states:
            continue

        def decide(current: LeaderAndIsr, tp=tp):
            if current.leader == controller.assignments[tp][0]:
                return None
            election = preferred_replica_leader(controller.assignments[tp], current.isr, controller.live)
            if election.leader is None:
                return None
            return LeaderAndIsr(election.leader, current.leader_epoch + 1, current.isr, controller.epoch)

        state = yield from controller._write_state(tp, decide)
        if state is not None:
            controller._trace_election(tp, state, "preferred", unclean=False)
            changed.append(tp)
    if changed:
        controller._send_leader_and_isr(changed, sorted(controller.live))
        controller._send_update_metadata()


def requested_partitions(raw: bytes | None) -> list[TopicPartition]:
    """The partitions in the admin's election request: Kafka's format,
    {"version": 1, "partitions": [{"topic": "t", "partition": 0}, ...]}. Entries that
    do not parse are skipped (a bad request must not stop the controller)."""
    try:
        value = coord.decode_data(raw)
    except ValueError:
        return []
    entries = value.get("partitions") if isinstance(value, dict) else None
    out = set()
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        topic, partition = entry.get("topic"), entry.get("partition")
        if isinstance(topic, str) and isinstance(partition, int) and not isinstance(partition, bool):
            out.add(TopicPartition(topic, partition))
    return sorted(out)
