"""Idempotent producers at the leader: sequence checks, the five-batch duplicate window,
and producer state that survives failover, restart and truncation (no simpy)."""
from __future__ import annotations

from broker_core.errors import ErrorCode
from broker_core.messages import InitProducerIdRequest, ProduceRequest
from broker_core.records import Record, RecordBatch
from broker_core.types import TopicPartition
from tests.harness import Cluster
from tests.broker_core.logs import AppliedLog

TP = TopicPartition("t", 0)


def started(**kwargs) -> Cluster:
    cluster = Cluster(**kwargs)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    return cluster


def client_batch(sequence: int, count: int = 2, producer_id: int = 7, epoch: int = 0, tag: str = "v") -> RecordBatch:
    """A batch as an idempotent producer sends it: offsets unset, sequence numbered."""
    records = [Record(None, f"{tag}{sequence + i}", 10) for i in range(count)]
    return RecordBatch(0, -1, records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def send(cluster: Cluster, broker: int, batch: RecordBatch, acks: int = -1):
    response = cluster.request_and_wait(broker, lambda cid: ProduceRequest(cid, acks, 30000, {TP: batch}), 10000)
    assert response is not None, "no produce response"
    return response.partitions[TP]


def test_a_retried_batch_within_the_last_five_is_answered_with_its_original_offset_and_not_appended():
    """Kafka 2.7.0 ProducerStateManager.scala ProducerStateEntry.findDuplicateBatch, and
    Log.scala analyzeAndValidateProducerState: a duplicate of one of the producer's last
    five batches returns the original's offsets and appends nothing."""
    cluster = started()
    leader = cluster.leader()
    offsets = [send(cluster, leader, client_batch(2 * i)).base_offset for i in range(5)]
    assert offsets == [0, 2, 4, 6, 8]
    retried = send(cluster, leader, client_batch(0))
    assert (retried.error, retried.base_offset) == (ErrorCode.NONE, 0)
    assert cluster.partition(leader).log.log_end_offset == 10
    assert cluster.traced("produce_duplicate", offset=0, base_sequence=0)


def test_the_sixth_oldest_batch_is_not_a_duplicate_but_out_of_order():
    """Kafka 2.7.0 ProducerStateManager.scala: ProducerStateEntry keeps NumBatchesToRetain
    = 5 batches; an older sequence fails checkSequence with OUT_OF_ORDER_SEQUENCE_NUMBER."""
    cluster = started()
    leader = cluster.leader()
    for i in range(6):
        assert send(cluster, leader, client_batch(2 * i)).error is ErrorCode.NONE
    oldest = send(cluster, leader, client_batch(0))
    assert oldest.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    second = send(cluster, leader, client_batch(2))
    assert (second.error, second.base_offset) == (ErrorCode.NONE, 2)
    assert cluster.partition(leader).log.log_end_offset == 12


def test_a_sequence_gap_is_rejected_and_nothing_is_appended():
    """Kafka 2.7.0 ProducerStateManager.scala ProducerAppendInfo.checkSequence: the first
    sequence must be the last appended one plus one."""
    cluster = started()
    leader = cluster.leader()
    assert send(cluster, leader, client_batch(0)).error is ErrorCode.NONE
    gap = send(cluster, leader, client_batch(5))
    assert gap.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert cluster.partition(leader).log.log_end_offset == 2
    assert cluster.traced("produce_sequence_rejected", base_sequence=5, last_appended_sequence=1)
    assert send(cluster, leader, client_batch(2)).error is ErrorCode.NONE


def test_producer_epochs_a_new_epoch_starts_at_sequence_0_and_an_older_epoch_is_fenced():
    """Kafka 2.7.0 ProducerStateManager.scala ProducerAppendInfo.checkProducerEpoch
    (INVALID_PRODUCER_EPOCH since 2.7) and checkSequence for a new epoch."""
    cluster = started()
    leader = cluster.leader()
    assert send(cluster, leader, client_batch(0, epoch=1)).error is ErrorCode.NONE
    assert send(cluster, leader, client_batch(4, epoch=2)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(cluster, leader, client_batch(0, epoch=2)).error is ErrorCode.NONE
    assert send(cluster, leader, client_batch(2, epoch=1)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    # An unknown producer id is accepted at any sequence (no state: NO_PRODUCER_EPOCH).
    assert send(cluster, leader, client_batch(40, producer_id=8)).error is ErrorCode.NONE


def test_a_duplicate_retried_at_a_new_leader_after_failover_is_not_appended_twice():
    """Kafka 2.7.0 Log.scala: followers record producer state from the batches they
    replicate (append with AppendOrigin.Replication), so the new leader recognises a
    retry of a batch the old leader appended but never acknowledged."""
    cluster = started()
    old = cluster.leader()
    assert send(cluster, old, client_batch(0)).error is ErrorCode.NONE
    assert send(cluster, old, client_batch(2), acks=1).error is ErrorCode.NONE
    assert cluster.wait_for(cluster.settled, 5000)
    cluster.crash(old)
    assert cluster.wait_for(lambda: cluster.leader() not in (None, old), 30000)
    new = cluster.leader()
    retried = send(cluster, new, client_batch(2))
    assert (retried.error, retried.base_offset) == (ErrorCode.NONE, 2)
    assert cluster.values(new) == ["v0", "v1", "v2", "v3"]
    assert send(cluster, new, client_batch(4)).base_offset == 4


def test_a_restarted_broker_rebuilds_producer_state_from_its_log():
    """Kafka 2.7.0 Log.scala loadProducerState: recovery restores producer state (Kafka
    from a snapshot plus the log after it; isrlab from the whole log)."""
    cluster = started(brokers=(1,), replication_factor=1)
    assert send(cluster, 1, client_batch(0)).error is ErrorCode.NONE
    assert send(cluster, 1, client_batch(2)).error is ErrorCode.NONE
    cluster.crash(1)
    cluster.run_for(20000)  # a 2.7 broker restarted while its old session lives would exit
    cluster.start(1)
    assert cluster.wait_for(lambda: cluster.leader() == 1, 30000)
    retried = send(cluster, 1, client_batch(2))
    assert (retried.error, retried.base_offset) == (ErrorCode.NONE, 2)
    assert send(cluster, 1, client_batch(6)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert cluster.partition(1).log.log_end_offset == 4


def test_truncation_forgets_the_producer_state_of_the_truncated_batches():
    """Kafka 2.7.0 Log.scala truncateTo -> loadProducerState: after a truncation the
    state holds only what the log still holds."""
    log = AppliedLog(TP, 1 << 20)
    for sequence in (0, 2, 4):
        log.append_as_leader(client_batch(sequence), 0)
    assert log.producers.entries[7].last_sequence == 5
    log.truncate_to(2)
    assert log.producers.entries[7].last_sequence == 1
    assert [b.first_sequence for b in log.producers.entries[7].batches] == [0]
    log.truncate_to(0)
    assert not log.producers


def test_init_producer_id_blocks_reserved_by_two_brokers_at_once_do_not_overlap():
    """Kafka 2.7.0 ProducerIdManager.scala getNewProducerIdBlock: a block is written with
    a version check; the broker that loses the race reads again and takes the next one."""
    cluster = started()
    cids = [cluster.send(b, InitProducerIdRequest(cluster.next_correlation_id())) for b in (1, 2)]
    assert cluster.wait_for(lambda: all(c in cluster.responses for c in cids), 5000)
    ids = sorted(cluster.responses[c].producer_id for c in cids)
    assert ids == [0, 1000]
    assert all(cluster.responses[c].error is ErrorCode.NONE and cluster.responses[c].producer_epoch == 0
               for c in cids)
    again = cluster.request_and_wait(1, lambda cid: InitProducerIdRequest(cid))
    assert again.producer_id in (1, 1001)


def test_a_version_conflict_on_the_next_block_makes_the_loser_read_again():
    """Kafka 2.7.0 ProducerIdManager.scala getNewProducerIdBlock: the conditional update
    of /latest_producer_id_block fails for the broker that read the older version."""
    cluster = started()
    assert cluster.request_and_wait(1, lambda cid: InitProducerIdRequest(cid)).producer_id == 0
    cids = [cluster.send(b, InitProducerIdRequest(cluster.next_correlation_id())) for b in (2, 3)]
    assert cluster.wait_for(lambda: all(c in cluster.responses for c in cids), 5000)
    assert sorted(cluster.responses[c].producer_id for c in cids) == [1000, 2000]
    reserved = sorted(f["block_start"] for _, _, f in cluster.traced("producer_id_block_reserved"))
    assert reserved == [0, 1000, 2000]


def test_a_transactional_init_producer_id_is_refused():
    """Transactions are not modelled: isrlab answers COORDINATOR_NOT_AVAILABLE where
    Kafka 2.7.0 TransactionCoordinator.handleInitProducerId would look up the
    transactional id's coordinator."""
    cluster = started()
    response = cluster.request_and_wait(1, lambda cid: InitProducerIdRequest(cid, transactional_id="tx"))
    assert response.error is ErrorCode.COORDINATOR_NOT_AVAILABLE and response.producer_id == -1
