"""Follower truncation: KIP-101 alone, KIP-101 with KIP-279 (rounds), the high watermark
rule of 0.8.2, and what a follower does when its leader's epoch changes but not its leader."""
from __future__ import annotations

from broker_core.config import broker_config
from broker_core.context import NodeContext
from broker_core.epoch_cache import UNDEFINED
from broker_core.errors import ErrorCode
from broker_core.fetcher import FetchState, ReplicaFetcherManager
from broker_core.messages import (
    EpochEndOffset, LeaderAndIsr, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse, PartitionState)
from broker_core.partition import Partition
from broker_core.records import Record, RecordBatch
from broker_core.types import TopicPartition
from tests.harness import Cluster
from tests.broker_core.logs import AppliedLog, follower_of_broker_1, sent_messages

TP = TopicPartition("t", 0)


# -- KIP-279's motivating sequence: a follower that missed several leader changes ------------
def _missed_leader_changes(rule: str) -> Cluster:
    """Two replicas, unclean election, acks=1, each record its own batch. The leadership
    goes 1 -> 2 -> 1 -> 2 -> 1 while the other broker is down each time, so each writes
    in epochs the other never sees (KAFKA-6361; Kafka's EpochDrivenReplicationProtocol
    AcceptanceTest.logsShouldNotDivergeOnUncleanLeaderElections). At the end broker 2
    holds a0 b1(epoch B) d2(epoch D) and broker 1 a0 c1 c2 c3(epoch C) e4 e5(epoch E), with
    B < C < D < E (``c.written_in`` maps each value to its epoch: the numbers depend on how
    many other state changes the controller made, such as removing a dead broker from
    the ISR)."""
    c = Cluster(brokers=(1, 2), replication_factor=2,
                config={"unclean.leader.election.enable": True, "truncation": rule})
    c.start_all()
    assert c.wait_for(c.settled)
    assert c.leader() == 1

    c.written_in = {}

    def lead_and_write(broker: int, values: list[str]) -> None:
        assert c.wait_for(lambda: c.leader() == broker, 60000)
        for value in values:
            assert c.produce_and_wait(broker, [value], acks=1) is ErrorCode.NONE
            c.written_in[value] = c.partition(broker).leader_epoch

    lead_and_write(1, ["a0"])
    assert c.wait_for(c.settled)
    c.crash(1)
    lead_and_write(2, ["b1"])
    c.crash(2)
    c.start(1)
    lead_and_write(1, ["c1", "c2", "c3"])
    c.crash(1)
    c.start(2)
    lead_and_write(2, ["d2"])
    c.crash(2)
    c.start(1)
    lead_and_write(1, ["e4", "e5"])
    c.start(2)
    c.run_for(20000)
    return c


def test_kip101_alone_lets_a_follower_that_missed_leader_changes_diverge():
    """Kafka 1.1.0 ReplicaFetcherThread.maybeTruncate (KIP-101 before KIP-279): one round,
    the leader's offset only. Broker 2 asks for epoch D; broker 1 never had it and answers
    the start of epoch E (offset 4), above broker 2's log end, so broker 2 keeps b1 and d2
    and fetches c3 e4 e5 after them: the logs differ at offsets 1 and 2."""
    c = _missed_leader_changes("leader_epoch_kip101")
    assert c.values(1) == ["a0", "c1", "c2", "c3", "e4", "e5"]
    assert c.values(2) == ["a0", "b1", "d2", "c3", "e4", "e5"]
    [(_, _, answer)] = c.traced("epoch_end_offset_received")
    assert (answer["requested_epoch"], answer["answered_epoch"], answer["answered_end_offset"]) == (
        c.written_in["d2"], UNDEFINED, 4)
    assert answer["truncate_to"] == 3 and answer["done"]


def test_kip279_truncates_round_by_round_until_the_epochs_agree():
    """Kafka 2.7.0 AbstractFetcherThread.getOffsetTruncationState (KIP-279): broker 1
    answers epoch D with (C, 4); broker 2 has no epoch C, so it truncates to its own end of
    epoch B (offset 2, dropping d2) and asks for epoch B; the answer (A, 1), with A the
    epoch of a0, is an epoch it has, so it truncates to 1 (dropping b1) and fetches: the logs agree. Each round is in
    the trace (epoch_end_offset_received, and log_truncated with its round)."""
    c = _missed_leader_changes("leader_epoch")
    assert c.values(2) == c.values(1) == ["a0", "c1", "c2", "c3", "e4", "e5"]
    rounds = [(f["round"], f["requested_epoch"], f["answered_epoch"], f["answered_end_offset"], f["truncate_to"],
               f["done"]) for _, b, f in c.traced("epoch_end_offset_received") if b == 2]
    e = c.written_in
    assert rounds == [(1, e["d2"], e["c1"], 4, 2, False), (2, e["b1"], e["a0"], 1, 1, True)]
    truncations = [(f["round"], f["to_offset"], f["removed"]) for _, b, f in c.traced("log_truncated") if b == 2]
    assert truncations == [(1, 2, ["d2"]), (2, 1, ["b1"])]


# -- the rules one round at a time, on a follower driven directly ----------------------------
def _follower(rule: str, batches: list[tuple[int, int, str]], led_in_epoch: int | None = None, start: int = 0):
    """A follower of broker 1 (leader epoch 7) whose log holds ``(offset, epoch, value)``
    one-record batches; ``led_in_epoch``: it led in that epoch before and wrote nothing."""
    return follower_of_broker_1(broker_config("kafka-2.7", {"truncation": rule}), TP, batches, led_in_epoch, start)


_sent = sent_messages


def _answer(manager, request, epoch: int, end_offset: int) -> None:
    manager.handle_epoch_response(1, OffsetsForLeaderEpochResponse(
        request.correlation_id, {TP: EpochEndOffset(ErrorCode.NONE, epoch, end_offset)}))


LOG = [(0, 0, "a"), (1, 2, "b"), (2, 2, "c"), (3, 5, "d"), (4, 5, "e")]  # epochs 0@0, 2@1, 5@3


def test_kip279_an_answer_for_an_epoch_we_have_ends_truncation_at_the_lower_end():
    """Kafka 2.7.0 AbstractFetcherThread.getOffsetTruncationState: the leader answered an
    epoch we have: truncate to min(our end of it, the leader's end, our log end), done."""
    ctx, partition, manager = _follower("leader_epoch", LOG)
    [request] = _sent(ctx)
    assert request.partitions[TP] == (7, 5)
    _answer(manager, request, 2, 2)
    assert partition.log.log_end_offset == 2
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING


def test_kip279_an_answer_without_an_epoch_truncates_to_the_leaders_offset():
    """Kafka 2.7.0 getOffsetTruncationState: a valid offset with UNDEFINED_EPOCH (a
    leader on the pre-KIP-279 protocol) truncates to min(the leader's offset, our log
    end) and ends truncation."""
    ctx, partition, manager = _follower("leader_epoch", LOG)
    [request] = _sent(ctx)
    _answer(manager, request, UNDEFINED, 2)
    assert partition.log.log_end_offset == 2
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING


def test_kip279_an_answer_below_our_first_epoch_counts_as_an_epoch_we_have():
    """Kafka 2.7.0: the follower looks the answer up in its own cache with the same
    endOffsetFor, which answers an epoch below its first entry with that epoch and the
    first entry's start offset; so the round is final, at min(that, the leader's end)."""
    ctx, partition, manager = _follower("leader_epoch", [(4, 3, "x"), (5, 3, "y"), (6, 5, "z")], start=4)
    [request] = _sent(ctx)
    assert request.partitions[TP] == (7, 5)
    _answer(manager, request, 1, 9)  # the leader's epoch 1 ended at 9; our log starts in epoch 3
    assert partition.log.log_end_offset == 4
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING


def test_kip279_an_undefined_answer_after_a_round_keeps_that_rounds_offset():
    """Kafka 2.7.0 getOffsetTruncationState: UNDEFINED_EPOCH_OFFSET truncates to the
    partition's fetch offset, which after an intermediate round is that round's offset,
    not the high watermark."""
    ctx, partition, manager = _follower("leader_epoch", LOG)
    [request] = _sent(ctx)
    _answer(manager, request, 3, 4)  # an epoch we never had: truncate to our end of epoch 2
    assert partition.log.log_end_offset == 3
    [again] = _sent(ctx)
    assert again.partitions[TP] == (7, 2)
    _answer(manager, again, UNDEFINED, UNDEFINED)
    assert partition.log.log_end_offset == 3 and partition.log.high_watermark == 0
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING


def test_kip279_drops_an_epoch_that_starts_at_the_log_end_so_the_next_round_progresses():
    """Kafka 2.7.0 Log.truncateTo: a target at or past the log end still removes epoch
    entries starting at the log end (a former leader that assigned its epoch and appended
    nothing). Without it the follower would ask for that epoch again, forever."""
    ctx, partition, manager = _follower("leader_epoch", LOG, led_in_epoch=6)
    [request] = _sent(ctx)
    assert partition.log.epochs.entries[-1] == (6, 5)
    assert request.partitions[TP] == (7, 6)
    _answer(manager, request, 5, 9)  # epoch 5 is ours: it ends at our log end, 5
    assert partition.log.log_end_offset == 5
    assert partition.log.epochs.latest_epoch == 5
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING


def test_kip101_truncates_to_the_leaders_offset_in_one_round():
    """Kafka 1.1.0 ReplicaFetcherThread.maybeTruncate: an offset below our log end is the
    truncation point, whatever our epochs say; truncation ends after one round."""
    ctx, partition, manager = _follower("leader_epoch_kip101", LOG)
    [request] = _sent(ctx)
    _answer(manager, request, UNDEFINED, 2)
    assert partition.log.log_end_offset == 2
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING
    assert not [m for m in _sent(ctx) if isinstance(m, OffsetsForLeaderEpochRequest)]


def test_an_answer_to_a_request_from_an_earlier_leader_epoch_is_ignored():
    """Kafka 2.7.0 AbstractFetcherThread.truncateToEpochEndOffsets drops answers whose
    request carried another current leader epoch than the partition's now: a LeaderAndIsr
    (same leader, new epoch) for t-0 arrived while one request for t-0 and t-1 was out.
    t-1 uses its answer; t-0 asks again in its new epoch instead of truncating."""
    config = broker_config("kafka-2.7")
    ctx = NodeContext(2, config)
    partitions = {}
    for tp in (TP, TopicPartition("t", 1)):
        log = AppliedLog(tp, config.log_segment_bytes)
        for offset, epoch, value in LOG:
            log.append_as_follower(RecordBatch(offset, epoch, (Record(None, value, 10),)))
        partitions[tp] = Partition(2, tp, log, config)
        partitions[tp].make_follower(PartitionState(LeaderAndIsr(1, 7, (1, 2), 1), (1, 2)))
    manager = ReplicaFetcherManager(ctx, partitions)
    for tp in sorted(partitions):
        manager.add_partition(partitions[tp])
    _sent(ctx)
    manager.request_timed_out(1)  # the first request held t-0 only; the next holds both
    [stale] = _sent(ctx)
    assert sorted(stale.partitions) == sorted(partitions)
    partitions[TP].make_follower(PartitionState(LeaderAndIsr(1, 8, (1, 2), 1), (1, 2)))
    manager.add_partition(partitions[TP])
    assert _sent(ctx) == []  # one request per leader at a time: the stale one is still out
    manager.handle_epoch_response(1, OffsetsForLeaderEpochResponse(stale.correlation_id, {
        tp: EpochEndOffset(ErrorCode.NONE, 0, 1) for tp in partitions}))
    assert partitions[TopicPartition("t", 1)].log.log_end_offset == 1
    assert partitions[TP].log.log_end_offset == 5
    [fresh] = _sent(ctx)
    assert isinstance(fresh, OffsetsForLeaderEpochRequest) and fresh.partitions == {TP: (8, 5)}


# -- a new leader epoch with the same leader (item: 0.8.2 makeFollowers) ---------------------
def _follower_ahead_of_its_high_watermark(profile: str):
    """Leader 1 with followers 2 and 3; the follower that is not the controller crashes,
    so the leader's high watermark stops while the other follower fetches new records.
    The controller then removes the dead broker from the ISR, which bumps the leader epoch
    and keeps the leader."""
    c = Cluster(profile=profile)
    c.start_all()
    assert c.wait_for(c.settled)
    assert c.leader() == 1
    controller = next(b for b in c.brokers if c.nodes[b].controller.active)
    victim = 3 if controller != 3 else 2
    survivor = 5 - victim
    assert c.produce_and_wait(1, ["a", "b"]) is ErrorCode.NONE
    c.crash(victim)
    c.produce(1, ["c", "d"], acks=1)
    epoch = c.partition(1).leader_epoch
    assert c.wait_for(lambda: c.partition(1).leader_epoch > epoch and c.partition(survivor).leader_epoch > epoch)
    return c, survivor, epoch


def test_kafka_08_a_follower_does_not_truncate_when_the_epoch_changes_but_not_the_leader():
    """Kafka 0.8.2.2 Partition.makeFollower returns false when the leader is unchanged, so
    ReplicaManager.makeFollowers skips truncateTo(high watermark) and keeps the fetcher."""
    c, survivor, epoch = _follower_ahead_of_its_high_watermark("kafka-0.8")
    assert [f for _, b, f in c.traced("became_follower") if b == survivor and f["leader_epoch"] > epoch]
    assert not [f for _, b, f in c.traced("log_truncated") if b == survivor]
    assert c.values(survivor) == ["a", "b", "c", "d"]


def test_kafka_27_a_follower_asks_again_when_the_epoch_changes_but_not_the_leader():
    """Kafka 2.7.0 Partition.makeFollower compares the epoch too, so a new epoch restarts
    the fetcher in Truncating: the follower asks OffsetsForLeaderEpoch again, and since the
    leader still has its epoch, nothing is removed."""
    c, survivor, epoch = _follower_ahead_of_its_high_watermark("kafka-2.7")
    asked = [f for _, b, f in c.traced("epoch_end_offset_received") if b == survivor and f["leader_epoch"] > epoch]
    assert asked and asked[-1]["done"]
    assert not [f for _, b, f in c.traced("log_truncated") if b == survivor]
    assert c.values(survivor) == ["a", "b", "c", "d"]
