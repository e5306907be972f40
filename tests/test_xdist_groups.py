"""make test's xdist groups (tests/conftest.py), on a small suite run as make test runs
the real one (two workers, --dist loadgroup): the users of a shared session fixture all
run on one worker, which starts the fixture once; so do the tests of one file that use
its module-scoped fixture; the rest go to any worker, a test marked slow first."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = '''
import os
import pytest
from tests.conftest import pytest_collection_modifyitems  # the rule under test

LOG = os.environ["GROUPS_LOG"]


def note(*words):
    with open(LOG, "a") as log:
        log.write(" ".join([os.environ.get("PYTEST_XDIST_WORKER", "-"), *map(str, words)]) + "\\n")


@pytest.fixture(scope="session")
def spark():  # the name SHARED_SESSIONS gives
    note("start", "spark")
    return "session"


@pytest.fixture(scope="session")
def sweep(spark):  # uses the session only through another fixture
    return spark
'''

SPARK_TESTS = '''
import time
from conftest import note

def test_direct(spark):
    time.sleep(0.1)
    note("ran", "spark-direct")

def test_through_another_fixture(sweep):
    time.sleep(0.1)
    note("ran", "spark-indirect")
'''

MODULE_TESTS = '''
import time
import pytest
from conftest import note

@pytest.fixture(scope="module")
def served():
    note("start", "served")
    return []

def test_first(served):
    served.append("first")
    time.sleep(0.1)
    note("ran", "served")

def test_second_sees_the_first(served):
    assert served == ["first"]
    note("ran", "served")

def test_free():
    note("ran", "free")
'''

FREE_TESTS = "".join(f'''
def test_free_{i}():
    import time
    time.sleep(0.05)
    from conftest import note
    note("ran", "free")
''' for i in range(12))

# Collected last: a long test the workers must start before the short ones.
SLOW_TEST = '''
import pytest
from conftest import note

@pytest.mark.slow
def test_long():
    note("ran", "slow")
'''


def test_loadgroup_keeps_shared_fixtures_on_one_worker_each_started_once(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_a_free.py").write_text(FREE_TESTS)
    (suite / "test_b_spark.py").write_text(SPARK_TESTS)
    (suite / "test_c_spark_too.py").write_text(SPARK_TESTS)
    (suite / "test_d_module.py").write_text(MODULE_TESTS)
    (suite / "test_e_slow.py").write_text(SLOW_TEST)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    log = tmp_path / "log"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "GROUPS_LOG": str(log), "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "--rootdir", str(suite), str(suite)],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "20 passed" in done.stdout, done.stdout
    workers: dict[tuple[str, str], set[str]] = defaultdict(set)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    ran_on: dict[str, list[str]] = defaultdict(list)
    for line in log.read_text().splitlines():
        worker, what, name = line.split()
        workers[(what, name)].add(worker)
        counts[(what, name)] += 1
        if what == "ran":
            ran_on[worker].append(name)
    # the slow test was the first test outside a group handed out: its worker ran no
    # other such test before it
    (slow_worker,) = workers[("ran", "slow")]
    assert "free" not in ran_on[slow_worker][:ran_on[slow_worker].index("slow")], ran_on
    assert counts[("start", "spark")] == 1 and counts[("start", "served")] == 1
    spark_workers = workers[("ran", "spark-direct")] | workers[("ran", "spark-indirect")]
    assert len(spark_workers) == 1 and spark_workers == workers[("start", "spark")]
    assert counts[("ran", "spark-direct")] == counts[("ran", "spark-indirect")] == 2
    assert workers[("ran", "served")] == workers[("start", "served")] and len(workers[("ran", "served")]) == 1
    assert counts[("ran", "free")] == 13 and workers[("ran", "free")] <= {"gw0", "gw1"}
