"""The demo's sweep (Makefile: ``make demo``) has a scenario whose outcome depends on the
seed for a real reason (jepsen-2013-nemesis.yaml's header: whether a random fault hits
the lone leader of t-0), so the Spark report's probabilities over its 24 seeds lie
strictly between 0 and 1: here, the share of failing seeds of the unsafe variant (each
one a loss of acknowledged acks=all writes by unclean election) over the same 24 seeds,
and the safe variant passing on all of them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scenarios.parse import load_scenario
from scenarios.runner import run_seeds

ROOT = Path(__file__).resolve().parents[2]
DEMO_SEEDS = range(1, 25)


def demo_sweep() -> tuple[str, list[int]]:
    """The scenario file and the seeds the Makefile's demo sweeps."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"isrlab sweep (\S+) --seeds (\d+)-(\d+)", makefile)
    assert match, "make demo runs no isrlab sweep"
    return match.group(1), list(range(int(match.group(2)), int(match.group(3)) + 1))


def test_the_demo_sweeps_the_seed_dependent_scenario_over_24_seeds():
    assert demo_sweep() == ("scenarios/library/jepsen-2013-nemesis.yaml", list(DEMO_SEEDS))


@pytest.mark.slow
def test_the_demo_scenarios_verdicts_over_its_24_seeds_are_mixed(tmp_path):
    file, seeds = demo_sweep()
    variants = {v.variant: v for v in load_scenario(ROOT / file).variants}
    unclean = run_seeds(variants["unclean"], seeds, tmp_path / "unclean", jobs=2, keep="none")
    failing = [r for r in unclean if not r.passed]
    assert 0.2 <= len(failing) / len(seeds) <= 0.8, [r.seed for r in failing]
    for r in unclean:  # a seed fails exactly when it lost acknowledged writes by an unclean election
        lost = r.verdict.value("lost_writes_acks_all") > 0
        assert lost == (not r.passed) == (r.verdict.value("unclean_elections") > 0), r.replay_command
        assert r.untested == [] and r.verdict.value("failed_but_present") == 0, r.replay_command
    safe = run_seeds(variants["safe"], seeds, tmp_path / "safe", jobs=2, keep="none")
    assert [r.seed for r in safe if not r.passed] == []
