"""Partition assignors as pure functions: range, round-robin and sticky (issue 24).

In Kafka the broker never assigns partitions: the group leader, a consumer, runs the
assignor named by the protocol the group chose and hands the result to the coordinator
in its SyncGroup. The simulated consumers do the same, so the assignors live in the
core (standard library only) where both bindings' clients and the tests can call them.

The rules are Kafka 2.7.0's clients/src/main/java/org/apache/kafka/clients/consumer/
RangeAssignor.java, RoundRobinAssignor.java and StickyAssignor.java (the algorithm is in
internals/AbstractStickyAssignor.java, here broker_core/sticky_assignor.py), with
internals/AbstractPartitionAssignor.java's common work (topics without partitions
skipped; MemberInfo's order). Where Java iterates a HashMap, whose order is an accident
of hash buckets rather than a rule, this module iterates members in Kafka's member order
and partitions in (topic, partition) order, so that the same input always gives the
same output (docs/groups.md, "Assignors").
"""
from __future__ import annotations

from collections.abc import Mapping

from broker_core.assignor_base import Assignment, Subscription, java_order, member_order, partition_order
from broker_core.sticky_assignor import sticky_assign
from broker_core.types import TopicPartition

__all__ = ["RANGE", "ROUND_ROBIN", "STICKY", "STRATEGIES", "Assignment", "Subscription", "UnknownAssignor", "assign",
           "java_order", "member_order", "partition_order", "range_assign", "round_robin_assign", "sticky_assign"]

RANGE = "range"
ROUND_ROBIN = "roundrobin"
STICKY = "sticky"
# The protocol names Kafka 2.7.0's assignors register with (their name() methods).
STRATEGIES = (RANGE, ROUND_ROBIN, STICKY)


class UnknownAssignor(ValueError):
    """A protocol name no assignor here answers to. The coordinator maps a group whose
    members share no known protocol to INCONSISTENT_GROUP_PROTOCOL."""

    def __init__(self, strategy: str) -> None:
        super().__init__(f"unknown partition assignment strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
        self.strategy = strategy


def assign(strategy: str, subscriptions: Mapping[str, Subscription],
           partitions_per_topic: Mapping[str, int]) -> Assignment:
    """The leader's assignment: every member of ``subscriptions`` mapped to its list of
    partitions (possibly empty), for the strategy (protocol) name the group chose.

    ``partitions_per_topic`` is the leader's metadata; as AbstractPartitionAssignor.assign
    does, topics nobody subscribes to and topics with no partitions (unknown to the
    metadata) are left out. Members come in member_order. Raises UnknownAssignor for a
    name not in STRATEGIES."""
    counts = _subscribed_counts(subscriptions, partitions_per_topic)
    if strategy == RANGE:
        return range_assign(subscriptions, counts)
    if strategy == ROUND_ROBIN:
        return round_robin_assign(subscriptions, counts)
    if strategy == STICKY:
        result = sticky_assign(subscriptions, counts)
        return {member: result[member] for member in member_order(subscriptions)}
    raise UnknownAssignor(strategy)


def _subscribed_counts(subscriptions: Mapping[str, Subscription],
                       partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    subscribed = {topic for sub in subscriptions.values() for topic in sub.topics}
    return {topic: count for topic, count in sorted(partitions_per_topic.items(), key=lambda e: java_order(e[0]))
            if topic in subscribed and count > 0}


def range_assign(subscriptions: Mapping[str, Subscription], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """RangeAssignor.assign: per topic, the subscribed members in member order each take a
    contiguous range; the first (partitions % members) of them take one more."""
    ordered = member_order(subscriptions)
    assignment: Assignment = {member: [] for member in ordered}
    for topic in sorted(partitions_per_topic, key=java_order):
        members = [m for m in ordered if topic in subscriptions[m].topics]
        if not members:
            continue
        per_member, extra = divmod(partitions_per_topic[topic], len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return assignment


def round_robin_assign(subscriptions: Mapping[str, Subscription],
                       partitions_per_topic: Mapping[str, int]) -> Assignment:
    """RoundRobinAssignor.assign: all partitions of the subscribed topics, topics sorted,
    dealt one at a time over the members in member order (a circular iterator), skipping
    members that do not subscribe to the partition's topic."""
    ordered = member_order(subscriptions)
    assignment: Assignment = {member: [] for member in ordered}
    if not ordered:
        return assignment
    position = 0
    for topic in sorted(partitions_per_topic, key=java_order):
        if not any(topic in subscriptions[m].topics for m in ordered):
            continue
        for partition in range(partitions_per_topic[topic]):
            while topic not in subscriptions[ordered[position]].topics:
                position = (position + 1) % len(ordered)
            assignment[ordered[position]].append(TopicPartition(topic, partition))
            position = (position + 1) % len(ordered)
    return assignment
