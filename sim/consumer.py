"""The simulated consumer: assigned partitions (no group, no commits), a position per
partition that it sets, resets and validates as the Java consumer does, and a ``poll``
operation in the history per fetch (sim/clients.py describes the history).

A partition is in one of four states (SubscriptionState.FetchStates, 2.7.0):
``await_reset`` (no valid position: ListOffsets by ``auto.offset.reset``),
``await_validation`` (the leader changed: OffsetsForLeaderEpoch, KIP-320),
``fetching``, and ``failed`` (the application got an exception it does not handle: the
consumer stops consuming that partition).
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.client_history import CLIENT_TIMEOUT, INFO, INVOKE, OK, poll_info, poll_invoke, poll_ok
from analysis.read_records import keys_from, records_from
from broker_core.errors import ErrorCode
from broker_core.messages import (
    CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchPartition, FetchRequest,
    FetchResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse)
from broker_core.types import NO_LEADER, TopicPartition
from sim.clients import SimClient

RESET_POLICIES = ("earliest", "latest", "none")
_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}
# Fetch errors after which the Java consumer asks for new metadata (Fetcher.
# initializeCompletedFetch, 2.7.0); UNKNOWN_LEADER_EPOCH (the broker is behind the
# consumer) is simply retried.
RETRY_BACKOFF_MS = 100  # the Java consumer's retry.backoff.ms default
_REFRESH_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE)


@dataclass
class FetchState:
    """One partition's FetchPosition (offset, offset_epoch, the leader and epoch it was
    validated against) and its state."""
    state: str = "await_reset"
    position: int = -1
    offset_epoch: int | None = None  # leader epoch of the last record consumed, if known
    leader: int = NO_LEADER
    leader_epoch: int = -1
    reset_reason: str = "initial"
    busy: bool = False  # a ListOffsets or OffsetsForLeaderEpoch for it is in flight
    retry_at_ms: float = 0.0  # a failed ListOffsets is not asked again before (retry.backoff.ms)


class SimConsumer(SimClient):
    """One fetch per leader at a time over every partition in the ``fetching`` state.

    ``auto_offset_reset`` is earliest, latest or none; ``start_offset`` (or None) seeks
    every partition there before the first fetch; ``validate_positions`` turns on KIP-320
    (Kafka 2.1+ clients): the current leader epoch in fetches, validation after a leader
    change, and ignoring metadata older than the epoch already known."""

    def __init__(self, env, network, name, brokers, trace, partitions: list[TopicPartition],
                 max_wait_ms: int = 500, poll_interval_ms: int = 100, start_ms: int = 0,
                 request_timeout_ms: int = 30000, record_history: bool = True,
                 auto_offset_reset: str = "earliest", start_offset: int | None = None,
                 validate_positions: bool = False, retry_backoff_ms: int = RETRY_BACKOFF_MS):
        super().__init__(env, network, name, brokers, trace, request_timeout_ms)
        if auto_offset_reset not in RESET_POLICIES:
            raise ValueError(f"auto.offset.reset must be one of {RESET_POLICIES}")
        self.partitions = sorted(partitions)
        self.auto_offset_reset = auto_offset_reset
        self.start_offset = start_offset
        self.validate_positions = validate_positions
        self.retry_backoff_ms = retry_backoff_ms
        # the newest leader epoch a ListOffsets answer named (Metadata.lastSeenLeaderEpochs)
        self.seen_epochs: dict[TopicPartition, int] = {}
        self.states = {tp: FetchState() for tp in self.partitions}
        self.max_wait_ms = max_wait_ms
        self.poll_interval_ms = poll_interval_ms
        self.record_history = record_history
        self._fetching: set[int] = set()
        self.consumed: dict[TopicPartition, list[tuple[int, str | None]]] = {tp: [] for tp in self.partitions}
        env.process(self._run(start_ms))

    def is_behind(self, tp: TopicPartition, end: int) -> bool:
        """Not yet at ``end``: below it, or without a valid position (a reset or a
        validation pending keeps the old offset, which proves nothing)."""
        state = self.states[tp]
        return state.position < end or state.state in ("await_reset", "await_validation")

    def has_given_up(self, tp: TopicPartition) -> bool:
        """The application got an exception for ``tp`` and consumes it no more."""
        return self.states[tp].state == "failed"

    def _run(self, start_ms: int):
        if start_ms:
            yield self.env.timeout(start_ms)
        if self.start_offset is not None:  # KafkaConsumer.seek: a position, not validated
            for tp in self.partitions:
                self._move(tp, self.start_offset, None, "initial")
        self.refresh_metadata()
        while self.running:
            self._poll()
            yield self.env.timeout(self.poll_interval_ms)

    def stop(self) -> None:
        self.running = False

    # -- positions -------------------------------------------------------------------
    def _move(self, tp: TopicPartition, offset: int, offset_epoch: int | None, reason: str) -> None:
        """Set a position other than by consuming records, and say so in the trace."""
        state = self.states[tp]
        self._trace(self.name, "position_reset", {"partition": str(tp), "from_offset": state.position,
                                                  "to_offset": offset, "reason": reason})
        state.position, state.offset_epoch, state.state = offset, offset_epoch, "fetching"

    def _request_reset(self, tp: TopicPartition, reason: str, exception: str, **details) -> None:
        """Fetcher.handleOffsetOutOfRange / SubscriptionState.maybeCompleteValidation: with a
        reset policy, look the position up again; without one, the application gets
        ``exception`` and stops consuming the partition."""
        state = self.states[tp]
        if self.auto_offset_reset == "none":
            state.state = "failed"
            self._trace(self.name, "exception_raised", {"exception": exception, "partition": str(tp),
                                                        "fetch_offset": state.position, **details})
            return
        state.state, state.reset_reason = "await_reset", reason

    def accepts_metadata(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """KIP-320 clients keep what they know when a broker's metadata names an older
        leader epoch (Metadata.updateLatestMetadata, 2.7.0)."""
        if not self.validate_positions:
            return True
        return leader_epoch >= max(self.leader_epochs.get(tp, -1), self.seen_epochs.get(tp, -1))

    def on_metadata(self) -> None:
        """SubscriptionState.maybeValidatePositionForCurrentLeader: a position whose
        leader or epoch changed is checked before fetching again, if its epoch is known."""
        for tp in self.partitions:
            state = self.states[tp]
            leader, epoch = self.leaders.get(tp, NO_LEADER), self.leader_epochs.get(tp, -1)
            if leader == NO_LEADER or (leader, epoch) == (state.leader, state.leader_epoch):
                continue
            state.leader, state.leader_epoch = leader, epoch
            if self.validate_positions and state.state == "fetching" and state.offset_epoch is not None:
                state.state = "await_validation"
        self._poll()

    # -- requests --------------------------------------------------------------------
    def _poll(self) -> None:
        if not self.running:
            return
        fetch: dict[int, list[TopicPartition]] = {}
        resets: dict[int, list[TopicPartition]] = {}
        validations: dict[int, list[TopicPartition]] = {}
        for tp in self.partitions:
            state = self.states[tp]
            leader = self.leaders.get(tp, NO_LEADER)
            if state.state == "failed" or state.busy:
                continue
            if leader == NO_LEADER:
                self.refresh_metadata()
                continue
            if state.state == "await_reset" and state.retry_at_ms > self.env.now:
                continue
            kind = {"fetching": fetch, "await_reset": resets, "await_validation": validations}[state.state]
            kind.setdefault(leader, []).append(tp)
        for broker in sorted(resets):
            self._send_resets(broker, resets[broker])
        for broker in sorted(validations):
            self._send_validations(broker, validations[broker])
        for broker in sorted(fetch):
            if broker not in self._fetching and self.reachable(broker):
                self._send_fetch(broker, fetch[broker])

    def _send_resets(self, broker: int, tps: list[TopicPartition]) -> None:
        if self.auto_offset_reset == "none":  # only reached before a first position
            for tp in tps:
                self._request_reset(tp, "initial", "NoOffsetForPartitionException")
            return
        for tp in tps:
            self.states[tp].busy = True
        wanted = {tp: _RESET_TIMESTAMPS[self.auto_offset_reset] for tp in tps}
        self.request(broker, lambda cid: ListOffsetsRequest(cid, wanted), ("reset", broker, tps))

    def _send_validations(self, broker: int, tps: list[TopicPartition]) -> None:
        """Fetcher.validateOffsetsAsync: the current leader epoch and the epoch of the
        position; the leader answers where that epoch ends in its log."""
        wanted: dict[TopicPartition, tuple[int, int]] = {}
        for tp in tps:
            state = self.states[tp]
            state.busy = True
            # on_metadata awaits validation only for a position whose epoch is known
            assert state.offset_epoch is not None
            wanted[tp] = (state.leader_epoch, state.offset_epoch)
        sent = {tp: (self.states[tp].position, self.states[tp].leader_epoch) for tp in tps}
        self.request(broker, lambda cid: OffsetsForLeaderEpochRequest(cid, CONSUMER_REPLICA_ID, wanted),
                     ("validate", broker, sent))

    def _send_fetch(self, broker: int, tps: list[TopicPartition]) -> None:
        states = self.states
        epoch = (lambda tp: states[tp].leader_epoch) if self.validate_positions else (lambda tp: -1)
        wanted = {tp: FetchPartition(states[tp].position, epoch(tp)) for tp in tps}
        op = self.new_op()
        if self.record_history:
            self.history(INVOKE, poll_invoke(op, {str(tp): states[tp].position for tp in tps}))
        self._fetching.add(broker)
        self.request(broker, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, self.max_wait_ms, 1, wanted,
                                                      self.client_id),
                     ("fetch", broker, op, {tp: states[tp].position for tp in tps}))

    # -- responses -------------------------------------------------------------------
    def on_response(self, context, message) -> None:
        if context[0] == "reset":
            self._on_reset(context[2], message)
        elif context[0] == "validate":
            self._on_validation(context[2], message)
        else:
            self._on_fetch(context, message)

    def _on_reset(self, tps: list[TopicPartition], message: ListOffsetsResponse) -> None:
        """Fetcher.resetOffsetsAsync and handleListOffsetResponse (2.7.0): a partition
        that failed (NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE while a new leader's
        high watermark catches up, LEADER_NOT_AVAILABLE, the epoch errors, ...) is asked
        again after retry.backoff.ms, and the metadata is refreshed. An answer's leader
        epoch counts as seen (Metadata.updateLastSeenEpochIfNewer); the position itself
        gets no epoch, so it is validated only once a consumed record gives it one
        (resetOffsetIfNeeded)."""
        refresh = False
        for tp in tps:
            state = self.states[tp]
            state.busy = False
            result = message.partitions[tp]
            if result.error is not ErrorCode.NONE:
                state.retry_at_ms = self.env.now + self.retry_backoff_ms
                refresh = True
                continue
            if self.validate_positions and result.leader_epoch > self.seen_epochs.get(tp, -1):
                self.seen_epochs[tp] = result.leader_epoch
            if state.state == "await_reset":
                self._move(tp, result.offset, None, state.reset_reason)
        if refresh:
            self.refresh_metadata()
        self._poll()

    def _on_validation(self, sent: dict[TopicPartition, tuple[int, int]],
                       message: OffsetsForLeaderEpochResponse) -> None:
        """SubscriptionState.maybeCompleteValidation (2.7.0)."""
        for tp in sorted(sent):
            state = self.states[tp]
            state.busy = False
            result = message.partitions[tp]
            if state.state != "await_validation" or (state.position, state.leader_epoch) != sent[tp]:
                continue  # the position or its leader changed meanwhile: this answer is stale
            if result.error is not ErrorCode.NONE:
                self.leaders.pop(tp, None)  # fenced or unknown epoch, not the leader: new metadata
                self.refresh_metadata()
            elif result.end_offset < 0 or result.leader_epoch < 0:
                self._request_reset(tp, "truncation_detected", "LogTruncationException", divergent_offset=-1)
            elif result.end_offset < state.position:
                if self.auto_offset_reset == "none":
                    self._request_reset(tp, "truncation_detected", "LogTruncationException",
                                        divergent_offset=result.end_offset)
                else:  # to the first offset known to diverge, not by the reset policy
                    self._move(tp, result.end_offset, result.leader_epoch, "truncation_detected")
            else:
                state.state = "fetching"
        self._poll()

    def _on_fetch(self, context, message: FetchResponse) -> None:
        _, broker, op, sent = context
        self._fetching.discard(broker)
        records: dict[str, list] = {}
        errors: dict[str, str] = {}
        high_watermarks: dict[str, int] = {}
        keys: dict[str, list] = {}
        refresh = False
        for tp in sorted(message.partitions):
            result = message.partitions[tp]
            state = self.states[tp]
            if state.state != "fetching" or state.position != sent[tp]:
                continue  # Fetcher: no longer fetchable, or a stale answer
            if result.error is ErrorCode.NONE:
                high_watermarks[str(tp)] = result.high_watermark
                got = records_from(result.batches, state.position, None)
                if got:
                    state.position = got[-1][0] + 1
                    state.offset_epoch = _epoch_of(result.batches, got[-1][0])
                    records[str(tp)] = got
                    got_keys = keys_from(result.batches, sent[tp], None)
                    if got_keys is not None:
                        keys[str(tp)] = got_keys
                    self.consumed[tp].extend(got)
                if result.batches and result.batches[-1].next_offset > state.position:
                    # Fetcher (nextFetchOffset = batch.nextOffset): a batch whose last
                    # records the cleaner removed, or an empty one it kept for a
                    # producer, still moves the position past it.
                    state.position = result.batches[-1].next_offset
                continue
            errors[str(tp)] = result.error.name
            if result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._request_reset(tp, "out_of_range", "OffsetOutOfRangeException")
            elif result.error in _REFRESH_ERRORS:
                self.leaders.pop(tp, None)
                refresh = True
        if self.record_history:
            self.history(OK, poll_ok(op, records, high_watermarks, errors, keys))
        if refresh:
            self.refresh_metadata()
        if records:
            self._poll()

    def on_timeout(self, context, reason: str = CLIENT_TIMEOUT) -> None:
        broker = context[1]
        if context[0] == "fetch":
            self._fetching.discard(broker)
            if self.record_history:
                self.history(INFO, poll_info(context[2], reason))
        else:
            for tp in context[2]:
                self.states[tp].busy = False
        self.leaders = {tp: b for tp, b in self.leaders.items() if b != broker}
        self.refresh_metadata()


def _epoch_of(batches, offset: int) -> int | None:
    """The leader epoch of the batch holding ``offset`` (RecordBatch.partitionLeaderEpoch)."""
    for batch in batches:
        if batch.base_offset <= offset < batch.next_offset:
            return batch.leader_epoch
    return None
