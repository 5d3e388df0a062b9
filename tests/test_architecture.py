"""The package's shape: packages follow the process walls, with no circle between packages or
modules; only the engine imports a framework; in-house imports stand at the top of a module;
short functions; a test file beside every module it tests."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from mptbench.core.cells import AXES, BACKENDS, Cell
from mptbench.engine import backends, kernels

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mptbench"
MAX_FUNCTION_LINES = 60
# What each package may import of the others. The core imports nothing else of mptbench; the
# plan (the Snakefile's parse), the job side (a Snakemake job's own Python) and the report
# never import the engine (the variant's Python, the only one with a framework); the engine
# reads data only through data/ (the tfds cache).
LAYERS = {
    "core": set(),
    "data": {"core"},
    "plan": {"core", "data"},
    "jobs": {"core", "data"},
    "engine": {"core", "data"},
    "report": {"core", "plan"},
}
# Machine-learning frameworks, and which packages may import them (always inside a function
# or after the backend is chosen: importing Keras picks its backend for the process).
FRAMEWORKS = {"tensorflow", "jax", "jaxlib", "torch", "keras", "tensorflow_datasets"}
MAY_IMPORT_A_FRAMEWORK = {"engine", "data"}  # data: tfds builds and reads the cache


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _import_nodes(path: Path):
    """(node, at module level) for every import statement of a file."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, id(node) in top


def _names(node) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module:
            return []
        return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return [a.name for a in node.names]


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """mptbench modules a file imports, at any depth."""
    return {name for node, _ in _import_nodes(path) for name in _names(node) if name in modules}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack, node, dep]
            if dep not in state and (found := visit(dep, [*stack, node])):
                return found
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name, [])):
            return found
    return None


def _module_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    # A package's __init__ re-exporting its modules is not a dependency of those modules.
    return {n: {d for d in deps if not n.startswith(f"{d}.")} for n, deps in graph.items()}


def test_no_import_circle_between_modules():
    circle = _circle(_module_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_packages_follow_the_process_walls():
    graph = _module_graph()
    packages = {_package(m) for m in graph} - {""}
    assert packages == set(LAYERS), packages
    crossings = sorted(
        f"{module} -> {dep}"
        for module, deps in graph.items()
        for dep in deps
        if _package(dep) != _package(module)
        and _package(module)
        and _package(dep) not in LAYERS[_package(module)]
    )
    assert not crossings, crossings
    between = {}
    for module, deps in graph.items():
        between.setdefault(_package(module), set()).update(
            _package(d) for d in deps if _package(d) != _package(module)
        )
    assert _circle(between) is None


def test_the_layer_check_fails_on_a_forbidden_import():
    """The check above is not vacuous: a report module importing the engine is caught."""
    graph = {"mptbench.report.x": {"mptbench.engine.backends"}}
    module, (dep,) = next(iter(graph.items()))
    assert _package(dep) not in LAYERS[_package(module)]
    assert _circle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_only_the_engine_and_the_data_stage_import_a_framework():
    offenders = []
    for name, path in _modules().items():
        for node, at_top in _import_nodes(path):
            found = sorted({n.split(".")[0] for n in _names(node)} & FRAMEWORKS)
            if found and _package(name) not in MAY_IMPORT_A_FRAMEWORK:
                offenders.append(f"{name}: {', '.join(found)}")
            # Where they may, never at module level: the backend must be chosen first.
            elif found and at_top:
                offenders.append(f"{name} imports {', '.join(found)} at load")
    assert not offenders, offenders


def test_in_house_imports_stand_at_the_top_of_their_module():
    """No deferred import of mptbench's own code: the layering is what the imports say."""
    deferred = [
        f"{name}:{node.lineno}"
        for name, path in _modules().items()
        for node, at_top in _import_nodes(path)
        if not at_top and any(n.split(".")[0] == "mptbench" for n in _names(node))
    ]
    assert not deferred, deferred


def test_axis_order_and_backend_names_are_defined_once():
    assert tuple(Cell.__dataclass_fields__) == AXES
    schema = yaml.safe_load((PACKAGE / "plan" / "schema.yaml").read_text())
    assert tuple(schema["properties"]["backend"]["propertyNames"]["enum"]) == BACKENDS
    variant = schema["$defs"]["variant"]["properties"]["backends"]["items"]["enum"]
    assert tuple(variant) == BACKENDS
    assert {p.stem for p in (ROOT / "conf" / "backend").glob("*.yaml")} == set(BACKENDS)
    # The engine has a backend and kernels for each name, and for no other.
    assert tuple(backends.BACKENDS) == BACKENDS and tuple(kernels.KERNELS) == BACKENDS


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, long


def test_every_test_file_mirrors_a_module():
    """tests/<package>/test_<module>.py tests src/mptbench/<package>/<module>.py."""
    orphans = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        relative = path.relative_to(ROOT / "tests")
        if len(relative.parts) == 1:
            continue  # the workflow, the cluster and the environment as a whole
        module = PACKAGE / relative.parent / f"{relative.stem.removeprefix('test_')}.py"
        if not module.exists():
            orphans.append(str(relative))
    assert not orphans, orphans


def test_each_layer_is_a_package():
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").exists(), layer
