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
from sim.idempotence import IdempotentSequences, insert_in_sequence_order

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


def _batch(count: int = 2):
    return SimpleNamespace(tp=TP, values=["v"] * count, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                           sequence_reset=False, attempts=1)


def _sequences(producer_id: int = 5) -> IdempotentSequences:
    sequences = IdempotentSequences()
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
    partition's sequences at 0; a batch of an older epoch changes nothing."""
    sequences = _sequences()
    stale, gap, unknown = _batch(), _batch(), _batch()
    sequences.assign(stale)
    stale.producer_epoch = -7  # numbered under an earlier epoch
    sequences.failed(stale, ErrorCode.INVALID_PRODUCER_EPOCH, adjust_sequences=True)
    assert not sequences.epoch_bump_required
    sequences.assign(gap)
    sequences.failed(gap, ErrorCode.INVALID_PRODUCER_EPOCH, adjust_sequences=True)
    assert sequences.epoch_bump_required
    sequences.maybe_resolve_and_bump()
    sequences.assign(unknown)
    sequences.failed(unknown, ErrorCode.UNKNOWN_PRODUCER_ID, adjust_sequences=False)
    fresh = _batch()
    sequences.assign(fresh)
    assert (fresh.producer_epoch, fresh.base_sequence) == (1, 0) and not sequences.epoch_bump_required
