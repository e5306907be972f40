"""The checkers that judge a run from its history and final read (so that they work on
simulated and real runs alike), plus the brokers' own facts where the trace has them.

Every checker is one linear pass over a shared index (dicts keyed by value or by
partition and offset). ``registry.py`` lists them, once, with the results each answers;
``run_checkers`` runs them all and returns results by name.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterable, Iterator

from analysis.checkers.availability import LeadershipSamples, replay_leadership
from analysis.checkers.index import RunIndex, build_index
from analysis.checkers.leadership import clients_of
from analysis.checkers.registry import (
    CHECKER_NAMES, CHECKERS, GROUPS_ONLY, MAPPING_CHECKERS, RATE_CHECKERS, TIMED_ANOMALIES, UNTESTED_NAMES, RunFacts, run_all)
from analysis.checkers.result import MAX_EXAMPLES, CheckResult
from analysis.history import History
from analysis.trace import Event

__all__ = ["CHECKERS", "CHECKER_NAMES", "GROUPS_ONLY", "MAPPING_CHECKERS", "RATE_CHECKERS", "TIMED_ANOMALIES", "UNTESTED_NAMES",
           "MAX_EXAMPLES", "CheckResult", "LeadershipSamples", "RunIndex", "build_index", "collector_paused",
           "run_checkers"]


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
        leadership = replay_leadership(index.events, lambda: clients_of({op.process for op in history.operations}),
                                       replica_states)
        results = run_all(RunFacts(index, history, replica_states, leadership))
    return {r.name: r for r in results}


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
