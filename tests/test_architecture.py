"""The layering rules of ARCHITECTURE.md, checked on the source."""
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_CORE = {"simpy", "asyncio", "socket", "select", "selectors", "threading", "multiprocessing",
                     "subprocess", "time", "os", "random", "kazoo", "pyspark", "networkx", "datetime"}
LAYERS = {  # package -> packages it must not import
    "broker_core": {"sim", "real_io", "scenarios", "analysis", "spark_reports", "isrlab", "faults"},
    "faults": {"sim", "real_io", "scenarios", "analysis", "spark_reports", "isrlab", "broker_core"},
    "analysis": {"sim", "real_io", "scenarios", "spark_reports", "isrlab"},
    "sim": {"real_io", "scenarios", "spark_reports", "isrlab"},
    "real_io": {"sim", "scenarios", "spark_reports", "isrlab"},
    "scenarios": {"spark_reports", "isrlab"},
    "spark_reports": {"isrlab"},
}

# The libraries that tie code to one way of running: only their binding may import them
# (ARCHITECTURE.md: the core and everything shared run under either binding).
ONLY_IN = {
    "simpy": "sim",
    "asyncio": "real_io", "socket": "real_io", "select": "real_io", "selectors": "real_io", "kazoo": "real_io",
    "pyspark": "spark_reports", "pyarrow": "spark_reports",
}
# Narrow exceptions, file by file: spark_reports/session.py opens one TCP connection to
# check that a --master spark://HOST:PORT answers before Spark retries it for a minute.
ALSO_ALLOWED = {("socket", "spark_reports/session.py")}
# Every package of the project. bench/ and tests/ are not packages of the product:
# bench/sim_speed.py times bare simpy as a reference, and tests drive both bindings.
PACKAGES = sorted(set(LAYERS) | {"isrlab"})


def imports_of(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, node.lineno, alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path, node.lineno, node.module.split(".")[0]


def test_broker_core_imports_only_the_standard_library_and_itself():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for p, line, name in imports_of("broker_core")
           if name != "broker_core" and (name not in sys.stdlib_module_names or name in FORBIDDEN_IN_CORE)]
    assert bad == []


def test_broker_core_never_uses_the_global_random_generator():
    for path in (ROOT / "broker_core").rglob("*.py"):
        assert "random." not in path.read_text(), path


def test_imports_point_down_only():
    bad = []
    for package, forbidden in LAYERS.items():
        for path, line, name in imports_of(package):
            if name in forbidden:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert bad == []


def test_nothing_imports_the_command_line_package():
    bad = [f"{p}:{line}" for package in LAYERS for p, line, name in imports_of(package) if name == "isrlab"]
    assert bad == []


def test_simpy_asyncio_sockets_kazoo_and_pyspark_are_imported_only_by_their_binding():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for package in PACKAGES
           for p, line, name in imports_of(package) if name in ONLY_IN and ONLY_IN[name] != package
           and (name, str(p.relative_to(ROOT))) not in ALSO_ALLOWED]
    assert bad == []



def test_the_two_bindings_never_import_each_other():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for package, other in (("sim", "real_io"), ("real_io", "sim"))
           for p, line, name in imports_of(package) if name == other]
    assert bad == []


def test_the_product_imports_nothing_that_only_the_tests_install():
    """pytest, hypothesis and kafka-python are the `test` extra (pyproject.toml): a package
    of the product that imported one would break an install without it. confluent-kafka
    is a runtime dependency: the real binding's workload (isrlab run --binding real)."""
    test_only = {"pytest", "hypothesis", "kafka", "snappy"}
    offenders = [(str(path), line, module) for package in PACKAGES for path, line, module in imports_of(package)
                 if module in test_only]
    assert offenders == []
