"""A group member's offsets, sans I/O: where it reads each owned partition from
(OffsetFetch on assignment, then auto.offset.reset through ListOffsets when the group
committed nothing) and its commits (sync, async, auto-commit), as Kafka 2.7.0's
ConsumerCoordinator (commitOffsetsSync, commitOffsetsAsync, maybeAutoCommitOffsetsAsync,
OffsetCommitResponseHandler, OffsetFetchResponseHandler) and Fetcher.resetOffsetsAsync do.

Each OffsetCommit request is one operation in the history (``f`` = ``commit``): a sync
commit that retries is several operations, so that each has one outcome.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis import group_history as gh
from analysis.client_history import FAIL, INFO, INVOKE
from broker_core.errors import ErrorCode
from broker_core.group_messages import (
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetCommitTopic,
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchTopic)
from broker_core.messages import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ListOffsetsRequest, ListOffsetsResponse
from broker_core.types import TopicPartition
from sim.group_member_types import LeaderOf, MemberPort

# OffsetCommitResponseHandler: errors after which a commit may be tried again
_RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT)
_COORDINATOR_GONE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT)
_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


@dataclass(eq=False)
class CommitJob:
    """What the application asked to commit; sent once, or again after a retriable error
    (sync until ``deadline_ms``; async only for an application that retries)."""
    mode: str
    offsets: dict[TopicPartition, int]
    deadline_ms: int
    before_join: bool = False
    not_before_ms: int = 0
    token: int = 0


class Committer:
    def __init__(self, member: MemberPort):
        self.member = member
        self.positions: dict[TopicPartition, int] = {}
        self.need_committed: set[TopicPartition] = set()  # OffsetFetch still to ask
        self.need_reset: dict[TopicPartition, int] = {}  # partition -> ListOffsets not before
        self.fetch_retry_ms = 0
        self.queued: list[CommitJob] = []  # waiting for a coordinator or their retry time
        self.next_auto_ms: int | None = None
        self._tokens = 0

    # -- positions ------------------------------------------------------------------------
    def fetch_positions(self) -> dict[TopicPartition, int]:
        return {tp: self.positions[tp] for tp in self.member.assignment if tp in self.positions}

    def on_assigned(self, now: int) -> None:
        """onJoinComplete: the new partitions' positions come from the group's commits."""
        self.positions = {}
        self.need_reset = {}
        self.need_committed = set(self.member.assignment)
        self.fetch_retry_ms = 0
        self._send_offset_fetch(now)

    def on_revoked(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)
            self.need_reset.pop(tp, None)
        self.need_committed.difference_update(partitions)

    def consumed(self, tp: TopicPartition, offsets: list[int], now: int) -> None:
        m = self.member
        if tp not in self.positions or not offsets:
            return  # not fetchable here: the application cannot have been given these
        m.record(gh.GROUP_CONSUMED, gh.consumed(m.config.group_id, m.member_id, m.generation, str(tp),
                                                sorted(offsets)))
        self.positions[tp] = max(offsets) + 1

    def _set_position(self, tp: TopicPartition, offset: int, reason: str) -> None:
        m = self.member
        self.positions[tp] = offset
        m.record(gh.GROUP_POSITION, gh.position(m.config.group_id, m.member_id, m.generation, str(tp), offset,
                                                reason))

    def _send_offset_fetch(self, now: int) -> None:
        m = self.member
        wanted = sorted(self.need_committed)
        if not wanted or m.coordinator is None or now < self.fetch_retry_ms or m.has_inflight("offset_fetch"):
            return
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = tuple(OffsetFetchTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items()))
        m.send(m.coordinator, OffsetFetchRequest(m.next_cid(), m.config.group_id, topics),
               ("offset_fetch", m.generation))

    def _on_offset_fetch(self, context: tuple, response: OffsetFetchResponse, now: int) -> None:
        """OffsetFetchResponseHandler, then refreshCommittedOffsetsIfNeeded: a committed
        offset is the position; none (-1) leaves the partition to auto.offset.reset."""
        m = self.member
        if context[1] != m.generation or not m.in_group:
            return  # an answer for an assignment this member no longer has
        if response.error_code is not ErrorCode.NONE:
            self.fetch_retry_ms = now + m.config.retry_backoff_ms
            if response.error_code in _COORDINATOR_GONE:
                m.coordinator_lost(now, response.error_code.name)
            return
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in self.need_committed:
                    continue
                if p.error_code is not ErrorCode.NONE:
                    self.fetch_retry_ms = now + m.config.retry_backoff_ms
                    continue
                self.need_committed.discard(tp)
                if p.committed_offset >= 0:
                    self._set_position(tp, p.committed_offset, "committed")
                else:
                    self.need_reset[tp] = now
        self._send_resets(now)

    def _send_resets(self, now: int) -> None:
        """Fetcher.resetOffsetsAsync: one ListOffsets per partition, to its leader."""
        m = self.member
        busy = {c[2] for c in m.inflight.values() if c[0] == "list_offsets"}
        for tp in sorted(self.need_reset):
            if self.need_reset[tp] <= now and tp not in busy:
                wanted = {tp: _RESET_TIMESTAMPS[m.config.auto_offset_reset]}
                m.send(LeaderOf(tp), ListOffsetsRequest(m.next_cid(), wanted), ("list_offsets", m.generation, tp))

    def _on_list_offsets(self, context: tuple, response: ListOffsetsResponse, now: int) -> None:
        _, generation, tp = context
        if generation != self.member.generation or tp not in self.need_reset:
            return
        result = response.partitions.get(tp)
        if result is None or result.error is not ErrorCode.NONE:
            self.need_reset[tp] = now + self.member.config.retry_backoff_ms
            return
        del self.need_reset[tp]
        self._set_position(tp, result.offset, self.member.config.auto_offset_reset)

    # -- commits --------------------------------------------------------------------------
    def commit(self, now: int, mode: str, offsets: dict[TopicPartition, int] | None,
               before_join: bool = False) -> int | None:
        """Commit ``offsets`` (None: every owned position, allConsumed). Returns a token
        while the commit is outstanding (for onJoinPrepare to wait on), else None."""
        m = self.member
        wanted = dict(offsets) if offsets is not None else self.fetch_positions()
        if not wanted:
            return None
        self._tokens += 1
        job = CommitJob(mode, wanted, now + m.config.commit_timeout_ms, before_join, now, self._tokens)
        return job.token if self._send(job, now) else None

    def _send(self, job: CommitJob, now: int) -> bool:
        """Send ``job`` now, queue it for a coordinator, or fail it at once. True while
        it is outstanding."""
        m = self.member
        if m.coordinator is None and m.in_group:
            if now >= job.deadline_ms:
                self._local_failure(job, gh.NO_COORDINATOR, now)
                return False
            self.queued.append(job)
            return True
        op = m.next_op()
        offsets = {str(tp): o for tp, o in sorted(job.offsets.items())}
        m.record(INVOKE, gh.commit_invoke(op, m.config.group_id, m.member_id, m.generation, job.mode, offsets))
        if not m.in_group:  # generationIfStable() is null: CommitFailedException, nothing sent
            m.record(FAIL, gh.commit_completion(op, m.config.group_id, {}, reason=gh.NOT_IN_GROUP))
            return False
        topics: dict[str, list[OffsetCommitPartition]] = {}
        for tp, offset in sorted(job.offsets.items()):
            topics.setdefault(tp.topic, []).append(OffsetCommitPartition(tp.partition, offset))
        request = OffsetCommitRequest(m.next_cid(), m.config.group_id,
                                      tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()),
                                      m.generation, m.member_id, m.config.group_instance_id)
        m.send(m.coordinator, request, ("commit", op, job, m.generation))
        return True

    def _local_failure(self, job: CommitJob, reason: str, now: int) -> None:
        m = self.member
        op = m.next_op()
        offsets = {str(tp): o for tp, o in sorted(job.offsets.items())}
        m.record(INVOKE, gh.commit_invoke(op, m.config.group_id, m.member_id, m.generation, job.mode, offsets))
        m.record(FAIL, gh.commit_completion(op, m.config.group_id, {}, reason=reason))
        self._finished(job, now)

    def _on_commit(self, context: tuple, response: OffsetCommitResponse, now: int) -> None:
        m = self.member
        _, op, job, sent_generation = context
        committed: dict[str, int] = {}
        errors: dict[str, str] = {}
        first: ErrorCode | None = None
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code is ErrorCode.NONE:
                    committed[str(tp)] = job.offsets.get(tp, -1)
                else:
                    errors[str(tp)] = p.error_code.name
                    first = first or p.error_code
        m.record(gh.commit_outcome(errors), gh.commit_completion(op, m.config.group_id, committed, errors))
        if first is None:
            return self._finished(job, now)
        if first in _COORDINATOR_GONE:
            m.coordinator_lost(now, first.name)
        elif first is ErrorCode.REBALANCE_IN_PROGRESS:
            m.request_rejoin()
        elif first in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            if sent_generation == m.generation or m.state != "joining":
                m.reset_generation()
        self._after_failure(job, first in _RETRIABLE, now)

    def _after_failure(self, job: CommitJob, retriable: bool, now: int) -> None:
        """commitSync retries until its time is up; commitAsync does not, unless the
        application sends it again (``retry_async_commits``, the seed 003 case);
        auto-commit tries again after retry.backoff.ms (nextAutoCommitTimer)."""
        config = self.member.config
        again = retriable and now < job.deadline_ms and (
            job.mode == gh.SYNC or (job.mode in (gh.ASYNC, gh.RETRY) and config.retry_async_commits))
        if again:
            if job.mode == gh.ASYNC:
                job.mode = gh.RETRY
            job.not_before_ms = now + config.retry_backoff_ms
            self.queued.append(job)
            return
        if job.mode == gh.AUTO and retriable and self.next_auto_ms is not None:
            self.next_auto_ms = min(self.next_auto_ms, now + config.retry_backoff_ms)
        self._finished(job, now)

    def _finished(self, job: CommitJob, now: int) -> None:
        if job.before_join:
            self.member.prejoin_commit_done(now)

    # -- the member's calls ---------------------------------------------------------------
    def on_response(self, context: tuple, response: Any, now: int) -> None:
        if context[0] == "commit":
            self._on_commit(context, response, now)
        elif context[0] == "offset_fetch":
            self._on_offset_fetch(context, response, now)
        elif context[0] == "list_offsets":
            self._on_list_offsets(context, response, now)

    def on_no_answer(self, context: tuple, now: int, reason: str) -> None:
        m = self.member
        if context[0] == "commit":
            m.record(INFO, gh.commit_completion(context[1], m.config.group_id, {}, reason=reason))
            self._after_failure(context[2], True, now)
        elif context[0] == "list_offsets" and context[2] in self.need_reset:
            self.need_reset[context[2]] = now + m.config.retry_backoff_ms

    def on_coordinator(self, now: int) -> None:
        self._retry_due(now)
        self._send_offset_fetch(now)

    def on_poll(self, now: int) -> None:
        """maybeAutoCommitOffsetsAsync, in a stable group only (poll() completes a
        rebalance before it gets there)."""
        config, m = self.member.config, self.member
        if self.next_auto_ms is None:
            self.next_auto_ms = now + config.auto_commit_interval_ms
        self.on_tick(now)
        if config.auto_commit and m.in_group and now >= self.next_auto_ms:
            self.next_auto_ms = now + config.auto_commit_interval_ms
            self.commit(now, gh.AUTO, None)

    def on_tick(self, now: int) -> None:
        self._retry_due(now)
        if self.member.in_group:
            self._send_offset_fetch(now)
            self._send_resets(now)

    def _retry_due(self, now: int) -> None:
        due = [j for j in self.queued if j.not_before_ms <= now or j.deadline_ms <= now]
        if not due or (self.member.coordinator is None and not any(j.deadline_ms <= now for j in due)):
            return
        self.queued = [j for j in self.queued if all(j is not d for d in due)]
        # in the order they became due: an application's retry waited retry.backoff.ms,
        # so a commit made meanwhile goes first (how a retry lands after a newer commit)
        for job in sorted(due, key=lambda j: (j.not_before_ms, j.token)):
            if job.deadline_ms <= now and self.member.coordinator is None:
                self._local_failure(job, gh.NO_COORDINATOR, now)
            elif not self._send(job, now):
                self._finished(job, now)

    def deadlines(self) -> list[int]:
        """When something of the offsets' is due; nothing that waits for an answer or
        for a coordinator (a runtime woken for it would find nothing to do)."""
        m = self.member
        times = [j.deadline_ms for j in self.queued if j.mode == gh.SYNC]
        if m.coordinator is not None:
            times += [j.not_before_ms for j in self.queued]
        if m.config.auto_commit and m.in_group and self.next_auto_ms is not None:
            times.append(self.next_auto_ms)
        if m.in_group:
            if self.need_committed and m.coordinator is not None and not m.has_inflight("offset_fetch"):
                times.append(self.fetch_retry_ms)
            busy = {c[2] for c in m.inflight.values() if c[0] == "list_offsets"}
            times += [t for tp, t in self.need_reset.items() if tp not in busy]
        return times
