"""Deliberately broken variants of the core, for tests only (issue 23, "Mutations").

A test suite that passes says little until it is shown failing on a wrong core. Each
mutant below breaks one rule of Kafka's that the core follows, at the one place where
the core applies it; tests/test_mutants.py runs, for each, the tests that must catch it
(docs/mutants.md has the table) and fails when one survives.

A mutant is chosen without editing a file, so that the broken core is the same code as
the real one but for one branch:

- ``ISRLAB_MUTANT=NAME`` in the environment. The core reads no environment (it has no
  I/O of its own): each process that runs it hands its environment to
  :func:`activate_from` once, when the binding's package is imported (sim/__init__.py,
  real_io/__init__.py; tests/conftest.py for the tests that drive cores directly), so
  that every process started from there (``isrlab run``, its ``--jobs`` workers, a pytest
  subprocess, a served broker) runs the same mutant;
- ``activate(NAME)`` (or ``with active(NAME):``) in a test's own process.

Each mutation point reads one bool flag below (``if mutants.HW_BEFORE_ISR:``): a global
lookup, never in a per-record loop, so the unmutated core pays next to nothing and its
traces are unchanged (tests/test_trace_digests.py).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping

ENV = "ISRLAB_MUTANT"

# name -> the rule it breaks (the first line of docs/mutants.md's row)
MUTANTS: dict[str, str] = {
    "hw-before-isr": "the leader's high watermark moves to its own log end before the ISR has the records",
    "isr-write-unversioned": "an ISR change is written without its zkVersion check (leader's write, AlterIsr)",
    "unclean-ignores-setting": "an offline election picks a replica outside the ISR with unclean election off",
    "follower-skips-truncation": "a follower never truncates (high watermark or leader-epoch truncation)",
    "stale-leader-epoch-accepted": "a fetch or OffsetsForLeaderEpoch with a stale current leader epoch is served",
    "stale-controller-epoch-accepted": "a request of an older controller epoch is applied",
    "duplicate-sequence-accepted": "an idempotent producer's retried batch is appended a second time",
    "cleaner-drops-last-value": "the cleaner drops the latest value of every key it cleans",
    "throttle-never-applied": "a client over its quota is never throttled",
    "follower-hw-uncapped": "a follower takes the leader's high watermark past its own log end",
    "hw-over-committed-isr": "the high watermark counts the committed ISR only while an ISR change is pending",
    "idle-follower-dropped": "lag measured from the last fetch: a follower at the log end leaves the ISR",
    "acks-all-below-min-isr": "acks=all is accepted and answered with fewer than min.insync.replicas in the ISR",
    "epoch-not-bumped": "an offline election keeps the old leader epoch",
    "log-start-not-applied": "a follower ignores the leader's log start offset",
    "tombstone-removed-early": "the cleaner removes tombstones before delete.retention.ms has passed",
}

ACTIVE: str | None = None
# One flag per mutant, set by activate(); the core reads these, never ACTIVE.
HW_BEFORE_ISR = False
ISR_WRITE_UNVERSIONED = False
UNCLEAN_IGNORES_SETTING = False
FOLLOWER_SKIPS_TRUNCATION = False
STALE_LEADER_EPOCH_ACCEPTED = False
STALE_CONTROLLER_EPOCH_ACCEPTED = False
DUPLICATE_SEQUENCE_ACCEPTED = False
CLEANER_DROPS_LAST_VALUE = False
THROTTLE_NEVER_APPLIED = False
FOLLOWER_HW_UNCAPPED = False
HW_OVER_COMMITTED_ISR = False
IDLE_FOLLOWER_DROPPED = False
ACKS_ALL_BELOW_MIN_ISR = False
EPOCH_NOT_BUMPED = False
LOG_START_NOT_APPLIED = False
TOMBSTONE_REMOVED_EARLY = False


def activate(name: str | None) -> None:
    """Make ``name`` the active mutant (None or "": the real core) in this process.
    Objects built before keep no copy of a flag: the change applies to the next step."""
    global ACTIVE, HW_BEFORE_ISR, ISR_WRITE_UNVERSIONED, UNCLEAN_IGNORES_SETTING, FOLLOWER_SKIPS_TRUNCATION
    global STALE_LEADER_EPOCH_ACCEPTED, STALE_CONTROLLER_EPOCH_ACCEPTED, DUPLICATE_SEQUENCE_ACCEPTED
    global CLEANER_DROPS_LAST_VALUE, THROTTLE_NEVER_APPLIED, FOLLOWER_HW_UNCAPPED, HW_OVER_COMMITTED_ISR
    global IDLE_FOLLOWER_DROPPED, ACKS_ALL_BELOW_MIN_ISR, EPOCH_NOT_BUMPED, LOG_START_NOT_APPLIED
    global TOMBSTONE_REMOVED_EARLY
    if name and name not in MUTANTS:
        # A misspelt name would run the real core and make every test "catch" nothing.
        raise ValueError(f"{ENV}: unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    ACTIVE = name or None
    HW_BEFORE_ISR = ACTIVE == "hw-before-isr"
    ISR_WRITE_UNVERSIONED = ACTIVE == "isr-write-unversioned"
    UNCLEAN_IGNORES_SETTING = ACTIVE == "unclean-ignores-setting"
    FOLLOWER_SKIPS_TRUNCATION = ACTIVE == "follower-skips-truncation"
    STALE_LEADER_EPOCH_ACCEPTED = ACTIVE == "stale-leader-epoch-accepted"
    STALE_CONTROLLER_EPOCH_ACCEPTED = ACTIVE == "stale-controller-epoch-accepted"
    DUPLICATE_SEQUENCE_ACCEPTED = ACTIVE == "duplicate-sequence-accepted"
    CLEANER_DROPS_LAST_VALUE = ACTIVE == "cleaner-drops-last-value"
    THROTTLE_NEVER_APPLIED = ACTIVE == "throttle-never-applied"
    FOLLOWER_HW_UNCAPPED = ACTIVE == "follower-hw-uncapped"
    HW_OVER_COMMITTED_ISR = ACTIVE == "hw-over-committed-isr"
    IDLE_FOLLOWER_DROPPED = ACTIVE == "idle-follower-dropped"
    ACKS_ALL_BELOW_MIN_ISR = ACTIVE == "acks-all-below-min-isr"
    EPOCH_NOT_BUMPED = ACTIVE == "epoch-not-bumped"
    LOG_START_NOT_APPLIED = ACTIVE == "log-start-not-applied"
    TOMBSTONE_REMOVED_EARLY = ACTIVE == "tombstone-removed-early"


@contextmanager
def active(name: str) -> Iterator[None]:
    """``activate(name)`` for the block, then the mutant that was active before."""
    before = ACTIVE
    activate(name)
    try:
        yield
    finally:
        activate(before)


def activate_from(environment: Mapping[str, str]) -> None:
    """The mutant ``environment`` names in ISRLAB_MUTANT, when it names one (an unknown
    name raises, as :func:`activate` does); otherwise nothing changes, so a test's own
    ``activate`` is left alone."""
    name = environment.get(ENV)
    if name:
        activate(name)


activate(None)
