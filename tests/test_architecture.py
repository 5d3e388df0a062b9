"""The package's shape: packages follow the process walls, with no circle between packages or
modules; only the engine imports a framework; in-house imports stand at the top of a module;
short functions; a test file beside every module it tests; a feature goes by one name in every
package, so `git ls-files | grep fits` finds all of it. The benchmarks (bench/) keep short
functions too, and use the package through its public names only."""

from __future__ import annotations

import ast
from pathlib import Path

from mptbench.core.cells import AXES, BACKENDS, Cell
from mptbench.core.contract import JOB_KINDS, KINDS
from mptbench.engine import backends, kernels
from mptbench.plan import schema

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mptbench"
BENCH = ROOT / "bench"
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
REPORT_FEATURES = {"machines"}  # Machines compared: a section of the report's own, no engine job
PLACES = [PACKAGE / "engine", PACKAGE / "jobs", ROOT / "workflow" / "scripts", PACKAGE / "report"]
# Names features went by before they had one: a module by one of them is a feature under a
# second name. "memory" is the trainer's OOM evidence, jobs/memory.py, and nothing else.
SECOND_NAMES = {
    "memory": "fits",
    "fit": "fits",
    "numerics": "parity",
    "calibration": "calibrate",
    "startup": "environment",
}
OOM_EVIDENCE = PACKAGE / "jobs" / "memory.py"
# They launch or run every kind of engine job (the launcher names the fit try for its memory).
RUN_EVERY_KIND = {PACKAGE / "jobs" / "launcher.py", PACKAGE / "engine" / "__main__.py"}


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
    properties = schema.document()["properties"]
    assert tuple(properties["backend"]["propertyNames"]["enum"]) == BACKENDS
    variant = properties["variant"]["additionalProperties"]["properties"]["backends"]
    assert tuple(variant["items"]["enum"]) == BACKENDS
    assert {p.stem for p in (ROOT / "conf" / "backend").glob("*.yaml")} == set(BACKENDS)
    # The engine has a backend and kernels for each name, and for no other.
    assert tuple(backends.BACKENDS) == BACKENDS and tuple(kernels.KERNELS) == BACKENDS


# Where a backend may be named by its string: its Framework entry and its engine module. And
# what names TensorFlow's wheel, not the Keras backend: the variants' environments.
NAMES_A_BACKEND = {PACKAGE / "core" / "frameworks.py", PACKAGE / "engine" / "backends.py",
                   PACKAGE / "jobs" / "environment.py"}


def _backend_literals(paths) -> list[str]:
    """'path:line 'name'' of every string that is a backend's name, in `paths`."""
    return [f"{path.name}:{node.lineno} {node.value!r}"
            for path in paths for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and node.value in BACKENDS]


def test_a_backend_is_named_in_its_declaration_alone(tmp_path):
    """A new backend is its Framework (core/frameworks.py), its yaml and its engine module: no
    other module names one, so none branches on a name the next backend would have to join."""
    assert _backend_literals(p for p in PACKAGE.rglob("*.py") if p not in NAMES_A_BACKEND) == []
    planted = tmp_path / "planted.py"
    planted.write_text('if backend == "jax":\n    pass\n')
    assert _backend_literals([planted]) == ["planted.py:1 'jax'"]


def _long_functions(paths) -> list[str]:
    """'path:line name (lines)' of every function over MAX_FUNCTION_LINES in `paths`."""
    long = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    return long


def test_no_function_is_longer_than_60_lines():
    long = _long_functions(PACKAGE.rglob("*.py"))
    assert not long, long


def test_no_benchmark_function_is_longer_than_60_lines():
    """bench/ is held to the package's measure: a benchmark's steps are named functions."""
    long = _long_functions(sorted(BENCH.glob("*.py")))
    assert not long, long


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(tree: ast.AST) -> list[str]:
    """mptbench's private names a module uses: imported (`from mptbench.x import _y`, or from a
    private module), or read off a name an mptbench import bound (`schema._validator`)."""
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mptbench":
                    bound.add(alias.asname or "mptbench")
                    found += [alias.name] if any(map(_private, alias.name.split("."))) else []
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "mptbench":
                for alias in node.names:
                    bound.add(alias.asname or alias.name)
                    dotted = f"{node.module}.{alias.name}"
                    found += [dotted] if any(map(_private, dotted.split("."))) else []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(ast.unparse(node))
    return found


def _trees(path: Path):
    """A file's syntax tree, and that of any Python it holds in a string naming mptbench (code
    a benchmark runs in a fresh interpreter, `python -c`)."""
    tree = ast.parse(path.read_text())
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "mptbench" in node.value:
                try:
                    yield ast.parse(node.value)
                except SyntaxError:
                    continue


def test_benchmarks_use_no_private_name_of_the_package():
    """bench/ imports the production code it measures, never a copy of it, and only through
    its public names: a private one may change with nothing in bench/ run to notice."""
    found = [
        f"{path.relative_to(ROOT)}: {use}"
        for path in sorted(BENCH.glob("*.py"))
        for tree in _trees(path)
        for use in _private_uses(tree)
    ]
    assert not found, found


def test_the_private_name_check_fails_on_a_private_use(tmp_path):
    """The check above is not vacuous: each way to reach a private name is caught, in code
    and in code held in a string; public names and other packages' private ones pass."""
    for source in (
        "from mptbench.report.summary import _tflops",
        "from mptbench.plan import schema\nschema._validator()",
        "import mptbench.plan.schema as s\ns._validator()",
        "import mptbench.core.stats\nmptbench.core.stats._x",
        "from mptbench.engine._private import run",
    ):
        assert _private_uses(ast.parse(source)), source
    public = "from mptbench.core import stats\nstats.of_logs([1.0])\nimport os\nos._exit(0)"
    assert not _private_uses(ast.parse(public))
    script = tmp_path / "script.py"
    script.write_text('CODE = "from mptbench.plan import schema; schema._validator()"\n')
    assert [use for tree in _trees(script) for use in _private_uses(tree)] == [
        "schema._validator"
    ]


def test_no_formatter_markers_where_no_formatter_runs():
    """CI runs ruff check, not a formatter: a `fmt: skip` marker would say a layout is kept
    against a tool that never looks (the style is ruff's lint and the 100-column limit)."""
    marker = "fmt" + ": "  # written apart, so this file does not hold the marker it forbids
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("src", "tests", "bench", "workflow")
        for path in (ROOT / folder).rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if f"# {marker}skip" in line or f"# {marker}off" in line
    ]
    assert not found, found


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


def _feature(kind: str) -> str:
    """An engine job kind's one name (core/contract/kinds.py): "fits" for a fit try."""
    return KINDS[kind].feature


def _features() -> set[str]:
    return {_feature(kind) for kind in JOB_KINDS} | REPORT_FEATURES


def _kinds_run_by(path: Path) -> set[str]:
    """The kinds of engine job a module builds or runs: those whose job class it imports."""
    kind_of = {cls.__name__: kind for kind, cls in JOB_KINDS.items()}
    return {
        kind_of[alias.name]
        for node, _ in _import_nodes(path)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in kind_of
    }


def _named_after(name: str) -> set[str]:
    """The features a function's name names: fits_sections, parity_columns, machine_facts."""
    words = set(name.split("_"))
    return {f for f in _features() if words & {f, f.removesuffix("s")}}


def _misnamed(paths: list[Path]) -> list[str]:
    """Modules that are a feature's under another name than the feature's: one that builds or
    runs one kind of engine job (the launcher and the engine's entry point run every kind, the
    trainer two: they are no feature's), one by a name a feature went by, and a report module
    holding a function named after a feature."""
    wrong = []
    for path in paths:
        kinds = _kinds_run_by(path)
        if len(kinds) == 1 and path.stem != _feature(*kinds) and path not in RUN_EVERY_KIND:
            wrong.append(f"{path}: runs {kinds} jobs, so is {_feature(*kinds)}.py")
        if path.stem in SECOND_NAMES and path != OOM_EVIDENCE:
            wrong.append(f"{path}: {SECOND_NAMES[path.stem]} under a second name")
        if path.parent.name == "report":
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    if not _named_after(node.name) <= {path.stem}:
                        wrong.append(f"{path}: {node.name} is {_named_after(node.name)}'s")
    return wrong


def test_each_engine_job_kind_runs_in_its_engine_module():
    """engine/__main__.py names no job kind: it runs a kind's job with engine/<its feature>.py's
    `run`, which every kind's engine module has."""
    main = (PACKAGE / "engine" / "__main__.py").read_text()
    assert not [cls.__name__ for cls in JOB_KINDS.values() if cls.__name__ in main]
    for kind in KINDS.values():
        tree = ast.parse((PACKAGE / "engine" / f"{kind.feature}.py").read_text())
        entries = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
        assert [a.arg for a in entries[0].args.args] == ["job", "start"], kind.feature


def test_a_feature_goes_by_one_name_in_every_package():
    paths = [p for place in PLACES for p in sorted(place.glob("*.py")) if p.stem[0] != "_"]
    assert not _misnamed(paths)
    # Its workflow script runs its job side, where it has both.
    for feature in _features():
        script = ROOT / "workflow" / "scripts" / f"{feature}.py"
        if script.exists() and (PACKAGE / "jobs" / f"{feature}.py").exists():
            imported = {n for node, _ in _import_nodes(script) for n in _names(node)}
            assert f"mptbench.jobs.{feature}" in imported, script


def test_the_name_check_fails_on_a_feature_under_a_second_name(tmp_path):
    """A numerics.py back in report/, with parity's code in it, is caught three ways over."""
    numerics = tmp_path / "report" / "numerics.py"
    numerics.parent.mkdir()
    numerics.write_text(
        "from mptbench.core.contract import ParityJob\n\n\ndef parity_columns(): ...\n"
    )
    assert len(_misnamed([numerics])) == 3
    # The real parity module passes under its own name.
    assert not _misnamed([PACKAGE / "report" / "parity.py", PACKAGE / "jobs" / "parity.py"])
