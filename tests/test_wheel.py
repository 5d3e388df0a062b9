"""The wheel that `pip install .` builds: it holds every file of the package, and installed in a
fresh venv, with nothing of the checkout on its path, it composes the smoke plan and renders a
report with its templates and the published (2020) results."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from report.test_aggregate import write_runs

ROOT = Path(__file__).resolve().parents[1]

# Run by the fresh venv's Python: plan the smoke experiment, report stored run records.
USE_IT = """
import json, sys
import mptbench
from mptbench.plan import compose_config, expand_devices, grid
from mptbench.report.aggregate import main
conf, runs = sys.argv[1:]
cfg = compose_config(conf, "smoke", [])
cells = grid(cfg, expand_devices(cfg, gpus=[]))
code = main(["--runs", runs, "--report-dir", "report"])
print(json.dumps({"package": mptbench.__file__, "path": sys.path, "report": code,
                  "cells": [[c.device, c.policy, c.batch_size] for c in cells]}))
"""


def run(*args: str | Path, cwd: Path = ROOT) -> str:
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def tracked(under: str = ".") -> set[str]:
    """The checkout's files that git tracks (and that are still there)."""
    names = run("git", "ls-files", "-z", under).split("\0")
    return {n for n in names if n and (ROOT / n).is_file()}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the tracked files: what `pip install .` of a clone installs."""
    clone = tmp_path_factory.mktemp("clone")
    for name in tracked():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    out = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "--no-index", "-w", out, clone)
    (path,) = out.glob("*.whl")
    return path


def fresh_venv(root: Path, wheel: Path) -> Path:
    """A venv with the wheel installed, the dependencies importable from this venv's
    site-packages as a plain path (so its .pth files, the editable install among them, do not
    run); its Python."""
    run(sys.executable, "-m", "venv", "--without-pip", root)
    python = root / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
        "--no-index", wheel)
    site = run(python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site.strip()) / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


@pytest.mark.slow
def test_the_wheel_holds_every_file_of_the_package(wheel):
    package = {name.removeprefix("src/") for name in tracked("src/mptbench")}
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("mptbench/")}
    missing = sorted(package - shipped)
    assert not missing, f"not in the wheel (pyproject.toml: package-data): {missing}"
    assert shipped == package
    assert "mptbench/report/templates/index.html.j2" in shipped


@pytest.mark.slow
def test_the_installed_wheel_plans_the_smoke_and_renders_a_report(wheel, tmp_path):
    python = fresh_venv(tmp_path / "venv", wheel)
    work = tmp_path / "work"
    runs = write_runs(work)
    used = json.loads(run(python, "-I", "-c", USE_IT, ROOT / "conf", runs, cwd=work))
    assert Path(used["package"]).is_relative_to(tmp_path / "venv")
    assert not [p for p in used["path"] if Path(p).is_relative_to(ROOT / "src")]
    assert sorted(used["cells"]) == [
        ["cpu", policy, bs] for policy in ("float32", "mixed_bfloat16", "mixed_float16")
        for bs in (4, 8)
    ]
    assert used["report"] == 0
    html = (work / "report" / "index.html").read_text()
    published = html.split('<h2 id="published">Published (2020)</h2>', 1)[1]
    assert "+7% to +10% (1.07×–1.10×) on the Tesla V100" in published
    (diagnosis,) = (work / "report").rglob("cpu/diagnosis.html")
    assert "batch 64: slower, 0.73×" in diagnosis.read_text()
