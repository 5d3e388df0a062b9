"""The fault matrix, the jobs' half: a kill -9 during calibration, a train job, the trainer alone
and the report, two Snakemakes at once, and an MLflow server that asks for credentials or goes
away; each then run again as test_faults.py describes, and held to the same whole state."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import faults
import pytest
from faults import checkout_fixture, clean_fixture  # noqa: F401 - the fixtures checkout, clean
from mlflow_server import MlflowServer
from workflow_helpers import active_runs, runs, snakemake, trainers, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.workflow]


def test_kill_9_during_calibration(checkout, clean):
    settings = ["device.cpu.calibrate.cap_s=3.5"]  # a calibration not measured yet
    process = faults.start(checkout, "f_calibrate", *settings)
    calibrations = checkout / "results" / "calibration"
    wait_for(lambda: list(calibrations.rglob("*.log")) and len(
        list(calibrations.rglob("*.log"))) > len(list(calibrations.rglob("*.json"))),
        process, "calibration")
    time.sleep(2)
    faults.kill_all(process)
    faults.rerun(checkout, "f_calibrate", *settings)
    faults.assert_whole(checkout, "f_calibrate", clean)


def test_kill_9_during_a_train_job(checkout, clean):
    process = faults.start(checkout, "f_train")
    wait_for(lambda: trainers(checkout), process, "a trainer")
    time.sleep(3)
    faults.kill_all(process)
    assert not trainers(checkout)
    assert not list((checkout / "results/f_train/runs").rglob("*.json"))
    _, unlocked = faults.rerun(checkout, "f_train")
    assert unlocked
    faults.assert_whole(checkout, "f_train", clean)
    # The killed attempt's run is in the trash, ended as KILLED by the rerun: none RUNNING.
    every = runs(checkout / "results/mlflow.db", "f_train")
    assert len(every) > len(active_runs(checkout / "results/mlflow.db", "f_train"))
    assert "RUNNING" not in {status for _, status, _ in every}
    assert ("KILLED", "deleted") in {(status, stage) for _, status, stage in every}


def test_kill_9_of_the_trainer_alone_is_recorded_as_killed(checkout, clean):
    process = faults.start(checkout, "f_trainer")
    (trainer,) = wait_for(lambda: trainers(checkout), process, "a trainer")
    time.sleep(2)
    trainer.kill()
    assert process.wait(timeout=600) == 0  # the supervisor survives; the workflow goes on
    (record,) = (checkout / "results/f_trainer/runs").rglob("*.json")
    data = json.loads(record.read_text())
    assert data["outcome"] == "killed" and "SIGKILL" in data["reason"]
    again = snakemake(checkout, "--cores", "2", *faults.config("f_trainer"))
    assert "Nothing to be done" in again.stdout + again.stderr  # an outcome, not a failure


def test_kill_9_during_the_report(checkout, clean):
    process = faults.start(checkout, "f_aggregate")
    log = checkout / "results/f_aggregate/logs/aggregate.log"
    wait_for(log.exists, process, "the aggregate job")
    faults.kill_all(process)
    faults.rerun(checkout, "f_aggregate")
    faults.assert_whole(checkout, "f_aggregate", clean)


def test_two_snakemakes_at_once_in_one_directory(checkout, clean):
    first = faults.start(checkout, "f_twice")
    wait_for(lambda: (checkout / ".snakemake/locks").exists() and list(
        (checkout / ".snakemake/locks").iterdir()), first, "the first run's lock")
    second = snakemake(checkout, "--cores", "2", *faults.config("f_twice"))
    assert second.returncode != 0 and faults.LOCKED in second.stdout + second.stderr
    assert first.wait(timeout=900) == 0
    faults.assert_whole(checkout, "f_twice", clean)


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
        checkout, "--cores", "2", *faults.config("f_auth", "tracking=server"), env=env, timeout=900
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
    command = [str(exe), "--cores", "2", *faults.config("f_unreachable", "tracking=server",
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


