"""The train job's supervisor: a comparison group's repeats in fresh processes, one MLflow run
per cell, and a trainer that dies recorded as what the evidence says (oom only with a memory
record)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import mlflow
import psutil
import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ProbePoint, ProbeResult, encode
from mptbench.core.record import METRICS
from mptbench.jobs.series import train_series
from mptbench.jobs.trainer import Trainer

pytestmark = pytest.mark.slow


def _run(batch_size=8, policy="float32", **train):
    return smoke_cell_run(policy=policy, batch_size=batch_size, **train)


def _job(tmp_path, prepared, tracking, policies=("float32",), **train):
    """The supervisor's command line for a group of `policies`, and the first record's path."""
    paths = {name: tmp_path / f"{name}.json" for name in ("prepared", "tracking")}
    paths["prepared"].write_text(json.dumps(prepared))
    paths["tracking"].write_text(json.dumps(tracking))
    runs, records = [], []
    for policy in policies:
        runs.append(tmp_path / f"run-{policy}.json")
        runs[-1].write_text(json.dumps(encode(_run(policy=policy, **train))))
        records.append(tmp_path / ("record.json" if not records else f"record-{policy}.json"))
    command = [
        sys.executable, "-m", "mptbench.jobs.supervisor", "--run", *map(str, runs),
        "--prepared", str(paths["prepared"]), "--tracking", str(paths["tracking"]),
        "--record", *map(str, records),
    ]
    return command, records[0]


def test_a_group_is_timed_in_turns_in_repeats_and_logged_as_one_mlflow_run_per_cell(
    tmp_path, prepared16, tracking
):
    # mixed_bfloat16, which these CPUs run natively: an emulated mixed_float16 made this
    # group (run twice) several times slower and checks nothing more here.
    command, record = _job(tmp_path, prepared16, tracking, ("float32", "mixed_bfloat16"),
                           repeats=2, max_repeats=2, epochs=2, steps_per_epoch=4,
                           warmup_steps=2, timed_steps=6, min_timed_steps=3)
    command += ["--profile-dir", str(tmp_path / "p32"), str(tmp_path / "p16")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(record.read_text())
    other = json.loads((tmp_path / "record-mixed_bfloat16.json").read_text())
    for cell in (data, other):
        assert cell["outcome"] == "ok" and len(cell["repeats"]) == 2
        assert cell["timed_steps"] == sum(len(r["step_ms"]) for r in cell["repeats"])
        assert cell["ms_per_step_ci_low"] <= cell["ms_per_step"] <= cell["ms_per_step_ci_high"]
    # Both policies ran in the same two processes, taking turns: the speedup pairs them.
    assert [r["process"] for r in data["repeats"]] == [r["process"] for r in other["repeats"]]
    assert all(len(r["rounds"]) == len(r["step_ms"]) for r in data["repeats"])
    assert data["images_per_sec"] == pytest.approx(8 / (data["ms_per_step"] / 1000))
    assert [e["epoch"] for e in data["epochs"]] == [1, 2]
    assert data["fingerprint"]["tensorflow"] == "2.21.0"
    assert data["config"]["variant"]["installed"] == {}
    assert (data["baseline"], other["baseline"]) == (True, False)
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    run = client.get_run(data["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["outcome"] == "ok"
    assert run.data.params["train.repeats"] == "2" and run.data.params["cell.batch_size"] == "8"
    logged = {m for m in METRICS if data.get(m) is not None}
    assert logged <= set(run.data.metrics) and "ms_per_step_ci_high" in logged
    assert [m.step for m in client.get_metric_history(data["mlflow_run_id"], "loss")] == [1, 2]
    # Each repeat was profiled: the breakdown, its raw profile and MLflow's copy of it.
    found = data["breakdown"]
    assert found["profiles"] == 2 and all(Path(r["xplane"]).is_file() for r in found["repeats"])
    for cls, ms in found["classes_ms"].items():
        assert found["classes_min_ms"][cls] <= ms <= found["classes_max_ms"][cls]
    # Measured, not rescaled: the profiled and the timed step side by side, and a closure.
    assert found["timed_ms_per_step"] == data["ms_per_step"] and found["profiled_ms_per_step"] > 0
    assert 0 < found["function_ms_per_step"] <= found["profiled_ms_per_step"]
    assert 0 < found["closure"] < 1.15
    assert {"breakdown_unattributed_ms", "breakdown_closure"} <= set(run.data.metrics)
    assert [a.path for a in client.list_artifacts(data["mlflow_run_id"], "profile")]
    # A rerun of the same group's cells replaces their runs: the store keeps one run per cell.
    # A cell is its grid axes, not its train settings, so the rerun is one short process.
    rerun, _ = _job(tmp_path, prepared16, tracking, ("float32", "mixed_bfloat16"), repeats=1,
                    max_repeats=1, epochs=1, steps_per_epoch=4, warmup_steps=1, timed_steps=3,
                    min_timed_steps=3, synthetic_twin=False, validate=False,
                    profile_steps=0)
    assert subprocess.run(rerun, capture_output=True, timeout=300).returncode == 0
    again = [json.loads(p.read_text()) for p in (record, tmp_path / "record-mixed_bfloat16.json")]
    active = client.search_runs([tracking["experiment_id"]], "tags.`mptbench.cell` != ''")
    assert {r.info.run_id for r in active} == {r["mlflow_run_id"] for r in again}
    assert data["mlflow_run_id"] not in {r["mlflow_run_id"] for r in again}
    assert run.data.tags["mlflow.parentRunId"] == tracking["parent_run_id"]


def _training_trainer(job: subprocess.Popen) -> psutil.Process:
    """The supervisor's child, once TensorFlow is in it (its memory says so) and training."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and job.poll() is None:
        children = psutil.Process(job.pid).children()
        if children and children[0].memory_info().rss > 400 * 2**20:
            time.sleep(2)
            return children[0]
        time.sleep(0.2)
    pytest.fail("the trainer never started training")


def test_an_outside_sigkill_is_recorded_as_killed_not_oom(tmp_path, prepared32, tracking):
    command, record = _job(
        tmp_path, prepared32, tracking, epochs=1, steps_per_epoch=5000, timed_steps=4000,
        time_budget_s=None, max_step_seconds=None, validate=False, precision=None,
    )
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    os.kill(_training_trainer(job).pid, signal.SIGKILL)
    out, _ = job.communicate(timeout=120)
    assert job.returncode == 0, out[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "killed", data["reason"]
    assert "SIGKILL" in data["reason"] and "no out-of-memory record" in data["reason"]
    run = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(data["mlflow_run_id"])
    assert run.info.status == "KILLED" and run.data.tags["outcome"] == "killed"
    assert not list(tmp_path.glob(".record.json.*"))  # the job's own files are gone


def test_sigterm_to_the_job_ends_its_trainer_and_its_mlflow_run_as_killed(
    tmp_path, prepared32, tracking
):
    """What scancel, a SLURM time limit or `kill` does: SIGTERM to the job, not a death of its
    trainer. No record (the next run goes on from the processes that finished), no trainer
    left training."""
    command, record = _job(
        tmp_path, prepared32, tracking, epochs=1, steps_per_epoch=5000, timed_steps=4000,
        time_budget_s=None, max_step_seconds=None, validate=False, precision=None,
    )
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    trainer = _training_trainer(job)
    job.send_signal(signal.SIGTERM)  # the supervisor only: its trainer must not outlive it
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 128 + signal.SIGTERM, out[-2000:]
    assert out.splitlines()[-1] == (
        "error: stopped by SIGTERM before the job finished; no record written, the next run "
        "goes on where it stopped"
    )
    assert not trainer.is_running() or trainer.status() == psutil.STATUS_ZOMBIE
    assert not record.exists() and not list(tmp_path.glob(".record.json.*"))
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    (run,) = client.search_runs([tracking["experiment_id"]], "tags.`mptbench.cell` != ''")
    assert run.info.status == "KILLED"


def test_memory_limit_exceeded_is_recorded_as_oom(tmp_path, prepared32, tracking):
    command, record = _job(tmp_path, prepared32, tracking, batch_size=16384, kill_above_mb=1800,
                           max_step_seconds=None, synthetic_twin=False)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "oom", data.get("reason")
    assert "over train.kill_above_mb=1800" in data["reason"]


@contextlib.contextmanager
def _memory_cgroup(limit_mb: int):
    """A memory cgroup of our own (v1 or v2), as root; skips where none can be made."""
    name = f"mptbench-test-{uuid.uuid4().hex[:8]}"
    for root, limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
                             ("/sys/fs/cgroup", "memory.max")):
        group = Path(root) / name
        try:
            group.mkdir()
            (group / limit_file).write_text(str(limit_mb * 2**20))
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
            continue
        try:
            yield group
        finally:
            with contextlib.suppress(OSError):
                group.rmdir()
        return
    pytest.skip("no writable memory cgroup here (needs root and cgroup v1 or v2 memory)")


def test_a_real_oom_kill_is_recorded_as_oom_with_the_kernels_record(tmp_path, prepared32, tracking):
    command, record = _job(tmp_path, prepared32, tracking, batch_size=16384,
                           max_step_seconds=None, synthetic_twin=False)
    with _memory_cgroup(1500) as group:
        shell = f'echo $$ > {group}/cgroup.procs && exec "$@"'
        done = subprocess.run(["sh", "-c", shell, "sh", *command], capture_output=True,
                              text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "oom", data.get("reason")
    assert "the kernel's OOM killer killed the trainer" in data["reason"]
    assert "oom_kill 0 -> 1" in data["reason"] and group.name in data["reason"]


def test_a_neighbours_oom_kill_is_not_blamed_on_the_trainer(tmp_path, prepared32, tracking):
    """Another process in the job's memory cgroup runs out of memory and the kernel kills it;
    then the trainer is killed from outside. The cgroup's count rose, but not for the trainer:
    its own cgroup's did not, so it was killed, not out of memory."""
    command, record = _job(
        tmp_path, prepared32, tracking, epochs=1, steps_per_epoch=5000, timed_steps=4000,
        time_budget_s=None, max_step_seconds=None, validate=False, precision=None,
    )
    # Raises its own OOM score to the top, so the kernel picks it over the trainer.
    hog = (
        'open("/proc/self/oom_score_adj", "w").write("1000")\n'
        "chunks = []\n"
        "while True:\n"
        '    chunks.append(b"x" * 2**26)\n'
    )
    with _memory_cgroup(3000) as group:
        shell = f'echo $$ > {group}/cgroup.procs && exec "$@"'
        job = subprocess.Popen(["sh", "-c", shell, "sh", *command], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        trainer = _training_trainer(job)
        neighbour = subprocess.run(["sh", "-c", shell, "sh", sys.executable, "-c", hog],
                                   capture_output=True, timeout=120)
        assert neighbour.returncode == -signal.SIGKILL  # the kernel's OOM killer's
        assert trainer.is_running()
        os.kill(trainer.pid, signal.SIGKILL)
        out, _ = job.communicate(timeout=120)
    assert job.returncode == 0, out[-2000:]
    data = json.loads(record.read_text())
    assert data["outcome"] == "killed", data["reason"]
    assert "an OOM kill in the cgroup it shares was another process's" in data["reason"]
    assert "oom_kill 0 -> 1" in data["reason"] and group.name in data["reason"]


def test_an_unknown_failure_fails_the_job(tmp_path, prepared32, tracking):
    command, record = _job(tmp_path, prepared32, tracking)
    # No digest to check the cache against (a cache from before digests): the trainer fails.
    broken = dict(prepared32, data_dir=str(tmp_path / "no-such-cache"), digest=None)
    (tmp_path / "prepared.json").write_text(json.dumps(broken))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "error: the engine exited with code 1; see the log above" in done.stderr
    assert not record.exists()
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    cells = client.search_runs([tracking["experiment_id"]], "tags.`mptbench.cell` != ''")
    assert [r.info.status for r in cells] == ["FAILED"]


def test_a_cell_over_budget_by_its_probe_starts_no_trainer(tmp_path, prepared32, tracking):
    (tmp_path / "prepared.json").write_text(json.dumps(prepared32))
    run = _run(batch_size=64, max_step_seconds=3.0)
    point = ProbePoint(batch_size=2, first_step_s=5.0, steps_s=[4.0], step_s=4.0)
    probe = ProbeResult("tensorflow", "pypi", "cpu", "float32", 32, [point], {"host": "probe"})
    trainer = Trainer("no-such-python", [run], [str(tmp_path / "record.json")])
    [(record,)] = train_series([trainer], str(tmp_path / "prepared.json"), tracking,
                               {"float32": probe})
    assert record["outcome"] == "over_budget"
    assert record["reason"].startswith("a probe step at batch 2 already took 4.0 s")
    assert record["fingerprint"] == {"host": "probe"} and "ms_per_step" not in record
    tags = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(record["mlflow_run_id"]).data.tags
    assert tags["outcome"] == "over_budget"
