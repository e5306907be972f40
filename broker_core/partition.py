"""One partition's replica at one broker: its role, leader epoch, ISR and, when it
leads, what it knows of its followers. ISR and high-watermark rules live here."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from json.encoder import encode_basestring_ascii
from typing import Any

from broker_core import mutants
from broker_core.config import BrokerConfig
from broker_core.effects import Effect, Trace
from broker_core.errors import ErrorCode, InvariantViolation
from broker_core.log import PartitionLog
from broker_core.messages import LeaderAndIsr, PartitionState
from broker_core.producer_state import BatchMetadata, DuplicateAppend
from broker_core.records import BatchHeader, Records
from broker_core.types import NO_LEADER, TopicPartition


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # hosted, but no leader is known


@dataclass
class FollowerProgress:
    """The leader's view of one follower (Kafka's Replica fetch state)."""
    log_end_offset: int = -1  # unknown until the follower fetches
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_ms: int = -1
    # 0.8.2.2 Replica.logEndOffsetUpdateTimeMs: set by every fetch (and by makeLeader's
    # reset), whether or not the log end moved; the last_fetch lag rule reads it.
    log_end_offset_updated_ms: int = 0

    def record_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> bool:
        """Kafka's rule: caught up now if the fetch reached the leader's log end; caught up
        at the previous fetch if it reached what the log end was then. True when the
        follower's log end offset changed."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms
        self.log_end_offset_updated_ms = now_ms
        moved = fetch_offset != self.log_end_offset
        self.log_end_offset = fetch_offset
        return moved

    def reset_last_caught_up(self, leader_log_end_offset: int, now_ms: int, last_caught_up_ms: int) -> None:
        """2.7.0 Replica.resetLastCaughtUpTime, which makeLeader applies to every follower
        at every leader epoch: the log end offset stays known."""
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms
        self.last_caught_up_ms = last_caught_up_ms


class Partition:
    def __init__(self, broker_id: int, tp: TopicPartition, log: PartitionLog, config: BrokerConfig):
        self.broker_id = broker_id
        self.tp = tp
        self.log = log
        self.config = config
        self.role = Role.OFFLINE
        self.replicas: tuple[int, ...] = ()
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.zk_version = -1
        self.controller_epoch = -1
        self.followers: dict[int, FollowerProgress] = {}
        # The log end offset when this broker last became leader (Kafka's
        # leaderEpochStartOffsetOpt); None while it does not lead.
        self.leader_epoch_start_offset: int | None = None
        # An ISR change under way: the proposed ISR (Kafka's PendingExpandIsr /
        # PendingShrinkIsr) and, under the zookeeper protocol, the partition's lock held
        # while the leader's own write is in flight.
        self.pending_isr: tuple[int, ...] | None = None
        self.isr_locked = False

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def isr_change_in_flight(self) -> bool:
        return self.pending_isr is not None

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """KIP-497's maximal ISR: the committed ISR plus any replica being added. A
        pending shrink does not count until the controller commits it."""
        if self.pending_isr is None or mutants.HW_OVER_COMMITTED_ISR:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def leader_and_isr(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr, self.controller_epoch, self.zk_version)

    # -- role changes ----------------------------------------------------------------
    def make_leader(self, state: PartitionState, now_ms: int) -> list[Effect]:
        """Partition.makeLeader. Every follower in the ISR counts as caught up now (or a
        new leader would evict them before they had a chance to fetch from it). 2.7.0
        forgets the followers' log end offsets only when this broker was not leading
        already (``isNewLeader``), so a same-leader epoch bump keeps them and the high
        watermark need not wait a fetch round; 0.8.2.2 forgets them every time
        (``same_leader_keeps_follower_state``)."""
        lai = state.leader_and_isr
        keep = self.is_leader and self.config.same_leader_keeps_follower_state
        self._adopt(state, Role.LEADER)
        old, self.followers = self.followers, {}
        epoch_start = self.log.log_end_offset
        for replica in self.replicas:
            if replica == self.broker_id:
                continue
            caught_up_ms = now_ms if replica in lai.isr else 0
            progress = old.get(replica) if keep else None
            if progress is None:
                progress = FollowerProgress(last_caught_up_ms=caught_up_ms, log_end_offset_updated_ms=now_ms)
            else:
                progress.reset_last_caught_up(epoch_start, now_ms, caught_up_ms)
            self.followers[replica] = progress
        self.leader_epoch_start_offset = self.log.log_end_offset
        return self.log.assign_epoch(lai.leader_epoch)

    def make_follower(self, state: PartitionState) -> None:
        """Follow a live leader. A LeaderAndIsr naming no live leader is not applied at all
        (ReplicaManager._skip_become_follower, 2.7.0 makeFollowers), so leader -1 here is
        a caller's bug; a replica stays offline until told of a live leader."""
        if state.leader_and_isr.leader == NO_LEADER:
            raise InvariantViolation(f"{self.tp} at broker {self.broker_id}: asked to follow no leader")
        self._adopt(state, Role.FOLLOWER)
        self.followers = {}
        self.leader_epoch_start_offset = None

    def _adopt(self, state: PartitionState, role: Role) -> None:
        lai = state.leader_and_isr
        if lai.leader_epoch < self.leader_epoch:
            raise InvariantViolation(f"{self.tp} at broker {self.broker_id}: leader epoch would go back from "
                                     f"{self.leader_epoch} to {lai.leader_epoch}")
        self.role = role
        self.replicas = state.replicas
        self.leader = lai.leader
        self.leader_epoch = lai.leader_epoch
        self.isr = lai.isr
        self.zk_version = lai.zk_version
        self.controller_epoch = lai.controller_epoch
        self.pending_isr = None
        self.isr_locked = False

    # -- leader: appends -------------------------------------------------------------
    def append_as_leader(self, records: Any, acks: int,
                         now_ms: int = 0) -> tuple[ErrorCode, BatchHeader | DuplicateAppend | None, list]:
        """Append a client's records (Record tuples, or a client's batch object). A
        duplicate of one of an idempotent producer's last five batches returns the
        original's offsets (``DuplicateAppend``) and appends nothing."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None, []
        if acks == -1 and len(self.isr) < self.config.min_insync_replicas and not mutants.ACKS_ALL_BELOW_MIN_ISR:
            return ErrorCode.NOT_ENOUGH_REPLICAS, None, []
        if "compact" in self.config.log_cleanup_policy and has_keyless_record(records):
            # Kafka 2.7.0 LogValidator.validateKey: "Compacted topic cannot accept message
            # without key in topic partition ..." (INVALID_RECORD; nothing is appended).
            return ErrorCode.INVALID_RECORD, None, [Trace("produce_rejected", {
                "partition": str(self.tp), "error": "INVALID_RECORD", "reason": "a record without a key"})]
        # An idempotent producer's batch (any binding's). Plain Records carry no producer
        # id; asked first, as getattr's miss raises and catches an AttributeError per request.
        if type(records) is not Records and getattr(records, "producer_id", -1) >= 0:
            error, duplicate = self.log.producers.check_client_batch(records)
            if error is not ErrorCode.NONE or duplicate is not None:
                return self._producer_check_failed(records, error, duplicate)
        batch, effects = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        if self.log.rolls:
            effects += self.log.roll_traces()
        return ErrorCode.NONE, batch, effects

    def _producer_check_failed(self, batch: Any, error: ErrorCode, duplicate: BatchMetadata | None
                               ) -> tuple[ErrorCode, BatchHeader | DuplicateAppend | None, list]:
        """Kafka's Log.append answers a duplicate with the original's offsets (it waits
        for their replication like any append) and rejects a sequence out of order."""
        fields = {"partition": str(self.tp), "producer_id": batch.producer_id,
                  "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
                  "last_sequence": batch.last_sequence}
        if duplicate is not None:
            # Answered from the producer state's metadata, as Kafka 2.7.0 does
            # (ProducerStateManager.scala findDuplicateBatch, Log.scala append's early
            # return): the cleaner may have removed the original batch from the log
            # (cleanInto keeps only a producer's last batch), and its offsets still hold.
            fields["offset"] = duplicate.first_offset
            answer = DuplicateAppend(duplicate.first_offset, duplicate.last_offset + 1, batch.size_bytes)
            return ErrorCode.NONE, answer, [Trace("produce_duplicate", fields)]
        entry = self.log.producers.entries[batch.producer_id]
        fields.update(error=error.name, expected_epoch=entry.producer_epoch, last_appended_sequence=entry.last_sequence)
        return error, None, [Trace("produce_sequence_rejected", fields)]

    # -- leader: followers, ISR and high watermark -----------------------------------
    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """The leader's view of a follower after its fetch; True when the follower's log
        end offset changed (2.7.0 updateFollowerFetchState then tries the high watermark)."""
        progress = self.followers.get(replica_id)
        if progress is None:
            return False
        return progress.record_fetch(fetch_offset, self.log.log_end_offset, now_ms)

    def maybe_advance_high_watermark(self) -> bool:
        """High watermark = the smallest log end offset over the maximal ISR (leader
        included): Partition.maybeIncrementLeaderHW (2.7.0), 0.8.2's over the ISR. A
        follower whose log end the leader does not know yet holds it where it is, and
        nothing moves while the partition is locked for a coordination write."""
        if not self.is_leader or self.isr_locked:
            return False
        candidate = self.log.log_end_offset
        for replica in () if mutants.HW_BEFORE_ISR else self.maximal_isr:
            if replica == self.broker_id:
                continue
            progress = self.followers.get(replica)
            if progress is None or progress.log_end_offset < 0:
                return False
            candidate = min(candidate, progress.log_end_offset)
        if candidate > self.log.high_watermark:
            self.log.high_watermark = candidate
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int) -> tuple[int, ...]:
        """Followers in the ISR that the leader drops (``isr_lag_rule``):

        - ``last_caught_up_unless_at_log_end`` (2.1+; 2.7.0 Partition.isFollowerOutOfSync):
          its log end differs from the leader's and it has not caught up within
          ``replica.lag.time.max.ms``. A follower of an idle partition that stopped
          fetching stays in.
        - ``last_caught_up`` (0.9 to 2.0, KIP-16): not caught up within the lag time.
        - ``last_fetch`` (0.8.2.2 Partition.getOutOfSyncReplicas, "stuck"): it sent no
          fetch within the lag time, however far behind it is.

        Any rule also drops a follower lagging by more than ``replica.lag.max.messages``
        when that is set (0.8.2's "slow" followers)."""
        rule = self.config.isr_lag_rule
        lag_ms = self.config.replica_lag_time_max_ms
        max_messages = self.config.replica_lag_max_messages
        leader_end = self.log.log_end_offset
        if mutants.IDLE_FOLLOWER_DROPPED:
            rule = "last_fetch"  # 0.8.2's time from the last fetch, with no exception at the log end
        lagging = []
        for replica in self.isr:
            if replica == self.broker_id:
                continue
            progress = self.followers.get(replica)
            if progress is None:
                continue
            if rule == "last_fetch":
                too_slow = now_ms - progress.log_end_offset_updated_ms > lag_ms
            else:
                too_slow = now_ms - progress.last_caught_up_ms > lag_ms and not (
                    rule == "last_caught_up_unless_at_log_end" and progress.log_end_offset == leader_end)
            too_far = (max_messages is not None and progress.log_end_offset >= 0
                       and leader_end - progress.log_end_offset > max_messages)
            if too_slow or too_far:
                lagging.append(replica)
        return tuple(lagging)

    def caught_up_replicas(self) -> tuple[int, ...]:
        """Followers outside the ISR that have reached the high watermark and the start of
        the current leader epoch: they may rejoin."""
        isr = self.isr
        for replica in self.replicas:
            if replica not in isr:
                break
        else:
            return ()  # everyone is in already: the usual case, checked on every fetch (no set built)
        epoch_start = self.log.epochs.entries[-1][1] if self.log.epochs.entries else 0
        joining = []
        for replica, progress in sorted(self.followers.items()):
            if replica in self.isr or replica not in self.replicas:
                continue
            if progress.log_end_offset >= max(self.log.high_watermark, epoch_start):
                joining.append(replica)
        return tuple(joining)

    def snapshot(self) -> dict:
        """The replica's state, for samplers and fault triggers (snapshots_json writes
        the same fields as JSON text: keep the two in step)."""
        return {
            "role": self.role.value, "leader": self.leader, "leader_epoch": self.leader_epoch,
            "isr": list(self.isr), "log_end_offset": self.log.log_end_offset,
            "high_watermark": self.log.high_watermark, "log_start_offset": self.log.log_start_offset,
            "durable_offset": self.log.durable_offset,
        }


def leader_epoch_error(partition: Partition | None, current_leader_epoch: int) -> ErrorCode:
    """KIP-320 fencing of a request for a leader's data (2.7.0 Partition.getLocalLog,
    used by Fetch and OffsetsForLeaderEpoch alike): the leader epoch is checked
    before leadership, so a former leader tells a request from an older epoch that it
    is fenced (FENCED_LEADER_EPOCH) and one from a newer epoch that it has not heard
    of that epoch yet (UNKNOWN_LEADER_EPOCH); only a request of its own epoch hears
    NOT_LEADER_OR_FOLLOWER. A partition not hosted at all has no epoch to compare
    (ReplicaManager.getPartitionOrError). An epoch of -1 (clients before KIP-320) is
    not checked."""
    if partition is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch >= 0:
        if current_leader_epoch < partition.leader_epoch and not mutants.STALE_LEADER_EPOCH_ACCEPTED:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > partition.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


# A replica's snapshot() as JSON text, keys sorted (tests/broker_core/test_snapshot_json.py
# holds it equal to the encoded snapshot)
_SNAPSHOT_JSON = ('%s:{"durable_offset":%d,"high_watermark":%d,"isr":[%s],"leader":%d,"leader_epoch":%d,'
                  '"log_end_offset":%d,"log_start_offset":%d,"role":%s}')


# A partition's name, and as a JSON string: a pure cache (names never change), shared by
# every broker of a process so that a restarted broker does not encode them again
_NAMES: dict[TopicPartition, tuple[str, str]] = {}


def snapshots_json(partitions: dict[TopicPartition, Partition]) -> str:
    """``{str(tp): p.snapshot()}`` as compact, key-sorted, ASCII-only JSON (what
    ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` writes), one %-format per
    replica from its fields: a third of the cost of building each replica's dict and
    having the encoder sort its eight keys, paid by the simulation's sampler every
    sample for every replica."""
    named = []
    for tp in partitions:
        names = _NAMES.get(tp)
        if names is None:
            text = str(tp)
            names = _NAMES[tp] = (text, encode_basestring_ascii(text))
        named.append((names, tp))
    named.sort()  # as the encoder orders keys: by name, "t-10" before "t-2"
    parts = []
    for (_, name), tp in named:
        partition = partitions[tp]
        log = partition.log
        parts.append(_SNAPSHOT_JSON % (
            name, log.durable_offset, log.high_watermark, ",".join([str(replica) for replica in partition.isr]),
            partition.leader, partition.leader_epoch, log.log_end_offset, log.log_start_offset,
            encode_basestring_ascii(partition.role.value)))
    return "{" + ",".join(parts) + "}"


def has_keyless_record(records: Any) -> bool:
    """Whether a produce's records (Record tuples, or a client's batch of either binding)
    hold one without a key."""
    if isinstance(records, Records) or hasattr(records, "keys"):
        keys = records.keys
        return keys is None or None in keys
    batch_records = getattr(records, "records", None)
    if batch_records is not None:
        return has_keyless_record(batch_records)
    return any(record.key is None for record in records)
