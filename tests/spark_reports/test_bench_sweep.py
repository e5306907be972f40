"""bench/spark_sweep.py stays runnable: a short run prints both times, the ratio and the
memory, and --write replaces its own part of a markdown file, nothing else."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.spark_reports.conftest import ROOT


@pytest.mark.slow
def test_the_sweep_benchmark_prints_both_sides_and_rewrites_only_its_part(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no java: Spark needs a JVM")
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nbefore\n")
    command = [sys.executable, "bench/spark_sweep.py", "--seeds", "2", "--write", str(page)]
    for _ in range(2):  # the second run replaces what the first wrote
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=True).stdout
    one = re.search(r"one process, one seed after another:\s+([\d.]+) s .* peak memory ([\d,]+) MiB, CPU ([\d.]+) s", out)
    spark = re.search(r"isrlab sweep on local\[2\]\s+([\d.]+) s", out)
    memory = re.search(r"peak memory: Python driver ([\d,]+) MiB; driver, JVM and Python workers ([\d,]+) MiB", out)
    ratio = re.search(r"speed-up:\s+([\d.]+)x  \(target >= 1.6: (met|not met)\)", out)
    assert one and spark and memory and ratio, out
    assert abs(float(ratio[1]) - float(one[1]) / float(spark[1])) < 0.01 + 0.01 * float(ratio[1])
    assert int(memory[2].replace(",", "")) > int(memory[1].replace(",", "")) > 10
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n") and text.count("#### spark_sweep") == 1, text
    assert "`.venv/bin/python bench/spark_sweep.py --seeds 2 " in text
