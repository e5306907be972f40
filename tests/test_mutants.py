"""Every deliberately broken core (broker_core/mutants.py) is caught (issue 23, "Mutations").

For each mutant, the tests named in CATCHERS run in a subprocess with ISRLAB_MUTANT set,
and each must fail there: a pytest node must report a failed test (not an error of
collection, not "no tests ran"), and an `isrlab run --check-invariants` of a library
scenario must end FAIL (an invariant violated, or an expectation of the scenario missed).
A mutant under which one of its catchers passes has survived, and the test fails.
Without a mutant every catcher passes: the pytest nodes are part of the suite, and
test_the_catching_runs_pass_on_the_real_core runs the scenarios unmutated.

Two tiers, both marked slow (each case starts a subprocess: 4 to 30 s measured under
load; `make test-fast` keeps only the table and switch tests):
- ``unit``: the cheapest catching unit or property tests, one pytest subprocess a mutant;
- ``run``: a library scenario whose expectations say the safe outcome, run with
  --check-invariants.
docs/mutants.md has the same table, with what each catcher sees."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core import mutants

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300


@dataclass(frozen=True)
class Run:
    """`isrlab run scenarios/library/SCENARIO.yaml --variant VARIANT --seed SEED --check-invariants`."""
    scenario: str
    variant: str | None = None
    seed: int = 1

    def args(self, out: Path) -> list[str]:
        args = [sys.executable, "-m", "isrlab", "run", f"scenarios/library/{self.scenario}.yaml",
                "--seed", str(self.seed), "--no-plot", "--check-invariants", "--out", str(out)]
        return args + (["--variant", self.variant] if self.variant else [])


B = "tests/broker_core/"
# mutant -> (unit catchers: pytest node ids, run catchers)
CATCHERS: dict[str, tuple[tuple[str, ...], tuple[Run, ...]]] = {
    "hw-before-isr": (
        (B + "test_isr_change.py::test_a_replica_being_added_to_the_isr_is_waited_for_before_anything_is_acknowledged",
         B + "test_invariants.py::test_nothing_is_violated_through_produce_failover_and_restart_on_the_safe_profile"),
        (Run("leader-crash"),)),
    "isr-write-unversioned": (
        (B + "test_isr_change.py::test_a_stale_zk_version_is_not_retried_by_the_leader",
         B + "test_isr_change.py::test_the_controller_fences_stale_alter_isr_requests"),
        ()),
    "unclean-ignores-setting": (
        (B + "test_election.py::test_no_live_isr_member_and_unclean_disabled_gives_no_leader",),
        (Run("idle-follower-stays-in-sync", "stuck-0.8"),)),
    "follower-skips-truncation": (
        (B + "test_truncation.py::test_kip279_truncates_round_by_round_until_the_epochs_agree",),
        ()),
    "stale-leader-epoch-accepted": (
        (B + "test_stale_epochs.py::test_fetches_with_a_stale_current_leader_epoch_change_nothing",
         B + "test_leader_requests.py::test_the_leader_epoch_is_checked_before_leadership"),
        (Run("nemesis-safe"),)),
    "stale-controller-epoch-accepted": (
        (B + "test_stale_epochs.py::test_controller_requests_with_a_stale_controller_epoch_change_nothing",
         B + "test_controller.py::test_a_stale_controller_epoch_is_fenced_by_brokers"),
        ()),
    "duplicate-sequence-accepted": (
        (B + "test_idempotence.py::test_a_retried_batch_within_the_last_five_is_answered_with_its_original_offset"
             "_and_not_appended",),
        (Run("retries-on-failover", "idempotent"),)),
    "cleaner-drops-last-value": (
        (B + "test_cleaner_properties.py::test_cleaning_keeps_each_keys_final_value_and_every_offset",),
        (Run("compaction-failover"),)),
    "throttle-never-applied": (
        (B + "test_quota_properties.py::test_throttle_times_match_the_brute_force_model",),
        (Run("quota-noisy-neighbour"),)),
    "follower-hw-uncapped": (
        (B + "test_invariants.py::test_a_follower_catching_up_in_small_fetches_keeps_its_high_watermark_below_its_log_end",),
        ()),
    "hw-over-committed-isr": (
        (B + "test_isr_change.py::test_a_replica_being_added_to_the_isr_is_waited_for_before_anything_is_acknowledged",),
        ()),
    "idle-follower-dropped": (
        (B + "test_isr_lag_and_high_watermark.py::test_an_idle_follower_that_stopped_fetching_stays_in_the_isr",),
        (Run("idle-follower-stays-in-sync", "kept"),)),
    "acks-all-below-min-isr": (
        (B + "test_replication.py::test_min_isr_rejects_acks_all_before_the_append_when_the_isr_is_too_small",),
        ()),
    "epoch-not-bumped": (
        (B + "test_invariants.py::test_an_election_by_a_controller_that_survives_the_leader_starts_a_new_epoch",),
        ()),
    "log-start-not-applied": (
        (B + "test_retention.py::test_a_follower_takes_the_leaders_log_start_from_fetch_responses",),
        ()),
    "tombstone-removed-early": (
        (B + "test_cleaner.py::test_tombstones_stay_until_delete_retention_past_the_last_clean_segment",),
        (Run("compaction-tombstone-restart", "within-retention"),)),
}


def mutated_env(mutant: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != mutants.ENV}
    if mutant is not None:
        env[mutants.ENV] = mutant
    env["ISRLAB_COMPILED"] = "0"  # the suite tests the interpreted core (tests/conftest.py)
    return env


def run_pytest(mutant: str, nodes: tuple[str, ...]) -> dict[str, str]:
    """Each node id's outcome under the mutant: "failed" if any test it names failed."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--hypothesis-seed=0", *nodes], cwd=ROOT, env=mutated_env(mutant),
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode in (0, 1), f"pytest could not run the catchers ({proc.returncode}):\n{proc.stdout[-3000:]}"
    outcomes = {}
    for node in nodes:
        found = re.findall(rf"^(PASSED|FAILED|ERROR) {re.escape(node)}(?:\[[^\]]*\])?(?: |$)", proc.stdout, re.M)
        assert found, f"{node} did not run:\n{proc.stdout[-3000:]}"
        outcomes[node] = "failed" if "FAILED" in found else ("error" if "ERROR" in found else "passed")
    return outcomes


def run_scenario(mutant: str | None, run: Run, out: Path) -> tuple[int, str]:
    proc = subprocess.run(run.args(out), cwd=ROOT, env=mutated_env(mutant), capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    return proc.returncode, proc.stdout + proc.stderr


def test_every_mutant_has_a_row_and_every_row_a_mutant():
    assert sorted(CATCHERS) == sorted(mutants.MUTANTS)
    for name, (units, runs) in CATCHERS.items():
        assert units or runs, f"{name}: no test is named to catch it"


def test_each_mutant_switches_its_own_flag_only():
    flags = {name: name.upper().replace("-", "_") for name in mutants.MUTANTS}
    try:
        for name, flag in flags.items():
            mutants.activate(name)
            assert [f for f in flags.values() if getattr(mutants, f)] == [flag]
        mutants.activate(None)
        assert not any(getattr(mutants, f) for f in flags.values()) and mutants.ACTIVE is None
        with pytest.raises(ValueError, match="unknown mutant"):
            mutants.activate("hw-before-isrr")
    finally:
        mutants.activate(None)


def test_the_environment_selects_a_mutant_at_import():
    code = "from broker_core import mutants; print(mutants.ACTIVE, mutants.EPOCH_NOT_BUMPED)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=mutated_env("epoch-not-bumped"),
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["epoch-not-bumped", "True"]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=mutated_env("no-such-mutant"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown mutant 'no-such-mutant'" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in sorted(CATCHERS) if CATCHERS[m][0]])
def test_the_unit_catchers_fail_under_the_mutant(mutant):
    outcomes = run_pytest(mutant, CATCHERS[mutant][0])
    survived = [node for node, outcome in outcomes.items() if outcome != "failed"]
    assert survived == [], f"mutant {mutant} survived (these passed under it): {survived}"


@pytest.mark.slow
@pytest.mark.parametrize("mutant, run", [(m, r) for m in sorted(CATCHERS) for r in CATCHERS[m][1]],
                         ids=lambda v: v if isinstance(v, str) else f"{v.scenario}-{v.variant}-seed{v.seed}")
def test_the_invariant_checked_runs_fail_under_the_mutant(tmp_path, mutant, run):
    code, output = run_scenario(mutant, run, tmp_path)
    assert code == 1, f"mutant {mutant} survived {run} (exit {code}):\n{output[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted({r for _, runs in CATCHERS.values() for r in runs},
                                       key=lambda r: (r.scenario, r.variant or "", r.seed)),
                         ids=lambda r: f"{r.scenario}-{r.variant}-seed{r.seed}")
def test_the_catching_runs_pass_on_the_real_core(tmp_path, run):
    code, output = run_scenario(None, run, tmp_path)
    assert code == 0, output[-3000:]


def test_a_mutant_runs_interpreted_even_when_a_compiled_build_is_asked_for(monkeypatch):
    from isrlab import compiled
    said: list[str] = []
    monkeypatch.setenv(mutants.ENV, "hw-before-isr")
    assert compiled.activate("1", say=said.append) is False
    assert said == ["ISRLAB_MUTANT is set (a deliberately broken core, docs/mutants.md)"]
