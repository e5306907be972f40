"""Three invariants on what a leader grants and tells (issue 23: each catches a rule the
older invariants let a broken core break unseen). broker_core/invariants.py's observer
runs the first two; the hosts run the third around a follower's fetch answers, as they
run broker_core/stale_epochs.py around requests (docs/invariants.md).

- MinIsrOnAcknowledge: an acks=all produce answered without error had, when answered,
  a maximal ISR of at least min.insync.replicas. 2.7.0 Partition.appendRecordsToLeader
  refuses the append below it (NOT_ENOUGH_REPLICAS) and checkEnoughReplicasReachOffset
  answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile (over
  curMaximalIsr); 0.8.2.2 Partition.appendMessagesToLeader and
  checkEnoughReplicasReachOffset do the same over the ISR. No setting breaks it.
- CaughtUpFollowerStaysInIsr: the leader never proposes to drop, for lag, a follower
  whose log end is its own (2.7.0 Partition.isFollowerOutOfSync, KAFKA-7152, 2.1+:
  ``logEndOffset != leaderEndOffset &&`` the lag time). Kafka breaks it under the older
  rules, which are availability rules, not losses: 0.8.2.2 getOutOfSyncReplicas drops a
  "stuck" follower that sent no fetch within the lag time, and 0.9 to 2.0 (KIP-16) drop
  one not caught up within it, idle partition or not. It is checked only under the 2.1+
  rule (``isr_lag_rule: last_caught_up_unless_at_log_end``): under the others its
  violation is Kafka's own behaviour, and the library's safe kafka-0.8 runs would stop.
- LogStartFollowsLeader: once a follower has applied a fetch answer, its log start is
  at least the leader's log start in that answer, capped at its high watermark (2.7.0
  ReplicaFetcherThread.processPartitionData: log.maybeIncrementLogStartOffset(
  leaderLogStartOffset, LeaderOffsetIncremented), which refuses to pass the high
  watermark). 0.8.2.2's fetch answer (v0) carries no log start; the core's kafka-0.8
  profile passes it anyway, so the invariant holds on every profile.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from broker_core.errors import ErrorCode
from broker_core.fetcher import FetchState
from broker_core.messages import FetchResponse, ProducePartitionResult
from broker_core.partition import Partition, Role
from broker_core.types import TopicPartition
from broker_core.violation import Violation

if TYPE_CHECKING:  # read only
    from broker_core.broker import BrokerNode

MIN_ISR_ON_ACKNOWLEDGE = "MinIsrOnAcknowledge"
CAUGHT_UP_FOLLOWER_STAYS_IN_ISR = "CaughtUpFollowerStaysInIsr"
LOG_START_FOLLOWS_LEADER = "LogStartFollowsLeader"
# The ISR lag rule under which CaughtUpFollowerStaysInIsr is Kafka's (2.1+).
AT_LOG_END_STAYS = "last_caught_up_unless_at_log_end"


def min_isr_on_acknowledge(tp: TopicPartition, broker: int, p: Partition,
                           result: ProducePartitionResult) -> list[Violation]:
    """MinIsrOnAcknowledge, for one partition of an acks=all answer ``broker`` gave."""
    if result.error is not ErrorCode.NONE or p.role is not Role.LEADER:
        return []
    isr = p.maximal_isr
    if len(isr) >= p.config.min_insync_replicas:
        return []
    return [Violation(MIN_ISR_ON_ACKNOWLEDGE, str(tp), (broker,),
                      {"maximal_isr": list(isr), "min_insync_replicas": p.config.min_insync_replicas,
                       "base_offset": result.base_offset, "leader_epoch": p.leader_epoch})]


def caught_up_follower_dropped(tp: TopicPartition, broker: int, p: Partition) -> list[Violation]:
    """CaughtUpFollowerStaysInIsr, for a leader that has just proposed ``p.pending_isr``
    (the caller calls it once per new proposal: the followers' progress is then what the
    leader decided on; later, a dropped follower may have caught up meanwhile)."""
    pending = p.pending_isr
    if pending is None or p.role is not Role.LEADER or p.config.isr_lag_rule != AT_LOG_END_STAYS:
        return []
    leader_end = p.log.log_end_offset
    out = []
    for replica in p.isr:
        if replica == broker or replica in pending:
            continue
        progress = p.followers.get(replica)
        if progress is not None and progress.log_end_offset == leader_end:
            out.append(Violation(CAUGHT_UP_FOLLOWER_STAYS_IN_ISR, str(tp), (broker, replica),
                                 {"follower": replica, "follower_log_end_offset": progress.log_end_offset,
                                  "leader_log_end_offset": leader_end, "isr": list(p.isr),
                                  "proposed_isr": list(pending), "last_fetch_ms": progress.last_fetch_ms,
                                  "isr_lag_rule": p.config.isr_lag_rule}))
    return out


def log_starts_told(node: "BrokerNode", src: Any, message: Any) -> dict[TopicPartition, int] | None:
    """Before ``node`` handles ``message``: when it is the fetch answer its fetcher for
    ``src`` waits for, the leader's log start per partition the fetcher will apply (no
    error, fetching). None otherwise, or when a partition is out of range (the 0.8
    follower may halt there and apply nothing after it)."""
    if type(message) is not FetchResponse:
        return None
    fetcher = node.fetchers.fetchers.get(src)
    if fetcher is None or fetcher.in_flight != message.correlation_id:
        return None
    told = {}
    for tp, result in message.partitions.items():
        if fetcher.states.get(tp) is not FetchState.FETCHING:
            continue
        if result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            return None
        if result.error is ErrorCode.NONE and result.log_start_offset >= 0:
            told[tp] = result.log_start_offset
    return told or None


def log_start_followed(broker: int, node: "BrokerNode | None",
                       told: Mapping[TopicPartition, int]) -> list[Violation]:
    """LogStartFollowsLeader, after ``node`` handled the answer ``told`` came from."""
    if node is None:
        return []
    out = []
    for tp, leader_start in sorted(told.items()):
        p = node.replicas.partitions.get(tp)
        if p is None:
            continue
        log = p.log
        if log.log_start_offset < min(leader_start, log.high_watermark):
            out.append(Violation(LOG_START_FOLLOWS_LEADER, str(tp), (broker,),
                                 {"log_start_offset": log.log_start_offset, "leader_log_start_offset": leader_start,
                                  "high_watermark": log.high_watermark, "leader": p.leader}))
    return out
