"""A small world for group members in tests: broker_core's GroupCoordinator and
sim/group_member.py's members driven together in one loop, with explicit time.

Messages are delivered at once; a paused member's answers wait in its inbox until it
resumes (the bytes sit in its socket). The world plays the rest of a broker: it answers
FindCoordinator with the coordinator's node id and ListOffsets from its partitions'
bounds, and each member's application consumes what lies past its positions, with a
commit policy (after_processing, before_processing, auto, or none)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analysis.client_history import INVOKE, OK, READER, read_invoke, read_ok
from analysis.trace import Event
from broker_core.errors import ErrorCode
from broker_core.group_context import GroupConfig
from broker_core.group_coordinator import GroupCoordinator
from broker_core.messages import (
    EARLIEST_TIMESTAMP, FindCoordinatorResponse, ListOffsetsPartitionResult, ListOffsetsResponse)
from broker_core.types import TopicPartition
from sim.group_member import GroupMember
from sim.group_member_types import HistoryEvent, LeaderOf, MemberConfig, Outgoing

COORDINATOR = 1


@dataclass
class App:
    member: GroupMember
    commit: str = "after_processing"  # before_processing, auto (the member's own), none
    batch: int = 5  # records processed per poll
    inbox: list = field(default_factory=list)


class GroupWorld:
    def __init__(self, partitions: dict[str, int] | None = None, config: GroupConfig | None = None,
                 deferred_writes: bool = False, log_end: int = 20):
        self.partitions = dict(partitions or {"t": 4})
        self.coords = {COORDINATOR: GroupCoordinator(config or GroupConfig(initial_rebalance_delay_ms=0),
                                                     deferred_writes=deferred_writes)}
        self.coordinator_node: int | None = COORDINATOR  # what FindCoordinator answers
        self.log_end = {TopicPartition(t, p): log_end for t, n in self.partitions.items() for p in range(n)}
        self.apps: dict[str, App] = {}
        self.paused: set[str] = set()  # the whole process frozen (SIGSTOP, a long GC)
        self.stalled: set[str] = set()  # the application stopped polling; its heartbeat thread runs
        self.events: list[Event] = []
        self.now = 0

    @property
    def coord(self) -> GroupCoordinator:
        """The coordinator FindCoordinator names now (or the first)."""
        return self.coords[self.coordinator_node if self.coordinator_node in self.coords else COORDINATOR]

    # -- members ------------------------------------------------------------------------
    def add(self, name: str, commit: str = "after_processing", batch: int = 5, **config: Any) -> GroupMember:
        config.setdefault("group_id", "g")
        config.setdefault("topics", tuple(sorted(self.partitions)))
        config.setdefault("auto_commit", commit == "auto")
        config.setdefault("client_id", name)
        member = GroupMember(MemberConfig(**config), name, self.partitions)
        self.apps[name] = App(member, commit, batch)
        self._route(name, member.start(self.now))
        return member

    def crash(self, name: str) -> None:
        """The process dies: no LeaveGroup, its session expires at the coordinator."""
        del self.apps[name]

    def member(self, name: str) -> GroupMember:
        return self.apps[name].member

    # -- time ---------------------------------------------------------------------------
    def run(self, until: int, step: int = 100) -> None:
        while self.now < until:
            self.now = min(self.now + step, until)
            for node in sorted(self.coords):
                self._route_coordinator(self.coords[node].advance(self.now))
            for name in sorted(self.apps):
                if name not in self.paused:
                    self._step(name)

    def run_by_deadlines(self, until: int) -> int:
        """Jump from deadline to deadline (the members' next_deadline and the
        coordinator's) instead of ticking: what an event-driven runtime does. Returns
        how many times it woke up."""
        wakeups = 0
        while self.now < until:
            times = [self.apps[n].member.next_deadline() for n in sorted(self.apps) if n not in self.paused]
            times += [c.next_deadline() for c in self.coords.values()]
            due = min((t for t in times if t is not None), default=until)
            self.run(max(min(due, until), self.now + 1), step=until)
            wakeups += 1
        return wakeups

    def _step(self, name: str) -> None:
        app = self.apps[name]
        inbox, app.inbox = app.inbox, []
        for cid, response in inbox:
            self._route(name, app.member.on_response(cid, response, self.now))
        self._route(name, app.member.tick(self.now))
        if name not in self.stalled:
            self._route(name, app.member.poll(self.now))
            self._process(name)

    def _process(self, name: str) -> None:
        """The application's poll loop: the records past each position, then its commit."""
        app = self.apps[name]
        member = app.member
        for tp, position in sorted(member.fetch_positions().items()):
            end = min(position + app.batch, self.log_end[tp])
            if end <= position:
                continue
            offsets = list(range(position, end))
            if app.commit == "before_processing":
                self._route(name, member.commit_sync(self.now, {tp: end}))
            self._route(name, member.consumed(tp, offsets, self.now))
            if app.commit == "after_processing":
                self._route(name, member.commit_sync(self.now, {tp: end}))

    # -- the network ----------------------------------------------------------------------
    def _route(self, name: str, out: list) -> None:
        for item in out:
            if isinstance(item, HistoryEvent):
                self.events.append(Event(self.now, name, item.type, item.fields))
            else:
                self._deliver(name, item)

    def _deliver(self, name: str, item: Outgoing) -> None:
        request = item.request
        cid = request.correlation_id
        if item.to == "any":
            node = self.coordinator_node
            answer = FindCoordinatorResponse(cid, ErrorCode.NONE if node is not None
                                             else ErrorCode.COORDINATOR_NOT_AVAILABLE, node if node is not None else -1)
            self._answer(name, cid, answer)
        elif isinstance(item.to, LeaderOf):
            tp = item.to.partition
            offset = 0 if request.partitions[tp] == EARLIEST_TIMESTAMP else self.log_end[tp]
            self._answer(name, cid, ListOffsetsResponse(cid, {tp: ListOffsetsPartitionResult(ErrorCode.NONE, offset)}))
        else:
            self._route_coordinator(self.coords[item.to].handle(name, request, self.now))

    def _route_coordinator(self, answers: list) -> None:
        for dst, response in answers:
            self._answer(dst, response.correlation_id, response)

    def _answer(self, name: str, cid: int, response: Any) -> None:
        app = self.apps.get(name)
        if app is None:
            return  # crashed: the answer finds no socket
        if name in self.paused:
            app.inbox.append((cid, response))
        else:
            self._route(name, app.member.on_response(cid, response, self.now))

    def complete_writes(self, error: ErrorCode = ErrorCode.NONE) -> None:
        """Complete every group write the coordinator handed over (deferred_writes)."""
        for write in self.coord.take_writes():
            self._route_coordinator(self.coord.write_completed(write.token, error, self.now))

    # -- what happened ----------------------------------------------------------------------
    def of(self, event_type: str, name: str | None = None) -> list[Event]:
        return [e for e in self.events if e.type == event_type and (name is None or e.node == name)]

    def final_read(self) -> list[Event]:
        """The final read of every partition, as the reader would write it: which
        records exist, for the checkers."""
        events = []
        for op, tp in enumerate(sorted(self.log_end), 1):
            records = [[o, f"{tp}:{o}"] for o in range(self.log_end[tp])]
            events.append(Event(self.now, READER, INVOKE, read_invoke(op, str(tp))))
            events.append(Event(self.now, READER, OK, read_ok(op, str(tp), records, self.log_end[tp])))
        return events

    def owners(self) -> dict[TopicPartition, list[str]]:
        """Who believes it owns each partition now."""
        owned: dict[TopicPartition, list[str]] = {}
        for name, app in sorted(self.apps.items()):
            for tp in app.member.assignment:
                owned.setdefault(tp, []).append(name)
        return owned
