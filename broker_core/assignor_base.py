"""What every assignor shares: a member's Subscription and Kafka's orders of members,
topics and partitions (broker_core/assignors.py is the entry point; the sticky assignor's
algorithm, broker_core/sticky_assignor.py, needs these too, without the dispatch)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker_core.types import TopicPartition


@dataclass(frozen=True)
class Subscription:
    """One member's part of the group: what ConsumerPartitionAssignor.Subscription
    carries in 2.7.0, with the sticky assignor's user data already decoded.

    ``owned_partitions`` and ``generation`` are the member's prior assignment and the
    generation it was made in (StickyAssignor's user data, or ConsumerProtocolSubscription
    v1's OwnedPartitions: broker_core/consumer_protocol.py reads both); ``generation`` is
    None when the member sent none (a first join, or a v0 user data). Only the sticky
    assignor reads them. ``group_instance_id`` (static membership) orders members before
    their member id does, as AbstractPartitionAssignor.MemberInfo.compareTo does."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int | None = None
    group_instance_id: str | None = None

    @classmethod
    def of(cls, topics: Iterable[str], owned: Iterable[TopicPartition] = (), generation: int | None = None,
           group_instance_id: str | None = None) -> "Subscription":
        """A subscription from any iterables (tuples are stored, so it can be hashed)."""
        return cls(tuple(topics), tuple(TopicPartition(t, p) for t, p in owned), generation, group_instance_id)


Assignment = dict[str, list[TopicPartition]]


def java_order(text: str) -> bytes:
    """A sort key that orders strings as Java's String.compareTo does (by UTF-16 code
    unit), so "C10" sorts before "C2" and a character beyond the BMP sorts where Kafka
    puts it; Python's own order (by code point) differs only there."""
    return text.encode("utf-16-be", "surrogatepass")


def partition_order(tp: TopicPartition) -> tuple[bytes, int]:
    """(topic, partition), the order of the sticky assignor's TreeSet of partitions and
    of the round-robin assignor's sorted topics."""
    return java_order(tp.topic), tp.partition


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in AbstractPartitionAssignor.MemberInfo's order: members with a
    group.instance.id first, by that id, then the others by member id."""
    def key(member: str) -> tuple[int, bytes, bytes]:
        instance = subscriptions[member].group_instance_id
        if instance is not None:
            return 0, java_order(instance), java_order(member)
        return 1, b"", java_order(member)
    return sorted(subscriptions, key=key)
