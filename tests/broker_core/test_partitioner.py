"""The producer's partitioners (broker_core/partitioner.py) against the Java client."""
import random

import pytest

from broker_core.partitioner import (
    RoundRobinPartitioner, StickyPartitioner, murmur2, partition_for_key, to_positive)

# Kafka's own test vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
# testMurmur2 (2.7.0)
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("data", sorted(JAVA_MURMUR2))
def test_murmur2_gives_what_the_java_client_gives(data):
    """Kafka 2.7.0 (and 0.8.2.2) clients/.../common/utils/Utils.java murmur2, checked
    against UtilsTest.testMurmur2's vectors: every tail length (0 to 3 bytes) occurs."""
    assert murmur2(data) == JAVA_MURMUR2[data]


def test_a_keyed_record_goes_to_the_positive_hash_mod_partitions():
    """Kafka 2.7.0 DefaultPartitioner.partition: toPositive(murmur2(key)) % partitions;
    toPositive masks the sign bit (0.8.2.2's Utils.abs is the same mask)."""
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF == 1173551340
    assert partition_for_key(b"21", 7) == 1173551340 % 7
    assert partition_for_key(b"abc", 10) == 479470107 % 10
    assert to_positive(-2**31) == 0


def test_round_robin_cycles_over_the_partitions_that_have_a_leader():
    """Kafka 0.8.2.2 clients/.../producer/internals/Partitioner.partition: a counter
    taken modulo the available partitions (those with a leader), all partitions if none."""
    partitioner = RoundRobinPartitioner(random.Random(1))
    got = [partitioner.partition(3, [0, 2]) for _ in range(6)]
    assert sorted(got) == [0, 0, 0, 2, 2, 2] and all(a != b for a, b in zip(got, got[1:]))
    got = [partitioner.partition(3, []) for _ in range(3)]
    assert sorted(got) == [0, 1, 2]
    start = partitioner.take(4)
    assert [partitioner.partition(4, [0, 1, 2, 3])] == [(start + 4) % 4]


def test_sticky_partition_holds_until_its_own_batch_needs_a_new_one():
    """Kafka 2.4.0/2.7.0 StickyPartitionCache.partition and nextPartition (KIP-480): the
    same partition for every keyless record; a new batch for the sticky partition moves
    it to a different available partition; a new batch of another partition does not."""
    partitioner = StickyPartitioner(random.Random(1))
    first = partitioner.partition(6, [0, 1, 2, 3, 4, 5])
    assert all(partitioner.partition(6, [0, 1, 2, 3, 4, 5]) == first for _ in range(10))
    other = (first + 1) % 6
    assert partitioner.on_new_batch(6, [0, 1, 2, 3, 4, 5], other) == first
    seen = set()
    current = first
    for _ in range(200):
        nxt = partitioner.on_new_batch(6, [0, 1, 2, 3, 4, 5], current)
        assert nxt != current
        seen.add(nxt)
        current = nxt
    assert seen == {0, 1, 2, 3, 4, 5}


def test_sticky_partition_moves_only_to_partitions_with_a_leader():
    """Kafka 2.7.0 StickyPartitionCache.nextPartition: chosen among the available
    partitions; with one available, that one; with none, any partition."""
    partitioner = StickyPartitioner(random.Random(2))
    current = partitioner.partition(6, [1, 4])
    for _ in range(20):
        current = partitioner.on_new_batch(6, [1, 4], current)
        assert current in (1, 4)
    assert partitioner.on_new_batch(6, [3], current) == 3
    assert 0 <= partitioner.on_new_batch(6, [], 3) < 6
