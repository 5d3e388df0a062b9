"""Helpers for tests that run Snakemake as a user does: a checkout copy, the CLI, its job table."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "conf", "workflow", "src", "profiles", "envs")


def copy_workflow(root: Path) -> Path:
    """Copy the workflow into `root`: a test's results/ and resources/ stay out of the repo."""
    for name in WORKFLOW_FILES:
        src = ROOT / name
        if src.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(src, root / name, ignore=ignore)
        else:
            shutil.copy(src, root / name)
    return root


def snakemake(cwd: Path, *args: str, timeout: float = 600, env: dict | None = None):
    """Run this environment's snakemake CLI on the CPU only; returns the CompletedProcess."""
    env = {**(os.environ if env is None else env), "CUDA_VISIBLE_DEVICES": ""}
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run(
        [str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def job_counts(output: str) -> dict[str, int]:
    """The "Job stats" table of a Snakemake run or dry run, as {rule: count}."""
    lines = output[output.index("Job stats:") :].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def active_runs(db: Path, experiment: str) -> list[tuple[str, str]]:
    """(run id, status) of the runs an MLflow sqlite store holds for an experiment."""
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT r.run_uuid, r.status FROM runs r "
            "JOIN experiments e ON r.experiment_id = e.experiment_id "
            "WHERE e.name = ? AND r.lifecycle_stage = 'active'",
            (experiment,),
        ).fetchall()
