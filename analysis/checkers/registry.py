"""The one list of checkers. Each entry is a checker function with the results it
answers, in order, and what the rest of isrlab needs to know of each result: whether its
value is a count, a fraction or a mapping, whether an invalid one means the run tested
nothing, and whether its first example's ``t_ms`` says when the anomaly happened.

The result names (and so the order of verdict.json and of the printed table), the
expectations a scenario may name, the Spark verdict columns and their types, and the
runner's "not tested" reasons are all derived from ``CHECKERS``: a new checker is
added here, once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from analysis.checkers.availability import Interval, LeadershipSamples, check_unavailable
from analysis.checkers.compacted_removals import CompactedRemovals
from analysis.checkers.compaction import CompactionView, compaction_view
from analysis.checkers.compaction_logs import check_keeping_up, check_offsets_unchanged, check_replicas_converge
from analysis.checkers.compaction_values import check_final_values, check_resurrected_keys
from analysis.checkers.consumers import check_consumer_order, check_hw_regressions, check_truncated_reads
from analysis.checkers.facts import check_facts
from analysis.checkers.groups import GROUP_CONSUMED, GROUP_RESULT_NAMES, check_group_consumption
from analysis.checkers.happened import check_happened
from analysis.checkers.index import RunIndex
from analysis.checkers.leadership import LeadershipReplay
from analysis.checkers.replicas import check_divergence
from analysis.checkers.quotas import check_quotas
from analysis.checkers.result import CheckResult
from analysis.checkers.unseen import check_unseen
from analysis.compacted_topics import compacted_only_in_trace
from analysis.checkers.writes import (
    check_duplicates, check_failed_but_present, check_inconsistent_offsets, check_lost_writes, check_produce_rates)
from analysis.history import History


@dataclass
class RunFacts:
    """What every checker may read: the shared index, the history, the replica_state
    samples (or None) and the leadership replay computed once for all of them; the
    compaction view is built on first use, once."""
    index: RunIndex
    history: History
    replica_states: LeadershipSamples | None
    leadership: tuple[LeadershipReplay, dict[str, list[Interval]], int]
    _compaction: CompactionView | None = None
    _removals: CompactedRemovals | None = None

    @property
    def compaction(self) -> CompactionView:
        if self._compaction is None:
            self._compaction = compaction_view(self.history, self.index.events)
        return self._compaction

    @property
    def removals(self) -> CompactedRemovals:
        """What cleaning may have removed (empty, and false, without a cleaning)."""
        if self._removals is None:
            compacted = self.compaction.compacted
            self._removals = CompactedRemovals(self.compaction, compacted_only_in_trace(self.index.events)
                                               if compacted else set(), self.index.reads)
        return self._removals


@dataclass(frozen=True)
class Result:
    """One named result of a checker."""
    name: str
    value: str = "count"  # "count" (a whole number), "rate" (a fraction) or "mapping" (partition -> number)
    untested: bool = False  # invalid means the run tested nothing: the runner fails it unless expected
    timed: bool = False  # an anomaly whose first example's t_ms says when it happened
    # only in a verdict when the run had what it judges: a result whose details say
    # ``no_groups`` is left out, so runs without group consumers keep their verdicts
    # (and the stored digests of tests/test_trace_digests.py) unchanged
    groups_only: bool = False


@dataclass(frozen=True)
class Checker:
    results: tuple[Result, ...]
    check: Callable[[RunFacts], CheckResult | Sequence[CheckResult]]


def _counts(*names: str, timed: bool = False) -> tuple[Result, ...]:
    return tuple(Result(name, timed=timed) for name in names)


CHECKERS: tuple[Checker, ...] = (
    Checker((Result("lost_writes", timed=True), *_counts("lost_writes_acks_all", "lost_writes_acks_1")),
            lambda run: check_lost_writes(run.index, run.removals)),
    Checker(_counts("duplicates", timed=True), lambda run: check_duplicates(run.index)),
    Checker(_counts("inconsistent_offsets", timed=True), lambda run: check_inconsistent_offsets(run.index)),
    Checker(_counts("divergence", timed=True), lambda run: check_divergence(run.index.events)),
    Checker(_counts("consumer_non_monotonic", "consumer_skips", timed=True),
            lambda run: check_consumer_order(run.index, run.removals)),
    Checker(_counts("consumer_truncated_reads", timed=True),
            lambda run: check_truncated_reads(run.index, run.removals)),
    Checker(_counts("unseen"), lambda run: check_unseen(run.index, run.removals)),
    Checker(_counts("unavailable_ms"),
            lambda run: check_unavailable(run.index.events, run.replica_states, run.leadership)),
    Checker((Result("produce_error_rate", "rate"), Result("produce_timeout_rate", "rate")),
            lambda run: check_produce_rates(run.index)),
    Checker(_counts("hw_regressions", timed=True), lambda run: check_hw_regressions(run.index)),
    Checker(_counts("failed_but_present", timed=True), lambda run: check_failed_but_present(run.index)),
    # Client quotas (analysis/checkers/quotas.py): within the tolerance, throttles honoured,
    # then what happened (throttles, the unthrottled producers' latency) for expect: to name.
    Checker((Result("quota_violations", timed=True), Result("throttle_not_honoured", timed=True),
             *_counts("throttled", "unthrottled_produce_p99_ms")),
            lambda run: check_quotas(run.index.events, run.history)),
    # Compacted topics only; each says "not tested" (invalid when a compacted topic had
    # nothing it could judge) rather than pass quietly.
    Checker((Result("compacted_final_values", untested=True),), lambda run: check_final_values(run.compaction)),
    Checker((Result("resurrected_keys", untested=True),), lambda run: check_resurrected_keys(run.compaction)),
    Checker((Result("compacted_replicas_converge", untested=True),),
            lambda run: check_replicas_converge(run.compaction)),
    Checker((Result("offsets_unchanged", untested=True),), lambda run: check_offsets_unchanged(run.compaction)),
    Checker((Result("keeping_up_consumer_sees_all", untested=True),),
            lambda run: check_keeping_up(run.compaction, run.history)),
    # Consumer groups (analysis/checkers/groups.py): only in runs with group consumers.
    Checker((*(Result(name, timed=True, groups_only=True) for name in GROUP_RESULT_NAMES),
             Result(GROUP_CONSUMED, groups_only=True)),
            lambda run: check_group_consumption(run.index, run.history)),
    # What happened rather than what went wrong: always valid, for expect: to name.
    Checker((*_counts("unclean_elections", "leader_elections", "fenced_requests", "isr_shrinks", "isr_expansions"),
             Result("final_leader", "mapping")),
            lambda run: check_facts(run.index.events, run.leadership[0])),
    Checker((*_counts("faults_applied"), Result("faults_without_effect", untested=True),
             Result("triggers_never_fired", untested=True), *_counts("produced"),
             Result("acknowledged", untested=True), *_counts("consumed")),
            lambda run: check_happened(run.index.events, run.history)),
)

RESULTS: tuple[Result, ...] = tuple(result for checker in CHECKERS for result in checker.results)
CHECKER_NAMES: tuple[str, ...] = tuple(result.name for result in RESULTS)
# Checkers whose value is a mapping (partition -> number) rather than a number.
MAPPING_CHECKERS: tuple[str, ...] = tuple(r.name for r in RESULTS if r.value == "mapping")
RATE_CHECKERS: tuple[str, ...] = tuple(r.name for r in RESULTS if r.value == "rate")
# Results that say the run tested nothing when invalid (the runner fails such a run
# unless the scenario expects them).
UNTESTED_NAMES: tuple[str, ...] = tuple(r.name for r in RESULTS if r.untested)
TIMED_ANOMALIES: tuple[str, ...] = tuple(r.name for r in RESULTS if r.timed)
# Results a verdict holds only when the run had group consumption (Verdict reads them as 0 otherwise).
GROUPS_ONLY: tuple[str, ...] = tuple(r.name for r in RESULTS if r.groups_only)


def run_all(run: RunFacts) -> list[CheckResult]:
    """Every checker's results, in CHECKER_NAMES's order (but groups_only results of a
    run without groups); a checker that answers other
    results than it declares is a bug in isrlab, and raises."""
    results: list[CheckResult] = []
    for checker in CHECKERS:
        answered = checker.check(run)
        answered = [answered] if isinstance(answered, CheckResult) else list(answered)
        if [r.name for r in answered] != [r.name for r in checker.results]:
            raise AssertionError(f"a checker answered {[r.name for r in answered]}, "
                                 f"not its declared {[r.name for r in checker.results]}")
        results.extend(r for r, declared in zip(answered, checker.results)
                       if not (declared.groups_only and r.details.get("no_groups")))
    return results
