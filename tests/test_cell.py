"""The train job's supervisor, start-up facts, FLOPs, the calibrate rule and the diagnosis."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pandas as pd
import psutil
import pytest

from mptbench.cell import startup_facts
from mptbench.config import Cell, compose_config, run_config
from mptbench.diagnosis import why

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GUARD_LINE = (
    "I0000 00:00:1795945288.973987    2177 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.\n"
    "I0000 00:00:1795945290.770468    2177 port.cc:153] oneDNN custom operations are on.\n"
)


def test_startup_facts_read_the_unused_instructions_and_onednn():
    facts = startup_facts(GUARD_LINE)
    assert facts == {"tf_unused_cpu_instructions": ["AVX2", "AVX512F", "FMA"], "onednn": "on"}
    assert startup_facts("")["tf_unused_cpu_instructions"] == []


def _job(tmp_path, prepared, tracking, **train):
    run = run_config(
        compose_config(CONF, "smoke"), Cell("pypi", "cpu", "float32", train.pop("batch_size", 8))
    )
    run["train"].update(train)
    paths = {name: tmp_path / f"{name}.json" for name in ("prepared", "tracking")}
    paths["prepared"].write_text(json.dumps(prepared))
    paths["tracking"].write_text(json.dumps(tracking))
    record = tmp_path / "record.json"
    command = [
        sys.executable, str(ROOT / "workflow/scripts/train.py"), "--run", json.dumps(run),
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
    state = record.with_name(record.name + ".state")
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


@pytest.mark.slow
def test_flops_of_the_seed_convnet_match_a_hand_count():
    from mptbench.flops import forward_flops_per_example, training_flops_per_step
    from mptbench.models import build_model

    cfg = compose_config(CONF)
    model = build_model(cfg["model"], (256, 256, 3), 10, "float32")
    conv1 = 2 * 128 * 128 * 5 * 5 * 3 * 32
    conv2 = 2 * 64 * 64 * 7 * 7 * 32 * 64
    conv3 = 2 * 32 * 32 * 11 * 11 * 64 * 128
    dense = 2 * 128 * 10
    assert forward_flops_per_example(model) == conv1 + conv2 + conv3 + dense
    assert training_flops_per_step(model, 32) == 3 * 32 * (conv1 + conv2 + conv3 + dense)


@pytest.mark.slow
def test_calibrate_measures_every_dtype(tmp_path):
    out = tmp_path / "cpu.json"
    settings = {
        "matmul_size": 256,
        "conv_shape": [2, 8, 8, 16, 16],
        "conv_kernel": 3,
        "min_seconds": 0.05,
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/calibrate.py"), "--device", "cpu",
         "--variant", json.dumps({"name": "pypi", "env": {}}), "--settings", json.dumps(settings),
         "--output", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert set(data["matmul"]) == set(data["conv"]) == {"float32", "float16", "bfloat16"}
    assert all(v["tflops"] > 0 and v["iterations"] >= 1 for v in data["matmul"].values())
    assert data["matmul_vs_float32"]["float32"] == 1.0
    assert data["fingerprint"]["onednn"] in ("on", "off", "off (no oneDNN start-up message)")
    assert data["variant"] == "pypi" and data["device"] == "cpu"


def test_calibrate_fails_clearly_for_an_absent_gpu(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "workflow/scripts/calibrate.py"), "--device", "gpu0",
         "--variant", "{}", "--settings", "{}", "--output", str(tmp_path / "gpu0.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert "gpu0 was asked for but TensorFlow sees no GPU" in done.stderr
    assert not (tmp_path / "gpu0.json").exists()


def _rows(**columns):
    base = {"outcome": "ok", "policy": "float32"}
    n = max(len(v) for v in columns.values() if isinstance(v, list))
    data = {k: v if isinstance(v, list) else [v] * n for k, v in {**base, **columns}.items()}
    return pd.DataFrame(data)


def test_diagnosis_names_slow_kernels_input_bound_and_low_mfu():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        matmul_peak_vs_float32=[1.0, 0.93],
        conv_peak_vs_float32=[1.0, 0.015],
        input_bound_ratio=[1.4, 1.5],
        mfu=[0.41, 0.006],
        achieved_tflops=[0.047, 0.0006],
    )
    text = " ".join(why(rows))
    assert "slow float16 kernels (float16 peak 0.93x float32 for matmuls, 0.01x" in text
    assert "Input-bound: steps took 1.45x" in text
    assert "float32 reached 41.0% of its measured matmul peak" in text
    assert "held back by the slow float16 convolution kernels" in text


def test_diagnosis_of_a_fast_compute_bound_device():
    rows = _rows(
        policy=["float32", "mixed_bfloat16"],
        matmul_peak_vs_float32=[1.0, 7.5],
        conv_peak_vs_float32=[1.0, 5.0],
        input_bound_ratio=[1.02, 1.05],
        mfu=[0.55, 0.6],
        achieved_tflops=[30.0, 250.0],
    )
    text = " ".join(why(rows))
    assert "fast bfloat16 math is there (bfloat16 peak 7.50x float32" in text
    assert "Not input-bound" in text
    assert "compute-bound" in text
    assert why(_rows(policy=["float32"], outcome=["oom"])) == []


def test_diagnosis_explains_a_policy_that_never_ran():
    rows = _rows(
        policy=["float32", "mixed_float16"],
        outcome=["ok", "over_budget"],
        matmul_peak_vs_float32=[1.0, 0.65],
        conv_peak_vs_float32=[1.0, 0.003],
        input_bound_ratio=[1.0, None],
        mfu=[0.5, None],
        achieved_tflops=[0.1, None],
    )
    text = " ".join(why(rows))
    assert "mixed_float16: this device has slow float16 kernels" in text
    assert "float16 peak 0.65x float32 for matmuls, 0.003x for convolution training" in text
