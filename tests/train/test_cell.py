"""One grid cell, trained for real: timing, outcomes, the run record and its MLflow run."""

import copy
from pathlib import Path

import mlflow
import pytest

from mptbench.config import Cell, compose_config, run_config
from mptbench.train.budget import probe_cell
from mptbench.train.cell import run_cell
from mptbench.train.timing import percentile, summarise

CONF = Path(__file__).resolve().parents[2] / "conf"
pytestmark = pytest.mark.slow


def _run(policy="float32", batch_size=8, **train):
    cfg = compose_config(CONF, "smoke")
    run = run_config(cfg, Cell("pypi", "cpu", policy, batch_size))
    run = copy.deepcopy(run)
    run["train"].update(train)
    return run


def test_ok_cell_records_timing_epochs_and_one_mlflow_run(prepared32, tracking):
    run = _run(epochs=2, steps_per_epoch=4, warmup_steps=2, timed_steps=6, min_timed_steps=3)
    record = run_cell(run, prepared32, tracking, log=lambda _: None)
    assert record["outcome"] == "ok" and record["reason"] is None
    assert record["timed_steps"] == 6  # 8 steps in all, the first 2 warm-up
    assert len(record["warmup_ms"]) == 2
    assert 0 < record["ms_per_step_p10"] <= record["ms_per_step"] <= record["ms_per_step_p90"]
    assert record["images_per_sec"] == pytest.approx(8 / (record["ms_per_step"] / 1000))
    assert [e["epoch"] for e in record["epochs"]] == [1, 2]
    assert "val_accuracy" in record["epochs"][-1]
    assert record["fingerprint"]["tensorflow"] == "2.21.0"
    assert record["fingerprint"]["gpu"] is None

    client = mlflow.MlflowClient(tracking["tracking_uri"])
    run_info = client.get_run(record["mlflow_run_id"])
    assert run_info.info.status == "FINISHED"
    assert run_info.data.tags["outcome"] == "ok"
    assert run_info.data.params["train.epochs"] == "2"
    assert run_info.data.params["policy.name"] == "float32"
    assert run_info.data.params["cell.batch_size"] == "8"
    assert run_info.data.metrics["ms_per_step"] == pytest.approx(record["ms_per_step"])
    assert [m.step for m in client.get_metric_history(record["mlflow_run_id"], "loss")] == [1, 2]

    # A rerun of the same cell replaces its run: the store keeps one run per cell.
    again = run_cell(run, prepared32, tracking, log=lambda _: None)
    active = client.search_runs([tracking["experiment_id"]])
    assert [r.info.run_id for r in active] == [again["mlflow_run_id"]]


def test_timed_steps_account_for_the_timed_wall_time(prepared32, tracking):
    run = _run(batch_size=16, epochs=2, steps_per_epoch=6, warmup_steps=2, timed_steps=10)
    record = run_cell(run, prepared32, tracking, log=lambda _: None)
    assert record["timed_steps"] == 10
    # The timed steps span two epochs; validation between them is not counted as step time.
    assert record["timed_steps_s"] == pytest.approx(record["timed_wall_s"], rel=0.05)


def test_time_budget_stops_after_the_minimum_steps(prepared32, tracking):
    run = _run(
        epochs=1,
        steps_per_epoch=50,
        warmup_steps=1,
        timed_steps=None,
        min_timed_steps=3,
        time_budget_s=1e-6,
        validate=False,
    )
    record = run_cell(run, prepared32, tracking, log=lambda _: None)
    assert record["outcome"] == "ok"
    assert record["timed_steps"] == 3


def test_probe_times_a_few_images(prepared32):
    probe = probe_cell(_run(probe_batch_size=2), prepared32)
    assert probe["batch_size"] == 2 and probe["image_size"] == 32
    assert 0 < probe["step_s"] <= probe["first_step_s"] + 1.0
    assert (probe["variant"], probe["device"], probe["policy"]) == ("pypi", "cpu", "float32")


def test_probe_marks_a_too_slow_cell_over_budget_without_training(prepared32, tracking):
    run = _run(batch_size=16, max_step_seconds=3.0)
    probe = {"step_s": 1.0, "batch_size": 4}  # 1 s for 4 images: about 4 s at batch 16
    record = run_cell(run, prepared32, tracking, log=lambda _: None, probe=probe)
    assert record["outcome"] == "over_budget"
    assert record["predicted_step_s"] == pytest.approx(4.0)
    assert "predicted 4.0 s/step" in record["reason"]
    assert "train.max_step_seconds=3.0" in record["reason"]
    assert "ms_per_step" not in record
    tags = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(record["mlflow_run_id"]).data.tags
    assert tags["outcome"] == "over_budget"
    # Under the limit the cell trains.
    run = _run(batch_size=8, max_step_seconds=3.0, epochs=1, steps_per_epoch=5, timed_steps=3)
    assert run_cell(run, prepared32, tracking, log=lambda _: None, probe=probe)["outcome"] == "ok"


def test_exploding_loss_is_recorded_as_nonfinite(prepared32, tracking):
    run = _run(epochs=1, steps_per_epoch=6, warmup_steps=1, timed_steps=4, min_timed_steps=1)
    run["model"]["learning_rate"] = 1e38
    record = run_cell(run, prepared32, tracking, log=lambda _: None)
    assert record["outcome"] == "nonfinite"
    assert "loss became" in record["reason"]


def test_percentiles_and_summary():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 90) == 5.0
    summary = summarise([0.1, 0.2, 0.3], batch_size=10, timed_wall_s=0.61)
    assert summary["ms_per_step"] == pytest.approx(200)
    assert summary["images_per_sec"] == pytest.approx(50)
    assert summary["timed_steps"] == 3
    assert summarise([], 10, None) == {"timed_steps": 0}
