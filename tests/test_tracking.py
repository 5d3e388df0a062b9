"""The MLflow store under concurrent writers, and a tracking server on loopback."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import mlflow
import pytest
from mlflow_server import MlflowServer

from mptbench.tracking import CellRun, init_experiment

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


def test_runs_reach_a_tracking_server_on_loopback(tmp_path):
    with MlflowServer(tmp_path / "server.db", tmp_path / "artifacts") as server:
        uri = server.url
        tracking = init_experiment(uri, "served", None)
        run_id = _write_run(tracking, 0)
        run = mlflow.MlflowClient(uri).get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.tags["outcome"] == "ok"
