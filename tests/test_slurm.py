"""The smoke experiment through profiles/slurm on a real single-node SLURM on loopback."""

import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from slurm_cluster import SlurmCluster, Unavailable
from workflow_helpers import active_runs, copy_workflow, snakemake

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Every run has a timeout: the plugin polls forever for a job whose state it cannot read.
SMOKE_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        with SlurmCluster(tmp_path_factory.mktemp("slurm")) as running:
            yield running
    except Unavailable as exc:
        pytest.skip(f"no test SLURM on this machine: {exc}")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("slurm_checkout"))


def _site_values(cluster) -> list[str]:
    """The profile's CHANGE_ME values (and memory) for the test cluster's one small node."""
    mem_mb = min(2000, cluster.real_memory_mb // 2)
    timing = ("calibrate", "probe", "train")
    return [
        # Without accounting, sbatch takes any account name.
        "--default-resources",
        "slurm_account=test",
        f"slurm_partition={cluster.partition}",
        "mem_mb=1000",
        "runtime=30",
        # The prepare rule's 8 threads would exceed the node: SLURM rejects such a job.
        "--set-threads",
        *(f"{rule}={cluster.cpus}" for rule in (*timing, "prepare")),
        # conf/device asks 8000 MB for a CPU cell, more than a CI machine may have.
        "--set-resources",
        *(f"{rule}:mem_mb={mem_mb}" for rule in (*timing, "prepare")),
        *(f"{rule}:cpus_per_gpu=1" for rule in timing),
        # No slurmdbd: sacct knows no jobs, so poll squeue (MinJobAge is long enough).
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "3",
        "--jobs",
        "2",
    ]


def _snakemake_slurm(cwd, cluster, *config, timeout):
    # A SLURM job's variables (an outer allocation) or a custom SLURM_CONF would leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    args = ["--profile", "profiles/slurm", *_site_values(cluster), "--config", *config]
    try:
        return snakemake(cwd, *args, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        output = "".join(
            out.decode(errors="replace") if isinstance(out, bytes) else out or ""
            for out in (exc.stdout, exc.stderr)
        )
        pytest.fail(f"snakemake ran past {timeout} s\n{output[-6000:]}\n{cluster.logs()}")


@pytest.fixture(scope="module")
def smoke(cluster, checkout):
    start = time.monotonic()
    # One model: what this tests is the executor, not the grid.
    overrides = 'overrides=["model=[seed_convnet]","backend=[tensorflow]"]'
    done = _snakemake_slurm(
        checkout, cluster, "experiment=smoke", overrides, timeout=SMOKE_TIMEOUT_S
    )
    wall = time.monotonic() - start
    print(f"\nsmoke experiment through SLURM: {wall:.0f} s wall time")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:] + "\n" + cluster.logs()
    return checkout, output


def test_smoke_runs_every_cell_as_a_slurm_job(smoke):
    checkout, output = smoke
    summary = pd.read_csv(checkout / "results/smoke/report/summary.csv")
    assert len(summary) == 4 and set(summary["outcome"]) == {"ok"}
    assert (summary["ms_per_step"] > 0).all()
    records = sorted((checkout / "results/smoke/runs").rglob("*.json"))
    assert len(records) == 4
    job_ids = set()
    for path in records:
        fingerprint = json.loads(path.read_text())["fingerprint"]
        assert fingerprint["slurm_job_id"], f"{path} was not run by SLURM"
        assert fingerprint["host"]
        job_ids.add(fingerprint["slurm_job_id"])
    assert len(job_ids) == 4  # one SLURM job per cell
    assert "has been submitted with SLURM jobid" in output


def test_smoke_logs_one_finished_mlflow_run_per_cell(smoke):
    checkout, _ = smoke
    runs = active_runs(checkout / "results/mlflow.db", "smoke")
    assert len(runs) == 5 and {status for _, status in runs} == {"FINISHED"}  # 4 cells, 1 sweep


def test_gpu_request_on_a_node_without_gpus_fails_with_slurms_reason(smoke, cluster):
    checkout, _ = smoke
    overrides = 'overrides=["sweep.devices=[gpu0]","device.check_present=false","name=smoke_gpu",'
    overrides += '"backend=[tensorflow]"]'
    done = _snakemake_slurm(checkout, cluster, "experiment=smoke", overrides, timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    # sbatch's own words reach the user through the plugin's error message.
    assert "SLURM sbatch failed" in output, output[-3000:]
    assert "Requested node configuration is not available" in output, output[-3000:]
    # The request SLURM refused: one GPU with cores per GPU (cpus_per_gpu), not a CPU cell's.
    assert "--gpus=1" in output and "--cpus-per-gpu=1" in output, output[-3000:]
    assert not (checkout / "results/smoke_gpu/runs").exists()
