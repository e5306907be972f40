"""bench/spark_sweep.py stays runnable: a short run prints every side (the sweep and
`isrlab run --jobs N`, compiled and interpreted), the ratios of this one run, the
executors' code and memory, and --write replaces its own part of a markdown file,
nothing else."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.spark_reports.conftest import ROOT

BEGIN = "<!-- bench/spark_sweep.py --write: from here -->"
END = "<!-- bench/spark_sweep.py --write: to here -->"


@pytest.mark.slow
def test_the_sweep_benchmark_prints_every_side_and_ratio_and_rewrites_only_its_part(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no java: Spark needs a JVM")
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nbefore\n\n{BEGIN}\n#### spark_sweep, an older run\n{END}\n\nafter\n")
    command = [sys.executable, "bench/spark_sweep.py", "--seeds", "2", "--write", str(page)]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=True).stdout
    sides = {m[1]: (float(m[2]), None if m[3] == "-" else float(m[3]))
             for m in re.finditer(r"^(isrlab \S+(?: --jobs 2)?, \w+) +([\d.]+) +([\d.]+|-) ", out, re.MULTILINE)}
    compiled = "no compiled build matches" not in out
    codes = ("compiled", "interpreted") if compiled else ("interpreted",)
    assert sorted(sides) == sorted(f"isrlab {kind}, {code}" for kind in ("sweep", "run --jobs 2") for code in codes), out
    for code in codes:
        wall, job = sides[f"isrlab sweep, {code}"]
        assert job is not None and 0 < job < wall
        assert f"sweep {code}: ran {code} on the executors" in out
        ratio = re.search(rf"sweep / isrlab run --jobs 2, {code}: +([\d.]+)x \(the sweep's job alone +([\d.]+)x", out)
        assert ratio, out
        run = sides[f"isrlab run --jobs 2, {code}"][0]
        # the times are printed to 0.1 s, the ratios from the times themselves: a short run
        # of 3.2 s printed is 3.15-3.25 s, 1.6% either way
        assert abs(float(ratio[1]) - wall / run) < 0.01 + wall / run * (0.05 / wall + 0.05 / run)
        assert abs(float(ratio[2]) - job / run) < 0.01 + job / run * (0.05 / job + 0.05 / run)
    if compiled:
        ratio = re.search(r"compiled sweep / interpreted sweep: +([\d.]+)x", out)
        assert ratio and abs(float(ratio[1]) - sides["isrlab sweep, compiled"][0] / sides["isrlab sweep, interpreted"][0]) < 0.02
    memory = re.search(r"peak memory of the Python driver ([\d,]+) MiB", out)
    assert memory and int(memory[1].replace(",", "")) > 10
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n") and text.endswith(f"{END}\n\nafter\n"), text
    assert text.count("#### spark_sweep") == 1 and "an older run" not in text, text
    assert "`.venv/bin/python bench/spark_sweep.py --seeds 2 " in text
