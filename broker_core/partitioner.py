"""How a producer picks a partition, as the Java client does.

Pure client logic, kept on the ground floor so that both bindings' producers follow
one rule:

- a keyed record goes to ``to_positive(murmur2(key)) % partitions`` (every Java
  client version; Utils.murmur2 and Utils.toPositive, 0.8.2.2's Utils.abs is the
  same mask);
- a keyless record goes round-robin over the partitions that have a leader (0.8.2.2
  Partitioner.partition; RoundRobinPartitioner from 2.4), or, from 2.4, to a "sticky"
  partition that changes only when a new batch is needed (KIP-480:
  DefaultPartitioner with StickyPartitionCache).

Randomness (the round-robin counter's start, the sticky partition's choice) comes
from a generator the runtime seeds, never from a global one.
"""
from __future__ import annotations

from typing import Protocol, Sequence

PARTITIONERS = ("round_robin", "sticky")


class RandomSource(Protocol):
    """The seeded generator a runtime hands in (a seeded ``Random`` in the simulation)."""

    def randrange(self, stop: int) -> int: ...

    def getrandbits(self, k: int) -> int: ...


_MASK = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C


def _signed(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash as Kafka's Utils.murmur2 computes it: Java int
    arithmetic (wrapping at 32 bits), the seed 0x9747b28c, a signed result."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    if tail:  # Java's switch falls through from case 3 to case 1
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return _signed(h)


def to_positive(number: int) -> int:
    """Utils.toPositive: clear the sign bit (not abs: MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """DefaultPartitioner.partition for a keyed record."""
    return to_positive(murmur2(key)) % partitions


def make_partition_for_key(partitions: int):
    """``partition_for_key`` for string keys (UTF-8, as Kafka's StringSerializer),
    remembering each key's partition: a workload reuses a few keys many times."""
    cache: dict[str, int] = {}

    def partition(key: str) -> int:
        found = cache.get(key)
        if found is None:
            found = cache[key] = partition_for_key(key.encode("utf-8"), partitions)
        return found
    return partition


class RoundRobinPartitioner:
    """Keyless records in turn over the partitions that have a leader (0.8.2.2
    Partitioner.partition: a counter starting at a random int; with no partition
    available, over all of them). One instance per topic."""

    name = "round_robin"

    def __init__(self, rng: RandomSource):
        self._counter = rng.getrandbits(31)

    def partition(self, partitions: int, available: Sequence[int]) -> int:
        value = to_positive(self._counter)
        self._counter += 1
        if available:
            return available[value % len(available)]
        return value % partitions

    def take(self, count: int) -> int:
        """Advance the counter by ``count`` records at once; returns its old value, so
        that record j of the run goes to ``available[(old + j) % len(available)]``."""
        old = self._counter
        self._counter += count
        return to_positive(old)

    def on_new_batch(self, partitions: int, available: Sequence[int], previous: int) -> None:
        """The round-robin partitioner does not care about batches."""


class StickyPartitioner:
    """KIP-480 (2.4+ DefaultPartitioner and StickyPartitionCache): keyless records stay
    on one partition until the producer would have to open a new batch there; then
    ``on_new_batch`` moves to another partition with a leader, drawn at random; one
    instance per topic."""

    name = "sticky"

    def __init__(self, rng: RandomSource):
        self._rng = rng
        self._current: int | None = None

    def partition(self, partitions: int, available: Sequence[int]) -> int:
        """StickyPartitionCache.partition: the current sticky partition, chosen on
        first use."""
        if self._current is None:
            return self.on_new_batch(partitions, available, -1)
        return self._current

    def on_new_batch(self, partitions: int, available: Sequence[int], previous: int) -> int:
        """StickyPartitionCache.nextPartition: change only if ``previous`` (the partition
        that needed a new batch) is still the sticky one; never pick the same partition
        again when another one has a leader."""
        old = self._current
        if old is not None and old != previous:
            return old
        if not available:
            new = self._rng.randrange(partitions)
        elif len(available) == 1:
            new = available[0]
        else:
            new = available[self._rng.randrange(len(available))]
            while new == old:
                new = available[self._rng.randrange(len(available))]
        self._current = new
        return new


def make_partitioner(name: str, rng: RandomSource) -> RoundRobinPartitioner | StickyPartitioner:
    if name == "round_robin":
        return RoundRobinPartitioner(rng)
    if name == "sticky":
        return StickyPartitioner(rng)
    raise ValueError(f"unknown partitioner {name!r}; known: {', '.join(PARTITIONERS)}")
