"""The train job's supervisor: a trainer killed for memory, past its limit, or failing."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import psutil
import pytest

from mptbench.config import Cell, compose_config, run_config
from mptbench.train.supervisor import job_files

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def _job(tmp_path, prepared, tracking, **train):
    run = run_config(
        compose_config(CONF, "smoke"), Cell("pypi", "cpu", "float32", train.pop("batch_size", 8))
    )
    run["train"].update(train)
    paths = {name: tmp_path / f"{name}.json" for name in ("prepared", "tracking", "run")}
    paths["prepared"].write_text(json.dumps(prepared))
    paths["tracking"].write_text(json.dumps(tracking))
    paths["run"].write_text(json.dumps(run))
    record = tmp_path / "record.json"
    command = [
        sys.executable, "-m", "mptbench.train.supervisor", "--run", str(paths["run"]),
        "--prepared", str(paths["prepared"]), "--tracking", str(paths["tracking"]),
        "--record", str(record),
    ]  # fmt: skip
    return command, record


@pytest.mark.slow
def test_trainer_killed_for_memory_is_recorded_as_oom(tmp_path, prepared32, tracking):
    command, record = _job(
        tmp_path, prepared32, tracking, epochs=1, steps_per_epoch=5000, timed_steps=4000,
        time_budget_s=None, max_step_seconds=None, validate=False,
    )  # fmt: skip
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _, state = job_files(record)
    deadline = time.monotonic() + 120
    while not state.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.2)
    assert state.exists(), job.communicate()[0][-2000:]
    # What the kernel's out-of-memory killer does to the trainer.
    for child in psutil.Process(job.pid).children():
        os.kill(child.pid, signal.SIGKILL)
    out, _ = job.communicate(timeout=120)
    assert job.returncode == 0, out[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "oom" and "SIGKILL" in data["reason"]
    assert data["batch_size"] == 8 and data["policy"] == "float32"
    run = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(data["mlflow_run_id"])
    assert run.info.status == "KILLED"
    assert run.data.tags["outcome"] == "oom"
    assert not state.exists()


@pytest.mark.slow
def test_memory_limit_exceeded_is_recorded_as_oom(tmp_path, prepared32, tracking):
    command, record = _job(
        tmp_path, prepared32, tracking, batch_size=16384, memory_limit_mb=1800,
        max_step_seconds=None, synthetic_twin=False,
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "oom", data.get("reason")
    assert "over train.memory_limit_mb=1800" in data["reason"]


@pytest.mark.slow
def test_unknown_failure_fails_the_job(tmp_path, prepared32, tracking):
    command, record = _job(tmp_path, prepared32, tracking)
    broken = dict(prepared32, data_dir=str(tmp_path / "no-such-cache"))
    (tmp_path / "prepared.json").write_text(json.dumps(broken))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "the training process exited with code" in done.stderr
    assert not record.exists()
