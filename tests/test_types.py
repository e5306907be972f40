"""mypy passes over every package, with pyproject.toml's [tool.mypy] settings (only the
named files are checked; libraries without types are Any, by the overrides there).

Why it matters beyond tidiness: mypyc refuses to compile what mypy rejects, so a type
error in a compiled module (isrlab/compiled.py) is a broken `make compiled`; in the
loop that carries out the core's effects (broker_core/effect_loop.py), mypy's
exhaustiveness check (broker_core.effects.unhandled_effect) is what finds a forgotten
effect, and its EffectPort Protocol holds each runtime (sim/broker_host.py,
real_io/runtime.py, tests/harness.py) to a method for each; faults/binding.py's
Protocol is how each binding is held to the fault primitives, and real_io/runtime.py's CoordinationPort how both coordination
stores are held to what the runtime drives."""
from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from isrlab.compiled import ROOT, modules, source_of

# Checked besides the packages: tests/harness.py, the in-test router that carries out the
# core's effects.
CHECKED_FILES = ("tests/harness.py",)


def _packages() -> list[str]:
    """Every package the project installs (pyproject.toml's setuptools include list)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted(pattern.rstrip("*") for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"])


CHECKED_PACKAGES = _packages()


def test_every_package_is_checked_and_the_compiled_modules_with_them():
    """A package added to pyproject.toml is checked from then on; the compiled modules
    (mypyc's input) all lie in checked packages."""
    assert {"broker_core", "sim", "analysis", "faults", "scenarios", "spark_reports", "isrlab",
            "real_io"} <= set(CHECKED_PACKAGES)
    assert all(m.split(".")[0] in CHECKED_PACKAGES for m in modules())
    assert all(source_of(m).exists() for m in modules()) and all((ROOT / f).exists() for f in CHECKED_FILES)


@pytest.mark.slow  # about 8 s with a cold .mypy_cache (pyspark's and matplotlib's inline types), 1.5 s warm
def test_mypy_passes_over_every_package():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", *CHECKED_PACKAGES, *CHECKED_FILES],
                          cwd=ROOT, capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, "\n".join(errors) or done.stdout + done.stderr
