"""The mypyc build of the simulation (isrlab/compiled.py, `isrlab build`): compiled and
interpreted runs write byte-identical traces and verdicts, and a build that is absent,
stale or failed to compile leaves isrlab running interpreted, with a message.

The build used is build/mypyc when it matches the sources (`make test` builds it first);
otherwise these tests compile one into a temporary directory: they never skip."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from isrlab.compiled import DEFAULT_DIR, MANIFEST, build, usable_build
from tests.update_trace_digests import RUNS, run_key, stored_digests

ROOT = Path(__file__).resolve().parent.parent

# Runs every stored-digest run (tests/update_trace_digests.py) in a fresh interpreter,
# compiled or not as ISRLAB_COMPILED says, and prints which code ran and the digests.
DIGESTS_CHILD = """
import json, sys, tempfile
from pathlib import Path
from isrlab import compiled
compiled.activate(say=lambda text: print(text, file=sys.stderr))
from tests.update_trace_digests import RUNS, run_digests, run_key
with tempfile.TemporaryDirectory() as tmp:
    digests = {run_key(*run): run_digests(*run, Path(tmp) / str(i)) for i, run in enumerate(RUNS)}
print(json.dumps({"compiled": compiled.in_use(), "digests": digests}))
"""


def matching_build(tmp_path_factory) -> Path:
    """build/mypyc when it matches the sources, else one compiled for the tests: never a
    skip (tests/spark_reports/test_sweep_compiled.py uses it too)."""
    if usable_build(DEFAULT_DIR)[0] is not None:
        return DEFAULT_DIR
    out = tmp_path_factory.mktemp("mypyc") / "build"
    said: list[str] = []
    assert build(out, say=said.append), "\n".join(said)
    return out


@pytest.fixture(scope="module")
def compiled_build(tmp_path_factory) -> Path:
    return matching_build(tmp_path_factory)


def child(setting: str | Path, *argv: str) -> subprocess.CompletedProcess:
    """A fresh interpreter in the checkout's root with ISRLAB_COMPILED=setting."""
    env = {**os.environ, "ISRLAB_COMPILED": str(setting)}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_compiled_and_interpreted_runs_write_byte_identical_traces_and_verdicts(compiled_build):
    interpreted = child("0", "-c", DIGESTS_CHILD)
    compiled = child(compiled_build, "-c", DIGESTS_CHILD)
    assert interpreted.returncode == 0, interpreted.stderr
    assert compiled.returncode == 0, compiled.stderr
    interpreted_out, compiled_out = json.loads(interpreted.stdout), json.loads(compiled.stdout)
    assert (interpreted_out["compiled"], compiled_out["compiled"]) == (False, True)
    assert sorted(compiled_out["digests"]) == sorted(run_key(*run) for run in RUNS)
    assert compiled_out["digests"] == interpreted_out["digests"]


def isrlab_run(setting: str | Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return child(setting, "-m", "isrlab", "run", "scenarios/library/leader-crash.yaml", "--out", str(out), *extra)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


LEADER_CRASH = stored_digests()["leader-crash/-/seed-1"]


def test_isrlab_run_with_the_build_writes_the_stored_trace_also_in_jobs_workers(compiled_build, tmp_path):
    single = isrlab_run(compiled_build, tmp_path / "one", "--seed", "1", "--no-plot")
    assert single.returncode == 0, single.stderr
    assert sha256(tmp_path / "one" / "trace.jsonl") == LEADER_CRASH["trace.jsonl"]
    many = isrlab_run(compiled_build, tmp_path / "many", "--seeds", "1-2", "--jobs", "2", "--keep", "all")
    assert many.returncode == 0, many.stderr
    assert sha256(tmp_path / "many" / "seed-1" / "trace.jsonl") == LEADER_CRASH["trace.jsonl"]
    assert "running interpreted" not in single.stderr + many.stderr


def test_building_the_command_line_imports_no_compiled_module():
    # else every command finds the simulation imported before it can switch the build on
    code = ("import sys, isrlab.cli; isrlab.cli.build_parser(); from isrlab.compiled import modules; "
            "print([m for m in modules() if m in sys.modules])")
    done = child("0", "-c", code)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_check_invariants_runs_compiled_in_the_command_and_in_jobs_workers(compiled_build, tmp_path):
    # the checked host extends the compiled BrokerHost: interpreted, it raised TypeError
    run = ["-m", "isrlab", "run", "scenarios/library/kip-101-scenario-1.yaml", "--variant", "hw", "--check-invariants"]
    one = child(compiled_build, *run, "--seed", "1", "--out", str(tmp_path / "one"), "--no-plot")
    assert one.returncode == 1, one.stdout + one.stderr
    assert "INVARIANT VIOLATED: AcknowledgedNeverTruncated" in one.stdout
    many = child(compiled_build, *run, "--seeds", "1-2", "--jobs", "2", "--out", str(tmp_path / "many"))
    assert many.returncode == 1, many.stdout + many.stderr
    assert len(re.findall(r"FAIL .* invariant AcknowledgedNeverTruncated", many.stdout)) == 2, many.stdout
    assert "running interpreted" not in one.stderr + many.stderr and "internal error" not in many.stderr


def test_without_a_build_isrlab_run_runs_interpreted_and_says_so_when_asked(tmp_path):
    absent = tmp_path / "no-build"
    result = isrlab_run(absent, tmp_path / "run", "--seed", "1", "--no-plot")
    assert result.returncode == 0, result.stderr
    assert f"no compiled build in {absent}" in result.stderr and "running interpreted" in result.stderr
    assert sha256(tmp_path / "run" / "trace.jsonl") == LEADER_CRASH["trace.jsonl"]


def test_a_build_older_than_a_source_is_not_used_and_isrlab_says_which(compiled_build, tmp_path):
    stale = tmp_path / "stale"
    shutil.copytree(compiled_build, stale)
    manifest = json.loads((stale / MANIFEST).read_text())
    manifest["sources"]["broker_core.log"] = "0" * 64  # as if broker_core/log.py changed after the build
    (stale / MANIFEST).write_text(json.dumps(manifest))
    result = isrlab_run(stale, tmp_path / "run", "--seed", "1", "--no-plot")
    assert result.returncode == 0, result.stderr
    assert f"the build in {stale} is older than broker_core/log.py; running interpreted" in result.stderr
    assert sha256(tmp_path / "run" / "trace.jsonl") == LEADER_CRASH["trace.jsonl"]


def test_a_failed_compile_removes_the_old_build_and_says_isrlab_runs_interpreted(compiled_build, tmp_path):
    # A Python without mypyc (a bare venv) is a real way for compiling to fail.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    old = tmp_path / "build"
    shutil.copytree(compiled_build, old)
    said: list[str] = []
    assert not build(old, force=True, python=str(tmp_path / "venv" / "bin" / "python"), say=said.append)
    assert "mypyc is not installed" in said[-1] and "isrlab runs interpreted" in said[-1]
    assert not old.exists() and not old.with_name("build.new").exists()
    assert usable_build(old)[0] is None



@pytest.mark.slow
def test_sim_speed_runs_the_real_simulation_compiled_too_against_the_same_floor(compiled_build):
    done = subprocess.run([sys.executable, "bench/sim_speed.py", "--seconds", "2", "--linger-ms", "50",
                           "--sweep-seeds", "1", "--compiled", str(compiled_build)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^(\w+)\s+50 ms\s+(interpreted|compiled)\s+([\d,]+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+) "
                      r"\((?:meets|above) 2.5\)", done.stdout, re.M)
    assert [(r[0], r[1]) for r in rows] == [("round_robin", "interpreted"), ("round_robin", "compiled"),
                                            ("sticky", "interpreted"), ("sticky", "compiled")], done.stdout
    for interpreted, compiled in (rows[0:2], rows[2:4]):
        assert compiled[2] == interpreted[2]  # the same requests: the same simulation
        assert compiled[3] == interpreted[3] and float(compiled[4]) > 0  # one floor for both
    assert f"compiled runs: the mypyc build in {compiled_build}" in done.stdout
    assert re.search(r"^  compiled: [\d.]+ with one worker, [\d.]+ with --jobs \d+$", done.stdout, re.M), done.stdout


# A mutant switched on inside a compiled process (docs/mutants.md): isrlab refuses the
# build under ISRLAB_MUTANT, so this child switches the build on first and the mutant
# after, the order a test of the compiled core itself would use.
COMPILED_MUTANT_CHILD = """
import sys
from pathlib import Path
from isrlab import compiled
assert compiled.activate(say=lambda text: print(text, file=sys.stderr))
from broker_core import mutants
from scenarios.parse import load_scenario
from scenarios.runner import run_scenario
scenario = load_scenario(Path("scenarios/library/leader-crash.yaml"))
if len(sys.argv) > 2:
    mutants.activate(sys.argv[2])
result = run_scenario(scenario, 1, sys.argv[1], judge=False, check_invariants=True)
print(compiled.in_use(), result.violation and result.violation.invariant)
"""


@pytest.mark.slow
def test_a_mutant_switched_on_in_a_compiled_process_breaks_the_compiled_core(compiled_build, tmp_path):
    # mutants.py is compiled with the core: its flags are module globals that the
    # compiled callers look up at each use, so activate() reaches them too
    real = child(compiled_build, "-c", COMPILED_MUTANT_CHILD, str(tmp_path / "real"))
    mutated = child(compiled_build, "-c", COMPILED_MUTANT_CHILD, str(tmp_path / "mutant"), "hw-before-isr")
    assert real.returncode == 0 and mutated.returncode == 0, real.stderr + mutated.stderr
    assert real.stdout.split() == ["True", "None"]
    assert mutated.stdout.split() == ["True", "StrongIsr"], mutated.stdout
