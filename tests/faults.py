"""What the fault matrix's two files share (test_faults.py: data; test_faults_jobs.py: jobs and
the MLflow server): starting and killing Snakemake as a terminal does, running the same command
again, and what a run must leave after any fault."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import active_runs, one_cell_config, snakemake, warm_copy

LOCKED = "cannot be locked"


def config(name: str, *more: str) -> list[str]:
    return ["--config", *one_cell_config(name, *more)]


def start(checkout: Path, name: str, *more: str) -> subprocess.Popen:
    """snakemake in its own process group, as a terminal starts it."""
    exe = Path(sys.executable).with_name("snakemake")
    log = open(checkout / f"{name}.out", "a")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [str(exe), "--cores", "2", *config(name, *more)], cwd=checkout, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )


def kill_all(process: subprocess.Popen) -> None:
    """kill -9 of Snakemake's whole process group: it and every job it started."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def rerun(checkout: Path, name: str, *more: str) -> tuple[subprocess.CompletedProcess, bool]:
    """The same command again; with --unlock first when Snakemake says the directory is
    locked. Returns the run and whether it needed the unlock."""
    done = snakemake(checkout, "--cores", "2", *config(name, *more), timeout=900)
    unlocked = LOCKED in done.stdout + done.stderr
    if unlocked:
        assert snakemake(checkout, "--unlock", *config(name, *more)).returncode == 0
        done = snakemake(checkout, "--cores", "2", *config(name, *more), timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done, unlocked


def assert_whole(checkout: Path, name: str, clean: pd.DataFrame, cells: int = 1) -> None:
    results = checkout / "results" / name
    records = sorted((results / "runs").rglob("*.json"))
    assert len(records) == cells, records
    assert not list((results / "runs").rglob(".*")), "a supervisor's job or output file is left"
    runs = active_runs(checkout / "results/mlflow.db", name)
    assert len(runs) == cells + 1, runs  # the cells and the sweep
    assert {status for _, status in runs} == {"FINISHED"}
    ids = {json.loads(p.read_text())["mlflow_run_id"] for p in records}
    assert ids <= {run_id for run_id, _ in runs}
    summary = pd.read_csv(results / "report/summary.csv")
    assert list(summary.columns) == list(clean.columns)
    keys = ["model", "backend", "variant", "device", "policy", "batch_size"]
    assert summary[keys].values.tolist() == clean[keys].values.tolist()
    assert not list((results / "report").glob(".*.tmp"))
    assert not list((checkout / "resources").rglob("*.part"))


# The fixtures both files use, imported by them under these names (pytest knows them by the
# names given): a module's checkout and the clean run its reruns are compared with.


@pytest.fixture(scope="module", name="checkout")
def checkout_fixture(tmp_path_factory, warm, request) -> Path:
    """A checkout of the module's own that starts where the smoke run stands: each fault's run
    rebuilds only what the fault touched."""
    return warm_copy(warm, tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))


@pytest.fixture(scope="module", name="clean")
def clean_fixture(smoke_run) -> pd.DataFrame:
    """The report's rows of a run nothing disturbed: the shared smoke run's row of the one cell
    each fault runs (one_cell_config), with every column a report has."""
    checkout, _ = smoke_run
    summary = pd.read_csv(checkout / "results/smoke/report/summary.csv")
    return summary[(summary["policy"] == "float32") & (summary["batch_size"] == 8)]
