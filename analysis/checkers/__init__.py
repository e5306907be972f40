"""The checkers that judge a run from its history and final read (so that they work on
simulated and real runs alike), plus the brokers' own facts where the trace has them.

Every checker is one linear pass over a shared index (dicts keyed by value or by
partition and offset); ``run_checkers`` runs them all and returns results by name.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterable, Iterator

from analysis.checkers.availability import LeadershipSamples, check_unavailable, replay_leadership
from analysis.checkers.consumers import check_consumer_order, check_hw_regressions, check_truncated_reads
from analysis.checkers.facts import FACT_NAMES, check_facts
from analysis.checkers.happened import HAPPENED_NAMES, UNTESTED_NAMES, check_happened
from analysis.checkers.index import RunIndex, build_index
from analysis.checkers.leadership import clients_of
from analysis.checkers.replicas import check_divergence
from analysis.checkers.result import MAX_EXAMPLES, CheckResult
from analysis.checkers.unseen import check_unseen
from analysis.checkers.writes import (
    check_duplicates, check_failed_but_present, check_inconsistent_offsets, check_lost_writes, check_produce_rates)
from analysis.history import History
from analysis.trace import Event

CHECKER_NAMES = (
    "lost_writes",
    "lost_writes_acks_all",
    "lost_writes_acks_1",
    "duplicates",
    "inconsistent_offsets",
    "divergence",
    "consumer_non_monotonic",
    "consumer_skips",
    "consumer_truncated_reads",
    "unseen",
    "unavailable_ms",
    "produce_error_rate",
    "produce_timeout_rate",
    "hw_regressions",
    "failed_but_present",
    *FACT_NAMES,
    *HAPPENED_NAMES,
)
# Checkers whose value is a mapping (partition -> number) rather than a number.
MAPPING_CHECKERS = ("final_leader",)

__all__ = ["CHECKER_NAMES", "MAPPING_CHECKERS", "UNTESTED_NAMES", "MAX_EXAMPLES", "CheckResult", "LeadershipSamples", "RunIndex",
           "build_index", "collector_paused", "run_checkers"]


def run_checkers(history: History, replica_states: LeadershipSamples | Iterable[Event] | None = None,
                 index: RunIndex | None = None) -> dict[str, CheckResult]:
    """Every result in CHECKER_NAMES, by name. ``replica_states`` are the replica_state
    events (which build_history leaves out) or their reduction; unavailable_ms uses
    them only for a trace without became_leader events (it replays leadership
    otherwise), and then with leader_elected events alone if they are absent too."""
    if replica_states is not None and not isinstance(replica_states, LeadershipSamples):
        replica_states = LeadershipSamples.of(replica_states)
    with collector_paused():
        index = index if index is not None else build_index(history)
        results = _all_results(index, replica_states, history)
    by_name = {r.name: r for r in results}
    return {name: by_name[name] for name in CHECKER_NAMES}


@contextmanager
def collector_paused() -> Iterator[None]:
    """The checkers allocate millions of small acyclic objects next to a big history;
    the cyclic collector would rescan that history again and again for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _all_results(index: RunIndex, replica_states: LeadershipSamples | None, history: History) -> list[CheckResult]:
    leadership = replay_leadership(index.events, lambda: clients_of({op.process for op in history.operations}),
                                   replica_states)
    return [
        *check_lost_writes(index),
        check_duplicates(index),
        check_inconsistent_offsets(index),
        check_divergence(index.events),
        *check_consumer_order(index),
        check_truncated_reads(index),
        check_unseen(index),
        check_unavailable(index.events, replica_states, leadership),
        *check_produce_rates(index),
        check_hw_regressions(index),
        check_failed_but_present(index),
        *check_facts(index.events, leadership[0]),
        *check_happened(index.events, history),
    ]
