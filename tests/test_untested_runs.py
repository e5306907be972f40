"""Issue 10: a run that tested nothing does not pass quietly."""
import json
import subprocess
import sys
from pathlib import Path



ROOT = Path(__file__).resolve().parent.parent

BASE = """
name: untested
cluster:
  brokers: 3
  config: {{min.insync.replicas: {min_isr}}}
  topics: [{{name: t, partitions: 1, replication_factor: {rf}}}]
workload:
  producers: [{{topic: t, acks: all, rate: 50}}]
faults:
  - {{at: 2s, crash: 1, for: 3s}}
{trigger}duration: 10s
expect:
  lost_writes: 0
{more}"""
NEVER = "  - {{when: {{partition: t-0, isr_size: 1}}, isolate: 2{optional}}}\n"


def run(tmp_path: Path, **fields) -> tuple[subprocess.CompletedProcess, dict]:
    values = {"min_isr": 1, "rf": 3, "trigger": "", "more": "", **fields}
    scenario = tmp_path / "untested.yaml"
    scenario.write_text(BASE.format(**values))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "isrlab", "run", str(scenario), "--out", str(out), "--no-plot"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    return result, json.loads((out / "verdict.json").read_text())["results"]


def test_a_trigger_that_never_fired_fails_the_run_unless_optional(tmp_path):
    result, verdict = run(tmp_path, trigger=NEVER.format(optional=""))
    assert result.returncode == 1, result.stdout
    assert "NOT TESTED: 1 triggers never fired (line 11)" in result.stdout
    assert verdict["triggers_never_fired"]["value"] == 1
    optional, verdict = run(tmp_path, trigger=NEVER.format(optional=", optional: true"))
    assert optional.returncode == 0, optional.stdout
    assert verdict["triggers_never_fired"]["value"] == 0 and "NOT TESTED" not in optional.stdout


def test_a_workload_that_acknowledged_nothing_fails_unless_expected(tmp_path):
    # min.insync.replicas 2 on a single replica: every acks=all send is refused
    result, verdict = run(tmp_path, min_isr=2, rf=1)
    assert result.returncode == 1 and "NOT TESTED: 0 records acknowledged: the workload tested nothing" in result.stdout
    assert verdict["acknowledged"]["value"] == 0 and verdict["produced"]["value"] > 0
    expected, _ = run(tmp_path, min_isr=2, rf=1, more="  acknowledged: 0\n")
    assert expected.returncode == 0, expected.stdout


def test_what_happened_lists_each_fault_with_its_targets(tmp_path):
    result, verdict = run(tmp_path)
    assert result.returncode == 0, result.stdout
    crash = verdict["faults_applied"]["details"]["faults"][0]
    assert (crash["fault"], crash["start_ms"], crash["end_ms"], crash["targets"]) == ("crash", 2000, 5000, [1])
    block = result.stdout.split("what happened:")[1]
    assert "2s-5s  crash  1" in block and "acknowledged" in block


def test_a_scripted_fault_that_changed_nothing_fails_the_run_unless_optional(tmp_path):
    """The controller's broker named in a partition group beside the broker it resolves
    to ends up in both groups: nothing is cut. It used to print PASS."""
    step = "  - {{at: 1s, partition: [[controller], [1, 2, 3]], for: 500ms{optional}}}\n"
    result, verdict = run(tmp_path, trigger=step.format(optional=""))
    assert result.returncode == 1, result.stdout
    [example] = verdict["faults_without_effect"]["examples"]
    assert example["line"] == 11 and "resolved into two groups" in example["why"]
    assert "NOT TESTED: 1 scripted faults changed nothing; line 11: partition" in result.stdout
    optional, verdict = run(tmp_path, trigger=step.format(optional=", optional: true"))
    assert optional.returncode == 0 and verdict["faults_without_effect"]["value"] == 0


def test_only_the_scenarios_own_steps_count_as_faults_without_effect():
    """A nemesis or final-phase fault (no ``line``) that changed nothing is not the
    scenario's promise; an optional step's is excused."""
    from analysis.checkers.happened import check_happened
    from analysis.history import build_history
    from analysis.trace import Event
    started = [Event(1000, "nemesis", "fault_started", {"fault_id": 1, "fault": "crash", "targets": [],
                                                          "no_effect": "no running broker to stop"}),
               Event(2000, "nemesis", "fault_started", {"fault_id": 2, "fault": "pause", "targets": [], "line": 9,
                                                          "optional": True, "no_effect": "no running broker to pause"}),
               Event(3000, "nemesis", "fault_started", {"fault_id": 3, "fault": "crash", "targets": [], "line": 12,
                                                          "no_effect": "no running broker to stop"})]
    results = {r.name: r for r in check_happened(started, build_history(started))}
    assert results["faults_applied"].value == 3
    without = results["faults_without_effect"]
    assert without.value == 1 and not without.valid and without.examples[0]["line"] == 12
