"""``isrlab explore --master``: the search's seeds as Spark tasks find the seed the local
search finds, and the explorer writes the same file from it; the search folder holds
the same verdicts. The tasks run the compiled build when it matches the sources, as a
sweep's do (isrlab.spark_commands.session_with_build)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from isrlab.cli import main
from tests.spark_reports.conftest import JEPSEN, ROOT
from tests.test_compiled import matching_build

ARGS = ["--variant", "unclean", "--property", "lost_writes", "--max-runs", "5", "--shrink-runs", "4"]


@pytest.fixture(scope="module")
def compiled_build(tmp_path_factory) -> Path:
    return matching_build(tmp_path_factory)


def explore(capsys, out: Path, *extra: str) -> tuple[int, str, str]:
    status = main(["explore", str(JEPSEN.relative_to(ROOT)), *ARGS, "--out", str(out), *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_a_search_on_spark_runs_compiled_and_writes_the_file_the_local_search_writes(
        spark, compiled_build, tmp_path, capsys, monkeypatch):
    """The local search runs interpreted (the tests' ISRLAB_COMPILED=0); the Spark one
    with ISRLAB_COMPILED naming the build, which its executors switch on before they
    import the simulation. This process has imported the simulation by then, so its own
    shrink stays interpreted (and says so): the tasks' side alone is compiled."""
    monkeypatch.chdir(ROOT)
    local, on_spark = tmp_path / "local", tmp_path / "spark"
    status, out, err = explore(capsys, local)
    assert status == 1, out + err
    assert "Spark tasks" not in out
    monkeypatch.setenv("ISRLAB_COMPILED", str(compiled_build))
    status, spark_out, spark_err = explore(capsys, on_spark, "--master", "local[2]")
    assert status == 1, spark_out + spark_err
    assert "searched in 4 Spark tasks (compiled)" in spark_out, spark_out
    seed = re.search(r"found: seed (\d+), the search's seed number", out).group(1)
    assert f"found: seed {seed}, the search's seed number {int(seed)}," in spark_out
    # the batch ran whole: four seeds on local[2], the local search stopped at the violating one
    assert f"after {seed} runs" in out and "after 4 runs" in spark_out
    assert "explore: 4 of 5 runs, none violating yet" in spark_err
    written = re.search(r"written: +(\S+)", out).group(1)
    spark_written = re.search(r"written: +(\S+)", spark_out).group(1)
    assert Path(spark_written).name == Path(written).name
    assert Path(spark_written).read_text().replace(str(on_spark), "OUT") == \
        Path(written).read_text().replace(str(local), "OUT")
    assert re.search(r"sha256 (\w+)", spark_out).group(1) == re.search(r"sha256 (\w+)", out).group(1)
    # the search folder: each seed's verdict and drawn scenario, as the local search keeps them
    for n in range(1, int(seed) + 1):
        for name in ("verdict.json", "drawn.yaml"):
            assert (on_spark / "search" / f"seed-{n}" / name).read_text() == \
                (local / "search" / f"seed-{n}" / name).read_text(), (n, name)


def test_jobs_and_master_do_not_go_together_and_a_bad_master_is_refused(tmp_path, capsys):
    status, _, err = explore(capsys, tmp_path / "x", "--master", "local[2]", "--jobs", "2")
    assert status == 2 and "--jobs and --master do not go together" in err
    status, _, err = explore(capsys, tmp_path / "x", "--master", "yarn")
    assert status == 2 and "--master 'yarn': expected local, local[N], local[*] or spark://HOST:PORT" in err
