"""The optional mypyc build of the simulation's hot modules, and the switch that uses it.

``isrlab build`` (``make compiled``) compiles :func:`modules` with mypyc into
``build/mypyc/`` (gitignored; nothing is written beside the sources) and records, in
``manifest.json``, the sha256 of each source it compiled. :func:`activate` then makes
the import system load those extension modules in place of the sources, but only when
the build matches the sources exactly; otherwise, and whenever the build is absent or
failed, everything runs interpreted, as it always can. Only the simulation uses it
(``isrlab run`` with the sim binding, its ``--jobs`` workers, bench/sim_speed.py's
compiled runs, and the Python workers of a Spark sweep on a local master:
:func:`executor_setup`); the real binding stays interpreted. The compiled
and the interpreted code write byte-identical traces (tests/test_compiled.py).

``ISRLAB_COMPILED`` chooses: unset or ``auto`` uses a fresh build when there is one
(and says so when the build is stale); ``0`` always runs interpreted (the tests' default,
tests/conftest.py); ``1`` asks for the build and says why when it cannot be used; any
other value is the path of a build directory to use instead of ``build/mypyc``.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "build" / "mypyc"
ENV = "ISRLAB_COMPILED"
MANIFEST = "manifest.json"
GROUP = "isrlab_compiled"  # mypyc's shared library is GROUP__mypyc
SHIPPED_ARCHIVE = "isrlab-compiled-build.zip"  # the build's name among a Spark cluster job's files

# The simulation's hot path, by cProfile of bench/sim_speed.py: the whole broker core,
# and the simulated world's modules that carry every message (simpy stays interpreted).
# The trace writer's time is in json's C encoder: compiling analysis/trace.py gained
# nothing measurable, and leaving it out keeps every module `import isrlab.cli` loads
# interpreted, so that a command can still switch the build on when it starts.
# sim.consumer is compiled too because its SimConsumer extends SimClient: an interpreted
# class cannot extend a compiled one (and sim.group_consumer for its SimGroupConsumer). So is sim.invariant_checks, whose CheckedBrokerHost
# extends BrokerHost (interpreted, every --check-invariants run raised TypeError). sim.world (it relays every trace line) and
# analysis.workload (every record's value) took off another 2 to 5% of the CPU time;
# analysis.replica_digest (the final phase's digest of every replica's log) a little more.
# analysis.read_records (the final read's records as JSON text) and analysis.client_history
# (every history event's fields) hold what sim.clients and sim.producer did before the real
# binding shared them: compiled, so that the simulation's hot loops stay compiled too.
SIM_MODULES = ("sim.broker_host", "sim.network", "sim.producer", "sim.disk", "sim.clients", "sim.deadlines",
               "sim.consumer", "sim.invariant_checks", "sim.world", "analysis.workload", "analysis.replica_digest", "analysis.read_records",
               "analysis.client_history", "sim.group_consumer")


def modules() -> list[str]:
    """Every module the build compiles (package __init__ files stay interpreted)."""
    core = sorted(f"broker_core.{p.stem}" for p in (ROOT / "broker_core").glob("*.py") if p.stem != "__init__")
    return [*core, *SIM_MODULES]


def source_of(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _interpreter_tag() -> str:
    return f"{sys.implementation.cache_tag} {sys.version.split()[0]} {sys.platform}"


SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
target, files = sys.argv[1], sys.argv[2:]
setup(name="isrlab-compiled", script_args=["build_ext", "--build-lib", target + "/lib",
      "--build-temp", target + "/obj", "--parallel", "{jobs}"],
      ext_modules=mypycify(["--ignore-missing-imports", "--follow-imports=silent", "--cache-dir", target + "/mypy",
                            *files], target_dir=target + "/c", group_name="{group}", multi_file=True))
"""


def build(out_dir: Path = DEFAULT_DIR, jobs: int | None = None, force: bool = False, python: str = sys.executable,
          say=print) -> bool:
    """Compile :func:`modules` into ``out_dir`` with ``python``'s mypyc; True when a
    build that matches the sources is there afterwards (without ``force`` a fresh one is
    kept as it is). On any failure the old build is removed too (it no longer matches
    the sources) and ``say`` is told why and that isrlab runs interpreted."""
    out_dir = Path(out_dir)
    if not force and usable_build(out_dir)[0] is not None:
        say(f"the compiled build in {out_dir} is up to date")
        return True
    work = out_dir.with_name(out_dir.name + ".new")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    files = [str(source_of(m).relative_to(ROOT)) for m in modules()]
    digests = {m: _sha256(source_of(m)) for m in modules()}
    script = SETUP.format(jobs=jobs or os.cpu_count() or 1, group=GROUP)
    started = time.perf_counter()
    try:
        done = subprocess.run([python, "-c", script, str(work.resolve()), *files], cwd=ROOT,
                              capture_output=True, text=True)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        return _failed(out_dir, say, f"could not start {python}: {exc}")
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        output = (done.stdout + done.stderr).strip()
        if "No module named 'mypyc'" in output or "No module named 'setuptools'" in output:
            return _failed(out_dir, say, "mypyc is not installed (pip install -e '.[compiled]' installs it)")
        tail = "\n".join(output.splitlines()[-15:])
        return _failed(out_dir, say, f"mypyc failed:\n{tail}")
    built = {_module_name(p.relative_to(work / "lib")): str(p.relative_to(work))
             for p in sorted((work / "lib").rglob("*" + _suffix()))}
    missing = [m for m in modules() if m not in built]
    if missing:
        shutil.rmtree(work, ignore_errors=True)
        return _failed(out_dir, say, f"mypyc built no extension for {', '.join(missing)}")
    seconds = round(time.perf_counter() - started, 1)
    manifest = {"interpreter": _interpreter_tag(), "sources": digests, "extensions": built, "compile_seconds": seconds}
    for scratch in ("obj", "c", "mypy"):  # only lib/ is loaded; the rest is megabytes of C and objects
        shutil.rmtree(work / scratch, ignore_errors=True)
    (work / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(out_dir, ignore_errors=True)
    work.rename(out_dir)
    say(f"compiled {len(digests)} modules with mypyc into {out_dir} in {seconds} s")
    return True


def _failed(out_dir: Path, say, why: str) -> bool:
    shutil.rmtree(out_dir, ignore_errors=True)
    say(f"isrlab: no compiled build: {why}\nisrlab runs interpreted (the same traces, slower).")
    return False


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def _module_name(relative: Path) -> str:
    return ".".join(relative.parts).removesuffix(_suffix())


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Loads the named modules from their extension files; every other module is left
    to the usual finders (so package __init__ files and the rest come from the sources)."""

    def __init__(self, extensions: dict[str, Path]):
        self.extensions = extensions

    def find_spec(self, name, path=None, target=None):
        location = self.extensions.get(name)
        if location is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, str(location))
        return importlib.util.spec_from_file_location(name, str(location), loader=loader)


def usable_build(build_dir: Path) -> tuple[dict[str, Path] | None, str]:
    """The extension files of a build that matches this interpreter and today's sources,
    or None and why not."""
    try:
        manifest = json.loads((build_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, f"no compiled build in {build_dir} (`make compiled` builds it)"
    if manifest.get("interpreter") != _interpreter_tag():
        return None, f"the build in {build_dir} is for {manifest.get('interpreter')}, not {_interpreter_tag()}"
    sources = manifest.get("sources", {})
    if sorted(sources) != sorted(modules()):
        return None, f"the build in {build_dir} compiled other modules than this checkout lists"
    changed = [m for m in sorted(sources) if not source_of(m).exists() or _sha256(source_of(m)) != sources[m]]
    if changed:
        return None, (f"the build in {build_dir} is older than {source_of(changed[0]).relative_to(ROOT)}"
                      f"{f' and {len(changed) - 1} more' if len(changed) > 1 else ''}")
    extensions = {name: build_dir / rel for name, rel in manifest["extensions"].items()}
    if not all(p.exists() for p in extensions.values()):
        return None, f"the build in {build_dir} lacks some of its extension files"
    return extensions, ""


def activate(setting: str | None = None, say=None) -> bool:
    """Use the compiled build from now on in this process, when ``ISRLAB_COMPILED`` (or
    ``setting``) allows it and the build is fresh; True when it is in use. ``isrlab run``
    calls it for the simulation before it imports any compiled module (and its --jobs
    workers call it first thing); if one already is imported, the process stays
    interpreted: compiled code calls its compiled neighbours directly and refuses the
    interpreted copies of their classes."""
    setting = (os.environ.get(ENV, "auto") if setting is None else setting).strip() or "auto"
    say = say or (lambda text: print(f"isrlab: {text}; running interpreted", file=sys.stderr))
    if setting == "0":
        return False
    if os.environ.get("ISRLAB_MUTANT"):
        # A deliberately broken core (docs/mutants.md) is a test's tool: run the sources,
        # whose mutation points the suite checks, rather than a build nobody tested under it.
        say("ISRLAB_MUTANT is set (a deliberately broken core, docs/mutants.md)")
        return False
    if any(isinstance(f, _CompiledFinder) for f in sys.meta_path):
        return True
    extensions = _chosen_build(setting, say)[1]
    return extensions is not None and _switch_on(extensions, say)


def _switch_on(extensions: dict[str, Path], say: Callable[[str], None]) -> bool:
    loaded = sorted(m for m in extensions if m in sys.modules)
    if loaded:  # always said: a fresh build left unused is a bug of the caller's import order
        say(f"{loaded[0]} was imported before the compiled build could be switched on")
        return False
    sys.meta_path.insert(0, _CompiledFinder(extensions))
    return True


def _chosen_build(setting: str, say: Callable[[str], None]):
    """The build ``setting`` names (``auto`` and ``1``: build/mypyc) and its extension
    modules, or None when it does not match the sources; ``say`` hears why, unless
    ``auto`` found no build at all (nothing to explain)."""
    build_dir = DEFAULT_DIR if setting in ("auto", "1") else Path(setting)
    extensions, why = usable_build(build_dir)
    if extensions is None and (setting != "auto" or (build_dir / MANIFEST).exists()):
        say(why)
    return build_dir, extensions


def executor_setup(master: str, setting: str | None = None, say=None) -> Callable[[], bool] | None:
    """What a Spark sweep's Python workers call before they import the simulation: this
    process's :func:`activate` of the build, when the build matches the sources. A
    ``local`` master's workers share this machine's files and load the build from its
    folder; a cluster's get it with the job (a :class:`ShippedBuild`, which the caller
    ships). Otherwise None, and the workers run interpreted: ``say`` is told why once,
    where :func:`activate` would say it (a stale build, a build asked for with ``1`` or
    a path)."""
    setting = (os.environ.get(ENV, "auto") if setting is None else setting).strip() or "auto"
    say = say or (lambda text: print(f"isrlab: {text}; the Spark executors run interpreted", file=sys.stderr))
    if setting == "0":
        return None
    build_dir, extensions = _chosen_build(setting, say)
    if extensions is None:
        return None
    if not master.startswith("local"):
        return ShippedBuild(str(build_dir.resolve()), _interpreter_tag(), platform.machine())
    return partial(activate, str(build_dir.resolve()))


@dataclass(frozen=True)
class ShippedBuild:
    """The setup of a cluster's Python workers: the build travels with the job
    (:meth:`ship`, ``SparkContext.addArchive``) and each worker switches it on from its
    copy, when the worker's interpreter and machine are the build's (else it runs
    interpreted, and the sweep's summary says in how many tasks the build ran). The
    driver checked the build against the very sources the job ships
    (spark_reports.session's zip), so a worker checks the interpreter only."""
    folder: str  # the build's folder on the driver
    interpreter: str  # _interpreter_tag() of the driver, which the build matched
    machine: str

    def ship(self, sc) -> None:
        """Add the build (as an archive: Spark ships a folder to local executors only),
        and this module (which the workers unpickle this setup from; the project's zip
        holds the simulation's packages only), to the job's files."""
        folder = Path(tempfile.mkdtemp(prefix="isrlab-compiled-"))
        build_dir = Path(self.folder)
        with zipfile.ZipFile(folder / SHIPPED_ARCHIVE, "w") as archive:  # .so files: stored, not deflated
            for path in [build_dir / MANIFEST, *sorted((build_dir / "lib").rglob("*"))]:
                if path.is_file():
                    archive.write(path, str(path.relative_to(build_dir)))
        sc.addArchive(str(folder / SHIPPED_ARCHIVE))
        with zipfile.ZipFile(folder / "isrlab_compiled_setup.zip", "w") as archive:
            archive.writestr("isrlab/__init__.py", (ROOT / "isrlab" / "__init__.py").read_text(encoding="utf-8"))
            archive.write(Path(__file__), "isrlab/compiled.py")
        sc.addPyFile(str(folder / "isrlab_compiled_setup.zip"))

    def __call__(self) -> bool:
        from spark_reports.executor import shipped_file  # only spark_reports imports pyspark
        if any(isinstance(f, _CompiledFinder) for f in sys.meta_path):
            return True
        if (_interpreter_tag(), platform.machine()) != (self.interpreter, self.machine):
            return False
        folder = Path(shipped_file(SHIPPED_ARCHIVE))  # unpacked by Spark
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        extensions = {name: folder / rel for name, rel in manifest["extensions"].items()}
        return _switch_on(extensions, lambda text: None)


def in_use() -> bool:
    """Whether this process's broker core is the compiled one."""
    import broker_core.log
    return not broker_core.log.__file__.endswith(".py")
