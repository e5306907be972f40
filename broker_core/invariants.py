"""Replication invariants over the cores' state, checked after every step of a run.

Each invariant is named after what it protects, as the TLA+ specifications of Kafka
replication name them (hachikuji/kafka-specification: KafkaReplication.tla's StrongIsr
and LeaderInIsr, Kip320.tla's theorems). They only read core objects (``BrokerNode``
and the coordination store), so the simulation, tests/harness.py and hypothesis
machines all call them the same way::

    view = ClusterView(nodes, store)            # nodes: broker id -> BrokerNode (or None: down)
    observer = InvariantObserver()
    violations = observer.observe(view, [broker])   # after each input a broker handled
    violations = observer.produce_answered(node, request, response)  # acks=all answers (MinIsrOnAcknowledge)
    violations = observer.healed(view)          # once the cluster has settled
    violations = check_all(view)                # the memoryless invariants, once

A violation is a value (:class:`Violation`). Where Kafka itself breaks an invariant
under a setting in force (an unsafe profile or setting), the violation names that
setting in ``allowed_by``: the run still stops, and says it is Kafka's own behaviour,
not a bug of the model. StaleEpochChangesNothing is checked around each request's
handling: broker_core.stale_epochs; LogStartFollowsLeader around each fetch answer a
follower handles, MinIsrOnAcknowledge and CaughtUpFollowerStaysInIsr by the observer:
broker_core.follower_invariants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from broker_core import coordination as coord
from broker_core.errors import ErrorCode
from broker_core.follower_invariants import (
    CAUGHT_UP_FOLLOWER_STAYS_IN_ISR, LOG_START_FOLLOWS_LEADER, MIN_ISR_ON_ACKNOWLEDGE, caught_up_follower_dropped,
    min_isr_on_acknowledge)
from broker_core.messages import LeaderAndIsr, ProduceRequest, ProduceResponse
from broker_core.partition import Partition, Role
from broker_core.types import NO_LEADER, TopicPartition
from broker_core.violation import Violation

if TYPE_CHECKING:  # read only: the invariants never build a node or a store
    from broker_core.broker import BrokerNode
    from broker_core.coordination_store import CoordinationStore

LEADER_IN_ISR = "LeaderInIsr"
STRONG_ISR = "StrongIsr"
HIGH_WATERMARK_BELOW_LOG_END = "HighWatermarkBelowLogEnd"
LEADER_EPOCHS_GROW = "LeaderEpochsGrow"
NO_TWO_LEADERS_IN_ONE_EPOCH = "NoTwoLeadersInOneEpoch"
ACKNOWLEDGED_NEVER_TRUNCATED = "AcknowledgedNeverTruncated"
REPLICAS_AGREE_BELOW_HIGH_WATERMARK = "ReplicasAgreeBelowHighWatermark"
STALE_EPOCH_CHANGES_NOTHING = "StaleEpochChangesNothing"
INVARIANTS = (LEADER_IN_ISR, STRONG_ISR, HIGH_WATERMARK_BELOW_LOG_END, LEADER_EPOCHS_GROW,
              NO_TWO_LEADERS_IN_ONE_EPOCH, ACKNOWLEDGED_NEVER_TRUNCATED, REPLICAS_AGREE_BELOW_HIGH_WATERMARK,
              STALE_EPOCH_CHANGES_NOTHING, MIN_ISR_ON_ACKNOWLEDGE, CAUGHT_UP_FOLLOWER_STAYS_IN_ISR,
              LOG_START_FOLLOWS_LEADER)

# The settings under which Kafka itself loses committed data, as (name, test of a
# topic's config). Power loss is not a setting: the observer is told of it.
UNSAFE_SETTINGS = (
    # 0.8.2.2 ReplicaManager.makeFollowers truncates to the high watermark (KIP-101).
    ("truncation: high_watermark", lambda c: c.truncation == "high_watermark"),
    # 0.11 to 1.1: one round of OffsetsForLeaderEpoch, the leader's offset only (KIP-279).
    ("truncation: leader_epoch_kip101", lambda c: c.truncation == "leader_epoch_kip101"),
    # 2.7.0 PartitionStateMachine: an out-of-ISR replica may lead (OfflinePartitionLeaderElectionStrategy).
    ("unclean.leader.election.enable", lambda c: c.unclean_leader_election_enable),
    # 0.8.2.2 makeFollowers leaves parked produces, answered later (KAFKA-2960).
    ("demotion_completes_produces: false", lambda c: not c.demotion_completes_produces),
    # KAFKA-13091 (2.7 to 3.0): an AlterIsr commit advances the high watermark.
    ("alter_isr_commit_advances_high_watermark", lambda c: c.alter_isr_commit_advances_high_watermark),
)
POWER_LOSS = "power loss (Kafka acknowledges before fsync)"
# Which unsafe settings break which invariant (the others hold under every setting).
_BROKEN_BY = {
    STRONG_ISR: {name for name, _ in UNSAFE_SETTINGS} | {POWER_LOSS},
    REPLICAS_AGREE_BELOW_HIGH_WATERMARK: {name for name, _ in UNSAFE_SETTINGS} | {POWER_LOSS},
    ACKNOWLEDGED_NEVER_TRUNCATED: {name for name, _ in UNSAFE_SETTINGS} | {POWER_LOSS},
}


@dataclass
class ClusterView:
    """What the invariants read: every broker's core (None while it is down) and the
    coordination store (the TLA+ specifications' quorum state), if the caller has one."""
    nodes: Mapping[int, "BrokerNode | None"]
    store: "CoordinationStore | None" = None

    def live(self) -> Iterable[tuple[int, BrokerNode]]:
        return ((b, n) for b, n in sorted(self.nodes.items()) if n is not None)

    def replicas_of(self, tp: TopicPartition) -> list[tuple[int, Partition]]:
        out = []
        for broker, node in self.live():
            partition = node.replicas.partitions.get(tp)
            if partition is not None:
                out.append((broker, partition))
        return out

    def partitions(self) -> set[TopicPartition]:
        return {tp for _, node in self.live() for tp in node.replicas.partitions}

    def quorum_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """The partition's state node in the store (what the controller elects from)."""
        if self.store is None:
            return None
        data = coord.decode_data(self.store.get(coord.partition_state_path(tp.topic, tp.partition)))
        return LeaderAndIsr.from_data(data, 0) if isinstance(data, dict) and "leader" in data else None


def unsafe_in_force(view: ClusterView, topic: str, extra: Iterable[str] = ()) -> set[str]:
    """The unsafe settings any live broker runs ``topic`` with, and ``extra``."""
    found = set(extra)
    for _, node in view.live():
        config = node.config_for_topic(topic)
        found.update(name for name, applies in UNSAFE_SETTINGS if applies(config))
    return found


def _allowed(invariant: str, unsafe: Callable[[], set[str]]) -> tuple[str, ...]:
    """The unsafe settings that allow ``invariant``'s violation; ``unsafe`` is asked only
    then (reading every broker's config after every step would cost more than the check)."""
    return tuple(sorted(_BROKEN_BY.get(invariant, set()) & unsafe()))


# -- the memoryless invariants ------------------------------------------------------------
def leader_in_isr(tp: TopicPartition, replicas: list[tuple[int, Partition]],
                  quorum: LeaderAndIsr | None) -> list[Violation]:
    """LeaderInIsr (KafkaReplication.tla): the quorum's leader is in the quorum's ISR,
    and a replica that leads is in its own ISR. Kafka never takes the last member out
    (2.7.0 PartitionStateMachine / 0.8.2.2 removeReplicaFromIsr keep it while the leader
    is -1) and an unclean election makes the ISR the new leader alone: it holds under
    every profile and setting."""
    out = []
    if quorum is not None and quorum.leader != NO_LEADER and quorum.leader not in quorum.isr:
        out.append(Violation(LEADER_IN_ISR, str(tp), (quorum.leader,),
                             {"where": "quorum", "leader": quorum.leader, "isr": list(quorum.isr),
                              "leader_epoch": quorum.leader_epoch}))
    for broker, p in replicas:
        if p.role is Role.LEADER and broker not in p.isr:
            out.append(Violation(LEADER_IN_ISR, str(tp), (broker,),
                                 {"where": "replica", "isr": list(p.isr), "leader_epoch": p.leader_epoch}))
    return out


def high_watermark_below_log_end(tp: TopicPartition, broker: int, p: Partition) -> list[Violation]:
    """HighWatermarkBelowLogEnd (the specifications' HighWatermarkOk): high watermark <=
    log end offset at every replica. 2.7.0 Log.updateHighWatermark clamps it to the log
    end (and a follower's to its own, ReplicaFetcherThread.processPartitionData); holds
    under every profile and setting. Not log start <= high watermark: a follower's log
    start may pass its lagging high watermark after retention."""
    log = p.log
    if log.high_watermark <= log.log_end_offset:
        return []
    return [Violation(HIGH_WATERMARK_BELOW_LOG_END, str(tp), (broker,),
                      {"high_watermark": log.high_watermark, "log_end_offset": log.log_end_offset,
                       "role": p.role.value})]


def epoch_lineage(p: Partition, low: int, high: int) -> list[tuple[int, int]]:
    """The leader epochs of offsets [low, high) of a replica's log, as (epoch, first
    offset) from its leader-epoch cache: under NoTwoLeadersInOneEpoch an (epoch, offset)
    names one record, so two logs with the same lineage below an offset hold the same
    records there (the specifications' records are (id, epoch) pairs)."""
    entries = p.log.epochs.entries
    out = []
    for i, (epoch, start) in enumerate(entries):
        end = entries[i + 1][1] if i + 1 < len(entries) else p.log.log_end_offset
        first, last = max(start, low), min(end, high)
        if first < last:
            out.append((epoch, first))
    return out


def _is_compacted(p: Partition) -> bool:
    return "compact" in p.config.log_cleanup_policy


def replicas_agree(tp: TopicPartition, leader: tuple[int, Partition], member: tuple[int, Partition],
                   upto: int) -> dict | None:
    """What differs between two replicas' logs below ``upto``, or None. A compacted
    topic's cleaners run apart at each replica and may remove a whole epoch's batches at
    one of them, so there only the log ends are compared."""
    (_, lp), (_, mp) = leader, member
    if mp.log.log_end_offset < upto:
        return {"high_watermark": upto, "member_log_end_offset": mp.log.log_end_offset}
    if _is_compacted(lp) or (lp.log.epochs.entries == mp.log.epochs.entries
                             and lp.log.log_start_offset == mp.log.log_start_offset):
        return None  # the same lineage (the usual case after each fetch): no need to clip it
    low = max(lp.log.log_start_offset, mp.log.log_start_offset)
    mine, theirs = epoch_lineage(lp, low, upto), epoch_lineage(mp, low, upto)
    if mine != theirs:
        return {"high_watermark": upto, "leader_epochs": mine, "member_epochs": theirs}
    return None


def strong_isr(tp: TopicPartition, replicas: list[tuple[int, Partition]], quorum: LeaderAndIsr | None,
               unsafe: Callable[[], set[str]]) -> list[Violation]:
    """StrongIsr (KafkaReplication.tla, proved for Kip320.tla): whatever lies below the
    high watermark of a replica that presumes leadership is on every member of the true
    ISR (the quorum's; the leader's own where there is no store), record for record.
    Kafka 2.7.0 keeps it (Partition.maybeIncrementLeaderHW over the maximal ISR, ISR
    expansion only past the epoch start, truncation by leader epoch); Kafka 0.8.2.2
    breaks it by truncating to the high watermark, unclean election by electing outside
    the ISR, KIP-101 alone by one-round truncation, power loss by losing an ISR
    member's unflushed tail. Members that are down are not read."""
    out = []
    by_broker = dict(replicas)
    for broker, p in replicas:
        if p.role is not Role.LEADER or p.log.high_watermark <= p.log.log_start_offset:
            continue
        isr = quorum.isr if quorum is not None else p.isr
        for member in isr:
            mp = by_broker.get(member)
            if member == broker or mp is None:
                continue
            differs = replicas_agree(tp, (broker, p), (member, mp), p.log.high_watermark)
            if differs is not None:
                differs.update(leader=broker, member=member, leader_epoch=p.leader_epoch, isr=list(isr))
                out.append(Violation(STRONG_ISR, str(tp), (broker, member), differs, _allowed(STRONG_ISR, unsafe)))
    return out


def check_all(view: ClusterView) -> list[Violation]:
    """The invariants that need no memory, over every partition of the view."""
    out = []
    for tp in sorted(view.partitions()):
        replicas = view.replicas_of(tp)
        quorum = view.quorum_state(tp)
        out += leader_in_isr(tp, replicas, quorum)
        for broker, p in replicas:
            out += high_watermark_below_log_end(tp, broker, p)
        out += strong_isr(tp, replicas, quorum, lambda: unsafe_in_force(view, tp.topic))
    return out


# -- the invariants that need memory ------------------------------------------------------
@dataclass
class _Acked:
    """acks=all records acknowledged in one leader epoch: offsets [first, last]."""
    epoch: int
    first: int
    last: int


class InvariantObserver:
    """Checks every invariant after each step, remembering what the stateful ones need:
    each replica's last leader epoch (per process: a restarted broker starts again),
    which broker led each epoch, the acknowledged acks=all records, and the power losses
    the caller reports. It reads only the partitions whose state changed since it last
    looked (a fingerprint per replica) and the store's partition states."""

    def __init__(self) -> None:
        self._processes: dict[int, BrokerNode] = {}
        self._fingerprints: dict[tuple[int, TopicPartition], tuple] = {}
        self._epochs: dict[tuple[int, TopicPartition], int] = {}
        self._leaders: dict[tuple[TopicPartition, int], int] = {}
        self._quorum_raw: dict[TopicPartition, bytes | None] = {}
        self._quorum_epochs: dict[TopicPartition, int] = {}
        self._acked: dict[TopicPartition, list[_Acked]] = {}
        self._pending: dict[tuple[int, TopicPartition], tuple[int, ...] | None] = {}  # the last ISR proposal seen
        self._known: set[TopicPartition] = set()
        self._known_sorted: list[TopicPartition] = []
        self.power_losses: set[int] = set()
        self._quorum: dict[TopicPartition, LeaderAndIsr | None] = {}  # parsed from _quorum_raw

    def power_lost(self, broker: int) -> None:
        """The caller's report: ``broker`` lost power (its unflushed bytes are gone)."""
        self.power_losses.add(broker)

    def _unsafe(self, view: ClusterView, topic: str) -> Callable[[], set[str]]:
        """The unsafe settings in force for ``topic`` when a violation is seen (a setting
        changed at runtime counts as it is then), and power loss if any broker lost power."""
        return lambda: unsafe_in_force(view, topic, [POWER_LOSS] if self.power_losses else [])

    def observe(self, view: ClusterView, brokers: Iterable[int] | None = None) -> list[Violation]:
        """Every invariant over what changed at ``brokers`` (all when None) and in the store."""
        touched: set[TopicPartition] = set()
        out: list[Violation] = []
        for broker in (sorted(view.nodes) if brokers is None else brokers):
            node = view.nodes.get(broker)
            if node is None:
                continue
            if self._processes.get(broker) is not node:  # a new process: its epochs start again
                self._processes[broker] = node
                for key in [k for k in self._epochs if k[0] == broker]:
                    del self._epochs[key]
                for key in [k for k in self._pending if k[0] == broker]:
                    del self._pending[key]
            for tp, p in node.replicas.partitions.items():
                log = p.log
                entries = log.epochs.entries
                fingerprint = (p.role, p.leader_epoch, p.isr, log.log_end_offset, log.high_watermark,
                               log.log_start_offset, entries[-1] if entries else None, p.pending_isr)
                if self._fingerprints.get((broker, tp)) != fingerprint:
                    self._fingerprints[(broker, tp)] = fingerprint
                    touched.add(tp)
                    out += self._replica_changed(tp, broker, p)
        if view.store is not None:
            if not touched <= self._known:
                self._known |= touched
                self._known_sorted = sorted(self._known)  # a run's order, whatever the hash seed
            for tp in self._known_sorted:
                raw = view.store.get(coord.partition_state_path(tp.topic, tp.partition))
                if raw != self._quorum_raw.get(tp):
                    self._quorum_raw[tp] = raw
                    self._quorum[tp] = view.quorum_state(tp)
                    touched.add(tp)
        for tp in sorted(touched):
            out += self._partition_changed(view, tp)
        return out

    def _replica_changed(self, tp: TopicPartition, broker: int, p: Partition) -> list[Violation]:
        out = high_watermark_below_log_end(tp, broker, p)
        last = self._epochs.get((broker, tp))
        if last is not None and p.leader_epoch < last:
            out.append(Violation(LEADER_EPOCHS_GROW, str(tp), (broker,),
                                 {"where": "replica", "leader_epoch": p.leader_epoch, "before": last}))
        self._epochs[(broker, tp)] = p.leader_epoch
        if p.role is Role.LEADER:
            out += self._leads(tp, broker, p.leader_epoch, "replica")
        if p.pending_isr != self._pending.get((broker, tp)):  # a new ISR proposal: judged as it is made
            self._pending[(broker, tp)] = p.pending_isr
            out += caught_up_follower_dropped(tp, broker, p)
        return out

    def _leads(self, tp: TopicPartition, broker: int, epoch: int, where: str) -> list[Violation]:
        """NoTwoLeadersInOneEpoch: each leader epoch has one leader, in the store and at
        the replicas (2.7.0 and 0.8.2.2 alike: the controller bumps the epoch at every
        election, its writes fenced by the controller epoch's version)."""
        first = self._leaders.setdefault((tp, epoch), broker)
        if first == broker:
            return []
        return [Violation(NO_TWO_LEADERS_IN_ONE_EPOCH, str(tp), (first, broker),
                          {"where": where, "leader_epoch": epoch, "first_leader": first, "second_leader": broker})]

    def _partition_changed(self, view: ClusterView, tp: TopicPartition) -> list[Violation]:
        replicas = view.replicas_of(tp)
        quorum = self._quorum.get(tp) if view.store is not None else None
        out = leader_in_isr(tp, replicas, quorum)
        if quorum is not None:
            before = self._quorum_epochs.get(tp)
            if before is not None and quorum.leader_epoch < before:
                out.append(Violation(LEADER_EPOCHS_GROW, str(tp), (quorum.leader,),
                                     {"where": "quorum", "leader_epoch": quorum.leader_epoch, "before": before}))
            self._quorum_epochs[tp] = max(quorum.leader_epoch, before if before is not None else -1)
            if quorum.leader != NO_LEADER:
                out += self._leads(tp, quorum.leader, quorum.leader_epoch, "quorum")
        if any(p.role is Role.LEADER for _, p in replicas):
            unsafe = self._unsafe(view, tp.topic)
            out += strong_isr(tp, replicas, quorum, unsafe)
            out += self._acknowledged_kept(tp, replicas, unsafe)
        return out

    # -- AcknowledgedNeverTruncated -------------------------------------------------------
    def produce_answered(self, view: ClusterView, broker: int, request: ProduceRequest, response: ProduceResponse,
                         appended: Mapping[TopicPartition, tuple[int, int]] | None = None) -> list[Violation]:
        """Feed an answer ``broker`` gave to a produce: its acks=all successes are
        remembered with the leader epoch of their offsets in the acknowledging leader's
        log. Only acks=all records appended with the ISR at least min.insync.replicas
        count (acks=1 ones may be lost by design: 2.7.0 Partition.appendRecordsToLeader).
        ``appended`` (from :func:`appended_by`): per partition, the leader epoch and
        offset at which handling the request appended; an acknowledgement of those
        offsets holding another epoch's records, or beyond the log's end, is a
        violation at once (0.8.2.2's ack after truncation, KAFKA-2960)."""
        node = view.nodes.get(broker)
        if request.acks != -1 or node is None:
            return []
        out = []
        for tp, result in sorted(response.partitions.items()):
            p = node.replicas.partitions.get(tp)
            records = request.partitions.get(tp)
            if p is not None:
                out += min_isr_on_acknowledge(tp, broker, p, result)
            if result.error is not ErrorCode.NONE or result.base_offset < 0 or p is None or records is None:
                continue
            if len(p.isr) < p.config.min_insync_replicas:
                continue
            first, last = result.base_offset, result.base_offset + _record_count(records) - 1
            epochs = epoch_lineage(p, first, last + 1)
            epoch, at = (appended or {}).get(tp, (-1, -1))
            expected = [epoch] if at == first else [e for e, _ in epochs][:1]
            if p.log.log_end_offset <= last or [e for e, _ in epochs] != expected:
                out.append(Violation(ACKNOWLEDGED_NEVER_TRUNCATED, str(tp), (broker,),
                                     {"acknowledged": [first, last], "appended_epoch": epoch,
                                      "log_end_offset": p.log.log_end_offset, "epochs": epochs,
                                      "when": "acknowledged"},
                                     _allowed(ACKNOWLEDGED_NEVER_TRUNCATED, self._unsafe(view, tp.topic))))
                continue
            self._remember_ack(tp, int(expected[0]), first, last)
        return out

    def acknowledged(self, tp: TopicPartition) -> list[tuple[int, int, int]]:
        """The acknowledged acks=all records held to the invariant: (epoch, first, last)."""
        return [(a.epoch, a.first, a.last) for a in self._acked.get(tp, ())]

    def _remember_ack(self, tp: TopicPartition, epoch: int, first: int, last: int) -> None:
        acked = self._acked.setdefault(tp, [])
        if acked and acked[-1].epoch == epoch:
            acked[-1].first, acked[-1].last = min(acked[-1].first, first), max(acked[-1].last, last)
        else:
            acked.append(_Acked(epoch, first, last))

    def _acknowledged_kept(self, tp: TopicPartition, replicas: list[tuple[int, Partition]],
                           unsafe: Callable[[], set[str]]) -> list[Violation]:
        """AcknowledgedNeverTruncated (Raft's leader completeness, which 2.7.0 gives acks=all
        with the ISR at min.insync.replicas and clean election: DelayedProduce waits for the
        high watermark over the maximal ISR, the controller elects from the ISR): a replica
        leading an epoch at or after an acknowledged record's holds it, at its offset and
        in its epoch, unless retention moved the log start past it."""
        out = []
        for broker, p in replicas:
            if p.role is not Role.LEADER:
                continue
            for acked in self._acked.get(tp, ()):
                if p.leader_epoch < acked.epoch or p.log.log_start_offset > acked.last:
                    continue
                low = max(acked.first, p.log.log_start_offset)
                epochs = epoch_lineage(p, low, acked.last + 1)
                if p.log.log_end_offset > acked.last and _holds(p, [e for e, _ in epochs], acked.epoch):
                    continue
                out.append(Violation(ACKNOWLEDGED_NEVER_TRUNCATED, str(tp), (broker,),
                                     {"acknowledged": [acked.first, acked.last], "acknowledged_epoch": acked.epoch,
                                      "leader_epoch": p.leader_epoch, "log_end_offset": p.log.log_end_offset,
                                      "epochs": epochs, "when": "leading"},
                                     _allowed(ACKNOWLEDGED_NEVER_TRUNCATED, unsafe)))
                break
        return out

    # -- ReplicasAgreeBelowHighWatermark --------------------------------------------------
    def healed(self, view: ClusterView) -> list[Violation]:
        """ReplicasAgreeBelowHighWatermark, for the caller to call once every fault is
        healed and every partition settled (one leader, full ISR): every live replica
        holds the leader's log below the leader's high watermark, record for record (the
        final state the TLA+ specifications' WeakIsr and StrongIsr lead to). Broken by
        the same settings as StrongIsr."""
        out = []
        for tp in sorted(view.partitions()):
            replicas = view.replicas_of(tp)
            leaders = [(b, p) for b, p in replicas if p.role is Role.LEADER]
            if len(leaders) != 1:
                continue
            leader = leaders[0]
            for broker, p in replicas:
                if broker == leader[0]:
                    continue
                differs = replicas_agree(tp, leader, (broker, p), leader[1].log.high_watermark)
                if differs is not None:
                    differs.update(leader=leader[0], replica=broker)
                    out.append(Violation(REPLICAS_AGREE_BELOW_HIGH_WATERMARK, str(tp), (leader[0], broker), differs,
                                         _allowed(REPLICAS_AGREE_BELOW_HIGH_WATERMARK, self._unsafe(view, tp.topic))))
        return out


def _holds(p: Partition, epochs: list[int], acked_epoch: int) -> bool:
    """Whether offsets whose epochs are ``epochs`` still hold records acknowledged in
    ``acked_epoch``. On a compacted topic a cleaned-away batch lets an earlier epoch's
    entry cover its offsets, so there only a later epoch (another leader's records
    written over them) counts as lost."""
    if _is_compacted(p):
        return all(e <= acked_epoch for e in epochs)
    return epochs == [acked_epoch]


def log_ends(node: BrokerNode, request: ProduceRequest) -> dict[TopicPartition, int]:
    """The log end of each partition a produce names, before the node handles it."""
    partitions = node.replicas.partitions
    return {tp: partitions[tp].log.log_end_offset for tp in request.partitions if tp in partitions}


def appended_by(node: BrokerNode, ends_before: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """After the node handled a produce: where it appended, as (leader epoch, first
    offset) per partition whose log grew (what produce_answered compares an ack with)."""
    out = {}
    for tp, end in ends_before.items():
        p = node.replicas.partitions.get(tp)
        if p is not None and p.log.log_end_offset > end:
            out[tp] = (p.leader_epoch, end)
    return out


def _record_count(records: Any) -> int:
    """How many records a produce carried for one partition (a batch or a sequence)."""
    next_offset = getattr(records, "next_offset", None)
    base_offset = getattr(records, "base_offset", None)
    if isinstance(next_offset, int) and isinstance(base_offset, int) and next_offset > base_offset:
        return next_offset - base_offset
    count = getattr(records, "record_count", None)
    if isinstance(count, int):
        return count
    inner = getattr(records, "records", None)
    return len(inner) if inner is not None else len(records)
