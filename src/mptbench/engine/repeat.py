"""One repeat of a grid cell, in the engine: train the configured model under one policy and
batch size, time it, and return what was measured (the supervisor combines the repeats).

How a cell can end is listed in core/outcomes.py.
"""

from __future__ import annotations

from mptbench.core.jobs import Profiled, RepeatJob, RepeatResult, Run
from mptbench.engine import feed, timing
from mptbench.engine.backends import Session
from mptbench.engine.fingerprint import on_device
from mptbench.engine.models import build_model, jit_setting
from mptbench.engine.synthetic import synthetic_twin

# Op-level profiles are read from TensorFlow's profiler (jobs/profiles.py).
PROFILED_BACKENDS = ("tensorflow",)


def _timer(run: Run):
    """This repeat's share of the cell's time budget, and the step-time guard."""
    train = run.train
    return timing.make_step_timer(
        train.warmup_steps,
        train.timed_steps,
        train.min_timed_steps,
        train.time_budget_s / train.repeats if train.time_budget_s else None,
        train.warmup_epochs,
        precision=train.precision,
        step_limit_s=train.max_step_seconds,
    )


def _fit(session: Session, run: Run, prepared: dict, result: RepeatResult):
    """Build the model and fit it with the step timer; returns (model, timer)."""
    size = prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    jit = jit_setting(run.variant.jit_compile)
    model = build_model(run.model, input_shape, num_classes, run.policy, jit, run.block_steps)
    result.fingerprint["xla"] = bool(model.jit_compile)
    train_ds, val_ds = feed.cell_data(session, run, prepared)
    steps = run.train.steps_per_epoch or max(1, prepared["splits"]["train"] // run.cell.batch_size)
    timer = _timer(run)
    model.fit(
        train_ds, epochs=run.train.epochs, steps_per_epoch=steps, validation_data=val_ds,
        callbacks=[timer], verbose=run.train.verbose, shuffle=False,
    )  # fmt: skip
    return model, timer


def _judge(session: Session, run: Run, prepared: dict, result: RepeatResult, model, clock):
    """The outcome of a fit that ran, and what an ok one measured beyond its steps."""
    limit = run.train.max_step_seconds
    if clock.nonfinite:
        step, value = clock.nonfinite
        result.outcome, result.reason = "nonfinite", f"loss became {value} at step {step}"
    elif clock.over_budget:
        result.outcome = "over_budget"
        result.reason = (
            f"the first timed step took {clock.over_budget:.1f} s > train.max_step_seconds={limit}"
        )
    elif not clock.step_seconds:
        raise RuntimeError(
            f"no step was timed: {clock.step} steps ran, "
            f"{run.train.warmup_steps} of them warm-up; "
            "raise train.steps_per_epoch or train.epochs, or lower train.warmup_steps"
        )
    else:
        result.outcome = "ok"
        if run.train.synthetic_twin:
            print("synthetic twin: the same steps on in-memory random data", flush=True)
            result.synthetic_step_s = synthetic_twin(
                session, model, run, prepared, run.cell.batch_size, len(clock.step_seconds)
            )


def _timing(result: RepeatResult, clock) -> None:
    result.step_s = clock.step_seconds
    result.timed_wall_s = clock.timed_wall_s
    result.stopped_by = clock.stopped_by
    result.half_width = clock.half_width
    result.warmup_s = clock.warmup_seconds
    result.steps_per_sample = clock.steps_per_sample
    result.epochs = clock.epochs


def _optimizer_scope(model) -> str | None:
    """The name scope the optimizer's update ops run in (inside a loss-scale wrapper: its
    inner optimizer's)."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    return getattr(optimizer, "name", None)


def _profile(session: Session, model, run: Run, prepared: dict, path: str) -> Profiled:
    """train.profile_steps more steps under the profiler, after the timed ones; the raw
    profile goes to `path`. One step (or block) first lets the new input iterator settle."""
    tf, keras = session.framework, session.keras
    steps, block = run.train.profile_steps, run.block_steps
    train_ds, _ = feed.cell_data(session, run, prepared)
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=1
    )

    class Profiler(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == block:  # the second call: the first block has run
                tf.profiler.experimental.start(path, options=options)

        def on_train_end(self, logs=None):
            tf.profiler.experimental.stop()

    timer = timing.make_step_timer(block, steps, steps, None)
    model.fit(train_ds, epochs=1, steps_per_epoch=(1 + steps) * block,
              callbacks=[Profiler(), timer], verbose=0, shuffle=False)  # fmt: skip
    scopes = {"model_scope": model.name, "optimizer_scope": _optimizer_scope(model)}
    return Profiled(dir=path, steps=steps * block, step_s=timer.clock.step_seconds, scopes=scopes)


def _profiled(session: Session, model, job: RepeatJob, prepared: dict, result: RepeatResult):
    """An ok repeat's profile, or why it has none."""
    if session.name not in PROFILED_BACKENDS:
        result.profile_note = (
            f"op-level profiles are read for the tensorflow backend only, not {session.name}"
        )
        return
    result.profile = _profile(session, model, job.run, prepared, job.profile_dir)


def run_repeat(session: Session, job: RepeatJob, prepared: dict) -> RepeatResult:
    """Train and time one repeat; known failures become its outcome, others are raised.

    With the job's profile_dir (and train.profile_steps > 0), an ok repeat is then profiled."""
    run = job.run
    session.keras.utils.set_random_seed(run.seed)
    facts = on_device(session, run.cell.device, run.device.tf32)
    result = RepeatResult(repeat=job.repeat, fingerprint=facts)
    timer = None
    try:
        model, timer = _fit(session, run, prepared, result)
        _judge(session, run, prepared, result, model, timer.clock)
        if result.outcome == "ok" and job.profile_dir and run.train.profile_steps:
            _profiled(session, model, job, prepared, result)
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
        outcome = session.classify(exc)
        if outcome is None:
            raise
        result.outcome, result.reason = outcome
        print(f"{result.outcome}: {result.reason}", flush=True)
    if timer is not None:
        _timing(result, timer.clock)
    return result
