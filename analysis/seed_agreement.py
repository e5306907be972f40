"""Whether the seeds of a multi-seed run or a sweep changed anything.

A sweep's probabilities estimate how often something happens when the seed draws
what it draws (link jitter, a nemesis's faults, random targets). When every seed of a
configuration gave exactly the same result, the seed drew nothing that mattered: a
share over those seeds (of failing runs, of an anomaly) is 0 or 1 by construction, and
its interval says how many seeds ran, not how likely anything is. The user is told so,
in one wording, by ``isrlab run --seeds``, ``isrlab sweep`` and ``isrlab report``.

"The same result" means, precisely: the same outcome (PASS or FAIL, as ``isrlab run``
decides) and, for every one of the verdict's metrics (``COMPARED``: each checker's
result, in the order of ``analysis.checkers.CHECKER_NAMES``; the columns a run's
``summary.json`` and the sweep's ``verdicts`` table record), an equal value. Numbers
are compared as numbers (a rate of 0 equals 0.0), mappings (``final_leader``) key by
key. The wall time and the count of trace events are not metrics and are not compared.
When the outcome is the same but some metric differs, the seeds did change something
and nothing is said.
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping

from analysis.checkers import CHECKER_NAMES

COMPARED: tuple[str, ...] = CHECKER_NAMES


def _normal(value: object) -> object:
    """Numbers as floats, mappings as sorted [key, value] pairs: what equality means here."""
    if isinstance(value, Mapping):
        return sorted([str(k), _normal(v)] for k, v in value.items())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def run_signature(outcome: str, metrics: Mapping[str, object]) -> str:
    """One run's outcome and compared metrics as a short digest: two runs have the same
    result exactly when their signatures are equal. ``metrics`` maps each name of
    ``COMPARED`` to its value (a verdict's values, or a verdicts-table row)."""
    text = json.dumps([outcome, [_normal(metrics[name]) for name in COMPARED]], separators=(",", ":"))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def verdict_signature(outcome: str, verdict) -> str:
    """run_signature of an analysis.verdict.Verdict."""
    return run_signature(outcome, {name: verdict.value(name) for name in COMPARED})


def all_the_same(signatures: Iterable[str]) -> bool:
    """At least two runs, all with one signature."""
    distinct, count = set(), 0
    for signature in signatures:
        distinct.add(signature)
        count += 1
    return count >= 2 and len(distinct) == 1


METRICS_WORDS = (f"the {len(COMPARED)} verdict metrics (each checker's result, as summary.json and the "
                 f"verdicts table record them: {COMPARED[0]}, {COMPARED[1]}, ... {COMPARED[-1]})")


def same_results_note(runs: int, outcome: str, who: str = "") -> str:
    """The one line said when ``runs`` seeds (of configuration ``who``) all gave one result."""
    subject = f"{who}: all {runs} seeds" if who else f"all {runs} seeds"
    return (f"{subject} gave the same outcome ({outcome}) and the same value of each of {METRICS_WORDS}: "
            "the seeds did not change the outcome, so the probabilities over them (of failing, of an anomaly) "
            "are not estimates of anything random")
