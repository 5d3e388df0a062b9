"""One grid cell: train the configured model under one policy and batch size, time it, record it.

Every cell ends with an outcome the report shows:
  ok           trained; timing recorded
  oom          the device ran out of memory (as the published table records)
  nonfinite    the loss became NaN or Inf
  unsupported  TensorFlow has no kernel for this policy on this device (reason recorded)
  over_budget  a probe predicted a step slower than train.max_step_seconds (prediction recorded)
Anything else fails the job loudly.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from mptbench import dataset, timing
from mptbench.fingerprint import fingerprint
from mptbench.flops import training_flops_per_step
from mptbench.models import build_model, one_hot_labels
from mptbench.tracking import CellRun


def shuffle_buffer(rule: Any, train_examples: int, batch_size: int) -> int:
    """The seed's rule ("seed"): train examples // batch size; or a fixed number."""
    if rule == "seed":
        return max(1, train_examples // batch_size)
    return int(rule)


def input_pipeline(
    tf,
    info: dict,
    split: str,
    batch_size: int,
    input_cfg: dict,
    seed: int,
    training: bool,
    one_hot_classes: int = 0,
):
    """tf.data from the prepared cache: [0,1] floats, shuffled, batched, prefetched.

    Labels stay class indices, or become one-hot vectors of `one_hot_classes` entries.
    """
    _, ds = dataset.load(info, split)
    if input_cfg["cache"] == "memory":
        ds = ds.cache()  # uint8 after resizing: a quarter of the memory float32 would take
    if training:
        buffer = shuffle_buffer(input_cfg["shuffle_buffer"], info["splits"][split], batch_size)
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=training)

    def scale(x, y):
        return tf.cast(x, tf.float32) / 255.0, tf.one_hot(
            y, one_hot_classes
        ) if one_hot_classes else y

    ds = ds.map(scale, num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = bool(input_cfg["deterministic"])
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def jit_setting(value: Any) -> Any:
    return value if isinstance(value, bool) else "auto"


def require_device(tf, run: dict) -> None:
    """Fail loudly when a GPU cell's TensorFlow sees no GPU: it would time the CPU instead."""
    if run["device"]["kind"] == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError(
            f"{run['device']['name']} was asked for but TensorFlow sees no GPU "
            "(is this a CUDA build of TensorFlow, with drivers, on a GPU node?)"
        )


def probe_cell(run: dict, prepared: dict) -> dict[str, Any]:
    """Seconds of one training step on a few images (train.probe_batch_size), measured once
    per variant, device and policy; cells predict their own step time from it."""
    import tensorflow as tf

    require_device(tf, run)
    probe_bs = run["train"]["probe_batch_size"]
    size = prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    model = build_model(
        run["model"],
        input_shape,
        num_classes,
        run["policy"]["name"],
        jit_setting(run["variant"]["jit_compile"]),
    )
    x = tf.random.uniform((probe_bs, *input_shape), seed=run["seed"])
    y = tf.zeros((probe_bs,), dtype=tf.int64)
    if one_hot_labels(run["model"]):
        y = tf.one_hot(y, num_classes)
    started = time.perf_counter()
    model.train_on_batch(x, y)  # traces and compiles
    first = time.perf_counter() - started
    started = time.perf_counter()
    model.train_on_batch(x, y)
    step = time.perf_counter() - started
    cell = run["cell"]
    return {
        "variant": cell["variant"],
        "device": cell["device"],
        "policy": run["policy"]["name"],
        "image_size": size,
        "batch_size": probe_bs,
        "first_step_s": first,
        "step_s": step,
    }


def classify_error(tf, exc: BaseException) -> tuple[str, str] | None:
    """Map TensorFlow's errors to an outcome; None means a real failure."""
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return "oom", str(exc).strip().splitlines()[0][:300]
    text = str(exc)
    if isinstance(
        exc, tf.errors.UnimplementedError | tf.errors.NotFoundError | tf.errors.InvalidArgumentError
    ) and ("No registered" in text or "not supported" in text.lower() or "Unimplemented" in text):
        return "unsupported", text.strip().splitlines()[0][:300]
    return None


def _timer(train_cfg: dict, timed_steps: int | None = None, warmup_epochs: int | None = None):
    return timing.make_step_timer(
        train_cfg["warmup_steps"],
        timed_steps if timed_steps is not None else train_cfg["timed_steps"],
        train_cfg["min_timed_steps"],
        train_cfg["time_budget_s"],
        train_cfg["warmup_epochs"] if warmup_epochs is None else warmup_epochs,
    )


def synthetic_twin(
    tf, model, run: dict, input_shape, num_classes: int, batch_size: int, timed_steps: int
) -> dict:
    """The same model, policy and batch on random tensors already in memory.

    Its ms/step is the step time with no input pipeline at all, so the ratio to it tells an
    input bottleneck (well above 1) from compute (about 1). It times as many steps as the
    real run did, after the same warm-up.
    """
    x = tf.random.uniform((batch_size, *input_shape), seed=run["seed"])
    y = tf.random.uniform((batch_size,), maxval=num_classes, dtype=tf.int64, seed=run["seed"])
    if one_hot_labels(run["model"]):
        y = tf.one_hot(y, num_classes)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    timed_steps = min(timed_steps, run["train"]["synthetic_max_steps"])
    # The model is warm already; a few steps let the new input's function trace settle.
    warmup = max(2, run["train"]["warmup_steps"])
    timer = timing.make_step_timer(warmup, timed_steps, 1, run["train"]["time_budget_s"])
    steps = warmup + timed_steps
    model.fit(data, epochs=1, steps_per_epoch=steps, callbacks=[timer], verbose=0, shuffle=False)
    summary = timing.summarise(timer.step_seconds, batch_size, timer.timed_wall_s)
    return {
        "synthetic_ms_per_step": summary.get("ms_per_step"),
        "synthetic_timed_steps": summary.get("timed_steps"),
    }


def _efficiency(record: dict, model) -> None:
    """FLOPs per step and achieved TFLOP/s (the report divides by the calibrated peak: MFU)."""
    flops = training_flops_per_step(model, record["batch_size"])
    record["flops_per_step"] = flops
    if record.get("ms_per_step"):
        record["achieved_tflops"] = flops / (record["ms_per_step"] / 1000) / 1e12


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

    `startup` holds what TensorFlow's start-up log said (cell.import_tensorflow);
    `on_start(record)` is called once the MLflow run exists, so a supervisor can close it if
    this process is killed. `probe` is the probe rule's timing of a few images (probe_cell),
    from which a step at this batch size is predicted.
    """
    import keras
    import tensorflow as tf

    cell, train_cfg = run["cell"], run["train"]
    batch_size, policy = cell["batch_size"], run["policy"]["name"]
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    t_start = time.monotonic()
    require_device(tf, run)
    keras.utils.set_random_seed(run["seed"])
    size = prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    record: dict[str, Any] = {
        "experiment": run["name"],
        "model": run["model"]["name"],
        "dataset": prepared["dataset"],
        "image_size": size,
        **cell,
        "outcome": None,
        "reason": None,
        "warmup_steps": train_cfg["warmup_steps"],
        "started_at": started_at,
        "fingerprint": fingerprint(tf, keras, cell["device"]) | (startup or {}),
    }
    label = f"{cell['variant']}/{cell['device']}/{policy}/bs{batch_size}"
    with CellRun(tracking, label, run_name=f"{run['name']}:{label}") as mlrun:
        mlrun.log_params({k: v for k, v in run.items() if k != "cell"} | {"cell": cell})
        mlrun.log_fingerprint(record["fingerprint"])
        record.update(mlflow_run_id=mlrun.run_id, mlflow_experiment_id=tracking["experiment_id"])
        if on_start:
            on_start(record)
        timer = model = None
        try:
            if train_cfg["max_step_seconds"] and probe and batch_size > probe["batch_size"]:
                probe_s, probe_bs = probe["step_s"], probe["batch_size"]
                predicted = probe_s * batch_size / probe_bs
                record["predicted_step_s"] = predicted
                log(
                    f"probe: {probe_s:.3f} s for {probe_bs} images -> "
                    f"about {predicted:.2f} s/step at batch {batch_size}"
                )
                if predicted > train_cfg["max_step_seconds"]:
                    record["outcome"] = "over_budget"
                    record["reason"] = (
                        f"predicted {predicted:.1f} s/step "
                        f"(probe: {probe_s:.2f} s for {probe_bs} images) "
                        f"> train.max_step_seconds={train_cfg['max_step_seconds']}"
                    )
            if record["outcome"] is None:
                model = build_model(
                    run["model"],
                    input_shape,
                    num_classes,
                    policy,
                    jit_setting(run["variant"]["jit_compile"]),
                )
                record["fingerprint"]["xla"] = bool(model.jit_compile)
                one_hot = num_classes if one_hot_labels(run["model"]) else 0
                pipeline = {
                    "input_cfg": run["dataset"]["input"],
                    "seed": run["seed"],
                    "one_hot_classes": one_hot,
                }
                train_ds = input_pipeline(
                    tf, prepared, "train", batch_size, training=True, **pipeline
                )
                val_ds = None
                if train_cfg["validate"]:
                    val_ds = input_pipeline(
                        tf, prepared, "validation", batch_size, training=False, **pipeline
                    )
                steps = train_cfg["steps_per_epoch"] or max(
                    1, prepared["splits"]["train"] // batch_size
                )
                timer = _timer(train_cfg)
                model.fit(
                    train_ds,
                    epochs=train_cfg["epochs"],
                    steps_per_epoch=steps,
                    validation_data=val_ds,
                    callbacks=[timer],
                    verbose=train_cfg["verbose"],
                    shuffle=False,
                )
                if timer.nonfinite:
                    step, value = timer.nonfinite
                    record["outcome"], record["reason"] = (
                        "nonfinite",
                        f"loss became {value} at step {step}",
                    )
                elif not timer.step_seconds:
                    raise RuntimeError(
                        f"no step was timed: {timer.step} steps ran, "
                        f"{train_cfg['warmup_steps']} of them warm-up; "
                        "raise train.steps_per_epoch or train.epochs, or lower train.warmup_steps"
                    )
                else:
                    record["outcome"] = "ok"
                    record.update(
                        timing.summarise(timer.step_seconds, batch_size, timer.timed_wall_s)
                    )
                    if train_cfg["synthetic_twin"]:
                        log("synthetic twin: the same steps on in-memory random data")
                        twin = synthetic_twin(
                            tf,
                            model,
                            run,
                            input_shape,
                            num_classes,
                            batch_size,
                            len(timer.step_seconds),
                        )
                        record.update(twin)
                        if twin["synthetic_ms_per_step"]:
                            record["input_bound_ratio"] = (
                                record["ms_per_step"] / twin["synthetic_ms_per_step"]
                            )
                    _efficiency(record, model)
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
            outcome = classify_error(tf, exc)
            if outcome is None:
                raise
            record["outcome"], record["reason"] = outcome
            log(f"{record['outcome']}: {record['reason']}")
        if timer is not None:
            if record["outcome"] != "ok":
                record.update(timing.summarise(timer.step_seconds, batch_size, timer.timed_wall_s))
            record["warmup_ms"] = [1000 * s for s in timer.warmup_seconds]
            record["epochs"] = timer.epochs
            vals = [e["val_accuracy"] for e in timer.epochs if "val_accuracy" in e]
            record["final_val_accuracy"] = vals[-1] if vals else None
            mlrun.log_epochs(timer.epochs)
        record["duration_s"] = time.monotonic() - t_start
        metrics = {k: record.get(k) for k in RECORD_METRICS}
        metrics = {
            k: v for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)
        }
        mlrun.finish(
            metrics, {"outcome": record["outcome"], "reason": record["reason"] or ""}, record
        )
    return record


# Record fields also logged as MLflow metrics.
RECORD_METRICS = (
    "ms_per_step",
    "ms_per_step_p10",
    "ms_per_step_p90",
    "images_per_sec",
    "timed_steps",
    "synthetic_ms_per_step",
    "input_bound_ratio",
    "flops_per_step",
    "achieved_tflops",
    "final_val_accuracy",
    "predicted_step_s",
    "duration_s",
)
