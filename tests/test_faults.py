"""The fault matrix: each fault provoked for real on a small grid, then the same command run
again (after `snakemake --unlock` where Snakemake asks for it). After each: every cell has
exactly one record and one finished MLflow run (earlier attempts in MLflow's trash, none left
RUNNING), nothing half-written is left where a job would trust it, and the report has a clean
run's rows and columns. README's "When things go wrong" table lists what each fault needs
from the user. `scancel` of a job is tried in test_slurm.py, where the test cluster runs."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from httpserver import FileServer
from mlflow_server import MlflowServer
from workflow_helpers import (
    SMOKE_PX,
    active_runs,
    copy_workflow,
    one_cell_config,
    runs,
    snakemake,
    trainers,
    wait_for,
    warm_copy,
)

from mptbench.data.fixtures import make_imagenette_archive

pytestmark = [pytest.mark.slow, pytest.mark.workflow]

LOCKED = "cannot be locked"


def _config(name: str, *more: str) -> list[str]:
    return ["--config", *one_cell_config(name, *more)]


def _start(checkout: Path, name: str, *more: str) -> subprocess.Popen:
    """snakemake in its own process group, as a terminal starts it."""
    exe = Path(sys.executable).with_name("snakemake")
    log = open(checkout / f"{name}.out", "a")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [str(exe), "--cores", "2", *_config(name, *more)], cwd=checkout, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )


def _kill_all(process: subprocess.Popen) -> None:
    """kill -9 of Snakemake's whole process group: it and every job it started."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _rerun(checkout: Path, name: str, *more: str) -> tuple[subprocess.CompletedProcess, bool]:
    """The same command again; with --unlock first when Snakemake says the directory is
    locked. Returns the run and whether it needed the unlock."""
    done = snakemake(checkout, "--cores", "2", *_config(name, *more), timeout=900)
    unlocked = LOCKED in done.stdout + done.stderr
    if unlocked:
        assert snakemake(checkout, "--unlock", *_config(name, *more)).returncode == 0
        done = snakemake(checkout, "--cores", "2", *_config(name, *more), timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done, unlocked


def _assert_whole(checkout: Path, name: str, clean: pd.DataFrame, cells: int = 1) -> None:
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


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, warm):
    """A checkout that starts where the smoke run stands: each fault's run rebuilds only what
    the fault touched."""
    return warm_copy(warm, tmp_path_factory.mktemp("faults"))


@pytest.fixture(scope="module")
def clean(checkout) -> pd.DataFrame:
    """The report of a run that nothing disturbed."""
    done = snakemake(checkout, "--cores", "2", *_config("clean"), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return pd.read_csv(checkout / "results/clean/report/summary.csv")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A slow mirror of the archive on loopback: a download takes seconds, not milliseconds."""
    root = tmp_path_factory.mktemp("mirror")
    archive = make_imagenette_archive(
        root / "served" / "imagenette2-320.tgz", train_per_class=12, val_per_class=2,
        short_side=320,
    )
    with FileServer(root / "served") as server:
        # ~10 s for the archive: time to kill it midway.
        server.bytes_per_second = Path(archive["path"]).stat().st_size / 10
        yield server, archive


def test_kill_9_during_the_download(checkout, clean, mirror):
    server, archive = mirror
    remote = [f"dataset.url={server.url('imagenette2-320.tgz')}", "dataset.sha256_url=null",
              f"dataset.sha256={archive['sha256']}", "dataset.name=mirror-smoke"]
    downloads = checkout / "resources" / "downloads"
    process = _start(checkout, "f_download", *remote)
    parts = lambda: [p for p in downloads.glob("*.part") if p.stat().st_size > 0]  # noqa: E731
    (part,) = wait_for(parts, process, "a partial download on disk")
    _kill_all(process)
    assert 0 < part.stat().st_size < Path(archive["path"]).stat().st_size
    assert not (downloads / "imagenette2-320.tgz").exists()  # only the .part, never trusted
    _, unlocked = _rerun(checkout, "f_download", *remote)
    assert unlocked
    _assert_whole(checkout, "f_download", clean)
    # The rerun resumed the download where it stopped (an HTTP Range request).
    assert any(r.range for r in server.requests)


def test_kill_9_while_the_cache_is_built(checkout, clean):
    bigger = ["dataset.image_size=40"]  # a cache not built yet
    process = _start(checkout, "f_prepare", *bigger)
    tfds = checkout / "resources" / "tfds"
    wait_for(lambda: list(tfds.rglob("*incomplete*")), process, "cache build")
    _kill_all(process)
    assert not (tfds / "imagenette2-320-smoke-40px.json").exists()
    _rerun(checkout, "f_prepare", *bigger)
    _assert_whole(checkout, "f_prepare", clean)


def test_kill_9_during_calibration(checkout, clean):
    settings = ["device.cpu.calibrate.cap_s=3.5"]  # a calibration not measured yet
    process = _start(checkout, "f_calibrate", *settings)
    calibrations = checkout / "results" / "calibration"
    wait_for(lambda: list(calibrations.rglob("*.log")) and len(
        list(calibrations.rglob("*.log"))) > len(list(calibrations.rglob("*.json"))),
        process, "calibration")
    time.sleep(2)
    _kill_all(process)
    _rerun(checkout, "f_calibrate", *settings)
    _assert_whole(checkout, "f_calibrate", clean)


def test_kill_9_during_a_train_job(checkout, clean):
    process = _start(checkout, "f_train")
    wait_for(lambda: trainers(checkout), process, "a trainer")
    time.sleep(3)
    _kill_all(process)
    assert not trainers(checkout)
    assert not list((checkout / "results/f_train/runs").rglob("*.json"))
    _, unlocked = _rerun(checkout, "f_train")
    assert unlocked
    _assert_whole(checkout, "f_train", clean)
    # The killed attempt's run is in the trash, ended as KILLED by the rerun: none RUNNING.
    every = runs(checkout / "results/mlflow.db", "f_train")
    assert len(every) > len(active_runs(checkout / "results/mlflow.db", "f_train"))
    assert "RUNNING" not in {status for _, status, _ in every}
    assert ("KILLED", "deleted") in {(status, stage) for _, status, stage in every}


def test_kill_9_of_the_trainer_alone_is_recorded_as_killed(checkout, clean):
    process = _start(checkout, "f_trainer")
    (trainer,) = wait_for(lambda: trainers(checkout), process, "a trainer")
    time.sleep(2)
    trainer.kill()
    assert process.wait(timeout=600) == 0  # the supervisor survives; the workflow goes on
    (record,) = (checkout / "results/f_trainer/runs").rglob("*.json")
    data = json.loads(record.read_text())
    assert data["outcome"] == "killed" and "SIGKILL" in data["reason"]
    again = snakemake(checkout, "--cores", "2", *_config("f_trainer"))
    assert "Nothing to be done" in again.stdout + again.stderr  # an outcome, not a failure


def test_kill_9_during_the_report(checkout, clean):
    process = _start(checkout, "f_aggregate")
    log = checkout / "results/f_aggregate/logs/aggregate.log"
    wait_for(log.exists, process, "the aggregate job")
    _kill_all(process)
    _rerun(checkout, "f_aggregate")
    _assert_whole(checkout, "f_aggregate", clean)


def test_two_snakemakes_at_once_in_one_directory(checkout, clean):
    first = _start(checkout, "f_twice")
    wait_for(lambda: (checkout / ".snakemake/locks").exists() and list(
        (checkout / ".snakemake/locks").iterdir()), first, "the first run's lock")
    second = snakemake(checkout, "--cores", "2", *_config("f_twice"))
    assert second.returncode != 0 and LOCKED in second.stdout + second.stderr
    assert first.wait(timeout=900) == 0
    _assert_whole(checkout, "f_twice", clean)


def test_a_corrupted_shard_is_found_before_a_cell_reads_it(checkout, clean):
    prepared = checkout / f"resources/tfds/imagenette2-320-smoke-{SMOKE_PX}px.json"
    info = json.loads(prepared.read_text())
    folder = Path(info["data_dir"]) / info["builder"] / info["config"] / info["version"]
    folder = folder if folder.is_absolute() else checkout / folder
    shard = sorted(folder.glob("*train.tfrecord*"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # truncated
    done = snakemake(checkout, "--cores", "2", *_config("f_corrupt"))
    assert done.returncode != 0
    (log,) = (checkout / "results/f_corrupt/logs/train").rglob("*.log")
    line = log.read_text().strip().splitlines()[-1]
    assert line.startswith("error: ") and "the cache differs from the one built" in line
    assert not list((checkout / "results/f_corrupt/runs").rglob("*.json"))
    # What the line says to do: remove the cache and its prepared file, run again.
    command = line.split("rebuild it: ", 1)[1].removesuffix(", then rerun")
    subprocess.run(command, shell=True, cwd=checkout, check=True)  # noqa: S602 - our own words
    _rerun(checkout, "f_corrupt")
    _assert_whole(checkout, "f_corrupt", clean)


PASSWORD = "s3cret-for-the-test-only"


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    """`mlflow server --app-name basic-auth` on 127.0.0.1: its admin's password from the
    environment at first start, its user store and run store in a folder of its own."""
    root = tmp_path_factory.mktemp("auth_server")
    env = {**os.environ, "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
           "MLFLOW_FLASK_SERVER_SECRET_KEY": "another-test-only-secret"}
    with MlflowServer(root / "runs.db", root / "artifacts", "basic-auth", env) as server:
        yield server.url


def _get(url: str, user: str | None = None, password: str | None = None) -> int:
    request = urllib.request.Request(f"{url}/api/2.0/mlflow/experiments/search?max_results=5")
    if user:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_an_access_controlled_server_refuses_strangers_and_logs_a_cell_with_credentials(
    checkout, clean, auth_server
):
    assert _get(auth_server) == 401  # anonymous
    assert _get(auth_server, "admin", "wrong") == 401
    assert _get(auth_server, "admin", PASSWORD) == 200
    env = {**os.environ, "MLFLOW_TRACKING_URI": auth_server,
           "MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": PASSWORD}
    done = snakemake(
        checkout, "--cores", "2", *_config("f_auth", "tracking=server"), env=env, timeout=900
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    import mlflow

    os.environ.update(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=PASSWORD)
    try:
        client = mlflow.MlflowClient(auth_server)
        experiment = client.get_experiment_by_name("f_auth")
        runs = client.search_runs([experiment.experiment_id])
    finally:
        for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            os.environ.pop(name)
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}  # cell and sweep
    (record,) = (checkout / "results/f_auth/runs").rglob("*.json")
    assert json.loads(record.read_text())["mlflow_run_id"] in {r.info.run_id for r in runs}
    # The password is in no config, record, log or MLflow param, and not in Snakemake's output.
    assert PASSWORD not in done.stdout + done.stderr
    for path in [*(checkout / "results/f_auth").rglob("*"), *(checkout / ".snakemake").rglob("*")]:
        if path.is_file() and path.stat().st_size < 5_000_000:
            assert PASSWORD.encode() not in path.read_bytes(), path
    assert all(PASSWORD not in str(v) for r in runs for v in r.data.params.values())


def test_an_unreachable_mlflow_server_loses_no_cell(checkout, clean, tmp_path):
    server = MlflowServer(tmp_path / "runs.db", tmp_path / "artifacts").start()
    # Few retries, short timeouts: the test waits seconds for what a user's run retries longer.
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url, "CUDA_VISIBLE_DEVICES": "",
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    exe = Path(sys.executable).with_name("snakemake")
    command = [str(exe), "--cores", "2", *_config("f_unreachable", "tracking=server",
                                                   "tracking.system_metrics=false")]
    try:
        process = subprocess.Popen(
            command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )
        wait_for(lambda: trainers(checkout), process, "a trainer")
        server.stop()  # gone while the cell trains: it cannot log when it finishes
        output, _ = process.communicate(timeout=600)
        assert process.returncode != 0
        (log,) = (checkout / "results/f_unreachable/logs/train").rglob("*.log")
        line = log.read_text().strip().splitlines()[-1]
        assert line.startswith(f"error: MLflow at {server.url} could not be reached (")
        assert "the cells' records are kept beside them (" in line and "run again to log" in line
        (pending,) = (checkout / "results/f_unreachable/runs").rglob(".*.pending")
        assert json.loads(pending.read_text())["outcome"] == "ok"
        assert not list((checkout / "results/f_unreachable/runs").rglob("*.json"))
        server.start()
        again = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True,
                               timeout=900)
        assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
        text = log.read_text()
        # Logged from the records kept, not trained again (the engine prints "repeat 1, ...").
        assert "logging the records kept from an earlier attempt" in text
        assert "repeat 1, " not in text
        assert not pending.exists()
        (record,) = (checkout / "results/f_unreachable/runs").rglob("*.json")
        import mlflow

        client = mlflow.MlflowClient(server.url)
        experiment = client.get_experiment_by_name("f_unreachable")
        runs = client.search_runs([experiment.experiment_id])
        assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
        assert json.loads(record.read_text())["mlflow_run_id"] in {r.info.run_id for r in runs}
    finally:
        server.stop()


@contextlib.contextmanager
def _small_disk(folder: Path, size: str):
    """A tmpfs of `size` mounted on `folder` (hiding what is there until it is unmounted):
    a disk that fills up. Needs root; skipped elsewhere."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def _data(checkout: Path, name: str, *more: str) -> subprocess.CompletedProcess:
    return snakemake(checkout, "data", "--cores", "2", *_config(name, *more), timeout=600)


def test_a_full_disk_while_downloading_and_while_building_the_cache(checkout, clean, mirror):
    server, archive = mirror
    server.bytes_per_second = None
    served = Path(archive["path"]).with_name("imagenette2-320-full.tgz")
    served.write_bytes(Path(archive["path"]).read_bytes())
    remote = [f"dataset.url={server.url(served.name)}", "dataset.sha256_url=null",
              f"dataset.sha256={archive['sha256']}", "dataset.name=full-smoke"]
    downloads, tfds = checkout / "resources/downloads", checkout / "resources/tfds"
    with _small_disk(downloads, "64k"):
        done = _data(checkout, "f_full", *remote)
        assert done.returncode != 0
        log = checkout / "resources/logs/download/imagenette2-320-full.tgz.log"
        line = log.read_text().strip().splitlines()[-1]
        assert line.startswith("error: disk full while writing ") and line.endswith(" written)")
        assert not (downloads / served.name).exists()
    with _small_disk(tfds, "96k"):
        done = _data(checkout, "f_full", *remote)
        assert done.returncode != 0
        log = (checkout / f"resources/logs/prepare/full-smoke-{SMOKE_PX}px.log").read_text()
        (line,) = [x for x in log.splitlines() if x.startswith("error: ")]  # tfds' bars aside
        assert line == (
            "error: disk full while building the cache in resources/tfds: free space there and "
            "rerun (the partial build is in an incomplete.* folder, which no run reads)"
        )
    assert not (tfds / f"full-smoke-{SMOKE_PX}px.json").exists()
    _rerun(checkout, "f_full", *remote)
    _assert_whole(checkout, "f_full", clean)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--cores", "0", "--config", "experiment=smoke"],
         "mptbench: --cores 0 leaves no core for any job; give --cores N or --cores all"),
        (["-n", "--config", "experiment=smoke", "overrides=[sweep.batch_sizes=[4,8]"],
         "mptbench config: override 'sweep.batch_sizes=[4,8' does not parse: "),
        (["-n", "--config", "experiment=smoke", 'overrides=["policy=[float32", "x"'],
         "mptbench config: override '[\"policy=[float32\", \"x' does not parse: "),
        (["-n", "--config", "experiement=smoke"],
         "mptbench config: --config experiement=...: unknown key 'experiement'"),
        (["-n", "--profile", "profiles/slurm", "--config", "experiment=smoke"],
         "mptbench profile: profiles/slurm/config.yaml: fill in default-resources.slurm_account,"),
    ],
)
def test_bad_input_stops_before_any_job_with_one_line(tmp_path, args, line):
    checkout = copy_workflow(tmp_path)
    done = snakemake(checkout, *args, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert sum(x.startswith(line) for x in output.splitlines()) == 1, output[-2000:]
    assert not (checkout / "results").exists() and not (checkout / "resources").exists()
