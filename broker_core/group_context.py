"""What the group coordinator's parts share: its configuration, the time of the input
being handled, the answers to send, its timers and the writes it waits for.

The coordinator never reads a clock and sends nothing itself: each call is handed
``now_ms``, answers collect here as ``(destination, response)`` pairs, and timers are
deadlines keyed like the broker's SetTimer keys (``("group-join", group)``,
``("group-heartbeat", group, member)``, ``("group-pending", group, member)``), so that
BrokerNode can drive them with its TimerFired, or a test with ``advance``.

The seam to ``__consumer_offsets`` is ``store``: Kafka's GroupMetadataManager.storeGroup
and storeOffsets append a record and call back when the append has been replicated. A
coordinator made with ``deferred_writes=False`` (the default, and all this module needs
before the lead wires the internal topic) completes each write at once; with
``deferred_writes=True`` writes queue as :class:`GroupWrite` for the runtime, which
reports each back with ``GroupCoordinator.write_completed``.
"""
from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from broker_core.effects import CancelTimer, SetTimer
from broker_core.errors import ErrorCode
from broker_core.group_state import OffsetAndMetadata, Waiter
from broker_core.types import TopicPartition

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True)
class GroupConfig:
    """The broker settings the coordinator reads (KafkaConfig, 2.7.0 defaults)."""
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_ms: int = 10080 * 60 * 1000  # offsets.retention.minutes (seven days)
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms


@dataclass(frozen=True)
class GroupWrite:
    """A record the coordinator waits to see replicated in ``__consumer_offsets``:
    the group's metadata after a rebalance (``assignment`` per member, empty for an
    Empty group), offsets committed (``offsets``), or tombstones (``tombstones``: the
    offsets deleted or expired, and the group's own when ``group_tombstone``)."""
    token: int
    group_id: str
    generation_id: int
    assignment: dict[str, bytes] | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] | None = None
    tombstones: tuple[TopicPartition, ...] | None = None
    group_tombstone: bool = False

    @property
    def is_group_metadata(self) -> bool:
        return self.offsets is None and self.tombstones is None


# GroupMetadataManager.storeGroup / storeOffsets: the log append's error, as the client
# is told it. A timed-out group write makes the members rejoin; a timed-out commit is
# retried by the client as it is.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def client_error(append_error: ErrorCode, group_write: bool) -> ErrorCode:
    if append_error is ErrorCode.REQUEST_TIMED_OUT and group_write:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return _APPEND_ERRORS.get(append_error, append_error)


class GroupContext:
    def __init__(self, config: GroupConfig, member_id_seed: int, deferred_writes: bool):
        self.config = config
        self.now_ms = 0
        self.out: list[tuple[Hashable, Any]] = []
        self.timers: dict[tuple, int] = {}
        self._timer_order: dict[tuple, int] = {}  # when each was set: ties fire in that order
        self._timer_seq = 0
        self.timer_effects: list[SetTimer | CancelTimer] = []
        self.member_id_seed = member_id_seed  # BrokerNode renews it per session (group_host)
        self._ids = 0
        self.deferred_writes = deferred_writes
        self._tokens = 0
        self.pending_writes: dict[int, tuple[GroupWrite, Callable[[ErrorCode], None]]] = {}
        self.new_writes: list[GroupWrite] = []

    def reply(self, waiter: Waiter, response: Any) -> None:
        self.out.append((waiter.src, response))

    def take_out(self) -> list[tuple[Hashable, Any]]:
        out, self.out = self.out, []
        return out

    # -- timers --------------------------------------------------------------------
    def set_timer(self, key: tuple, delay_ms: int) -> None:
        at_ms = self.now_ms + max(delay_ms, 0)
        self.timers[key] = at_ms
        self._timer_seq += 1
        self._timer_order[key] = self._timer_seq
        self.timer_effects.append(SetTimer(key, at_ms))

    def cancel_timer(self, key: tuple) -> None:
        if self.timers.pop(key, None) is not None:
            self._timer_order.pop(key, None)
            self.timer_effects.append(CancelTimer(key))

    def due(self, now_ms: int) -> tuple | None:
        """The first timer due at ``now_ms``: earliest deadline, then earliest set."""
        ready = [(at, self._timer_order[k], k) for k, at in self.timers.items() if at <= now_ms]
        return min(ready)[2] if ready else None

    def pop_timer(self, key: tuple) -> None:
        del self.timers[key]
        del self._timer_order[key]

    # -- member ids and writes -------------------------------------------------------
    def new_member_id(self, prefix: str) -> str:
        """``prefix-uuid`` as GroupMetadata.generateMemberId, the UUID drawn from the
        runtime's seed and a counter rather than a global random generator."""
        self._ids += 1
        digest = hashlib.sha256(f"{self.member_id_seed}:{self._ids}".encode()).digest()
        return f"{prefix}-{uuid.UUID(bytes=digest[:16], version=4)}"

    def store(self, group_id: str, generation_id: int, on_done: Callable[[ErrorCode], None],
              assignment: dict[str, bytes] | None = None,
              offsets: dict[TopicPartition, OffsetAndMetadata] | None = None,
              tombstones: tuple[TopicPartition, ...] | None = None, group_tombstone: bool = False) -> None:
        self._tokens += 1
        write = GroupWrite(self._tokens, group_id, generation_id, assignment, offsets, tombstones, group_tombstone)
        if not self.deferred_writes:
            on_done(ErrorCode.NONE)
            return
        self.pending_writes[write.token] = (write, on_done)
        self.new_writes.append(write)
