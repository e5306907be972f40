"""The Spark session of a sweep or a report: local (``local[*]``) by default, or any
cluster given by ``--master``, quiet (errors only) and bound to 127.0.0.1 when local.

On a cluster the project's packages, and the pure-Python libraries the simulation
needs, travel with the job as one zip (``addPyFile``), so a standalone cluster whose
workers have only Python and pyspark can run a sweep; local workers import the
driver's own folders. Spark's own failures become SparkUnavailable with
one line of explanation: nobody should meet a Java stack trace.
"""
from __future__ import annotations

import importlib
import os
import py_compile
import re
import socket
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROJECT_PACKAGES = ("broker_core", "faults", "analysis", "sim", "scenarios", "spark_reports")
# Pure-Python libraries the simulation imports (a zip cannot carry compiled modules;
# yaml falls back on its pure-Python parser, and the executors never parse YAML anyway).
SHIPPED_LIBRARIES = ("simpy", "networkx", "yaml")
LOG4J2 = """status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n%ex{0}
"""
MASTER_FORMS = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?|spark://[^\s/:]+:[0-9]{1,5}")


class SparkUnavailable(Exception):
    """Spark could not start, reach its master or run a job: one line for the user."""


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Refuse a malformed master URL, and a standalone master nobody answers at (Spark
    itself would retry for a minute, then print a stack trace)."""
    if not MASTER_FORMS.fullmatch(master):
        raise SparkUnavailable(f"--master {master!r}: expected local, local[N], local[*] or spark://HOST:PORT")
    if master.startswith("spark://"):
        host, port = master[len("spark://"):].rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as exc:
            raise SparkUnavailable(f"--master {master}: cannot reach the Spark master ({exc.strerror or exc})") from None


def log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"isrlab-spark-{os.getuid()}.log"


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The JVM inherits this process's stderr when it starts: point it at a log file
    for that moment, so the JVM's own chatter (and any Java stack trace later) goes
    there instead of the user's terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / f"isrlab-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != LOG4J2:
        path.write_text(LOG4J2)
    return path


def project_zip() -> Path:
    """The project's packages and the pure-Python libraries, as imported by this
    process (so a worktree ships its own code), in one zip for the executors. Each
    module goes with its compiled .pyc beside it: zipimport never writes bytecode, so
    without it every new Python worker would compile networkx and the simulation from
    source again (seconds per worker)."""
    folder = Path(tempfile.mkdtemp(prefix="isrlab-spark-"))
    target = folder / "isrlab_job.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in PROJECT_PACKAGES + SHIPPED_LIBRARIES:
            package = _package_folder(name)
            for path in sorted(package.rglob("*.py")):
                arcname = Path(name) / path.relative_to(package)
                archive.write(path, arcname)
                compiled = folder / "pyc" / arcname.with_suffix(".pyc")
                py_compile.compile(str(path), cfile=str(compiled), dfile=str(arcname), doraise=True)
                archive.write(compiled, arcname.with_suffix(".pyc"))
    return target


def _package_folder(name: str) -> Path:
    """The folder a package is imported from in this process (every package shipped
    has an __init__.py: a namespace package has no one folder to ship)."""
    init = importlib.import_module(name).__file__
    if init is None:
        raise SparkUnavailable(f"{name} is a namespace package: no one folder to ship to the executors")
    return Path(init).parent


def _project_root() -> str:
    """The folder the project's packages are imported from in this process."""
    return str(_package_folder("spark_reports").parent)


def _ship_code(session, master: str) -> None:
    """Local workers import the driver's own folders (their bytecode cache included);
    any other master gets the zip."""
    if not master.startswith("local"):
        session.sparkContext.addPyFile(str(project_zip()))


# The driver's JVM (in local mode also the executors') is short-lived: a sweep of a few
# dozen runs used as much CPU in it as in the simulations, mostly the JIT warming Spark's
# own code up. C1 alone and the serial collector cut that by a third on the 2-core
# machine (docs/spark.md, "Where a local sweep's time goes"); the Python workers do the work.
DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _builder(master: str, app_name: str):
    from pyspark.sql import SparkSession
    log_option = f"-Dlog4j2.configurationFile=file:{_log_config()}"
    local = master.startswith("local")
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.extraJavaOptions", f"{log_option} {DRIVER_JVM_OPTIONS}")
               .config("spark.executor.extraJavaOptions", log_option)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "8"))
    if local or os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    return builder


@contextmanager
def spark_session(master: str = "local[*]", app_name: str = "isrlab") -> Iterator["SparkSession"]:
    """A session on ``master``. A session already running in this process (the tests'
    shared one) is used as it is and left running; one started here is stopped."""
    from pyspark.sql import SparkSession
    check_master(master)
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    try:
        session = start_session(master, app_name)
    except Exception as exc:
        raise SparkUnavailable(f"cannot start Spark on {master}: {one_line(exc)} (Spark's log: {log_path()})") from None
    try:
        yield session
    finally:
        session.stop()


def start_session(master: str, app_name: str = "isrlab"):
    """A session kept until the process ends (the tests' shared one)."""
    check_master(master)
    # PySpark starts its workers with $PYSPARK_PYTHON, else whatever `python3` is on the
    # PATH (which may lack this environment's libraries): default to this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):  # the Python workers inherit this environment
        paths = [_project_root(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    with _stderr_to(log_path()):
        session = _builder(master, app_name).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _ship_code(session, master)
    return session


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a Spark call raises (the JVM's through Py4J, PySpark's own)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    return (Py4JError, PySparkException)


def one_line(exc: BaseException) -> str:
    """The first line of a Spark or Py4J error worth showing: the Python exception a
    task raised, or Spark's own message, without the Java stack."""
    text = str(exc).strip()
    python_errors = re.findall(r"^\s*(\w+(?:Error|Exception|Failed|Unavailable)\w*: .+)$", text, re.MULTILINE)
    if python_errors:
        return python_errors[-1].strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "Traceback", "File ", "py4j", "----")):
            return line[:300]
    return type(exc).__name__
