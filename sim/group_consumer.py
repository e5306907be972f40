"""A consumer-group member as a simulated client process (docs/groups.md, "In the
simulation"): the sans-I/O ``GroupMember`` (sim/group_member.py) driven on simulated
time, its requests carried over the simulated network, the records of its assigned
partitions fetched from the positions it gives, and an application that processes each
batch and commits as the scenario's ``commit`` policy says.

The process can crash (its memory, the member's id and generation and every request in
flight, is lost; a restart is a new member that finds its position in the group's
commits) and pause (SIGSTOP: no call at all reaches the member; answers and timeouts
wait until it resumes, so it wakes as a zombie).

The application loop, per ``poll_interval``: ``poll`` (the member joins, rejoins,
auto-commits), then the next batch of at most ``max.poll.records`` fetched records is
processed. ``before_processing`` commits the batch's end first, ``after_processing``
(commitSync) and ``async`` (commitAsync) after; processing lasts ``processing`` ms, so
that a crash can fall between processing and the commit.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from analysis.client_history import CLIENT_TIMEOUT
from analysis.group_application import COMMIT_SYNC, CONSUME, WORK, batch_ends, batch_steps, in_hand_after
from analysis.read_records import records_from
from broker_core.errors import ErrorCode
from broker_core.messages import CONSUMER_REPLICA_ID, FetchPartition, FetchRequest
from broker_core.types import NO_LEADER, TopicPartition
from sim.clients import SimClient
from sim.group_member import GroupMember
from faults.triggers import member_view
from sim.group_member_types import ANY_BROKER, HistoryEvent, LeaderOf, MemberConfig, Outgoing

TICK_MS = 10  # how often the heartbeat thread looks at the member's next deadline
FETCH_MAX_WAIT_MS = 100


class SimGroupConsumer(SimClient):
    def __init__(self, env, network, name: str, brokers: list[int], trace, config: MemberConfig, workload: Any,
                 partitions_per_topic: dict[str, int]):
        # JoinGroup is held up to the rebalance timeout: the Java consumer waits that
        # long plus 5 s for its answer (AbstractCoordinator.sendJoinGroupRequest)
        timeout = max(30000, (config.rebalance_timeout_ms or config.max_poll_interval_ms) + 5000)
        super().__init__(env, network, name, brokers, trace, timeout)
        self.config, self.workload = config, workload
        self.partitions_per_topic = dict(partitions_per_topic)
        self.client_id = config.client_id
        self.alive = False
        self.paused = False
        self.incarnation = 0
        self.member: GroupMember | None = None
        self._held: list[tuple] = []  # what reached a paused process, in order
        self._resumed = env.event()
        self._buffer: dict[TopicPartition, tuple[int, list[int]]] = {}  # fetched: (from position, offsets)
        self._fetching: set[int] = set()
        self._processing = False
        self._in_hand: dict[TopicPartition, list[int]] = {}  # committed, not yet handed over
        self.consumed_records = 0  # by every incarnation: what a trigger's consumed: tests
        self._any_index = 0
        self.start()

    # -- the process's life --------------------------------------------------------------
    def start(self) -> None:
        """Start the process (again): a new member, nothing in memory from before."""
        self.incarnation += 1
        self.alive, self.paused, self.running = True, False, True
        self._held, self._buffer, self._fetching, self._processing = [], {}, set(), False
        self._in_hand = {}
        self._pending.clear()
        self._destination.clear()
        self._metadata_in_flight = None
        self.leaders, self.leader_epochs = {}, {}
        self.member = GroupMember(self.config, self.name, self.partitions_per_topic)
        delay = self.workload.start_ms if self.incarnation == 1 else 0
        self.env.process(self._application(self.incarnation, delay))
        self.env.process(self._heartbeat_thread(self.incarnation, delay))

    def crash(self) -> None:
        """kill -9: the member, its buffers and requests in flight are gone."""
        self.alive = self.paused = self.running = False
        self.member = None
        self._pending.clear()
        self._destination.clear()
        self._held = []
        if not self._resumed.triggered:
            self._resumed.succeed()  # the paused loops wake up and see they are gone
        self._resumed = self.env.event()

    def stop(self) -> None:
        """The final phase: the application finishes the batch it committed before
        processing (a stop is not a crash: that batch is not lost), then stops, with no
        close and no last commit."""
        if self.alive and not self.paused and self._in_hand and self.member is not None:
            self._hand_over(self.member, self._in_hand)
        self.crash()

    def pause(self) -> None:
        if self.alive:
            self.paused = True

    def resume(self) -> None:
        if not (self.alive and self.paused):
            return
        self.paused = False
        held, self._held = self._held, []
        event, self._resumed = self._resumed, self.env.event()
        event.succeed()
        for kind, args in held:  # in the order they arrived
            if kind == "receive":
                super()._receive(*args)
            else:
                super()._timed_out(*args)

    def _receive(self, src: str, message: Any) -> None:
        if not self.alive:
            return
        if self.paused:
            self._held.append(("receive", (src, message)))
            return
        super()._receive(src, message)

    def _timed_out(self, cid: int) -> None:
        if self.paused and self.alive:
            self._held.append(("timeout", (cid,)))
            return
        super()._timed_out(cid)

    def _current(self, incarnation: int):
        """Wait while paused; None when this loop's process is gone."""
        while self.alive and self.paused and incarnation == self.incarnation:
            yield self._resumed
        return self.alive and incarnation == self.incarnation

    # -- the two threads -------------------------------------------------------------------
    def _application(self, incarnation: int, delay: int):
        if delay:
            yield self.env.timeout(delay)
        if not (yield from self._current(incarnation)):
            return
        self.refresh_metadata()
        assert self.member is not None
        self._carry(self.member.start(self.now()))
        while (yield from self._current(incarnation)):
            member = self.member
            assert member is not None
            self._carry(member.poll(self.now()))
            batch = self._take_batch(member)
            if batch:
                yield from self._process(member, batch, incarnation)
                if not (yield from self._current(incarnation)):
                    return
            self._send_fetches()
            yield self.env.timeout(self.workload.poll_interval_ms)

    def _process(self, member: GroupMember, batch: dict[TopicPartition, list[int]], incarnation: int):
        """One batch, by the ``commit`` policy's steps (analysis/group_application.py,
        which the real binding's members follow too): hand it to the application, work
        ``processing`` ms, commit its end, in the policy's order. A crash within those ms
        duplicates (the batch was consumed, not committed) or loses (committed, never
        consumed) the batch for the group."""
        steps = batch_steps(self.workload.commit)
        ends = batch_ends(batch)
        for index, step in enumerate(steps):
            if step == CONSUME:
                self._hand_over(member, batch)
            elif step == WORK:
                self._processing = True
                if self.workload.processing_ms:
                    yield self.env.timeout(self.workload.processing_ms)
                    if not (yield from self._current(incarnation)):
                        return
                self._processing = False
            else:
                commit = member.commit_sync if step == COMMIT_SYNC else member.commit_async
                self._carry(commit(self.now(), ends))
                if in_hand_after(steps, index):
                    self._in_hand = batch

    def view(self) -> dict:
        """This member's part of the view triggers judge (faults/triggers.py)."""
        generation = self.member.generation if self.member is not None else None
        return member_view(self.alive, self._processing, self.consumed_records, generation)

    def _hand_over(self, member: GroupMember, batch: dict[TopicPartition, list[int]]) -> None:
        self._in_hand = {}
        self.consumed_records += sum(len(offsets) for offsets in batch.values())
        for tp in sorted(batch):
            self._carry(member.consumed(tp, batch[tp], self.now()))

    def _heartbeat_thread(self, incarnation: int, delay: int):
        if delay:
            yield self.env.timeout(delay)
        while (yield from self._current(incarnation)):
            member = self.member
            assert member is not None
            due = member.next_deadline()
            if due is not None and due <= self.now():
                self._carry(member.tick(self.now()))
            yield self.env.timeout(TICK_MS)

    # -- the member's requests and events ---------------------------------------------------
    def _carry(self, out: list) -> None:
        """Write the member's events to the trace and send its requests."""
        for item in out:
            if isinstance(item, HistoryEvent):
                self.history(item.type, item.fields)
            else:
                self._send(item)

    def _send(self, item: Outgoing) -> None:
        member_cid = item.request.correlation_id
        broker = self._target(item.to)
        if broker is None:  # no leader known: as a request that found no connection
            self.refresh_metadata()
            assert self.member is not None
            self._carry(self.member.on_no_answer(member_cid, self.now(), "no_leader"))
            return

        def build(cid: int) -> Any:
            # the member's own correlation id stays in context; replace, not copy and set:
            # the compiled build's frozen messages refuse a copy's __setstate__
            return dataclasses.replace(item.request, correlation_id=cid)
        self.request(broker, build, ("member", member_cid, self.incarnation))

    def _target(self, to: Any) -> int | None:
        if isinstance(to, LeaderOf):
            leader = self.leaders.get(to.partition, NO_LEADER)
            return None if leader == NO_LEADER else leader
        if to == ANY_BROKER:  # leastLoadedNode: one the client can reach, in turn
            candidates = [b for b in self.brokers if self.reachable(b)] or self.brokers
            self._any_index += 1
            return candidates[self._any_index % len(candidates)]
        return int(to)

    def on_response(self, context: Any, message: Any) -> None:
        if context[0] == "fetch":
            self._on_fetch(context, message)
        elif self.member is not None and context[2] == self.incarnation:
            self._carry(self.member.on_response(context[1], message, self.now()))

    def on_timeout(self, context: Any, reason: str = CLIENT_TIMEOUT) -> None:
        if context == "metadata":
            return
        if context[0] == "fetch":
            self._fetching.discard(context[1])
            self.leaders = {tp: b for tp, b in self.leaders.items() if b != context[1]}
            self.refresh_metadata()
        elif self.member is not None and context[2] == self.incarnation:
            self._carry(self.member.on_no_answer(context[1], self.now(), reason))

    # -- fetching ----------------------------------------------------------------------------
    def _take_batch(self, member: GroupMember) -> dict[TopicPartition, list[int]]:
        """KafkaConsumer.poll's records: at most max.poll.records, only those fetched at
        the partition's current position (a rebalance or a new position voids the rest)."""
        positions = member.fetch_positions()
        left = self.workload.max_poll_records
        batch: dict[TopicPartition, list[int]] = {}
        for tp in sorted(self._buffer):
            start, offsets = self._buffer[tp]
            if positions.get(tp) != start:
                del self._buffer[tp]
                continue
            if left <= 0:
                break
            taken, rest = offsets[:left], offsets[left:]
            batch[tp] = taken
            left -= len(taken)
            if rest:
                self._buffer[tp] = (taken[-1] + 1, rest)
            else:
                del self._buffer[tp]
        return batch

    def _send_fetches(self) -> None:
        if self.member is None or self._processing:
            return
        by_leader: dict[int, dict[TopicPartition, FetchPartition]] = {}
        for tp, position in sorted(self.member.fetch_positions().items()):
            if tp in self._buffer:
                continue
            leader = self.leaders.get(tp, NO_LEADER)
            if leader == NO_LEADER:
                self.refresh_metadata()
                continue
            by_leader.setdefault(leader, {})[tp] = FetchPartition(position)
        for broker in sorted(by_leader):
            if broker in self._fetching or not self.reachable(broker):
                continue
            wanted = by_leader[broker]
            self._fetching.add(broker)
            self.request(broker, lambda cid: FetchRequest(cid, CONSUMER_REPLICA_ID, FETCH_MAX_WAIT_MS, 1, wanted,
                                                          self.client_id),
                         ("fetch", broker, {tp: p.fetch_offset for tp, p in wanted.items()}))

    def _on_fetch(self, context: Any, message: Any) -> None:
        _, broker, sent = context
        self._fetching.discard(broker)
        refresh = False
        for tp in sorted(message.partitions):
            result = message.partitions[tp]
            if result.error is not ErrorCode.NONE:
                if result.error is not ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.leaders.pop(tp, None)
                    refresh = True
                continue
            offsets = [offset for offset, _ in records_from(result.batches, sent[tp], None)]
            if offsets:
                self._buffer[tp] = (sent[tp], offsets)
        if refresh:
            self.refresh_metadata()
