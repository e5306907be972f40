"""mypy passes over every package but real_io, with pyproject.toml's [tool.mypy]
settings (only the named files are checked; libraries without types are Any).

Why it matters beyond tidiness: mypyc refuses to compile what mypy rejects, so a type
error in a compiled module (isrlab/compiled.py) is a broken `make compiled`; in the
files that carry out the core's effects, mypy's exhaustiveness check
(broker_core.effects.unhandled_effect) is what finds a forgotten effect; and faults/
binding.py's Protocol is how each binding is held to the fault primitives.

real_io is left out while issue 21's cluster work rewrites it: only its files that are
clean already are checked. The lead adds the whole package to CHECKED_PACKAGES when
that work lands (and drops the real_io files from CHECKED_FILES)."""
from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from isrlab.compiled import ROOT, modules, source_of

NOT_YET = {"real_io"}  # issue 21: joins when the multi-broker real binding lands
# The real binding's files that are clean today: its file layer and coordination stores,
# and its fault primitives (mypy checks them against faults/binding.py's Protocol);
# tests/harness.py, the in-test router that carries out the core's effects.
CHECKED_FILES = ("real_io/files.py", "real_io/coordination.py", "real_io/embedded_coordination.py",
                 "real_io/real_faults.py", "tests/harness.py")


def _packages() -> list[str]:
    """Every package the project installs (pyproject.toml's setuptools include list)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted(pattern.rstrip("*") for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"])


CHECKED_PACKAGES = [p for p in _packages() if p not in NOT_YET]


def test_every_package_but_real_io_is_checked_and_the_compiled_modules_with_them():
    """A package added to pyproject.toml is checked from then on; the compiled modules
    (mypyc's input) all lie in checked packages."""
    assert set(CHECKED_PACKAGES) | NOT_YET == set(_packages())
    assert {"broker_core", "sim", "analysis", "faults", "scenarios", "spark_reports", "isrlab"} <= set(CHECKED_PACKAGES)
    assert all(m.split(".")[0] in CHECKED_PACKAGES for m in modules())
    assert all(source_of(m).exists() for m in modules()) and all((ROOT / f).exists() for f in CHECKED_FILES)


@pytest.mark.slow  # about 8 s with a cold .mypy_cache (pyspark's and matplotlib's inline types), 1.5 s warm
def test_mypy_passes_over_every_package_but_real_io():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", *CHECKED_PACKAGES, *CHECKED_FILES],
                          cwd=ROOT, capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, "\n".join(errors) or done.stdout + done.stderr
