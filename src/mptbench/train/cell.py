"""One repeat of a grid cell, in the trainer: train the configured model under one policy and
batch size, time it, and return what was measured (the supervisor combines the repeats).

How a cell can end is listed in train/outcomes.py.
"""

from __future__ import annotations

from typing import Any

from mptbench.data.pipeline import input_pipeline
from mptbench.devices import require_visible
from mptbench.measure.fingerprint import fingerprint
from mptbench.policies import Policy
from mptbench.train import timing
from mptbench.train.models import build_model, jit_setting, one_hot_labels
from mptbench.train.outcomes import classify_error
from mptbench.train.synthetic import synthetic_twin


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


def _timer(train_cfg: dict):
    """This repeat's share of the cell's time budget, and the step-time guard."""
    budget = train_cfg["time_budget_s"]
    return timing.make_step_timer(
        train_cfg["warmup_steps"],
        train_cfg["timed_steps"],
        train_cfg["min_timed_steps"],
        budget / train_cfg["repeats"] if budget else None,
        train_cfg["warmup_epochs"],
        precision=train_cfg["precision"],
        step_limit_s=train_cfg["max_step_seconds"],
    )


def _fit(tf, run: dict, prepared: dict, result: dict):
    """Build the model and fit it with the step timer; returns (model, timer)."""
    train_cfg, size = run["train"], prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    policy = Policy.of(run["policy"]["name"], run["policy"])
    jit = jit_setting(run["variant"]["jit_compile"])
    model = build_model(run["model"], input_shape, num_classes, policy, jit)
    result["fingerprint"]["xla"] = bool(model.jit_compile)
    train_ds, val_ds = _pipelines(tf, run, prepared, num_classes)
    steps = train_cfg["steps_per_epoch"] or max(
        1, prepared["splits"]["train"] // run["cell"]["batch_size"]
    )
    timer = _timer(train_cfg)
    model.fit(
        train_ds, epochs=train_cfg["epochs"], steps_per_epoch=steps, validation_data=val_ds,
        callbacks=[timer], verbose=train_cfg["verbose"], shuffle=False,
    )  # fmt: skip
    return model, timer


def _judge(tf, run: dict, prepared: dict, result: dict, model, clock) -> None:
    """The outcome of a fit that ran, and what an ok one measured beyond its steps."""
    limit = run["train"]["max_step_seconds"]
    if clock.nonfinite:
        step, value = clock.nonfinite
        result["outcome"], result["reason"] = "nonfinite", f"loss became {value} at step {step}"
    elif clock.over_budget:
        result["outcome"] = "over_budget"
        result["reason"] = (
            f"the first timed step took {clock.over_budget:.1f} s > train.max_step_seconds={limit}"
        )
    elif not clock.step_seconds:
        raise RuntimeError(
            f"no step was timed: {clock.step} steps ran, "
            f"{run['train']['warmup_steps']} of them warm-up; "
            "raise train.steps_per_epoch or train.epochs, or lower train.warmup_steps"
        )
    else:
        result["outcome"] = "ok"
        batch_size, size = run["cell"]["batch_size"], prepared["image_size"]
        if run["train"]["synthetic_twin"]:
            print("synthetic twin: the same steps on in-memory random data", flush=True)
            result["synthetic_step_s"] = synthetic_twin(
                tf, model, run, (size, size, 3), len(prepared["classes"]), batch_size,
                len(clock.step_seconds),
            )  # fmt: skip


def _timing(result: dict, clock) -> None:
    result.update(
        step_s=clock.step_seconds,
        timed_wall_s=clock.timed_wall_s,
        stopped_by=clock.stopped_by,
        half_width=clock.half_width,
        warmup_s=clock.warmup_seconds,
        epochs=clock.epochs,
    )


def _optimizer_scope(model) -> str | None:
    """The name scope the optimizer's update ops run in (inside a loss-scale wrapper: its
    inner optimizer's)."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    return getattr(optimizer, "name", None)


def _profile(tf, model, run: dict, prepared: dict, result: dict, profile_dir: str) -> None:
    """train.profile_steps more steps under the profiler, after the timed ones; the raw
    profile goes to profile_dir. One step first lets the new input iterator settle."""
    import keras

    steps = run["train"]["profile_steps"]
    train_ds, _ = _pipelines(tf, run, prepared, len(prepared["classes"]))
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=1
    )

    class Profiler(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 1:
                tf.profiler.experimental.start(profile_dir, options=options)

        def on_train_end(self, logs=None):
            tf.profiler.experimental.stop()

    timer = timing.make_step_timer(1, steps, steps, None)
    model.fit(train_ds, epochs=1, steps_per_epoch=1 + steps, callbacks=[Profiler(), timer],
              verbose=0, shuffle=False)  # fmt: skip
    result["profile"] = {
        "dir": profile_dir,
        "steps": steps,
        "step_s": timer.clock.step_seconds,
        "scopes": {"model_scope": model.name, "optimizer_scope": _optimizer_scope(model)},
    }


def run_repeat(
    run: dict,
    prepared: dict,
    repeat: int,
    startup: dict | None = None,
    profile_dir: str | None = None,
) -> dict:
    """Train and time one repeat; known failures become its outcome, others are raised.

    With `profile_dir` (and train.profile_steps > 0), an ok repeat is then profiled."""
    import keras
    import tensorflow as tf

    device = run["cell"]["device"]
    require_visible(tf, device)
    keras.utils.set_random_seed(run["seed"])
    facts = fingerprint(tf, keras, device) | (startup or {})
    result: dict[str, Any] = {
        "repeat": repeat,
        "outcome": None,
        "reason": None,
        "fingerprint": facts,
    }
    timer = None
    try:
        model, timer = _fit(tf, run, prepared, result)
        _judge(tf, run, prepared, result, model, timer.clock)
        if result["outcome"] == "ok" and profile_dir and run["train"]["profile_steps"]:
            _profile(tf, model, run, prepared, result, profile_dir)
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
        outcome = classify_error(tf, exc)
        if outcome is None:
            raise
        result["outcome"], result["reason"] = outcome
        print(f"{result['outcome']}: {result['reason']}", flush=True)
    if timer is not None:
        _timing(result, timer.clock)
    return result
