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
