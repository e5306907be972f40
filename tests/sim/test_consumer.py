"""The simulated consumer's position: auto.offset.reset, a start offset, and KIP-320
validation after a leader change (sim/consumer.py)."""
import random
from pathlib import Path

import pytest
import simpy

from analysis.history import load_history
from broker_core.errors import ErrorCode
from broker_core.messages import (
    EpochEndOffset, ListOffsetsPartitionResult, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, OffsetsForLeaderEpochResponse, PartitionMetadata)
from broker_core.types import TopicPartition
from scenarios.parse import parse_scenario
from scenarios.runner import run_scenario
from sim.consumer import SimConsumer
from sim.network import LinkSpec, Network

TP = TopicPartition("t", 0)

# A 3-broker cluster whose leader (1) loses its followers, acknowledges alone, and is
# then cut off; broker 2 becomes leader uncleanly, without what broker 1 had alone. A
# consumer that read those records from broker 1 now stands past the new leader's log
# for its epoch, while the producer (short timeouts) writes on at broker 2.
UNCLEAN = """
name: consumer-unclean
cluster:
  brokers: 3
  profile: {profile}
  config: {{unclean.leader.election.enable: true, replica.lag.time.max.ms: 5000, zookeeper.session.timeout.ms: 6000}}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
workload:
  producers: [{{topic: t, acks: all, rate: 100, request_timeout: 2s, retries: 5}}]
  consumers: [{{topic: t{consumer}}}]
faults:
  - {{at: 3s, partition: [[1], [2, 3]]}}
  - {{when: {{partition: t-0, isr: [1]}}, delay: 3s, isolate: 1}}
  - {{at: 30s, heal: true}}
duration: 40s
final: {{max_wait: 10s}}
"""

STEADY = """
name: consumer-steady
cluster:
  brokers: 3
  topics: [{name: t, partitions: 1, replication_factor: 3}]
workload:
  producers: [{topic: t, acks: all, rate: 100}]
  consumers: [CONSUMER]
duration: 4s
"""


def run(tmp_path: Path, text: str, name: str = "c.yaml"):
    result = run_scenario(parse_scenario(text, name), 1, tmp_path)
    return load_history(result.trace_path)


def resets(history, reason=None):
    return [e for e in history.events if e.type == "position_reset" and (reason is None or e["reason"] == reason)]


def first_polled_offset(history) -> int:
    polls = [o for o in history.of("poll") if o.outcome == "ok" and o.completion["records"].get("t-0")]
    return polls[0].completion["records"]["t-0"][0][0]


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_leader_change_validation_detects_truncation_only_from_kafka_2_1(tmp_path: Path, profile: str):
    """Kafka 2.7.0 clients/.../consumer/internals/SubscriptionState.maybeValidatePositionForCurrentLeader
    and maybeCompleteValidation, Fetcher.validateOffsetsAsync (KIP-320): after a leader
    change the consumer asks the new leader (OffsetsForLeaderEpoch) where the epoch of its
    last record ends; an end below its position is a truncation, and with a reset policy
    it seeks to that end offset. Kafka 0.8 consumers do not validate."""
    history = run(tmp_path, UNCLEAN.format(profile=profile, consumer=""))
    unclean = [e for e in history.events if e.type == "leader_elected" and e["unclean"]]
    assert unclean and unclean[0]["leader"] == 2
    detected = resets(history, "truncation_detected")
    if profile == "kafka-0.8":
        assert detected == []
        return
    assert len(detected) == 1
    reset = detected[0]
    truncated = [e for e in history.events if e.type == "log_truncated" and e.node == "broker-1"]
    # broker 2's log for epoch 0 ends where broker 1's log was cut back to
    assert reset["to_offset"] == truncated[0]["to_offset"] < reset["from_offset"]
    assert reset.node == "consumer-0" and reset.t_ms > unclean[0].t_ms
    polls = [o for o in history.of("poll") if o.outcome == "ok" and o.completion.t_ms > reset.t_ms
             and o.completion["records"].get("t-0")]
    assert polls[0].completion["records"]["t-0"][0][0] == reset["to_offset"]


def test_without_validation_the_consumer_skips_the_new_leaders_records(tmp_path: Path):
    """The same run with ``validate_positions: false`` (a client before KIP-320, Kafka
    2.1): the consumer keeps its position and fetches from the new leader, whose log has
    grown past it with other records, so it silently skips those between the
    truncation point and its position (what KIP-320 fixes)."""
    history = run(tmp_path, UNCLEAN.format(profile="kafka-2.7", consumer=", validate_positions: false"))
    assert resets(history, "truncation_detected") == [] and resets(history, "out_of_range") == []
    unclean = next(e for e in history.events if e.type == "leader_elected" and e["unclean"])
    truncated = next(e for e in history.events if e.type == "log_truncated" and e.node == "broker-1")
    before = [o for o in history.of("poll") if o.outcome == "ok" and o.invoke.t_ms < unclean.t_ms
              and o.completion["records"].get("t-0")]
    after = [o for o in history.of("poll") if o.outcome == "ok" and o.invoke.t_ms > unclean.t_ms
             and o.completion["records"].get("t-0")]
    position = before[-1].completion["records"]["t-0"][-1][0] + 1
    assert after[0].completion["records"]["t-0"][0][0] == position > truncated["to_offset"]


def test_truncation_without_a_reset_policy_stops_the_partition(tmp_path: Path):
    """Kafka 2.7.0 SubscriptionState.maybeCompleteValidation with no reset policy returns
    the truncation and Fetcher raises LogTruncationException: the position stays, and the
    consumer (an application that does not seek) consumes that partition no more."""
    history = run(tmp_path, UNCLEAN.format(profile="kafka-2.7",
                                           consumer=", auto.offset.reset: none, start_offset: 0"))
    raised = [e for e in history.events if e.type == "exception_raised"]
    assert [e["exception"] for e in raised] == ["LogTruncationException"]
    assert raised[0]["divergent_offset"] < raised[0]["fetch_offset"]
    assert resets(history, "truncation_detected") == []
    later = [o for o in history.of("poll") if o.invoke.t_ms > raised[0].t_ms and "t-0" in o.invoke["positions"]]
    assert later == []
    behind = [e for e in history.events if e.type == "consumers_behind"]
    assert behind and behind[0]["behind"] == [["consumer-0", "t-0"]]


@pytest.mark.parametrize("policy", ["earliest", "latest"])
def test_initial_position_follows_auto_offset_reset(tmp_path: Path, policy: str):
    """Kafka 2.7.0 Fetcher.resetOffsetsIfNeeded (ListOffsets, earliest or latest) for a
    partition without a position: a consumer starting at 2 s with ``latest`` begins at
    the high watermark, with ``earliest`` at offset 0."""
    history = run(tmp_path, STEADY.replace("CONSUMER", f"{{topic: t, start: 2s, auto.offset.reset: {policy}}}"))
    initial = resets(history, "initial")
    assert len(initial) == 1 and initial[0]["from_offset"] == -1
    if policy == "earliest":
        assert initial[0]["to_offset"] == 0
    else:
        assert 150 < initial[0]["to_offset"] < 250  # about 2 s of 100 records/s
    assert first_polled_offset(history) == initial[0]["to_offset"]


@pytest.mark.parametrize("policy,expected", [("earliest", 0), ("latest", None)])
def test_out_of_range_position_resets_by_policy(tmp_path: Path, policy: str, expected):
    """Kafka 2.7.0 Fetcher.handleOffsetOutOfRange: OFFSET_OUT_OF_RANGE with a reset policy
    resets the position by it (a start offset far past the log end here)."""
    history = run(tmp_path, STEADY.replace(
        "CONSUMER", f"{{topic: t, start: 1s, start_offset: 100000, auto.offset.reset: {policy}}}"))
    assert [(e["from_offset"], e["to_offset"]) for e in resets(history, "initial")] == [(-1, 100000)]
    out = resets(history, "out_of_range")
    assert len(out) == 1 and out[0]["from_offset"] == 100000
    if expected is not None:
        assert out[0]["to_offset"] == expected
    else:
        assert 50 < out[0]["to_offset"] < 150
    assert first_polled_offset(history) == out[0]["to_offset"]


def test_out_of_range_without_a_policy_raises(tmp_path: Path):
    """Kafka 2.7.0 Fetcher.handleOffsetOutOfRange without a reset policy throws
    OffsetOutOfRangeException; the position is not moved."""
    history = run(tmp_path, STEADY.replace(
        "CONSUMER", "{topic: t, start_offset: 100000, auto.offset.reset: none}"))
    raised = [e for e in history.events if e.type == "exception_raised"]
    assert [(e["exception"], e["fetch_offset"]) for e in raised] == [("OffsetOutOfRangeException", 100000)]
    assert resets(history, "out_of_range") == []


FENCED = """
name: consumer-fenced
cluster:
  brokers: 3
  profile: {profile}
  topics: [{{name: t, partitions: 1, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
workload:
  producers: [{{topic: t, acks: 1, rate: 100}}]
  consumers: [{{topic: t}}]
faults:
  - {{at: 2s, crash: 3}}
duration: 5s
"""


@pytest.mark.parametrize("profile", ["kafka-2.7", "kafka-0.8"])
def test_fetch_carries_the_leader_epoch_from_kafka_2_1(tmp_path: Path, profile: str):
    """Kafka 2.7.0 Fetcher.prepareFetchRequests (the position's current leader epoch in
    each FetchPartition, KIP-320) and Fetcher.initializeCompletedFetch: when a follower
    dies the controller bumps the leader epoch (same leader); the consumer's next fetch,
    with the old epoch, is fenced (FENCED_LEADER_EPOCH), it refreshes its metadata,
    validates its position with the new epoch and fetches on from the same offset. A
    Kafka 0.8 consumer sends no epoch and is never fenced."""
    history = run(tmp_path, FENCED.format(profile=profile))
    bumped = next(e for e in history.events if e.type == "isr_shrunk" and e["by"] == "controller")
    assert bumped["leader_epoch"] == 1
    fenced = [o for o in history.of("poll") if o.outcome == "ok"
              and o.completion.fields.get("errors", {}).get("t-0") == "FENCED_LEADER_EPOCH"]
    assert resets(history) == resets(history, "initial")
    if profile == "kafka-0.8":
        assert fenced == []
        return
    # Fenced at least once (again while the metadata it refreshes from is still stale),
    # always at the same position, from which it then fetches on.
    assert fenced and len({o.invoke["positions"]["t-0"] for o in fenced}) == 1
    position = fenced[0].invoke["positions"]["t-0"]
    later = [o for o in history.of("poll") if o.outcome == "ok" and o.invoke.t_ms > fenced[-1].completion.t_ms
             and o.completion["records"].get("t-0")]
    assert later[0].completion["records"]["t-0"][0][0] == position


def a_consumer(validate: bool) -> SimConsumer:
    env = simpy.Environment()
    network = Network(env, random.Random(1), LinkSpec())
    return SimConsumer(env, network, "consumer-0", [1, 2, 3], lambda *a: None, [TP],
                       validate_positions=validate)


@pytest.mark.parametrize("validate", [True, False])
def test_metadata_with_an_older_leader_epoch_is_ignored_from_kafka_2_1(validate: bool):
    """Kafka 2.7.0 clients/.../Metadata.updateLatestMetadata: a KIP-320 client keeps the
    leader of the newest epoch it knows when a broker with stale metadata names an older
    one; older clients take whatever they are told."""
    consumer = a_consumer(validate)
    consumer._pending[6] = "metadata"  # two metadata requests in flight, answered in turn
    newer = PartitionMetadata(ErrorCode.NONE, 2, 5, (1, 2, 3), (2,))
    older = PartitionMetadata(ErrorCode.NONE, 1, 4, (1, 2, 3), (1,))
    consumer._receive("broker-1", MetadataResponse(6, (1, 2, 3), 1, {TP: newer}))
    consumer._pending[7] = "metadata"
    consumer._receive("broker-3", MetadataResponse(7, (1, 2, 3), 1, {TP: older}))
    assert (consumer.leaders[TP], consumer.leader_epochs[TP]) == ((2, 5) if validate else (1, 4))


def test_a_validation_answer_for_an_older_position_or_leader_is_ignored():
    """Kafka 2.7.0 SubscriptionState.maybeCompleteValidation: an OffsetsForLeaderEpoch
    answer counts only if the position (offset and current leader) is still the one the
    request was sent for; otherwise a newer validation is under way."""
    consumer = a_consumer(True)
    state = consumer.states[TP]
    state.state, state.position, state.offset_epoch, state.leader, state.leader_epoch = "await_validation", 50, 0, 2, 6
    answer = OffsetsForLeaderEpochResponse(1, {TP: EpochEndOffset(ErrorCode.NONE, 0, 10)})
    consumer._on_validation({TP: (50, 5)}, answer)  # sent while the leader epoch was 5
    assert (state.state, state.position) == ("await_validation", 50)
    consumer._on_validation({TP: (50, 6)}, answer)
    assert (state.state, state.position) == ("fetching", 10)


@pytest.mark.parametrize("policy", ["earliest", "none"])
def test_a_leader_that_knows_no_such_epoch_resets_or_raises(policy: str):
    """Kafka 2.7.0 SubscriptionState.maybeCompleteValidation, hasUndefinedEpochOrOffset:
    when the new leader has no epoch at or below the consumer's, the position is reset
    by the policy (a ListOffsets follows), or without one LogTruncationException is
    raised with no divergent offset."""
    events = []
    consumer = a_consumer(True)
    consumer._trace = lambda node, type_, fields: events.append((type_, fields))
    consumer.auto_offset_reset = policy
    state = consumer.states[TP]
    state.state, state.position, state.offset_epoch, state.leader, state.leader_epoch = "await_validation", 50, 0, 2, 6
    undefined = OffsetsForLeaderEpochResponse(1, {TP: EpochEndOffset(ErrorCode.NONE, -1, -1)})
    consumer._on_validation({TP: (50, 6)}, undefined)
    if policy == "earliest":
        assert (state.state, state.reset_reason, state.position) == ("await_reset", "truncation_detected", 50)
        assert events == []
    else:
        assert state.state == "failed"
        assert events == [("exception_raised", {"exception": "LogTruncationException", "partition": "t-0",
                                                "fetch_offset": 50, "divergent_offset": -1})]


def test_a_fenced_validation_asks_for_new_metadata_and_keeps_waiting():
    """Kafka 2.7.0 Fetcher.validateOffsetsAsync: a partition whose OffsetsForLeaderEpoch
    failed (FENCED_LEADER_EPOCH: the consumer's epoch is old) is retried after a metadata
    update; its position stays unvalidated meanwhile."""
    consumer = a_consumer(True)
    consumer.leaders[TP] = 2
    state = consumer.states[TP]
    state.state, state.position, state.offset_epoch, state.leader, state.leader_epoch = "await_validation", 50, 0, 2, 6
    fenced = OffsetsForLeaderEpochResponse(1, {TP: EpochEndOffset(ErrorCode.FENCED_LEADER_EPOCH, -1, -1)})
    consumer._on_validation({TP: (50, 6)}, fenced)
    assert (state.state, state.position, state.busy) == ("await_validation", 50, False)
    assert TP not in consumer.leaders and consumer._metadata_in_flight is not None


def test_a_reset_that_finds_no_offset_yet_is_retried_after_the_backoff_with_new_metadata():
    """Kafka 2.7.0 clients/src/main/java/org/apache/kafka/clients/consumer/internals/Fetcher.java
    handleListOffsetResponse: OFFSET_NOT_AVAILABLE (a new leader whose high watermark has
    not reached its epoch's start) puts the partition in partitionsToRetry, and
    resetOffsetsAsync asks again after retry.backoff.ms with a metadata update requested
    (SubscriptionState.requestFailed, Metadata.requestUpdate). The answer that then gives
    the offset names the leader epoch, which counts as seen (updateLastSeenEpochIfNewer):
    metadata naming an older epoch is ignored afterwards."""
    consumer = a_consumer(True)
    consumer.auto_offset_reset = "latest"
    consumer.leaders[TP], consumer.leader_epochs[TP] = 2, 4
    sent = []
    consumer.network.send = lambda src, dst, message: sent.append((dst, message))
    consumer._poll()
    assert [type(m) for _, m in sent] == [ListOffsetsRequest]
    consumer._pending.pop(sent[0][1].correlation_id)
    unavailable = ListOffsetsResponse(1, {TP: ListOffsetsPartitionResult(ErrorCode.OFFSET_NOT_AVAILABLE)})
    consumer.on_response(("reset", 2, [TP]), unavailable)
    state = consumer.states[TP]
    assert (state.state, state.position, consumer.leaders[TP]) == ("await_reset", -1, 2)
    assert [type(m) for _, m in sent[1:]] == [MetadataRequest]
    consumer._poll()  # within retry.backoff.ms: not asked again
    assert [type(m) for _, m in sent[1:]] == [MetadataRequest]
    consumer.env.run(until=consumer.retry_backoff_ms)
    consumer._poll()
    assert [type(m) for _, m in sent[2:]] == [ListOffsetsRequest]
    found = ListOffsetsResponse(2, {TP: ListOffsetsPartitionResult(ErrorCode.NONE, 7, 5)})
    consumer.on_response(("reset", 2, [TP]), found)
    assert (state.state, state.position, state.offset_epoch) == ("fetching", 7, None)
    assert not consumer.accepts_metadata(TP, 4) and consumer.accepts_metadata(TP, 5)
