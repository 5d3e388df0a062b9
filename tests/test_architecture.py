"""The package's shape: a package per stage, no import circle, short functions, and a test
file beside every module it tests."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mptbench"
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """mptbench modules a file imports, at any depth (a deferred import is still a dependency)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found


def test_no_import_circle():
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    # A package's __init__ re-exporting its modules is not a dependency of those modules.
    for name in graph:
        graph[name] = {d for d in graph[name] if not name.startswith(f"{d}.")}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " -> ".join([*stack, node, dep]))
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


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


def test_each_stage_is_a_package():
    for stage in ("config", "data", "train", "measure", "report", "variants"):
        assert (PACKAGE / stage / "__init__.py").exists(), stage
