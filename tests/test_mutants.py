"""Every deliberately broken core (broker_core/mutants.py) is caught (issue 23, "Mutations").

For each mutant, the tests named in CATCHERS run in a subprocess with ISRLAB_MUTANT set,
and each must fail there: a pytest node must report a failed test (not an error of
collection, not "no tests ran"), and an `isrlab run --check-invariants` of a library
scenario must end FAIL (an invariant violated, or an expectation of the scenario missed).
A mutant under which one of its catchers passes has survived, and the test fails.
Without a mutant every catcher passes: the pytest nodes are part of the suite, and
test_the_catching_runs_pass_on_the_real_core runs the scenarios unmutated.

Four tiers (docs/mutants.md has the same table, with what each catcher sees):
- ``unit``: the cheapest catching unit or property tests, one pytest subprocess a mutant;
- ``run``: a library scenario whose expectations say the safe outcome, run with
  --check-invariants;
- ``machine``: the hypothesis state machines, which the issue asks to catch every mutant:
  the replication machine (run_replication_machine, in this process, with the mutant
  switched on by ``mutants.active``) and the area machines of tests/properties/ (a pytest
  subprocess);
- ``explore``: ``isrlab explore BASE --property P --max-runs K --jobs 1`` from a safe
  library scenario, deterministic with those options: it must find a violation under the
  mutant, and the same search must find none on the real core.
Each case but the in-process replication machine starts a subprocess and is marked slow
(4 to 60 s measured under load, up to 203 s for the compaction-failover search on the real
core); `make test-fast` keeps the table and switch tests and the quick replication searches."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core import mutants
from tests.broker_core.race_rules import FAST_ISR as FAST_ISR_SETTINGS, RACE_MACHINES

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
        (Run("jepsen-2013", "safe"),)),  # MinIsrOnAcknowledge
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


@dataclass(frozen=True)
class Replication:
    """``run_replication_machine(profile, examples, steps=steps)``: derandomized, so the
    same search on every machine; it must find a violation (or raise) under the mutant and
    nothing on the real core. ``machine`` names one of the race machines of
    tests/broker_core/race_rules.py (slow links: RACE_MACHINES), ``overrides`` broker
    settings (sorted pairs); ``follower_rules`` adds the idle and burst rules
    (tests/broker_core/follower_rules.py)."""
    profile: str
    examples: int
    steps: int | None = None
    machine: str | None = None
    overrides: tuple[tuple[str, object], ...] = ()
    follower_rules: bool = False

    def run(self):
        from tests.broker_core.replication_machine import run_replication_machine
        return run_replication_machine(self.profile, self.examples, steps=self.steps, shrink=False,
                                       overrides=dict(self.overrides), follower_rules=self.follower_rules,
                                       base=RACE_MACHINES[self.machine] if self.machine else None)


# ISR changes every few seconds once a link is slow (race_rules.FAST_ISR); ZK_ISR also
# has the leader write the ISR to ZooKeeper itself (2.7 with an older inter.broker.protocol.version)
FAST_ISR = tuple(sorted(FAST_ISR_SETTINGS.items()))
ZK_ISR = tuple(sorted({**FAST_ISR_SETTINGS, "isr_change_protocol": "zookeeper"}.items()))


P = "tests/properties/"
# A retention limit of two segments of a few batches each, checked every second: the
# leader moves its log start every few seconds of traffic (log-start-not-applied).
SMALL_RETENTION = (("log.retention.bytes", 600), ("log.retention.check.interval.ms", 1000), ("log.segment.bytes", 300))
# mutant -> (the replication machine's catching search, the area machines of tests/properties/)
MACHINES: dict[str, tuple[Replication | None, tuple[str, ...]]] = {
    "hw-before-isr": (Replication("kafka-2.7", 25), ()),
    # the plain machine needs 120 examples of 150 rules (37-41 s); slow links leave a
    # replica out of the ISR often, and the ISR members' crashes then elect it
    "unclean-ignores-setting": (Replication("kafka-2.7", 500, machine="races", overrides=FAST_ISR), ()),
    # the leader's own ISR write on its cached zkVersion, while the controller's change
    # (a controlled shutdown, a crash) and its LeaderAndIsr are on a slow link: LeaderEpochsGrow
    "isr-write-unversioned": (Replication("kafka-2.7", 100, machine="isr-races", overrides=ZK_ISR),
                             ()),
    # a zombie controller's UpdateMetadata, on a slow link while a newer controller took
    # over: StaleEpochChangesNothing
    "stale-controller-epoch-accepted": (Replication("kafka-2.7", 100, machine="isr-races", overrides=FAST_ISR),
                                       ()),
    # a follower rejoins while its fetches and the leader's AlterIsr are slow: StrongIsr
    "hw-over-committed-isr": (Replication("kafka-2.7", 100, machine="isr-races", overrides=FAST_ISR),
                             ()),
    # the KIP-320 consumer machine catches it too, but its shrink passed 300 s
    "follower-skips-truncation": (Replication("kafka-2.7", 25), ()),
    "stale-leader-epoch-accepted": (Replication("kafka-2.7", 25), ()),
    "duplicate-sequence-accepted": (None, (P + "test_idempotence_machine.py::test_idempotent_producer::runTest",)),
    "throttle-never-applied": (None, (P + "test_quota_machine.py::test_quotas::runTest",)),
    "epoch-not-bumped": (Replication("kafka-2.7", 50), ()),
    # MinIsrOnAcknowledge: the machine's min.insync.replicas is 2 and its crashes and cuts
    # leave the leader alone in its ISR
    "acks-all-below-min-isr": (Replication("kafka-2.7", 25), ()),
    # CaughtUpFollowerStaysInIsr: a cut link, then the idle rule past the lag time (10 s, so
    # that both idle lengths pass it)
    "idle-follower-dropped": (Replication("kafka-2.7", 50, overrides=(("replica.lag.time.max.ms", 10_000),),
                                          follower_rules=True), ()),
    # HighWatermarkBelowLogEnd: a burst, then a follower back catching up a batch a fetch
    "follower-hw-uncapped": (Replication("kafka-2.7", 25, overrides=(("replica.fetch.max.bytes", 100),),
                                         follower_rules=True), ()),
    # LogStartFollowsLeader: a restarted replica's retention check runs out of step with
    # its leader's, whose log start it must take from the fetch answers meanwhile
    "log-start-not-applied": (Replication("kafka-2.7", 25, overrides=SMALL_RETENTION, follower_rules=True), ()),
    # the compaction machine catches it too, but its shrink took 305 s: the cleaner's own
    # hypothesis property test, against the same dict model, is the cheap catcher
    "cleaner-drops-last-value": (None, (B + "test_cleaner_properties.py::test_cleaning_keeps_each_keys_final_value"
                                            "_and_every_offset",)),
    "tombstone-removed-early": (None, (B + "test_cleaner_properties.py::test_cleaning_keeps_each_keys_final_value"
                                           "_and_every_offset",)),
}
# HYPOTHESIS_CONSTANTS: a derandomized search draws the same examples only with the same
# constants. Hypothesis (pinned to 6.170.17 in pyproject.toml) mines the constants of
# every project module in sys.modules to bias what it draws, so a module imported by an
# earlier test in the same process (an xdist worker's lot) changed the examples.
# run_replication_machine leaves them out (replication_machine.project_constants_left_out),
# so each size above catches its mutant, and finds nothing on the real core, whatever
# was imported before.
# The mutants no state machine catches (docs/mutants.md, "What the machines miss"): the
# rule each breaks is one that no machine's rules reach. The row test checks that each
# mutant is in exactly one of MACHINES and MACHINE_MISSES.
MACHINE_MISSES: dict[str, str] = {
}


@dataclass(frozen=True)
class Explore:
    """`isrlab explore scenarios/library/SCENARIO.yaml --property PROPERTY --max-runs
    MAX_RUNS --jobs 1` (deterministic, seeds 1 to MAX_RUNS): under the mutant it stops at
    the first violating seed (named in a comment in EXPLORE), and on the real core the
    same search runs every seed and finds nothing. One shrink run only: the catch is the
    search's, not the shrink's. ``sets`` are ``--set KEY=VALUE`` options: a swarm knob
    (``swarm.config.KEY=[a, b]``: each seed draws one of the values) the base lacks."""
    scenario: str
    property: str
    max_runs: int
    variant: str | None = None
    sets: tuple[str, ...] = ()

    def args(self, out: Path) -> list[str]:
        args = [sys.executable, "-m", "isrlab", "explore", f"scenarios/library/{self.scenario}.yaml",
                "--property", self.property, "--max-runs", str(self.max_runs), "--jobs", "1",
                "--shrink-runs", "1", "--out", str(out)]
        args += [word for setting in self.sets for word in ("--set", setting)]
        return args + (["--variant", self.variant] if self.variant else [])


EXPLORE: dict[str, Explore] = {
    "hw-before-isr": Explore("leader-crash", "invariants", 10),  # seed 1: StrongIsr
    "stale-leader-epoch-accepted": Explore("leader-crash", "invariants", 10),  # seed 3: StaleEpochChangesNothing
    "follower-skips-truncation": Explore("leader-crash", "invariants", 10),  # seed 6: StrongIsr
    "epoch-not-bumped": Explore("leader-crash", "invariants", 10),  # seed 2: NoTwoLeadersInOneEpoch
    "duplicate-sequence-accepted": Explore("retries-on-failover", "duplicates", 10, "idempotent"),  # seed 1
    "cleaner-drops-last-value": Explore("compaction-failover", "compacted_final_values", 10),  # seed 1
    "tombstone-removed-early": Explore("compaction-tombstone-restart", "resurrected_keys", 10,
                                       "within-retention"),  # seed 3
    # the base sets its quota as a fault, which the explorer leaves out: seed 17 draws a
    # client_quota fault of its own that the noisy producer exceeds
    "throttle-never-applied": Explore("quota-noisy-neighbour", "quota_violations", 20),  # seed 17
    # min.insync.replicas 3 drawn: one broker down leaves the ISR below it
    "acks-all-below-min-isr": Explore("leader-crash", "invariants", 10,
                                      sets=("swarm.config.min.insync.replicas=[2, 3]",)),  # seed 2: MinIsrOnAcknowledge
    # replica.fetch.max.bytes 200 drawn: a broker back from a crash catches up a batch or two a fetch
    "follower-hw-uncapped": Explore("leader-crash", "invariants", 10, sets=(
        "swarm.config.replica.fetch.max.bytes=[200, 1048576]",)),  # seed 2: HighWatermarkBelowLogEnd
    # the base's producer stops at 5 s: a drawn fault that stops the follower's fetches
    # keeps it at the leader's log end past the lag time
    "idle-follower-dropped": Explore("idle-follower-stays-in-sync", "invariants", 10,
                                     "kept"),  # seed 9: CaughtUpFollowerStaysInIsr
    "log-start-not-applied": Explore("retention-moves-the-log-start", "invariants", 10,
                                     "by-size"),  # seed 1: LogStartFollowsLeader
    # seed 3: with every ISR member down, the mutant elects broker 1 from outside the ISR
    # (unclean: true with the setting off, at 38.2 s); StrongIsr at the end
    "unclean-ignores-setting": Explore("jepsen-2013", "invariants", 10, "safe"),  # seed 3
    # kafka-0.8's leaders write the ISR to ZooKeeper themselves: seed 9's leader overwrites
    # the controller's newer state, and the store's leader epoch goes back
    "isr-write-unversioned": Explore("jepsen-2013", "invariants", 10, "safe"),  # seed 9: LeaderEpochsGrow
    # seed 6: a former controller's UpdateMetadata reaches broker 2 after a newer
    # controller's (StaleEpochChangesNothing, the broker's controller epoch goes back)
    "stale-controller-epoch-accepted": Explore("rolling-restart", "invariants", 10),  # seed 6
    # only shutdowns and slow_nodes (every link of a node, or of it and zk, with a jitter;
    # not drawn unless named): a follower back from a shutdown catches up between two slow
    # fetches, its AlterIsr is pending while the other follower fetches on, and the
    # mutant's high watermark passes what the new member has when the expansion commits
    "hw-over-committed-isr": Explore("leader-crash", "invariants", 15, sets=(
        "swarm.faults=[shutdown, slow_nodes]",)),  # seed 15: StrongIsr
}
# The mutants no search caught within the budgets tried (docs/mutants.md, "What the
# explorer misses"): what was tried. They are findings, not hidden: the row test checks
# that each mutant is in exactly one of EXPLORE and EXPLORE_MISSES.
EXPLORE_MISSES: dict[str, str] = {
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


def run_scenario(mutant: str | None, run: Run | Explore, out: Path) -> tuple[int, str]:
    proc = subprocess.run(run.args(out), cwd=ROOT, env=mutated_env(mutant), capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    return proc.returncode, proc.stdout + proc.stderr


def test_every_mutant_has_a_row_and_every_row_a_mutant():
    assert sorted(CATCHERS) == sorted(mutants.MUTANTS)
    for name, (units, runs) in CATCHERS.items():
        assert units or runs, f"{name}: no test is named to catch it"
    assert sorted(set(MACHINES) | set(MACHINE_MISSES)) == sorted(mutants.MUTANTS)
    assert not set(MACHINES) & set(MACHINE_MISSES)
    for name, (replication, nodes) in MACHINES.items():
        assert replication or nodes, f"{name}: no state machine is named to catch it"
        assert all(node.startswith(P) or "_properties.py::" in node for node in nodes), nodes
    assert sorted(set(EXPLORE) | set(EXPLORE_MISSES)) == sorted(mutants.MUTANTS)
    assert not set(EXPLORE) & set(EXPLORE_MISSES)


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


@pytest.mark.parametrize("binding", ["sim", "real_io"])
def test_the_environment_selects_a_mutant_when_a_binding_is_imported(binding):
    """The core reads no environment: importing a binding hands it ISRLAB_MUTANT; the core
    alone stays the real one."""
    code = (f"from broker_core import mutants; print(mutants.ACTIVE); import {binding}; "
            "print(mutants.ACTIVE, mutants.EPOCH_NOT_BUMPED)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=mutated_env("epoch-not-bumped"),
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["None", "epoch-not-bumped", "True"], proc.stderr
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=mutated_env("no-such-mutant"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown mutant 'no-such-mutant'" in proc.stderr


def test_activate_from_leaves_a_tests_own_mutant_alone_without_the_variable():
    with mutants.active("epoch-not-bumped"):
        mutants.activate_from({})
        assert mutants.ACTIVE == "epoch-not-bumped"
    assert mutants.ACTIVE is None


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


REPLICATION = [pytest.param(m, r, marks=[pytest.mark.slow] if r.examples * (r.steps or 50) > 2_500 else [])
               for m in sorted(MACHINES) if (r := MACHINES[m][0]) is not None]


def machine_id(value: object) -> str:
    if isinstance(value, Replication):
        settings = "".join(f"-{k}={v}" for k, v in value.overrides) + ("-follower-rules" if value.follower_rules else "")
        return f"{value.machine or 'plain'}-{value.profile}{settings}-{value.examples}x{value.steps or 'default'}"
    if isinstance(value, Explore):
        knobs = "".join(f"-{setting.split('=')[0]}" for setting in value.sets)
        return f"{value.scenario}-{value.variant}-{value.property}-{value.max_runs}{knobs}"
    return str(value)


@pytest.mark.parametrize("mutant, search", REPLICATION, ids=machine_id)
def test_the_replication_machine_catches_the_mutant(mutant, search):
    """In this process: the mutant's flag is set for the search only (mutants.active)."""
    with mutants.active(mutant):
        failure = search.run()
    assert failure is not None, f"mutant {mutant} survived the replication machine ({search})"


@pytest.mark.slow
@pytest.mark.parametrize("search", sorted({r for r, _ in MACHINES.values() if r}, key=machine_id), ids=machine_id)
def test_the_catching_replication_searches_find_nothing_on_the_real_core(search):
    failure = search.run()
    assert failure is None, f"{failure.error}\n  " + "\n  ".join(failure.steps)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in sorted(MACHINES) if MACHINES[m][1]])
def test_the_area_machines_fail_under_the_mutant(mutant):
    outcomes = run_pytest(mutant, MACHINES[mutant][1])
    survived = [node for node, outcome in outcomes.items() if outcome != "failed"]
    assert survived == [], f"mutant {mutant} survived (these machines passed under it): {survived}"


@pytest.mark.slow
@pytest.mark.parametrize("mutant, search", sorted(EXPLORE.items()), ids=machine_id)
def test_the_explorer_finds_a_violation_under_the_mutant(tmp_path, mutant, search):
    code, output = run_scenario(mutant, search, tmp_path)
    assert code == 1, f"mutant {mutant} survived {search} (exit {code}):\n{output[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("search", sorted(set(EXPLORE.values()), key=machine_id), ids=machine_id)
def test_the_catching_searches_find_nothing_on_the_real_core(tmp_path, search):
    code, output = run_scenario(None, search, tmp_path)
    assert code == 0, output[-3000:]


def test_a_mutant_runs_interpreted_even_when_a_compiled_build_is_asked_for(monkeypatch):
    from isrlab import compiled
    said: list[str] = []
    monkeypatch.setenv(mutants.ENV, "hw-before-isr")
    assert compiled.activate("1", say=said.append) is False
    assert said == ["ISRLAB_MUTANT is set (a deliberately broken core, docs/mutants.md)"]
