"""What a follower's fetch carries and what it does with OFFSET_OUT_OF_RANGE, per
profile: 0.8.2.2 ReplicaFetcherThread.handleOffsetOutOfRange (halt unless unclean
election is on), 2.7.0 AbstractFetcherThread.fetchOffsetAndTruncate; 0.8.2.2 fetches
carry no leader epoch."""
from __future__ import annotations

from broker_core.config import broker_config
from broker_core.context import NodeContext
from broker_core.effects import Halt, Send, Trace
from broker_core.errors import ErrorCode
from broker_core.fetcher import ReplicaFetcherManager
from broker_core.messages import (
    EpochEndOffset, FetchPartitionResult, FetchRequest, FetchResponse, LeaderAndIsr, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, PartitionState)
from broker_core.partition import Partition
from broker_core.records import Record, RecordBatch
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog
from tests.harness import Cluster

TP = TopicPartition("t", 0)


def _follower(profile: str, overrides: dict | None = None, records: int = 5):
    """A follower of broker 1 (leader epoch 7) holding ``records`` one-record batches of
    epoch 3, all below its high watermark (so becoming follower truncates nothing)."""
    config = broker_config(profile, overrides or {})
    ctx = NodeContext(2, config)
    log = AppliedLog(TP, config.log_segment_bytes)
    for offset in range(records):
        log.append_as_follower(RecordBatch(offset, 3, (Record(None, f"v{offset}", 10),)))
    log.high_watermark = records
    partition = Partition(2, TP, log, config)
    partition.make_follower(PartitionState(LeaderAndIsr(1, 7, (1, 2), 1), (1, 2)))
    manager = ReplicaFetcherManager(ctx, {TP: partition})
    manager.add_partition(partition)
    [first] = [e.message for e in ctx.out if isinstance(e, Send)]
    if isinstance(first, OffsetsForLeaderEpochRequest):  # kafka-2.7: the leader has our epoch 3 up to 5
        ctx.out.clear()
        manager.handle_epoch_response(1, OffsetsForLeaderEpochResponse(
            first.correlation_id, {TP: EpochEndOffset(ErrorCode.NONE, 3, records)}))
    return ctx, partition, manager


def _fetch_sent(ctx: NodeContext) -> FetchRequest:
    [request] = [e.message for e in ctx.out if isinstance(e, Send)]
    ctx.out.clear()
    assert isinstance(request, FetchRequest)
    return request


def _out_of_range(ctx, manager, leader_log_start: int, leader_log_end: int) -> None:
    request = _fetch_sent(ctx)
    manager.handle_fetch_response(1, FetchResponse(request.correlation_id, {TP: FetchPartitionResult(
        ErrorCode.OFFSET_OUT_OF_RANGE, 0, leader_log_start, leader_log_end)}))


# -- item: kafka-0.8 OFFSET_OUT_OF_RANGE ----------------------------------------------------
def test_kafka_08_a_leader_behind_the_follower_halts_it_when_unclean_election_is_off():
    """0.8.2.2 server/ReplicaFetcherThread.scala handleOffsetOutOfRange: the leader's latest
    offset is below ours and the topic does not allow unclean election, so truncating
    would lose data: the broker halts (Runtime.halt(1): not clean, not requested),
    keeping its log, and says why."""
    ctx, partition, manager = _follower("kafka-0.8", {"unclean.leader.election.enable": False})
    _out_of_range(ctx, manager, 0, 3)
    [halt] = [e for e in ctx.out if isinstance(e, Halt)]
    assert (halt.clean, halt.requested) == (False, False)
    [refused] = [e.fields for e in ctx.out if isinstance(e, Trace) and e.type == "truncation_refused"]
    assert (refused["leader_log_end_offset"], refused["log_end_offset"], refused["reason"]) == (
        3, 5, "unclean_leader_election_disabled")
    assert partition.log.log_end_offset == 5


def test_kafka_08_a_leader_behind_the_follower_truncates_it_when_unclean_election_is_on():
    """0.8.2.2 handleOffsetOutOfRange: with unclean election allowed for the topic (the
    profile's default) the follower truncates to the leader's latest offset."""
    ctx, partition, manager = _follower("kafka-0.8")
    _out_of_range(ctx, manager, 0, 3)
    assert not [e for e in ctx.out if isinstance(e, Halt)]
    assert partition.log.log_end_offset == 3
    assert _fetch_sent(ctx).partitions[TP].fetch_offset == 3


def test_kafka_08_a_leader_not_behind_makes_the_follower_start_over_at_its_log_start():
    """0.8.2.2 handleOffsetOutOfRange: when the leader's latest offset is not below ours,
    truncateFullyAndStartAt(the leader's earliest offset), even when that is below our log
    end: the follower refetches everything from there."""
    ctx, partition, manager = _follower("kafka-0.8")
    _out_of_range(ctx, manager, 0, 6)
    assert partition.log.log_end_offset == 0 and partition.log.log_start_offset == 0
    assert _fetch_sent(ctx).partitions[TP].fetch_offset == 0


def test_kafka_27_keeps_its_log_when_the_leaders_start_is_below_its_end():
    """2.7.0 server/AbstractFetcherThread.scala fetchOffsetAndTruncate: a leader not behind
    us means fetching from max(the leader's start, our end); only a leader start above our
    end truncates fully. A leader behind us truncates us to its end whatever the unclean
    election setting (no halt since 0.8.2)."""
    ctx, partition, manager = _follower("kafka-2.7")
    _out_of_range(ctx, manager, 0, 6)
    assert partition.log.log_end_offset == 5
    _out_of_range(ctx, manager, 0, 3)
    assert not [e for e in ctx.out if isinstance(e, Halt)]
    assert partition.log.log_end_offset == 3


def test_kafka_08_the_harness_stops_a_halted_follower():
    """0.8.2.2 handleOffsetOutOfRange's halt, carried out by a runtime: a follower ahead of
    its leader with unclean election off halts, its session expires, and it is gone from
    the cluster (broker_halted), keeping its longer log on disk."""
    c = Cluster(profile="kafka-0.8", config={"unclean.leader.election.enable": False})
    c.start_all()
    assert c.wait_for(c.settled)
    leader = c.leader()
    follower = next(b for b in c.brokers if b != leader)
    assert c.produce_and_wait(leader, ["a", "b", "c"]) is ErrorCode.NONE
    # The leader's log loses its tail behind the followers' backs (as a power loss can).
    for effect in c.partition(leader).log.truncate_to(1):
        c.disks[leader].apply(effect)
    assert c.wait_for(lambda: follower not in c.nodes, 5000)
    [(_, _, halted)] = [t for t in c.traced("broker_halted") if t[1] == follower]
    assert not halted["clean"]
    assert c.traced("truncation_refused")


# -- item: kafka-0.8 fetches carry no leader epoch -------------------------------------------
def test_kafka_08_follower_fetches_carry_no_leader_epoch():
    """0.8.2.2 api/FetchRequest.scala has no leader epoch (KIP-320 is 2.1+): the follower
    sends -1, which the leader never fences; kafka-2.7 sends its current leader epoch."""
    ctx, _, _ = _follower("kafka-0.8")
    assert _fetch_sent(ctx).partitions[TP].current_leader_epoch == -1
    ctx, _, _ = _follower("kafka-2.7")
    assert _fetch_sent(ctx).partitions[TP].current_leader_epoch == 7
