"""Kafka's partition leader election rules as pure functions.

AR is the assigned replica list in assignment order; ISR order does not matter, only
membership. Each function returns the new leader or None, never raising.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from broker_core import mutants


@dataclass(frozen=True)
class Election:
    leader: int | None
    unclean: bool = False


def offline_partition_leader(assigned: Sequence[int], isr: Collection[int], live: Collection[int],
                             unclean_enabled: bool) -> Election:
    """OfflinePartitionLeaderElectionStrategy.

    The first replica in AR that is alive and in the ISR. If there is none and unclean
    leader election is enabled, the first alive replica in AR (which may lack committed
    data). Otherwise no leader: the partition stays offline.
    """
    for replica in assigned:
        if replica in live and replica in isr:
            return Election(replica)
    if unclean_enabled or mutants.UNCLEAN_IGNORES_SETTING:
        for replica in assigned:
            if replica in live:
                return Election(replica, unclean=True)
    return Election(None)


def preferred_replica_leader(assigned: Sequence[int], isr: Collection[int], live: Collection[int]) -> Election:
    """PreferredReplicaPartitionLeaderElectionStrategy: AR[0] if it is alive and in ISR."""
    if assigned and assigned[0] in live and assigned[0] in isr:
        return Election(assigned[0])
    return Election(None)


def controlled_shutdown_leader(assigned: Sequence[int], isr: Collection[int], live: Collection[int],
                               shutting_down: Collection[int]) -> Election:
    """ControlledShutdownPartitionLeaderElectionStrategy: the first replica in AR that is
    alive, in the ISR and not shutting down."""
    for replica in assigned:
        if replica in live and replica in isr and replica not in shutting_down:
            return Election(replica)
    return Election(None)


def reassignment_leader(target_assigned: Sequence[int], isr: Collection[int], live: Collection[int]) -> Election:
    """ReassignPartitionLeaderElectionStrategy: first replica of the new AR alive and in ISR."""
    for replica in target_assigned:
        if replica in live and replica in isr:
            return Election(replica)
    return Election(None)


def imbalanced_partitions(assignments: Mapping[Any, Sequence[int]], leaders: Mapping[Any, int],
                          percentage: int) -> list:
    """KafkaController.checkAndTriggerAutoLeaderRebalance (2.7.0; checkAndTriggerPartitionRebalance
    in 0.8.2.2): group the partitions by their preferred replica AR[0]; for each such broker,
    the imbalance ratio is the share of its partitions that another broker (or no broker)
    leads. When the ratio exceeds ``percentage`` / 100, every one of those partitions is a
    candidate for a preferred election. Partitions without a known leader count in the
    ratio's denominator only, as in Kafka. Returns the candidates in sorted order."""
    by_preferred: dict[int, list] = {}
    for tp in sorted(assignments):
        if assignments[tp]:
            by_preferred.setdefault(assignments[tp][0], []).append(tp)
    candidates = []
    for broker in sorted(by_preferred):
        partitions = by_preferred[broker]
        elsewhere = [tp for tp in partitions if tp in leaders and leaders[tp] != broker]
        # ratio > percentage / 100, in integers so that no rounding decides
        if len(elsewhere) * 100 > percentage * len(partitions):
            candidates.extend(elsewhere)
    return sorted(candidates)
