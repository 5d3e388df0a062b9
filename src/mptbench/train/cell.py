"""One grid cell: train the configured model under one policy and batch size, time it, record it.

How a cell can end is listed in train/outcomes.py; the record's fields in record.py.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from mptbench import record as fields
from mptbench.config.grid import Cell
from mptbench.data.pipeline import input_pipeline
from mptbench.devices import require_visible
from mptbench.measure.fingerprint import fingerprint
from mptbench.measure.flops import training_flops_per_step
from mptbench.policies import Policy
from mptbench.tracking import CellRun
from mptbench.train import timing
from mptbench.train.budget import over_budget
from mptbench.train.models import build_model, jit_setting, one_hot_labels
from mptbench.train.outcomes import classify_error
from mptbench.train.synthetic import synthetic_twin


def new_record(run: dict, prepared: dict, facts: dict) -> dict[str, Any]:
    train_cfg = run["train"]
    return {
        "experiment": run["name"],
        "model": run["model"]["name"],
        "dataset": prepared["dataset"],
        "image_size": prepared["image_size"],
        **run["cell"],
        "outcome": None,
        "reason": None,
        "warmup_steps": train_cfg["warmup_steps"],
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "fingerprint": facts,
    }


def _pipelines(tf, run: dict, prepared: dict, num_classes: int):
    batch_size = run["cell"]["batch_size"]
    pipeline = {
        "input_cfg": run["dataset"]["input"],
        "seed": run["seed"],
        "one_hot_classes": num_classes if one_hot_labels(run["model"]) else 0,
    }
    train_ds = input_pipeline(tf, prepared, "train", batch_size, training=True, **pipeline)
    val_ds = None
    if run["train"]["validate"]:
        val_ds = input_pipeline(tf, prepared, "validation", batch_size, training=False, **pipeline)
    return train_ds, val_ds


def _fit(tf, run: dict, prepared: dict, record: dict):
    """Build the model and fit it with the step timer; returns (model, timer)."""
    train_cfg, size = run["train"], prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    policy = Policy.of(run["policy"]["name"], run["policy"])
    jit = jit_setting(run["variant"]["jit_compile"])
    model = build_model(run["model"], input_shape, num_classes, policy, jit)
    record["fingerprint"]["xla"] = bool(model.jit_compile)
    train_ds, val_ds = _pipelines(tf, run, prepared, num_classes)
    steps = train_cfg["steps_per_epoch"] or max(
        1, prepared["splits"]["train"] // run["cell"]["batch_size"]
    )
    timer = timing.make_step_timer(
        train_cfg["warmup_steps"], train_cfg["timed_steps"], train_cfg["min_timed_steps"],
        train_cfg["time_budget_s"], train_cfg["warmup_epochs"],
    )  # fmt: skip
    model.fit(
        train_ds, epochs=train_cfg["epochs"], steps_per_epoch=steps, validation_data=val_ds,
        callbacks=[timer], verbose=train_cfg["verbose"], shuffle=False,
    )  # fmt: skip
    return model, timer


def _judge(tf, run: dict, prepared: dict, record: dict, model, timer, log) -> None:
    """The outcome of a fit that ran, and the figures of an ok one."""
    clock, batch_size = timer.clock, run["cell"]["batch_size"]
    if clock.nonfinite:
        step, value = clock.nonfinite
        record["outcome"], record["reason"] = "nonfinite", f"loss became {value} at step {step}"
        return
    if not clock.step_seconds:
        raise RuntimeError(
            f"no step was timed: {clock.step} steps ran, "
            f"{run['train']['warmup_steps']} of them warm-up; "
            "raise train.steps_per_epoch or train.epochs, or lower train.warmup_steps"
        )
    record["outcome"] = "ok"
    record.update(timing.summarise(clock.step_seconds, batch_size, clock.timed_wall_s))
    if run["train"]["synthetic_twin"]:
        log("synthetic twin: the same steps on in-memory random data")
        size = prepared["image_size"]
        twin = synthetic_twin(
            tf, model, run, (size, size, 3), len(prepared["classes"]), batch_size,
            len(clock.step_seconds),
        )  # fmt: skip
        record.update(twin)
        if twin["synthetic_ms_per_step"]:
            record["input_bound_ratio"] = record["ms_per_step"] / twin["synthetic_ms_per_step"]
    flops = training_flops_per_step(model, batch_size)
    record["flops_per_step"] = flops
    record["achieved_tflops"] = flops / (record["ms_per_step"] / 1000) / 1e12


def _attempt(tf, run: dict, prepared: dict, record: dict, probe, log):
    """Train unless over budget; known failures become outcomes. Returns the timer, if any."""
    timer = None
    try:
        over_budget(run, probe, record, log)
        if record["outcome"] is None:
            model, timer = _fit(tf, run, prepared, record)
            _judge(tf, run, prepared, record, model, timer, log)
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
        outcome = classify_error(tf, exc)
        if outcome is None:
            raise
        record["outcome"], record["reason"] = outcome
        log(f"{record['outcome']}: {record['reason']}")
    return timer


def _close(record: dict, timer, mlrun, started: float) -> None:
    """What every cell records at its end, whatever its outcome; the MLflow run's metrics."""
    if timer is not None:
        clock = timer.clock
        if record["outcome"] != "ok":
            batch_size = record["batch_size"]
            record.update(timing.summarise(clock.step_seconds, batch_size, clock.timed_wall_s))
        record["warmup_ms"] = [1000 * s for s in clock.warmup_seconds]
        record["epochs"] = clock.epochs
        vals = [e["val_accuracy"] for e in clock.epochs if "val_accuracy" in e]
        record["final_val_accuracy"] = vals[-1] if vals else None
        mlrun.log_epochs(clock.epochs)
    record["duration_s"] = time.monotonic() - started
    metrics = {k: record.get(k) for k in fields.METRICS}
    metrics = {k: v for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)}
    mlrun.finish(metrics, {"outcome": record["outcome"], "reason": record["reason"] or ""}, record)


def run_cell(
    run: dict,
    prepared: dict,
    tracking: dict,
    log=print,
    startup: dict | None = None,
    on_start=None,
    probe: dict | None = None,
) -> dict[str, Any]:
    """Train one cell and return its record (the caller writes it).

    `startup` holds what TensorFlow's start-up log said (measure.startup); `on_start(record)`
    is called once the MLflow run exists, so a supervisor can close it if this process is
    killed. `probe` is the probe rule's timing of a few images (train.budget).
    """
    import keras
    import tensorflow as tf

    started = time.monotonic()
    cell = run["cell"]
    require_visible(tf, cell["device"])
    keras.utils.set_random_seed(run["seed"])
    facts = fingerprint(tf, keras, cell["device"]) | (startup or {})
    record = new_record(run, prepared, facts)
    label = Cell(**cell).label
    with CellRun(tracking, label, run_name=f"{run['name']}:{label}") as mlrun:
        mlrun.log_params({k: v for k, v in run.items() if k != "cell"} | {"cell": cell})
        mlrun.log_fingerprint(record["fingerprint"])
        record.update(mlflow_run_id=mlrun.run_id, mlflow_experiment_id=tracking["experiment_id"])
        if on_start:
            on_start(record)
        timer = _attempt(tf, run, prepared, record, probe, log)
        _close(record, timer, mlrun, started)
    return record
