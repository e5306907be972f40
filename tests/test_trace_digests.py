"""Every stored run (tests/update_trace_digests.py: library scenarios, a few seeds, and
the benchmark's scenario) still writes a byte-identical trace and verdict. A change meant
to leave behaviour alone must keep them; a change meant to alter behaviour regenerates
them with ``python -m tests.update_trace_digests`` and says why in its commit."""
import pytest

from scenarios.parse import load_scenario
from tests.update_trace_digests import LIBRARY, RUNS, run_digests, run_key, stored_digests

STORED = stored_digests()
REGENERATE = "if the change is meant to alter behaviour: .venv/bin/python -m tests.update_trace_digests"


def test_every_run_has_a_stored_digest_and_nothing_else_is_stored():
    assert sorted(STORED) == sorted(run_key(*run) for run in RUNS), REGENERATE


def test_every_library_scenario_and_variant_has_a_stored_run():
    """A scenario added to the library without a digest would leave its behaviour unguarded."""
    stored = {(filename, variant) for filename, variant, _seed in RUNS}
    missing = []
    for path in sorted(LIBRARY.glob("*.yaml")):
        variants = [v.variant for v in load_scenario(path).variants] or [None]
        missing += [f"{path.name} {v or ''}".strip() for v in variants if (path.name, v) not in stored]
    assert not missing, f"add to RUNS in tests/update_trace_digests.py: {missing}"


@pytest.mark.parametrize("run", RUNS, ids=[run_key(*run) for run in RUNS])
def test_trace_and_verdict_match_the_stored_digests(tmp_path, run):
    assert run_digests(*run, tmp_path) == STORED[run_key(*run)], REGENERATE
