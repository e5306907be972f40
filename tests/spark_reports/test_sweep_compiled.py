"""A sweep's executors run the compiled simulation (isrlab/compiled.py) when the build
matches the sources and the master is local, interpreted when asked (ISRLAB_COMPILED=0),
and the two sweeps write the same tables, traces included."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from isrlab.cli import main
from isrlab.compiled import MANIFEST, ShippedBuild, executor_setup
from spark_reports.load import read_sweep
from spark_reports.schemas import TABLES
from spark_reports.sweep import run_sweep
from tests.spark_reports.conftest import JEPSEN, ROOT
from tests.test_compiled import matching_build


@pytest.fixture(scope="module")
def compiled_build(tmp_path_factory) -> Path:
    return matching_build(tmp_path_factory)


def test_unpickling_a_sweep_task_imports_none_of_the_compiled_modules():
    """The executor's task module comes before the switch to the build: had it imported a
    compiled module, that module would stay interpreted in every worker."""
    code = ("import sys; import spark_reports.executor; from isrlab.compiled import modules; "
            "print([m for m in modules() if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_executors_get_the_build_only_when_it_matches_from_their_files_or_with_the_job(compiled_build,
                                                                                          tmp_path):
    said: list[str] = []
    assert executor_setup("local[2]", "0", said.append) is None and said == []
    setup = executor_setup("local[2]", str(compiled_build), said.append)
    assert setup is not None and not isinstance(setup, ShippedBuild) and said == []
    shipped = executor_setup("spark://127.0.0.1:7077", str(compiled_build), said.append)
    assert shipped == ShippedBuild(str(compiled_build.resolve()), shipped.interpreter, shipped.machine)
    assert said == []
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / MANIFEST).write_text((compiled_build / MANIFEST).read_text().replace('"interpreter": "', '"interpreter": "x'))
    assert executor_setup("local[2]", str(stale), said.append) is None
    assert said[-1].startswith(f"the build in {stale} is for x")


def _sweep(args: list[str], out: Path, capsys) -> str:
    assert main(args + ["--out", str(out)]) == 0
    return capsys.readouterr().out


def _rows(spark, folder: Path) -> dict[str, list]:
    tables = read_sweep(spark, folder)
    return {name: sorted(tuple(map(repr, row)) for row in tables[name].collect()) for name in TABLES}


@pytest.mark.slow
def test_a_local_sweep_runs_compiled_when_the_build_matches_and_writes_what_an_interpreted_one_writes(
        spark, compiled_build, tmp_path, monkeypatch, capsys):
    """The compiled side as run_sweep, to see where each executor loaded the simulation
    from; the interpreted side as `isrlab sweep` with ISRLAB_COMPILED=0 (the tests' own
    setting), which says so."""
    monkeypatch.chdir(ROOT)
    file = str(JEPSEN.relative_to(ROOT))
    setup = executor_setup("local[2]", str(compiled_build))
    result = run_sweep(spark, file, [1, 2], tmp_path / "compiled", keep="all", executor_setup=setup)
    assert result.tasks_compiled == result.tasks == 4 and result.simulation_files
    lib = (compiled_build / "lib").resolve()
    assert all(Path(f).parent.parent == lib and f.endswith(".so") for f in result.simulation_files), result
    monkeypatch.setenv("ISRLAB_COMPILED", "0")
    interpreted_out = _sweep(["sweep", file, "--seeds", "1-2", "--master", "local[2]", "--keep", "all"],
                             tmp_path / "interpreted", capsys)
    assert "4 runs in 4 tasks (interpreted)" in interpreted_out, interpreted_out
    compiled_rows, interpreted_rows = _rows(spark, tmp_path / "compiled"), _rows(spark, tmp_path / "interpreted")
    assert len(compiled_rows["verdicts"]) == 4 and len(compiled_rows["traces"]) > 1000
    for name in TABLES:
        assert compiled_rows[name] == interpreted_rows[name], name


def test_the_driver_jvm_runs_with_the_options_that_spare_its_warm_up(spark):
    """C1 alone and the serial collector (spark_reports/session.py): the JVM the session
    started says it runs with them."""
    from spark_reports.session import DRIVER_JVM_OPTIONS
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(bean.getInputArguments())
    assert all(option in arguments for option in DRIVER_JVM_OPTIONS.split()), arguments
