"""How many examples the property tests draw: a bounded number by default (so that
`make test` stays quick), many more with ISRLAB_DEEP=1 (`make test-deep`), the one
switch for every property test of the suite (docs/testing.md)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

DEEP = os.environ.get("ISRLAB_DEEP", "") not in ("", "0")
DEEP_FACTOR = 25  # the deep run's examples per default example


def examples(default: int, deep: int | None = None) -> int:
    """``default`` normally; ``deep`` (or DEEP_FACTOR x default) under ISRLAB_DEEP=1."""
    if not DEEP:
        return default
    return deep if deep is not None else default * DEEP_FACTOR


def machine_settings(default_examples: int, steps: int, deep_steps: int | None = None) -> settings:
    """Settings for a RuleBasedStateMachine: ``default_examples`` runs of at most
    ``steps`` rules each, more and longer under ISRLAB_DEEP=1. No deadline: a step may
    run a simulated failover of several seconds of core time."""
    return settings(max_examples=examples(default_examples),
                    stateful_step_count=deep_steps if DEEP and deep_steps else steps,
                    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
