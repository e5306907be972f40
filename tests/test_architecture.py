"""The layering rules, checked on the source: imports point down only (isrlab, then
spark_reports, scenarios, the two bindings, and broker_core, faults and analysis at the
bottom); broker_core imports the standard library only; only a binding imports the
libraries that tie code to one way of running; no two modules import each other."""
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
# (the core and everything shared run under either binding).
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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports when it runs, at the top or inside a function;
    imports under ``if TYPE_CHECKING:`` are left out, since they never run (the controller's
    helper modules name the controller's type that way)."""
    tree = ast.parse(path.read_text(), str(path))
    type_only = {id(inner) for node in ast.walk(tree)
                 if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for statement in node.body for inner in ast.walk(statement)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:  # `from pkg import module` names a module; `from module import name` does not
                submodule = f"{node.module}.{alias.name}"
                found |= {submodule} if submodule in modules else {node.module} & modules
    return found - {module_name(path)}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another, directly or round a longer loop
    (Tarjan's strongly connected components, larger than one module)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_two_modules_import_each_other():
    """A cycle (isrlab/cli.py and spark_commands.py had one) works only while the imports
    stay inside functions, and ties both modules into one: what both need goes below them."""
    paths = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}
    graph = {module: runtime_imports(path, set(paths)) for module, path in paths.items()}
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
