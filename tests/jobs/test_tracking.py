"""The MLflow store under concurrent writers, and a tracking server on loopback."""

import multiprocessing
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import mlflow
import pytest
from mlflow_server import MlflowServer

from mptbench.jobs.tracking import (
    CELL_TAG,
    CellRun,
    fail_sweep,
    finish_sweep,
    init_experiment,
    log_figures,
)

pytestmark = pytest.mark.slow


def _write_run(tracking: dict, index: int) -> str:
    """One train job's worth of MLflow writes, as run_cell makes them."""
    with CellRun(dict(tracking, system_metrics=False), f"cell{index}", f"run{index}") as run:
        run.log_params({"train": {"epochs": 2}, "cell": {"batch_size": index}})
        run.log_fingerprint({"host": "test", "cpu": {"model": "x"}})
        run.log_epochs([{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}])
        run.finish({"ms_per_step": 10.0 + index}, {"outcome": "ok"}, {"index": index})
        return run.run_id


def test_eight_concurrent_writers_lose_nothing(tmp_path):
    tracking = init_experiment(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "concurrent", str(tmp_path / "a")
    )
    # Spawned, not forked: this process may already run JAX's threads (forking them deadlocks).
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=8, mp_context=spawn) as pool:
        run_ids = list(pool.map(_write_run, [tracking] * 8, range(8)))
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    runs = client.search_runs([tracking["experiment_id"]], "tags.`mptbench.cell` != ''")
    assert sorted(r.info.run_id for r in runs) == sorted(run_ids)
    # Each nested under the experiment's one sweep run, which a second init finds again.
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {tracking["parent_run_id"]}
    again = init_experiment(tracking["tracking_uri"], "concurrent", str(tmp_path / "a"))
    assert again["parent_run_id"] == tracking["parent_run_id"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.metrics["ms_per_step"] for r in runs) == [10.0 + i for i in range(8)]
    assert all(len(client.get_metric_history(r.info.run_id, "loss")) == 2 for r in runs)


def test_a_reports_figures_reach_a_run_in_as_few_requests_as_mlflow_allows(tmp_path):
    """950 metrics and 230 tags: three requests (MLflow refuses a batch of over 100 tags or
    1000 metrics), and every figure arrives."""
    tracking = init_experiment(f"sqlite:///{tmp_path / 'm.db'}", "figures", None,
                               system_metrics=False)
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    run_id = client.create_run(tracking["experiment_id"]).info.run_id
    metrics = {f"m{i}": i / 2 for i in range(950)}
    tags = {f"t{i}": i for i in range(230)}
    calls = []
    real = client.log_batch
    client.log_batch = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    log_figures(client, run_id, metrics, tags)
    assert len(calls) == 3
    data = client.get_run(run_id).data
    assert data.metrics == metrics
    assert {k: v for k, v in data.tags.items() if k.startswith("t")} == {
        k: str(v) for k, v in tags.items()}


def _init(uri: str, name: str) -> str:
    return init_experiment(uri, name, None, system_metrics=False)["experiment_id"]


def test_a_store_killed_while_it_was_made_is_not_left_for_the_rerun(tmp_path):
    db = tmp_path / "results" / "mlflow.db"
    uri = f"sqlite:///{db}"
    code = f"from mptbench.jobs.tracking import init_experiment as i; i({uri!r}, 'x', None)"
    process = subprocess.Popen([sys.executable, "-c", code])
    # MLflow builds the schema over a second or more; kill -9 as soon as it has begun.
    deadline = time.monotonic() + 120
    while not list(db.parent.glob(".mlflow.db.*.part")):
        assert process.poll() is None and time.monotonic() < deadline, "no store was begun"
        time.sleep(0.01)
    process.kill()
    process.wait()
    assert not db.exists()  # a half-made store never has the store's name
    (part,) = db.parent.glob(".mlflow.db.*.part")
    part.with_name(f"{part.name}-journal").touch()  # sqlite's, where the kill came mid-write
    assert _init(uri, "x") == "1"  # the rerun makes a whole one, whatever the kill left
    assert [p.name for p in db.parent.iterdir()] == ["mlflow.db"]  # the killed part removed


def test_two_processes_making_one_store_at_once_share_it(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        ids = list(pool.map(_init, [uri, uri], ["a", "b"]))
    assert sorted(ids) == ["1", "2"]  # each found the other's experiment in the one store
    names = {e.name for e in mlflow.MlflowClient(uri).search_experiments()}
    assert names == {"Default", "a", "b"}


def test_runs_reach_a_tracking_server_on_loopback(tmp_path):
    with MlflowServer(tmp_path / "server.db", tmp_path / "artifacts") as server:
        uri = server.url
        tracking = init_experiment(uri, "served", None)
        run_id = _write_run(tracking, 0)
        run = mlflow.MlflowClient(uri).get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.tags["outcome"] == "ok"


def test_every_attempt_of_a_cell_ends_and_only_the_last_stays_active(tmp_path):
    tracking = init_experiment(
        f"sqlite:///{tmp_path / 'mlflow.db'}", "attempts", str(tmp_path / "a")
    )
    tracking = dict(tracking, system_metrics=False)
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    # What a job killed with SIGKILL leaves: a run that never ended.
    lost = client.create_run(tracking["experiment_id"], tags={CELL_TAG: "cell"}).info.run_id
    with pytest.raises(KeyboardInterrupt), CellRun(tracking, "cell", "stopped") as stopped:
        raise KeyboardInterrupt  # Ctrl-C, or SIGTERM turned into an exception by the supervisor
    with pytest.raises(ValueError), CellRun(tracking, "cell", "failed") as failed:
        raise ValueError("a bug")
    with CellRun(tracking, "cell", "last") as last:
        last.finish({"ms_per_step": 1.0}, {"outcome": "ok"}, {})
    every = client.search_runs([tracking["experiment_id"]], f"tags.`{CELL_TAG}` = 'cell'",
                               run_view_type=mlflow.entities.ViewType.ALL)
    states = {r.info.run_id: (r.info.status, r.info.lifecycle_stage) for r in every}
    assert states == {
        lost: ("KILLED", "deleted"),
        stopped.run_id: ("KILLED", "deleted"),
        failed.run_id: ("FAILED", "deleted"),
        last.run_id: ("FINISHED", "active"),
    }


def test_a_sweep_that_failed_says_so_until_a_later_report_finishes_it(tmp_path):
    tracking = init_experiment(f"sqlite:///{tmp_path / 'mlflow.db'}", "sweep", str(tmp_path / "a"))
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    sweep = lambda: client.get_run(tracking["parent_run_id"]).info.status  # noqa: E731
    assert sweep() == "RUNNING"
    assert fail_sweep(tracking) is None and sweep() == "FAILED"
    (tmp_path / "report").mkdir()
    (tmp_path / "report/summary.csv").write_text("model\n")
    finish_sweep(tracking, str(tmp_path / "report"), {"cells": 1}, {})
    assert sweep() == "FINISHED"
    assert fail_sweep(tracking) is None and sweep() == "FINISHED"  # a later failure: still done


def test_a_sweep_on_a_server_that_is_gone_is_left_with_one_line_not_minutes_of_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}"
    # Without a limit the client retries with backoff for minutes; this fails the test instead.
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("fail_sweep retried for 60 s"))
    signal.alarm(60)
    try:
        why = fail_sweep({"tracking_uri": gone, "parent_run_id": "0" * 32})
    finally:
        signal.alarm(0)
    assert why and "\n" not in why and ("Connection refused" in why or "Max retries" in why), why
