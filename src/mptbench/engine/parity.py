"""Does it still learn: the same steps on the cell's data under each policy, from the same seed
(so the same initial weights and the same data order), each step's loss recorded; float32 once
more from another seed, for the spread two float32 runs have between them. Under dynamic loss
scaling each step's scale and whether its update was skipped (non-finite gradients: the
optimizer halves the scale and leaves the weights) are recorded too. jobs/parity.py compares
them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from mptbench.core.contract import ParityJob, ParityResult, ParityRun, Run
from mptbench.core.files import read_json
from mptbench.engine import feed
from mptbench.engine.backends import Session
from mptbench.engine.fingerprint import on_device
from mptbench.engine.models import build_model, jit_setting


def _value(variable) -> float:
    return float(variable.numpy() if hasattr(variable, "numpy") else variable)


def _recorder(keras, model, record: ParityRun):
    """A callback that keeps each step's own loss (the loss tracker is reset before every
    step, so the logged mean is that step's) and, under loss scaling, its scale and skips."""
    optimizer = model.optimizer
    scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    class Recorder(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.model.reset_metrics()
            self.iterations = _value(optimizer.iterations)

        def on_train_batch_end(self, batch, logs=None):
            loss = float((logs or {}).get("loss", math.nan))
            record.losses.append(loss if math.isfinite(loss) else None)
            if scaled:
                record.loss_scale.append(_value(optimizer.dynamic_scale))
                if _value(optimizer.iterations) == self.iterations:  # no update applied
                    record.skipped_steps.append(batch)

    if scaled:
        record.initial_loss_scale = float(optimizer.initial_scale)
    return Recorder()


def _train(session: Session, run: Run, seed: int, prepared: dict, steps: int) -> ParityRun:
    run = replace(run, seed=seed)
    size, classes = prepared["image_size"], len(prepared["classes"])
    session.keras.utils.set_random_seed(seed)
    record = ParityRun(policy=run.policy.name, seed=seed, losses=[])
    try:
        model = build_model(run.model, (size, size, 3), classes, run.policy,
                            jit_setting(run.variant.jit_compile))
        train_ds, val_ds = feed.cell_data(session, run, prepared)
        recorder = _recorder(session.keras, model, record)
        model.fit(train_ds, epochs=1, steps_per_epoch=steps, callbacks=[recorder], verbose=0,
                  shuffle=False)
        if val_ds is not None and record.losses and record.losses[-1] is not None:
            found = model.evaluate(val_ds, verbose=0, return_dict=True)
            record.val_accuracy = float(found.get("accuracy", math.nan))
    except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
        known = session.classify(exc)
        if known is None:
            raise
        record.outcome, record.reason = known
    last = record.losses[-1] if record.losses else None
    print(f"{run.policy.name} (seed {seed}): {record.outcome}, {len(record.losses)} steps, "
          f"last loss {last}, {len(record.skipped_steps)} skipped", flush=True)
    return record


def parity(session: Session, job: ParityJob, prepared: dict) -> ParityResult:
    """Each run of the job, one after the other."""
    first = job.runs[0]
    facts = on_device(session, first.cell.device, first.device.tf32)
    runs = [
        _train(session, run, seed, prepared, job.steps)
        for run, seed in zip(job.runs, job.seeds, strict=True)
    ]
    return ParityResult(first.cell.batch_size, runs, facts)


def run(job: ParityJob, start) -> ParityResult:
    """Do a parity run (the engine's entry point: `start` starts its backend)."""
    return parity(start(job.runs[0].backend.name), job, read_json(job.prepared))
