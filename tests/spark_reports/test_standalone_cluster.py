"""The same sweep on a real standalone Spark cluster (a master and one worker started
from the pyspark installation, bound to 127.0.0.1, stopped afterwards) gives the same
tables as local[2]; its executors run the compiled build that travelled with the job."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from spark_reports.load import read_sweep
from tests.spark_reports.conftest import JEPSEN, ROOT

SEEDS = (2, 3, 4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait(what: str, ready, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.5)
    raise AssertionError(f"the standalone {what} did not come up in {timeout_s:.0f} s")


def _master_json(ui_port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return {}


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory):
    spark_class = _spark_class()
    if not spark_class.exists():
        pytest.skip(f"no {spark_class} in the pyspark installation")
    folder = tmp_path_factory.mktemp("standalone")
    # nothing of this environment's Python path reaches the worker's executors
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")},
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(spark_class.parent.parent),
           "SPARK_WORKER_DIR": str(folder / "work")}
    port, ui_port = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    processes = []
    try:
        processes.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui_port)], env=env, stdout=open(folder / "master.log", "w"), stderr=subprocess.STDOUT))
        _wait("master", lambda: _master_json(ui_port).get("status") == "ALIVE")
        processes.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
             "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(folder / "work"), master_url],
            env=env, stdout=open(folder / "worker.log", "w"), stderr=subprocess.STDOUT))
        _wait("worker", lambda: _master_json(ui_port).get("aliveworkers", 0) >= 1)
        yield master_url
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _comparable(tables) -> dict:
    verdicts = {(r["config"], r["seed"]): (r["outcome"], r["verdict_json"], r["replay"])
                for r in tables["verdicts"].collect()}
    operations = {(r["config"], r["seed"]): r["n"] for r in
                  tables["operations"].groupBy("config", "seed").count().withColumnRenamed("count", "n").collect()}
    events = sorted(tuple(r) for r in tables["cluster_events"].drop("scenario").collect())
    return {"verdicts": verdicts, "operations": operations, "cluster_events": events}


def _bare_python() -> str:
    """The interpreter this virtual environment was made from: Python alone, without
    simpy, networkx or yaml (the executor puts pyspark on its path itself)."""
    bare = Path(sys.base_prefix) / "bin" / "python3"
    if sys.prefix == sys.base_prefix or not bare.exists():
        pytest.skip("not in a virtual environment: no bare Python to run the executors with")
    if subprocess.run([str(bare), "-c", "import simpy"], capture_output=True).returncode == 0:
        pytest.skip(f"{bare} has simpy: it would not show that the sweep ships its code")
    return str(bare)


@pytest.fixture(scope="module")
def compiled_build(tmp_path_factory) -> Path:
    from tests.test_compiled import matching_build
    return matching_build(tmp_path_factory)


@pytest.mark.slow
def test_a_sweep_on_a_standalone_cluster_gives_the_same_tables_as_local(spark, standalone_master, compiled_build,
                                                                        tmp_path):
    """The executors run a Python that has none of the simulation's libraries (nor the
    project): the code, the libraries and the compiled build travel with the job, and
    the executors run the build (the local sweep, the tests' ISRLAB_COMPILED=0, runs
    interpreted: the tables are the same)."""
    from spark_reports.sweep import run_sweep
    seeds = ",".join(map(str, SEEDS))
    done = subprocess.run(
        [sys.executable, "-m", "isrlab", "sweep", str(JEPSEN.relative_to(ROOT)), "--seeds", seeds, "--variant",
         "unclean", "--master", standalone_master, "--out", str(tmp_path / "cluster")],
        cwd=ROOT, env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "ISRLAB_COMPILED": str(compiled_build),
                       "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": _bare_python()},
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 runs in 3 tasks (compiled)" in done.stdout and standalone_master in done.stdout, done.stdout
    local = run_sweep(spark, str(JEPSEN.relative_to(ROOT)), list(SEEDS), tmp_path / "local", variant="unclean")
    assert local.runs == 3
    assert _comparable(read_sweep(spark, tmp_path / "cluster")) == _comparable(read_sweep(spark, local.out))
