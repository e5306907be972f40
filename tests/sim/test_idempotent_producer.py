"""The idempotent producer in whole simulated runs, and its sequence bookkeeping."""
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.history import load_history
from broker_core.errors import ErrorCode
from broker_core.types import TopicPartition
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario
from scenarios.source import ScenarioError
from sim.idempotence import IN_FLIGHT, PER_PARTITION, IdempotentSequences, insert_in_sequence_order

# Slow links and a busy producer widen the window in which the leader's followers hold a
# batch whose acknowledgement the crash destroys: the producer retries it at the new leader.
FAILOVER = """
name: idempotent-failover
cluster:
  brokers: 3
  profile: kafka-2.7
  config: {min.insync.replicas: 2}
  topics: [{name: t, partitions: 3, replication_factor: 3}]
network: {latency_ms: 20, jitter_ms: 10}
workload:
  producers: [{topic: t, acks: all, rate: 2000, retries: 5, request_timeout: 3s, enable.idempotence: IDEMPOTENCE}]
faults:
  - {at: 10s, crash: 1}
  - {at: 25s, restart: 1}
duration: 40s
"""


def test_retries_across_a_leader_failover_duplicate_without_idempotence_and_not_with_it(tmp_path: Path):
    """Kafka 2.7.0 ProducerStateManager.scala (followers keep producer state, so the new
    leader answers a retried batch with its original offset) and the producer's
    TransactionManager.java (a retry resends the same producer id, epoch and sequence)."""
    results = {}
    for enabled in ("false", "true"):
        scenario = parse_scenario(FAILOVER.replace("IDEMPOTENCE", enabled), f"failover-{enabled}.yaml")
        assert scenario.producers[0].enable_idempotence is (enabled == "true")
        results[enabled] = run_scenario(scenario, 1, tmp_path / enabled)
    assert results["false"].verdict["duplicates"].value > 0
    idempotent = results["true"]
    assert idempotent.verdict["duplicates"].value == 0
    assert idempotent.verdict["lost_writes"].value == 0
    events = load_history(idempotent.trace_path).events
    assert any(e.type == "produce_duplicate" for e in events), "the new leader recognised retried batches"
    assert sum(e.type == "producer_id_assigned" for e in events) == 1


def _scenario(producer: str, profile: str = "kafka-2.7") -> str:
    return f"""name: p
cluster:
  brokers: 3
  profile: {profile}
  topics: [{{name: t}}]
workload:
  producers:
    - {producer}
duration: 1s
"""


@pytest.mark.parametrize("profile, expected", [("kafka-0.8", False), ("kafka-2.7", False), ("kafka-3.0", True)])
def test_enable_idempotence_defaults_to_the_profile_and_implies_the_java_retries(profile, expected):
    """Kafka 3.0.1 ProducerConfig (KIP-679's default true; retries default to
    Integer.MAX_VALUE with idempotence); 2.7.0 and 0.8 default to false."""
    spec = parse_scenario(_scenario("{topic: t}", profile), "p.yaml").producers[0]
    assert spec.enable_idempotence is expected
    assert spec.retries == (2**31 - 1 if expected else 0)


def test_a_profile_default_idempotence_is_dropped_when_acks_or_retries_conflict():
    """Kafka 3.0.1 ProducerConfig.postProcessAndValidateIdempotenceConfigs: not set by
    the user, idempotence is disabled by acks other than all or retries 0."""
    for producer in ("{topic: t, acks: 1}", "{topic: t, retries: 0}"):
        assert parse_scenario(_scenario(producer, "kafka-3.0"), "p.yaml").producers[0].enable_idempotence is False


@pytest.mark.parametrize("producer, profile, message", [
    ("{topic: t, enable.idempotence: true}", "kafka-0.8", "kafka-0.8 has no idempotent producer"),
    ("{topic: t, enable.idempotence: true, acks: 1}", "kafka-2.7", "acks must be all"),
    ("{topic: t, enable.idempotence: true, retries: 0}", "kafka-3.0", "retries must not be 0"),
    ("{topic: t, enable.idempotence: yes please}", "kafka-2.7", "must be true or false"),
])
def test_an_impossible_enable_idempotence_names_file_line_and_field(producer, profile, message):
    """Kafka 2.7.0 ProducerConfig (ConfigException for acks/retries with idempotence);
    0.8 brokers have no producer ids at all."""
    with pytest.raises(ScenarioError) as error:
        parse_scenario(_scenario(producer, profile), "p.yaml")
    text = str(error.value)
    assert text.startswith("p.yaml:8: workload.producers[0].enable.idempotence") and message in text


# -- the bookkeeping alone (no simulation) ---------------------------------------------
TP = TopicPartition("t", 0)


def _batch(count: int = 2, tp: TopicPartition = TP):
    return SimpleNamespace(tp=tp, values=["v"] * count, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                           sequence_reset=False, attempts=1)


def _sequences(producer_id: int = 5, sequence_restart: str = PER_PARTITION) -> IdempotentSequences:
    sequences = IdempotentSequences(sequence_restart)
    sequences.set_producer_id(producer_id, 0)
    return sequences


def test_a_retried_batch_is_sent_only_when_it_is_the_first_in_flight_and_requeued_in_sequence_order():
    """Kafka 3.0.0 RecordAccumulator.shouldStopDrainBatchesForPartition and
    insertInSequenceOrder."""
    sequences = _sequences()
    first, second, third = _batch(), _batch(), _batch()
    for batch in (first, second, third):
        assert sequences.may_drain(batch)
        sequences.assign(batch)
    assert [b.base_sequence for b in (first, second, third)] == [0, 2, 4]
    queue = deque([_batch()])
    insert_in_sequence_order(queue, third)
    insert_in_sequence_order(queue, second)
    assert [b.base_sequence for b in queue] == [2, 4, -1]
    assert not sequences.may_drain(second)  # the first batch (sequence 0) is still in flight
    sequences.completed(first)
    assert sequences.may_drain(second) and not sequences.may_drain(third)


def test_out_of_order_after_an_earlier_failure_retries_and_a_real_gap_bumps_the_epoch():
    """Kafka 3.0.0 TransactionManager.canRetry for OUT_OF_ORDER_SEQUENCE_NUMBER, then
    bumpIdempotentProducerEpoch and startSequencesAtBeginning."""
    sequences = _sequences()
    first, second = _batch(), _batch()
    sequences.assign(first)
    sequences.assign(second)
    # The second is not the next sequence after the last acknowledged (-1): just retry.
    assert sequences.can_retry(second, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not sequences.epoch_bump_required
    # The first is the next one: the broker has a gap, so the epoch is bumped.
    assert sequences.can_retry(first, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert sequences.epoch_bump_required
    assert sequences.maybe_resolve_and_bump() is False
    assert sequences.producer_epoch == 1
    assert [(b.producer_epoch, b.base_sequence, b.sequence_reset) for b in (first, second)] == [
        (1, 0, True), (1, 2, True)]
    new = _batch()
    sequences.assign(new)
    assert (new.producer_epoch, new.base_sequence) == (1, 4)


def test_unknown_producer_id_bumps_the_epoch_and_duplicate_sequence_is_a_success():
    """Kafka 3.0.0 TransactionManager.canRetry (UNKNOWN_PRODUCER_ID: always retried by an
    idempotent producer, with an epoch bump) and Sender.completeBatch
    (DUPLICATE_SEQUENCE_NUMBER completes the batch)."""
    sequences = _sequences()
    batch = _batch()
    sequences.assign(batch)
    assert sequences.can_retry(batch, ErrorCode.UNKNOWN_PRODUCER_ID) and sequences.epoch_bump_required
    assert not sequences.can_retry(batch, ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
    sequences.completed(batch)
    assert sequences.partitions[TP].last_acked_sequence == 1 and not sequences.partitions[TP].in_flight


def test_an_expired_batch_leaves_its_partition_unresolved_until_the_epoch_is_bumped():
    """Kafka 3.0.0 TransactionManager.markSequenceUnresolved and maybeResolveSequences:
    new batches wait; with nothing in flight and a gap, the epoch is bumped."""
    sequences = _sequences()
    sent, waiting = _batch(), _batch()
    sequences.assign(sent)
    sequences.expired(sent)
    assert not sequences.may_drain(waiting)
    sequences.maybe_resolve_and_bump()
    assert sequences.producer_epoch == 1 and sequences.may_drain(waiting)
    sequences.assign(waiting)
    assert (waiting.producer_epoch, waiting.base_sequence) == (1, 0)


def test_an_exhausted_epoch_asks_for_a_new_producer_id():
    """Kafka 3.0.0 TransactionManager.bumpIdempotentProducerEpoch: at Short.MAX_VALUE the
    producer id is reset and InitProducerId sent again."""
    sequences = IdempotentSequences()
    sequences.set_producer_id(5, 32767)
    sequences.request_epoch_bump(TP)
    assert sequences.maybe_resolve_and_bump() is True and not sequences.has_producer_id


def test_a_batch_that_finally_fails_closes_its_gap_by_an_epoch_bump_or_a_sequence_reset():
    """Kafka 3.0.0 TransactionManager.handleFailedBatch: an out-of-order batch or one
    failed with retries left bumps the epoch; UNKNOWN_PRODUCER_ID restarts the
    partition's sequences at 0."""
    sequences = _sequences()
    gap, unknown = _batch(), _batch()
    sequences.assign(gap)
    sequences.failed(gap, ErrorCode.INVALID_PRODUCER_EPOCH, adjust_sequences=True)
    assert sequences.epoch_bump_required
    sequences.maybe_resolve_and_bump()
    sequences.assign(unknown)
    sequences.failed(unknown, ErrorCode.UNKNOWN_PRODUCER_ID, adjust_sequences=False)
    fresh = _batch()
    sequences.assign(fresh)
    assert (fresh.producer_epoch, fresh.base_sequence) == (1, 0) and not sequences.epoch_bump_required


# -- each client version's epoch bump (KAFKA-12152, fixed in 2.8.0) ----------------------
OTHER = TopicPartition("t", 1)

# Partition t-0 is led by broker 1, t-1 by broker 2; one record per 100 ms tick goes to
# each partition in turn, answered within a few ms, so between ticks nothing is in
# flight. The cut holds t-0's batch of 2200 ms past `hold`, so it is dropped; the
# client gives it up at its delivery timeout (retries left), which asks for an epoch
# bump for t-0 alone, while t-1 is idle with sequences already used.
IDLE_AT_A_BUMP = """
name: idle-at-a-bump
cluster:
  brokers: 2
  profile: PROFILE
  topics: [{name: t, partitions: 2, replication_factor: 2, assignment: {0: [1, 2], 1: [2, 1]}}]
network: {hold: 20ms}
workload:
  producers: [{topic: t, rate: 10, linger: 100ms, partitioner: round_robin, enable.idempotence: true, start: 1s,
               request_timeout: 150ms, delivery_timeout: 150ms, retry_backoff: 10ms}]
faults:
  - {at: 2150ms, cut: {from: producer-0, to: 1}, for: 100ms}
duration: 3s
"""


def _run_idle_at_a_bump(profile: str, tmp_path: Path, monkeypatch) -> tuple[list, list]:
    """The run's internal events, and every batch's (partition, epoch, sequence) as it
    was first numbered (the client's own view, which no trace event carries)."""
    numbered = []
    assign = IdempotentSequences.assign

    def recording_assign(self, batch):
        assign(self, batch)
        numbered.append((str(batch.tp), batch.producer_epoch, batch.base_sequence))
    monkeypatch.setattr(IdempotentSequences, "assign", recording_assign)
    scenario = parse_scenario(IDLE_AT_A_BUMP.replace("PROFILE", profile), "idle.yaml")
    result = run_scenario(scenario, 1, tmp_path / profile)
    assert result.verdict["failed_but_present"].value == 0 and result.verdict["lost_writes"].value == 0
    return load_history(result.trace_path).events, numbered


def test_kafka_2_7_a_partition_idle_at_an_epoch_bump_keeps_its_sequence_and_bumps_again(tmp_path, monkeypatch):
    """Kafka 2.7.0 clients/src/main/java/org/apache/kafka/clients/producer/internals/
    TransactionManager.java bumpIdempotentProducerEpoch (only partitionsToRewriteSequences
    go through TopicPartitionBookkeeper.startSequencesAtBeginning; no per-partition
    epoch) and canRetry (OUT_OF_ORDER_SEQUENCE_NUMBER on the next expected sequence:
    requestEpochBumpForPartition). KAFKA-12152: the idle partition's next batch carries
    the new epoch with its old sequence; the broker refuses it; the producer bumps again."""
    events, numbered = _run_idle_at_a_bump("kafka-2.7", tmp_path, monkeypatch)
    bumps = [e for e in events if e.type == "producer_epoch_bumped"]
    assert (bumps[0]["producer_epoch"], bumps[0]["partitions"]) == (1, ["t-0"])
    first_under_1 = next(n for n in numbered if n[0] == "t-1" and n[1] == 1)
    assert first_under_1[2] > 0  # t-1 was idle at the bump: its old sequence, not 0
    rejected = next(e for e in events if e.type == "produce_sequence_rejected" and e["partition"] == "t-1")
    assert (rejected["error"], rejected["producer_epoch"], rejected["expected_epoch"], rejected["base_sequence"]) == (
        "OUT_OF_ORDER_SEQUENCE_NUMBER", 1, 0, first_under_1[2])
    assert bumps[0].t_ms < rejected.t_ms < bumps[1].t_ms
    assert (bumps[1]["producer_epoch"], bumps[1]["partitions"]) == (2, ["t-1"])
    # t-0 was idle at that second bump in turn: the bumps cascade while the run lasts.
    assert len(bumps) > 3 and {tuple(b["partitions"]) for b in bumps[2:]} == {("t-0",), ("t-1",)}


def test_kafka_3_0_a_partition_idle_at_an_epoch_bump_restarts_at_sequence_0(tmp_path, monkeypatch):
    """Kafka 3.0.0 clients/src/main/java/org/apache/kafka/clients/producer/internals/
    TransactionManager.java maybeUpdateProducerIdAndEpoch and hasStaleProducerIdAndEpoch
    (the partition's own id and epoch; its sequences restart at 0 when its first batch
    after the bump is drained, RecordAccumulator.drainBatchesForOneNode): one bump only."""
    events, numbered = _run_idle_at_a_bump("kafka-3.0", tmp_path, monkeypatch)
    bumps = [(e["producer_epoch"], e["partitions"]) for e in events if e.type == "producer_epoch_bumped"]
    assert bumps == [(1, ["t-0"])]
    assert next(n for n in numbered if n[0] == "t-1" and n[1] == 1) == ("t-1", 1, 0)
    assert not [e for e in events if e.type == "produce_sequence_rejected"]


def test_a_producer_option_overrides_the_profiles_sequence_restart():
    """Kafka 2.7.0 / 3.0.0 TransactionManager (KAFKA-12152, 2.8.0): the profile picks
    its client's rule; sequence_restart picks either."""
    from broker_core.config import client_defaults
    assert client_defaults("kafka-2.7").sequence_restart == IN_FLIGHT
    assert client_defaults("kafka-3.0").sequence_restart == PER_PARTITION
    spec = parse_scenario(_scenario("{topic: t, sequence_restart: per_partition}"), "p.yaml").producers[0]
    assert spec.sequence_restart == PER_PARTITION
    assert parse_scenario(_scenario("{topic: t}"), "p.yaml").producers[0].sequence_restart is None
    with pytest.raises(ScenarioError) as error:
        parse_scenario(_scenario("{topic: t, sequence_restart: lazy}"), "p.yaml")
    assert "workload.producers[0].sequence_restart" in str(error.value) and "in_flight" in str(error.value)


@pytest.mark.parametrize("restart, expected", [(IN_FLIGHT, (1, 2)), (PER_PARTITION, (1, 0))])
def test_the_bookkeeping_numbers_an_idle_partitions_next_batch_by_its_version(restart, expected):
    """Kafka 2.7.0 TransactionManager.bumpIdempotentProducerEpoch and sequenceNumber (the
    idle partition keeps nextSequence) against 3.0.0 maybeUpdateProducerIdAndEpoch
    (startSequencesAtBeginning at the first drain after the bump)."""
    sequences = _sequences(sequence_restart=restart)
    idle, asking = _batch(tp=OTHER), _batch()
    sequences.assign(idle)
    sequences.completed(idle)
    sequences.assign(asking)
    sequences.request_epoch_bump(TP)
    sequences.maybe_resolve_and_bump()
    assert sequences.restarted == [TP]
    following = _batch(tp=OTHER)
    assert sequences.may_drain(following)
    sequences.assign(following)
    assert (following.producer_epoch, following.base_sequence) == expected


STALE_FAILURES = [(ErrorCode.REQUEST_TIMED_OUT, True), (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True),
                  (ErrorCode.UNKNOWN_PRODUCER_ID, False)]


@pytest.mark.parametrize("error, adjust", STALE_FAILURES, ids=[e.name for e, _ in STALE_FAILURES])
@pytest.mark.parametrize("restart", [IN_FLIGHT, PER_PARTITION])
def test_a_failed_batch_of_an_older_epoch_is_ignored_by_2_7_and_counted_by_3_0(restart, error, adjust):
    """Kafka 2.7.0 clients/src/main/java/org/apache/kafka/clients/producer/internals/
    TransactionManager.java handleFailedBatch
    returns early when producerIdOrEpochNotMatch(batch) ("the producerId has been reset
    internally"); 3.0.0 TransactionManager.java handleFailedBatch has no such return
    (KAFKA-12152 removed it): a batch of an older epoch that fails with retries left
    (Sender.failBatch: adjustSequenceNumbers = attempts < retries) or out of order asks
    for an epoch bump of its partition, and UNKNOWN_PRODUCER_ID resets the partition.
    Driven on the TransactionManager's counterpart, sim.idempotence.IdempotentSequences."""
    sequences = _sequences(sequence_restart=restart)
    stale, asking = _batch(tp=OTHER), _batch()
    sequences.assign(stale)
    sequences.assign(asking)
    sequences.request_epoch_bump(TP)
    sequences.maybe_resolve_and_bump()  # epoch 1 for t-0; t-1's batch is still of epoch 0
    assert (stale.producer_epoch, sequences.producer_epoch) == (0, 1)
    sequences.failed(stale, error, adjust_sequences=adjust)
    assert not sequences.partitions.get(OTHER, SimpleNamespace(in_flight=[])).in_flight
    following = _batch(tp=OTHER)
    if restart == IN_FLIGHT:
        assert not sequences.epoch_bump_required and OTHER in sequences.partitions
        sequences.assign(following)  # KAFKA-12152: the new epoch with the old sequence
        assert (following.producer_epoch, following.base_sequence) == (1, 2)
        return
    if error is ErrorCode.UNKNOWN_PRODUCER_ID:
        assert not sequences.epoch_bump_required and OTHER not in sequences.partitions  # resetSequenceForPartition
    else:
        assert sequences.epoch_bump_required and sequences.partitions_to_rewrite == {OTHER}
        sequences.maybe_resolve_and_bump()
        assert sequences.restarted == [OTHER]
    sequences.assign(following)
    assert following.base_sequence == 0
