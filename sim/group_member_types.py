"""What a group member (sim/group_member.py) and its offsets (sim/group_commits.py)
share: its settings, what it hands a runtime, and the view of the member the offsets
part works through (so that neither module imports the other)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from broker_core.assignors import STRATEGIES
from broker_core.types import TopicPartition
from faults.nodes import group_member_node

ANY_BROKER = "any"  # FindCoordinator goes to whichever broker the runtime can reach (leastLoadedNode)


@dataclass(frozen=True)
class LeaderOf:
    """A request for the current leader of ``partition`` (ListOffsets)."""
    partition: TopicPartition


@dataclass(frozen=True)
class Outgoing:
    to: Any  # a broker id (the coordinator), ANY_BROKER or LeaderOf
    request: Any


@dataclass(frozen=True)
class HistoryEvent:
    type: str  # an analysis/group_history.py type, or invoke/ok/fail/info of a commit
    fields: dict


@dataclass(frozen=True)
class MemberConfig:
    """The Java consumer's settings, with 2.7.0's defaults. ``rebalance_timeout_ms``
    None is ``max_poll_interval_ms``, which is what the Java consumer sends.
    ``retry_async_commits`` is seed 003's application: it sends a failed async commit
    again, unchecked, which can land after a newer one."""
    group_id: str
    topics: tuple[str, ...]
    client_id: str = "consumer"
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    rebalance_timeout_ms: int | None = None
    assignors: tuple[str, ...] = ("range",)
    group_instance_id: str | None = None
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: str = "latest"
    retry_backoff_ms: int = 100
    retry_async_commits: bool = False
    commit_timeout_ms: int = 60000  # default.api.timeout.ms: how long commit_sync retries
    join_version: int = 7

    def __post_init__(self) -> None:
        unknown = [a for a in self.assignors if a not in STRATEGIES]
        if unknown or not self.assignors:
            raise ValueError(f"assignors must be among {STRATEGIES}, got {self.assignors}")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be earliest or latest")


def member_configs(workload: Any, number: int) -> list[tuple[str, MemberConfig]]:
    """The members of a scenario's ``number``-th group entry (a
    scenarios.model.GroupConsumerWorkload, the layer above: read, not imported), each
    with its node name ``group-<number>-<m>`` (scenarios/parse_groups.py member_names)
    and its settings. What the application does is the runtime's: ``commit`` other than
    ``auto`` (it calls commit_sync or commit_async), ``max_poll_records`` (the batch it
    hands ``consumed``), ``start`` and ``poll_interval``."""
    out = []
    for m in range(workload.members):
        name = group_member_node(number, m)
        out.append((name, MemberConfig(
            workload.group, tuple(workload.topics), client_id=workload.client_id or name,
            session_timeout_ms=workload.session_timeout_ms, heartbeat_interval_ms=workload.heartbeat_interval_ms,
            max_poll_interval_ms=workload.max_poll_interval_ms, assignors=tuple(workload.assignors),
            group_instance_id=name if workload.static else None, auto_commit=workload.commit == "auto",
            auto_commit_interval_ms=workload.auto_commit_interval_ms, auto_offset_reset=workload.auto_offset_reset,
            retry_async_commits=workload.retry_failed_commits)))
    return out


class MemberPort(Protocol):
    """The member as sim/group_commits.py sees it."""
    config: MemberConfig
    assignment: list[TopicPartition]
    member_id: str
    generation: int
    coordinator: int | None
    state: str
    inflight: dict[int, tuple]

    @property
    def in_group(self) -> bool: ...
    def record(self, event_type: str, fields: dict) -> None: ...
    def send(self, to: Any, request: Any, context: tuple) -> None: ...
    def next_cid(self) -> int: ...
    def next_op(self) -> int: ...
    def has_inflight(self, kind: str) -> bool: ...
    def coordinator_lost(self, now: int, reason: str) -> None: ...
    def request_rejoin(self) -> None: ...
    def reset_generation(self) -> None: ...
    def prejoin_commit_done(self, now: int) -> None: ...
