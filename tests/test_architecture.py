"""The layering rules, checked on the source: imports point down only (isrlab, then
spark_reports, scenarios, the two bindings, and broker_core, faults and analysis at the
bottom); broker_core imports the standard library only; only a binding imports the
libraries that tie code to one way of running; no two modules import each other; the
bindings read a BrokerNode through its public methods only."""
import ast
import os
import re
import sys
import tempfile
from pathlib import Path

from broker_core.broker import BrokerNode

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
    # not inside a dotted name: Kafka's key ssl.secure.random.implementation is data
    for path in (ROOT / "broker_core").rglob("*.py"):
        assert not re.search(r"(?<![\w.])random\.", path.read_text()), path


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


# What a binding may read of a BrokerNode: its public methods (handle and the read-only
# queries). Its internals are for broker_core and the tests of the core.
NODE_API = {name for name, value in vars(BrokerNode).items() if callable(value) and not name.startswith("_")}
# Attributes of the node's parts (ReplicaManager, the fetchers, the controller, the log
# manager, the context), and attributes only a node has: reading through one of these
# reaches into the core, whatever the name the node is bound to.
NODE_INTERNALS = {"replicas", "fetchers", "controller", "logs", "ctx"}
NODE_ONLY = {"metadata", "metadata_live", "metadata_controller", "producer_ids", "config_listener"}
# (path, line text) of the few reads a comment justifies: the ``metadata`` field of the
# group messages (a member's protocol metadata, an offset's commit metadata: Kafka's field
# names), not a node's metadata cache.
NODE_READS_ALLOWED: set[tuple[str, str]] = {
    # a JoinGroup answer's member (broker_core.group_messages.JoinGroupResponseMember), not a BrokerNode
    ("sim/group_member.py", "metadata = joined.metadata  # a JoinGroup member's subscription bytes, not a node's"),
    ("real_io/group_api.py", '"metadata": m.metadata} for m in response.members]}'),
    ("real_io/group_api.py", '"committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,'),
}
OUTSIDE_THE_CORE = [p for p in PACKAGES if p != "broker_core"] + ["bench"]


def is_a_node(expr: ast.expr) -> bool:
    """``x.node`` (a host's or a runtime's node) or ``BrokerNode(...)``."""
    return (isinstance(expr, ast.Attribute) and expr.attr == "node"
            or isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "BrokerNode")


def node_internal_reads(path: Path) -> list[str]:
    """``x.node.<not a query>`` (and the same through a name bound to ``x.node`` or to
    ``BrokerNode(...)``), ``x.<part>.<anything>`` and ``x.<node-only attribute>`` in one
    file, as "path:line: text"."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    names = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and is_a_node(node.value)
             for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        inner = node.value
        through_node = (is_a_node(inner) or isinstance(inner, ast.Name) and inner.id in names) and node.attr not in NODE_API
        into_part = isinstance(inner, ast.Attribute) and inner.attr in NODE_INTERNALS
        if through_node or into_part or node.attr in NODE_ONLY:
            found.append((str(path.relative_to(ROOT)), node.lineno, lines[node.lineno - 1].strip()))
    return [f"{p}:{line}: {text}" for p, line, text in sorted(set(found)) if (p, text) not in NODE_READS_ALLOWED]


def test_the_bindings_read_a_broker_node_only_through_its_queries():
    """sim/, real_io/, faults/, scenarios/, spark_reports/ (and the rest outside the core)
    read a node through BrokerNode's public methods, never its parts: the core's
    internals can then change without touching a binding (issue 21)."""
    bad = [found for package in OUTSIDE_THE_CORE for path in sorted((ROOT / package).rglob("*.py"))
           for found in node_internal_reads(path)]
    assert bad == []


def test_the_node_read_check_finds_reads_of_the_internals():
    # Under the checkout (the check names files relative to it), with a name of its own:
    # another run of the suite in this checkout may be writing its sample at the same time.
    handle, name = tempfile.mkstemp(prefix="_node_reads_sample_", suffix=".py", dir=ROOT / "tests")
    os.close(handle)
    sample = Path(name)
    sample.write_text("a = host.node.replicas\nb = world.x.controller.active\nc = runtime.node.metadata_live\n"
                      "d = node.snapshot()\ne = self.replicas[tp]\nnode = host.node\nf = node.held\n"
                      "fresh = BrokerNode(1, config)\ng = fresh.topics\nh = other.held\n")
    try:
        found = node_internal_reads(sample)
    finally:
        sample.unlink()
    assert [f.split(": ", 1)[1] for f in found] == [
        "a = host.node.replicas", "b = world.x.controller.active", "c = runtime.node.metadata_live", "f = node.held",
        "g = fresh.topics"]
