"""Truncation on the fetch response (KAFKA-10554, `truncation: diverging_epoch`, the
kafka-3.0 default): the follower fetches from its log end at once with the epoch of its
last record, and the leader answers a diverging epoch where the logs part."""
from __future__ import annotations

import pytest

from broker_core.config import broker_config
from broker_core.effects import Send, Trace
from broker_core.errors import ErrorCode
from broker_core.fetcher import FetchState
from broker_core.messages import (
    CONSUMER_REPLICA_ID, FetchPartition, FetchPartitionResult, FetchRequest, FetchResponse,
    OffsetsForLeaderEpochRequest)
from broker_core.types import TopicPartition
from tests.broker_core.logs import follower_of_broker_1, sent_messages
from tests.broker_core.test_truncation import _missed_leader_changes
from tests.harness import Cluster

TP = TopicPartition("t", 0)
LOG = [(0, 0, "a"), (1, 2, "b"), (2, 2, "c"), (3, 5, "d"), (4, 5, "e")]  # epochs 0@0, 2@1, 5@3


def _follower():
    """A kafka-3.0 follower of broker 1 (leader epoch 7) holding LOG, high watermark 0."""
    return follower_of_broker_1(broker_config("kafka-3.0"), TP, LOG)


_sent = sent_messages


def _diverging(manager, request: FetchRequest, epoch: int, end_offset: int) -> None:
    manager.handle_fetch_response(1, FetchResponse(request.correlation_id, {TP: FetchPartitionResult(
        ErrorCode.NONE, 0, 0, 9, (), epoch, end_offset)}))


def test_kafka_30_a_follower_fetches_at_once_and_truncates_on_the_diverging_epoch():
    """3.0.0 core/src/main/scala/kafka/server/AbstractFetcherThread.scala
    partitionFetchState (isTruncationOnFetchSupported: Fetching from the log end,
    lastFetchedEpoch the log's latest), processFetchRequest and truncateOnFetchResponse
    (getOffsetTruncationState on the diverging epoch); ReplicaFetcherThread.buildFetch
    sends LastFetchedEpoch. No OffsetsForLeaderEpoch request is sent: the leader answers
    (2, 2) for epoch 5, an epoch we have, so we truncate to min(our end of 2 = 3, 2)."""
    ctx, partition, manager = _follower()
    assert manager.fetchers[1].states[TP] is FetchState.FETCHING
    [request] = _sent(ctx)
    assert isinstance(request, FetchRequest)
    wanted = request.partitions[TP]
    assert (wanted.fetch_offset, wanted.current_leader_epoch, wanted.last_fetched_epoch) == (5, 7, 5)
    _diverging(manager, request, 2, 2)
    assert partition.log.log_end_offset == 2
    [received] = [e.fields for e in ctx.out if isinstance(e, Trace) and e.type == "diverging_epoch_received"]
    assert (received["diverging_epoch"], received["truncate_to"], received["done"]) == (2, 2, True)
    [again] = _sent(ctx)
    assert isinstance(again, FetchRequest)
    assert (again.partitions[TP].fetch_offset, again.partitions[TP].last_fetched_epoch) == (2, 2)


def test_kafka_30_an_epoch_the_follower_lacks_truncates_below_it_and_the_next_fetch_is_the_next_round():
    """3.0.0 AbstractFetcherThread.getOffsetTruncationState (KIP-279) through
    truncateOnFetchResponse and updateFetchOffsetAndMaybeMarkTruncationComplete (Fetching
    even when truncation is not complete): the leader answers epoch 3, which we never
    had; we truncate to our end of epoch 2 (3) and our next fetch carries epoch 2."""
    ctx, partition, manager = _follower()
    [request] = _sent(ctx)
    _diverging(manager, request, 3, 4)
    traces = [e.fields for e in ctx.out if isinstance(e, Trace) and e.type == "diverging_epoch_received"]
    assert [(t["round"], t["last_fetched_epoch"], t["truncate_to"], t["done"]) for t in traces] == [(1, 5, 3, False)]
    [again] = _sent(ctx)
    assert (again.partitions[TP].fetch_offset, again.partitions[TP].last_fetched_epoch) == (3, 2)
    _diverging(manager, again, 2, 2)
    assert partition.log.log_end_offset == 2
    assert not [m for m in _sent(ctx) if isinstance(m, OffsetsForLeaderEpochRequest)]


def test_kafka_30_followers_that_missed_leader_changes_end_with_the_logs_kip279_gives(monkeypatch):
    """3.0.0 AbstractFetcherThread.truncateOnFetchResponse against 3.0.0
    cluster/Partition.scala readRecords (the diverging-epoch check with
    lastOffsetForLeaderEpoch): KIP-279's motivating sequence (kip-279.yaml) gives the same
    logs as the OffsetsForLeaderEpoch rounds, and no OffsetsForLeaderEpoch is sent."""
    sent_types = []
    original = Cluster._apply

    def recording(self, broker, effects):
        sent_types.extend(type(e.message).__name__ for e in effects if isinstance(e, Send))
        return original(self, broker, effects)

    monkeypatch.setattr(Cluster, "_apply", recording)
    c = _missed_leader_changes("diverging_epoch")
    assert c.values(2) == c.values(1) == ["a0", "c1", "c2", "c3", "e4", "e5"]
    assert "OffsetsForLeaderEpochRequest" not in sent_types
    e = c.written_in
    rounds = [(f["round"], f["last_fetched_epoch"], f["diverging_epoch"], f["diverging_end_offset"], f["truncate_to"])
              for _, b, f in c.traced("diverging_epoch_received") if b == 2]
    assert rounds == [(1, e["d2"], e["c1"], 4, 2), (2, e["b1"], e["a0"], 1, 1)]


def test_kafka_27_keeps_the_offsets_for_leader_epoch_rounds():
    """2.7.0 core/src/main/scala/kafka/server/ReplicaFetcherThread.scala has no
    isTruncationOnFetchSupported: kafka-2.7 truncates through OffsetsForLeaderEpoch;
    kafka-3.0 on the fetch response."""
    assert broker_config("kafka-2.7").truncation == "leader_epoch"
    assert broker_config("kafka-3.0").truncation == "diverging_epoch"


# -- the leader's side -----------------------------------------------------------------------
@pytest.fixture
def two_epochs():
    """A kafka-3.0 cluster whose leader's log holds a b in the first epoch and c in a later one."""
    c = Cluster(profile="kafka-3.0")
    c.start_all()
    assert c.wait_for(c.settled)
    first = c.partition(c.leader()).leader_epoch
    assert c.produce_and_wait(c.leader(), ["a", "b"]) is ErrorCode.NONE
    old = c.leader()
    c.crash(old)
    assert c.wait_for(lambda: c.leader() not in (None, old), 60000)
    assert c.produce_and_wait(c.leader(), ["c"]) is ErrorCode.NONE
    c.start(old)
    assert c.wait_for(c.settled, 60000)
    return c, first


def _fetch(c: Cluster, offset: int, last_fetched_epoch: int) -> FetchPartitionResult:
    leader = c.leader()
    response = c.request_and_wait(leader, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, 0, 1, {
        TP: FetchPartition(offset, c.partition(leader).leader_epoch, 1 << 20, last_fetched_epoch)}))
    return response.partitions[TP]


def test_the_leader_answers_a_diverging_epoch_or_out_of_range_for_a_last_fetched_epoch(two_epochs):
    """3.0.0 cluster/Partition.scala readRecords: the last fetched epoch is looked up as
    OffsetsForLeaderEpoch would; an epoch ending below the fetch offset is a diverging
    epoch with no records; an epoch the leader cannot answer (above its latest) is
    OFFSET_OUT_OF_RANGE, not a fall back to the high watermark; a consistent one reads."""
    c, first = two_epochs
    diverging = _fetch(c, 3, first)
    assert (diverging.error, diverging.diverging_epoch, diverging.diverging_end_offset) == (ErrorCode.NONE, first, 2)
    assert diverging.batches == ()
    latest = c.partition(c.leader()).log.epochs.latest_epoch
    assert _fetch(c, 3, latest + 1).error is ErrorCode.OFFSET_OUT_OF_RANGE
    read = _fetch(c, 2, first)
    assert read.error is ErrorCode.NONE and read.diverging_epoch == -1 and read.batches
