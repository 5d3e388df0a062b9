"""A machine with JAX and no TensorFlow times cells: synthetic data, the jax backend, and a cell
path that never imports TensorFlow (here hidden from every process the job starts)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.core.contract import encode
from mptbench.data.synthetic import prepared_info
from mptbench.plan import Cell, run_config

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Imported first by every Python process that has its folder on PYTHONPATH.
HIDE = """
import sys

HIDDEN = {hidden!r}

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden)", name=name)
        return None

sys.meta_path.insert(0, Hide())
"""
TENSORFLOW = ("tensorflow", "tensorflow_datasets", "tf_keras")
# What a GPU machine with only JAX lacks besides: bench/bench_gpu.py runs without them.
WORKFLOW = ("mlflow", "pandas", "matplotlib", "snakemake", "xprof", "jinja2", "torch")


def _hiding(folder: Path, hidden: tuple[str, ...]) -> dict:
    """An environment in which importing `hidden` fails, in the process and its children."""
    (folder / "sitecustomize.py").write_text(HIDE.format(hidden=tuple(hidden)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT / "src")]))
    env.pop("KERAS_BACKEND", None)
    check = subprocess.run(
        [sys.executable, "-c", f"import {hidden[0]}"], env=env, capture_output=True, text=True
    )
    assert check.returncode != 0 and "hidden" in check.stderr
    return env


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory):
    return _hiding(tmp_path_factory.mktemp("hide_tf"), TENSORFLOW)


def test_a_jax_cell_on_synthetic_data_runs_with_tensorflow_hidden(
    tmp_path, no_tensorflow, tracking
):
    cfg = composed("smoke", "dataset=synthetic", "dataset.image_size=32", "backend=[jax]",
                   "policy=[float32,mixed_bfloat16]")
    run = run_config(cfg, Cell("local", "seed_convnet", "jax", "pypi", "cpu", "mixed_bfloat16", 8))
    run = replace(
        run,
        train=replace(
            run.train,
            epochs=1,
            steps_per_epoch=8,
            warmup_steps=2,
            timed_steps=5,
            min_timed_steps=3,
            precision=None,
            repeats=1,  # two JAX processes with TensorFlow hidden: the GPU check below
            max_repeats=1,
        ),
    )
    (tmp_path / "run.json").write_text(json.dumps(encode(run)))
    (tmp_path / "prepared.json").write_text(json.dumps(prepared_info(cfg["dataset"])))
    (tmp_path / "tracking.json").write_text(json.dumps(tracking))
    record = tmp_path / "record.json"
    done = subprocess.run(
        [sys.executable, "-m", "mptbench.jobs.supervisor", "--run", str(tmp_path / "run.json"),
         "--prepared", str(tmp_path / "prepared.json"), "--tracking",
         str(tmp_path / "tracking.json"), "--record", str(record)],
        env=no_tensorflow, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "ok", data.get("reason")
    assert data["backend"] == "jax" and data["policy"] == "mixed_bfloat16"
    assert len(data["repeats"]) == 1 and data["ms_per_step"] > 0
    fingerprint = data["fingerprint"]
    assert fingerprint["jax"] and fingerprint["keras"] and fingerprint.get("tensorflow") is None
    assert data["dataset"] == "synthetic"
    # The cell's MLflow run carries the backend.
    import mlflow

    mlflow_run = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(data["mlflow_run_id"])
    assert mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.params["backend.name"] == "jax"
    assert mlflow_run.data.params["cell.backend"] == "jax"


def test_the_gpu_check_runs_with_only_jax_keras_and_hydra(tmp_path):
    """bench/bench_gpu.py on this CPU (--quick), as on a GPU machine that has JAX and none
    of TensorFlow, MLflow, pandas, Snakemake; the report then reads what it wrote."""
    (tmp_path / "hide").mkdir()
    env = _hiding(tmp_path / "hide", TENSORFLOW + WORKFLOW)
    out = tmp_path / "gpu_check"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/bench_gpu.py"), "--quick", "--models", "seed_convnet",
         "--batch-sizes", "4", "--repeats", "2", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = done.stdout
    assert "calibrated peaks (TFLOP/s): float32 matmul " in printed
    for policy in ("float32", "mixed_float16", "mixed_bfloat16"):
        assert f"seed_convnet {policy:<16}     4  " in printed
    assert "x (" in printed  # speedups with their intervals
    records = sorted((out / "runs").rglob("*.json"))
    assert len(records) == 3
    record = json.loads(records[0].read_text())
    assert record["backend"] == "jax" and record["outcome"] == "ok" and record["flops_per_step"]
    # The usual report, from those records and that calibration (here, where pandas is).
    calibrations = [str(p) for p in (out / "calibration").rglob("*.json")]
    report = subprocess.run(
        [sys.executable, "-m", "mptbench.report.aggregate", "--runs", str(out / "runs"),
         "--calibration", *calibrations, "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    import pandas as pd

    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    assert len(summary) == 3 and set(summary["backend"]) == {"jax"}
    assert (summary["mfu"] > 0).all()
