"""The smoke experiment through profiles/slurm on a real single-node SLURM on loopback."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from slurm_cluster import CLUSTER, SlurmCluster, Unavailable, end_strays
from workflow_helpers import (
    active_runs,
    one_cell_config,
    runs,
    snakemake,
    trainers,
    wait_for,
    warm_copy,
)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.workflow]

# Every run has a timeout: the plugin polls forever for a job whose state it cannot read.
SMOKE_TIMEOUT_S = 600


def test_what_a_job_left_running_ends_with_the_cluster_and_nothing_else_does():
    """A process of this cluster's job that outlived it (reparented to init, out of reach of
    scancel without cgroups) is killed when the cluster stops; another cluster's is not."""
    def sleeper(cluster_name):
        env = {**os.environ, "SLURM_CLUSTER_NAME": cluster_name}
        return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)

    stray, other = sleeper(CLUSTER), sleeper("another-cluster")
    try:
        assert end_strays() == [stray.pid]
        assert stray.wait(timeout=10) == -signal.SIGKILL and other.poll() is None
    finally:
        for process in (stray, other):
            process.kill()
            process.wait()


# Where a SLURM or munge installed on the machine keeps its configuration and state.
SYSTEM_FOLDERS = ("/etc/slurm", "/etc/munge", "/run/munge", "/run/slurm", "/var/lib/munge",
                  "/var/log/munge", "/var/spool/slurmd", "/var/lib/slurm")


def _system_files() -> dict[str, tuple[int, int]]:
    """Every file under SYSTEM_FOLDERS: its size and modification time."""
    files = {}
    for folder in SYSTEM_FOLDERS:
        for path in Path(folder).rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file():
                    stat = path.stat()
                    files[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return files


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    before = _system_files()
    try:
        with SlurmCluster(tmp_path_factory.mktemp("slurm")) as running:
            running.system_files_before = before
            yield running
    except Unavailable as exc:
        pytest.skip(f"no test SLURM on this machine: {exc}")


def test_the_cluster_answers_from_its_own_folder_and_leaves_the_machines_slurm_alone(cluster):
    """The daemons, munge and every client read the test's slurm.conf; the machine's SLURM and
    munge folders are as they were before it started."""
    assert cluster.conf.is_relative_to(cluster.workdir)
    done = cluster.client("sinfo", "-h", "-o", "%P %t")
    assert done.stdout.split() == [f"{cluster.partition}*", "idle"], done.stderr
    # A job's srun, with every SLURM_* variable gone as the executor's job step leaves it.
    step = subprocess.run(["srun", "-n1", "sh", "-c", "echo $SLURM_CLUSTER_NAME"],
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert step.stdout.strip() == CLUSTER, step.stderr
    bare = {k: v for k, v in cluster.env.items() if k != "SLURM_CONF"}
    again = subprocess.run(["srun", "-n1", "true"], env=bare, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0, again.stderr
    assert _system_files() == cluster.system_files_before


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, warm):
    """Where the smoke run stands (cache, environment, calibration): the jobs SLURM runs are
    the cells', the probes' and the report's."""
    return warm_copy(warm, tmp_path_factory.mktemp("slurm_checkout"))


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


def _slurm_command(cluster, *config) -> tuple[list[str], dict]:
    """The arguments after `snakemake`, and the environment to run it in."""
    return ["--profile", "profiles/slurm", *_site_values(cluster), "--config", *config], cluster.env


def _snakemake_slurm(cwd, cluster, *config, timeout):
    args, env = _slurm_command(cluster, *config)
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
    # Every rule of the smoke as a SLURM job, each group in one process: what is checked here
    # is where the jobs ran, not the timing (test_workflow.py times the smoke) nor what fits
    # and whether it learns (the smoke shows those: their jobs take the train job's resources),
    # nor the profile and the synthetic twin a train job runs after its repeats, wherever it is.
    # mixed_bfloat16 beside float32: fast on the CPUs the suite runs on (AVX512_BF16, AMX),
    # where an emulated mixed_float16 step took 4-17x float32's.
    once = 'overrides=["policy=[float32,mixed_bfloat16]","train.repeats=1","train.max_repeats=1",'
    once += '"sweep.fit_search=false","train.parity_steps=0","train.profile_steps=0",'
    once += '"train.synthetic_twin=false","train.validation_steps=0"]'
    done = _snakemake_slurm(checkout, cluster, "experiment=smoke", once, timeout=SMOKE_TIMEOUT_S)
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
    job_ids = {}
    for path in records:
        fingerprint = json.loads(path.read_text())["fingerprint"]
        assert fingerprint["slurm_job_id"], f"{path} was not run by SLURM"
        assert fingerprint["host"]
        job_ids.setdefault(path.name, set()).add(fingerprint["slurm_job_id"])
    # One SLURM job per series: both batch sizes' groups, each its two policies in turns.
    assert {name: len(ids) for name, ids in job_ids.items()} == {"bs4.json": 1, "bs8.json": 1}
    assert job_ids["bs4.json"] == job_ids["bs8.json"]
    assert "has been submitted with SLURM jobid" in output


def test_smoke_logs_one_finished_mlflow_run_per_cell(smoke):
    checkout, _ = smoke
    runs = active_runs(checkout / "results/mlflow.db", "smoke")
    assert len(runs) == 5 and {status for _, status in runs} == {"FINISHED"}  # 4 cells, 1 sweep


def test_each_target_runs_on_the_nodes_of_its_feature(smoke, cluster):
    """sweep.targets as a grid axis: the target whose constraint is the node's feature runs
    there (its records say so); the other's kind of node does not exist here, and SLURM
    refuses its jobs with its own reason."""
    checkout, _ = smoke
    targets = (f"sweep.targets={{here: {{constraint: {cluster.feature}}}, "
               "elsewhere: {constraint: mptbench_kind_b}}")
    overrides = ('overrides=["name=smoke_targets","policy=[float32]","sweep.batch_sizes=[8]",'
                 '"train.repeats=1","train.max_repeats=1","sweep.fit_search=false",'
                 '"train.max_step_seconds=null","train.profile_steps=0",'
                 f'"train.parity_steps=0","train.validation_steps=0","{targets}"]')
    done = _snakemake_slurm(checkout, cluster, "experiment=smoke", overrides, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]  # the other target's jobs cannot be placed
    here = sorted((checkout / "results/smoke_targets/runs/here").rglob("*.json"))
    assert [p.name for p in here] == ["bs8.json"], output[-3000:]
    record = json.loads(here[0].read_text())
    assert record["machine"] == "here" and record["fingerprint"]["slurm_job_id"]
    assert record["hardware"]["host"].split(".")[0] == cluster.node
    assert "-C mptbench_kind_b" in output  # the refused call, as the plugin reports it
    assert "SLURM sbatch failed" in output
    assert not (checkout / "results/smoke_targets/runs/elsewhere").exists()


def test_gpu_request_on_a_node_without_gpus_fails_with_slurms_reason(smoke, cluster):
    checkout, _ = smoke
    overrides = 'overrides=["sweep.devices=[gpu0]","device.check_present=false","name=smoke_gpu",'
    overrides += '"backend=[tensorflow]","sweep.machine=gpu-nodes"]'
    done = _snakemake_slurm(checkout, cluster, "experiment=smoke", overrides, timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    # sbatch's own words reach the user through the plugin's error message.
    assert "SLURM sbatch failed" in output, output[-3000:]
    assert "Requested node configuration is not available" in output, output[-3000:]
    # The request SLURM refused: one GPU with cores per GPU (cpus_per_gpu), not a CPU cell's.
    assert "--gpus=1" in output and "--cpus-per-gpu=1" in output, output[-3000:]
    assert not (checkout / "results/smoke_gpu/runs").exists()


def _slurm_job_of_a_trainer(checkout, process, but: set[str]) -> str:
    """The SLURM job id of a trainer training in the checkout, other than those in `but`."""

    def job() -> str | None:
        for trainer in trainers(checkout):
            with contextlib.suppress(psutil.Error):
                job_id = trainer.environ().get("SLURM_JOB_ID")
                if job_id and job_id not in but:
                    return job_id
        return None

    return wait_for(job, process, "a trainer in a new SLURM job", timeout=300)


def test_a_cancelled_job_is_retried_and_a_rerun_finishes_what_was_cancelled(smoke, cluster):
    """scancel of a train job, then of the retry the profile makes (retries: 1): the run
    fails naming both, leaves no record, and the same command run again finishes the cell."""
    checkout, _ = smoke
    config = one_cell_config("smoke_cancel")
    args, env = _slurm_command(cluster, *config)
    exe = Path(sys.executable).with_name("snakemake")
    with open(checkout / "smoke_cancel.out", "w+") as log:
        process = subprocess.Popen([str(exe), *args], cwd=checkout, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            cancelled: list[str] = []
            for _ in range(2):  # the job, then its retry
                cancelled.append(_slurm_job_of_a_trainer(checkout, process, set(cancelled)))
                subprocess.run(["scancel", cancelled[-1]], check=True, timeout=30, env=env)
            process.wait(timeout=SMOKE_TIMEOUT_S)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        log.seek(0)
        output = log.read()
    assert process.returncode != 0, output[-4000:]
    for job_id in cancelled:
        said = f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'"
        assert said in output, output[-4000:]
    results = checkout / "results/smoke_cancel"
    assert not list((results / "runs").rglob("*.json")), "a cancelled job left a record"
    assert not list((results / "runs").rglob(".*")), "a cancelled job left its job files"
    db = checkout / "results/mlflow.db"
    # Both attempts ended their MLflow runs as KILLED (the supervisor turns SIGTERM into that),
    # and the sweep run says FAILED: nothing is left RUNNING with nothing running.
    assert sorted(status for _, status, _ in runs(db, "smoke_cancel")) == [
        "FAILED", "KILLED", "KILLED"]

    done = _snakemake_slurm(checkout, cluster, *config, timeout=SMOKE_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:] + cluster.logs()
    (record,) = (results / "runs").rglob("*.json")
    data = json.loads(record.read_text())
    assert data["outcome"] == "ok" and data["fingerprint"]["slurm_job_id"] not in cancelled
    every = runs(db, "smoke_cancel")
    assert "RUNNING" not in {status for _, status, _ in every}
    active = active_runs(db, "smoke_cancel")
    assert len(active) == 2 and {status for _, status in active} == {"FINISHED"}  # cell, sweep
    assert data["mlflow_run_id"] in {run for run, _ in active}
    summary = pd.read_csv(results / "report/summary.csv")
    clean = pd.read_csv(checkout / "results/smoke/report/summary.csv")
    assert list(summary.columns) == list(clean.columns)
    keys = ["model", "backend", "variant", "device", "policy", "batch_size"]
    assert summary[keys].values.tolist() == [["seed_convnet", "tensorflow", "pypi", "cpu",
                                              "float32", 8]]
