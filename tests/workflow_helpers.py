"""Helpers for tests that run Snakemake as a user does: a checkout copy, the CLI, its job table."""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil

from mptbench.core.contract import RepeatJob
from mptbench.core.hardware import machine_id
from mptbench.plan import Cell, compose_config, run_config
from mptbench.plan.layout import WORKFLOW_FILES

ROOT = Path(__file__).resolve().parents[1]
# This machine's id: the first part of every cell's paths (results/<experiment>/runs/<machine>/).
MACHINE = machine_id()


@functools.cache
def _composed(experiment: str | None, overrides: tuple[str, ...]) -> dict:
    return compose_config(ROOT / "conf", experiment, list(overrides))


def composed(experiment: str | None = None, *overrides: str) -> dict:
    """The configuration as the workflow composes it (conf/, an experiment, Hydra overrides):
    composed once per test process for the same arguments, a copy of its own each call."""
    return copy.deepcopy(_composed(experiment, overrides))


# The try-out's composed config, and its image size: part of its cache's name
# (imagenette2-320-smoke-16px).
SMOKE = composed("smoke")
SMOKE_PX = SMOKE["dataset"]["image_size"]
# The try-out's cells: each policy at each batch size.
SMOKE_CELLS = len(SMOKE["policy"]) * len(SMOKE["sweep"]["batch_sizes"])
# One cell, timed once, no probe, no profile: for tests of the pipeline, not of the timing. At
# the smoke's largest batch, so the smoke run's calibration serves it (warm_copy).
ONE_CELL = ["model=[seed_convnet]", "backend=[tensorflow]", "policy=[float32]",
            "sweep.batch_sizes=[8]", "train.repeats=1", "train.max_step_seconds=null",
            "train.profile_steps=0", "train.synthetic_twin=false", "sweep.fit_search=false",
            "train.parity_steps=0"]


def smoke_cell_run(policy="float32", batch_size=8, model="seed_convnet", **train):
    """The Run of a smoke cell on TensorFlow, with train settings changed; no validation pass
    is timed after the steps unless `validation_steps` asks (a test that reads no whole run
    need not pay for compiling the test step)."""
    run = run_config(SMOKE, Cell("local", model, "tensorflow", "pypi", "cpu", policy, batch_size))
    train.setdefault("validation_steps", 0)
    return replace(run, train=replace(run.train, **train))


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


def warm_copy(warm: Path, root: Path) -> Path:
    """A new checkout in `root` that starts where `warm` (a checkout that ran the smoke
    experiment) stands: its archive, tfds cache, variant environment, calibrations and model
    descriptions are there and up to date (times kept), so a run builds only what its own
    change touches. Runs, reports and the MLflow store are not copied."""
    copy_workflow(root)
    keep = shutil.ignore_patterns("__pycache__")
    shutil.copytree(warm / "resources", root / "resources", ignore=keep)
    for folder in ("calibration", "models"):
        shutil.copytree(warm / "results" / folder, root / "results" / folder, ignore=keep)
    # What Snakemake recorded of those files (params, code): so they count as up to date.
    metadata = warm / ".snakemake" / "metadata"
    if metadata.is_dir():
        shutil.copytree(metadata, root / ".snakemake" / "metadata")
    return root


def warm_run(warm: Path, root: Path, experiment: str, *overrides: str) -> tuple[Path, str]:
    """The experiment with these Hydra overrides, on 2 cores, in a warm copy (`warm_copy`) in
    `root`: the copy and the run's combined output; a failed run fails the test with its log's
    end."""
    checkout = warm_copy(warm, root)
    done = snakemake(checkout, "--cores", "2", "--config", *config_values(experiment, *overrides),
                     timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return checkout, done.stdout + done.stderr


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


def config_values(experiment: str, *overrides: str) -> list[str]:
    """The values after `--config` for an experiment with these Hydra overrides."""
    if not overrides:
        return [f"experiment={experiment}"]
    return [f"experiment={experiment}", "overrides=[" + ",".join(f'"{o}"' for o in overrides) + "]"]


def one_cell_config(name: str, *more: str) -> list[str]:
    """The values after `--config` for the smoke experiment on ONE_CELL, named `name`."""
    return config_values("smoke", f"name={name}", *ONE_CELL, *more)


def runs(db: Path, experiment: str) -> list[tuple[str, str, str]]:
    """(run id, status, lifecycle stage) of every run an MLflow sqlite store holds for an
    experiment, the trash's included."""
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT r.run_uuid, r.status, r.lifecycle_stage FROM runs r "
            "JOIN experiments e ON r.experiment_id = e.experiment_id WHERE e.name = ?",
            (experiment,),
        ).fetchall()


def active_runs(db: Path, experiment: str) -> list[tuple[str, str]]:
    """(run id, status) of the runs an MLflow sqlite store holds for an experiment, outside
    the trash."""
    return [(run, status) for run, status, stage in runs(db, experiment) if stage == "active"]


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 300):
    """condition() once it is true; fails when the process ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process.poll() is not None:
            raise AssertionError(f"snakemake ended (code {process.returncode}) before {what}")
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout} s")


def trainers(checkout: Path) -> list[psutil.Process]:
    """The trainers running in a checkout (started by a local or a SLURM job): engine processes
    whose job file is a repeat of a cell, not a probe, a calibration or a model description."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline = proc.info["cmdline"] or []
        if "mptbench.engine" in cmdline and proc.info["cwd"] == str(checkout):
            if _engine_job_kind(checkout / cmdline[-1]) == RepeatJob.KIND:
                found.append(proc)
    return found


def _engine_job_kind(job_file: Path) -> str | None:
    """The kind written in an engine job file; None once it is gone (the job ended)."""
    try:
        return json.loads(job_file.read_text()).get("kind")
    except (OSError, ValueError):
        return None


def every_cell_has_an_mfu(summary) -> None:
    """No printed MFU is above 1, and every ok cell of a dtype the device runs natively holds
    one: the calibration covers the model's own convolutions, so no such cell outruns its peak
    ("calibration too low"). A dtype the device emulates (float16 on most CPUs) runs at its
    emulation's rate in the cell and in the calibration alike, so its peak is no ceiling with a
    margin: one suite run on a shared 2-core host read such cells at 0.67-2.1x a peak timed in
    a 4 s window at another moment. There the cell holds an MFU or says its calibration was too
    low; its peak is still measured."""
    ok = summary[summary["outcome"] == "ok"]
    assert ok["peak_tflops"].gt(0).all(), ok[["model", "policy", "peak_tflops"]]
    printed = ok["mfu"].dropna()
    assert (printed.gt(0) & printed.le(1)).all(), ok[["model", "policy", "mfu"]]
    fast = {"float32": True, "float16": False, "bfloat16": False}
    native = ok.apply(
        lambda row: fast.get(row["compute_dtype"]) or bool(row.get(f"fast_{row['compute_dtype']}")),
        axis=1,
    ).astype(bool)
    held = ok[native]
    assert len(held), "no cell of a natively run dtype to hold to its peak"
    assert held["mfu"].notna().all() and held["peak_note"].isna().all(), held[
        ["model", "policy", "mfu", "peak_note"]]
    emulated = ok[~native]
    too_low = emulated["peak_note"].astype("string").str.startswith("calibration too low")
    assert (emulated["mfu"].notna() | too_low.fillna(False)).all(), emulated[
        ["model", "policy", "mfu", "peak_note"]]
