"""Delayed produce and delayed fetch (Kafka's purgatory), keyed by partition."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from broker_core.messages import FetchRequest, ProducePartitionResult
from broker_core.types import TopicPartition


# The classes made per message have init=False and a written __init__: mypyc compiles a
# written __init__, while the one @dataclass generates stays interpreted (docs/compiled.md).
@dataclass(init=False)
class DelayedProduce:
    """An acks=all produce waiting for the high watermark to pass each batch."""
    id: int
    src: Hashable
    correlation_id: int
    required_offsets: dict[TopicPartition, int]  # the offset after the appended batch
    base_offsets: dict[TopicPartition, int]
    results: dict[TopicPartition, ProducePartitionResult] = field(default_factory=dict)

    def __init__(self, id: int, src: Hashable, correlation_id: int, required_offsets: dict[TopicPartition, int],
                 base_offsets: dict[TopicPartition, int],
                 results: dict[TopicPartition, ProducePartitionResult] | None = None) -> None:
        self.id = id
        self.src = src
        self.correlation_id = correlation_id
        self.required_offsets = required_offsets
        self.base_offsets = base_offsets
        self.results = {} if results is None else results

    @property
    def is_complete(self) -> bool:
        return all(tp in self.results for tp in self.required_offsets)

    @property
    def timer_key(self) -> tuple:
        return ("produce-timeout", self.id)


@dataclass(init=False)
class HeldProduce:
    """A produce whose appends started flushes by message count, not answered yet.
    Kafka's Log.append (2.7.0; 0.8.2.2 maybeFlush) calls flush() inline in the request
    handler thread, before ReplicaManager.appendRecords returns: only then is an acks=1
    request answered or an acks=all one's DelayedProduce created. ``flushes`` holds, per
    partition still flushing, the log end offset its flush must make durable."""
    id: int
    src: Hashable
    correlation_id: int
    acks: int
    timeout_ms: int
    results: dict[TopicPartition, ProducePartitionResult]
    required_offsets: dict[TopicPartition, int]
    base_offsets: dict[TopicPartition, int]
    flushes: dict[TopicPartition, int]

    def __init__(self, id: int, src: Hashable, correlation_id: int, acks: int, timeout_ms: int,
                 results: dict[TopicPartition, ProducePartitionResult], required_offsets: dict[TopicPartition, int],
                 base_offsets: dict[TopicPartition, int], flushes: dict[TopicPartition, int]) -> None:
        self.id = id
        self.src = src
        self.correlation_id = correlation_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.results = results
        self.required_offsets = required_offsets
        self.base_offsets = base_offsets
        self.flushes = flushes


@dataclass(init=False)
class DelayedFetch:
    id: int
    src: Hashable
    request: FetchRequest

    def __init__(self, id: int, src: Hashable, request: FetchRequest) -> None:
        self.id = id
        self.src = src
        self.request = request

    @property
    def timer_key(self) -> tuple:
        return ("fetch-wait", self.id)


class Purgatory:
    """Operations parked per partition; the lists keep arrival order (determinism)."""

    def __init__(self) -> None:
        self.produces: dict[int, DelayedProduce] = {}
        self.fetches: dict[int, DelayedFetch] = {}
        self.produce_watch: dict[TopicPartition, list[int]] = {}
        self.follower_fetch_watch: dict[TopicPartition, list[int]] = {}
        self.consumer_fetch_watch: dict[TopicPartition, list[int]] = {}
        self.held_produces: dict[int, HeldProduce] = {}  # waiting for their own appends' flushes
        self.flush_watch: dict[TopicPartition, list[int]] = {}
        self._next_id = 0

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def park_produce(self, op: DelayedProduce) -> None:
        self.produces[op.id] = op
        for tp in op.required_offsets:
            self.produce_watch.setdefault(tp, []).append(op.id)

    def hold_produce(self, op: HeldProduce) -> None:
        self.held_produces[op.id] = op
        for tp in sorted(op.flushes):
            self.flush_watch.setdefault(tp, []).append(op.id)

    def park_fetch(self, op: DelayedFetch, follower: bool) -> None:
        self.fetches[op.id] = op
        watch = self.follower_fetch_watch if follower else self.consumer_fetch_watch
        for tp in sorted(op.request.partitions):
            watch.setdefault(tp, []).append(op.id)

    @staticmethod
    def take(watch: dict[TopicPartition, list[int]], tp: TopicPartition) -> list[int]:
        return watch.pop(tp, [])
