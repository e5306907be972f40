"""One local Spark session (local[2]) for the whole test run: it takes seconds to start,
so every Spark test shares it. Also the small sweep several tests read.
Under pytest-xdist a session is one worker: tests/conftest.py puts every test that uses
the session in one xdist group, so that one worker runs them all and one JVM starts."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JEPSEN = ROOT / "scenarios" / "library" / "jepsen-2013.yaml"
SWEEP_SEEDS = list(range(1, 13))  # a few dozen runs: twelve seeds of each of the two variants


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("no java: Spark needs a JVM")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from spark_reports.session import start_session
    session = start_session("local[2]", "isrlab tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def jepsen_sweep(spark, tmp_path_factory):
    """isrlab sweep of jepsen-2013 (both variants), seeds 1-12, on the shared session."""
    from spark_reports.sweep import run_sweep
    out = tmp_path_factory.mktemp("sweep") / "jepsen"
    result = run_sweep(spark, str(JEPSEN.relative_to(ROOT)), SWEEP_SEEDS, out)
    return result


@pytest.fixture(scope="session")
def jepsen_report(spark, jepsen_sweep):
    """isrlab report over the shared sweep."""
    from spark_reports.build import build_report
    return build_report(spark, jepsen_sweep.out)
