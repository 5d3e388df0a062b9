"""The validation pass of a whole run (core/fullrun.py), timed in the process that timed the
cell's steps: Keras' own `evaluate` on the validation split at the cell's batch size, its test
step compiled anew as a run's first validation compiles it. The first batch (the compile) is
kept apart from the steady ones that follow: up to train.validation_steps of them, fewer once
they took train.validation_seconds (one at least)."""

from __future__ import annotations

import time

from mptbench.core.fullrun import plan
from mptbench.engine import feed


def validation_clock(steps: int, seconds: float | None, now=time.perf_counter):
    """A Keras callback that times each validation batch (or block of batches: its mean),
    the first apart, and stops `evaluate` once it has what it needs."""
    import keras

    class ValidationTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.first_s: float | None = None
            self.batch_s: list[float] = []
            self._t0, self._begin = 0.0, 0

        def on_test_batch_begin(self, batch, logs=None):
            self._begin, self._t0 = batch, now()

        def on_test_batch_end(self, batch, logs=None):
            float((logs or {}).get("loss", 0.0))  # reading it back waits for the device
            per_batch = (now() - self._t0) / (batch - self._begin + 1)
            if self.first_s is None:
                self.first_s = per_batch
            else:
                self.batch_s.append(per_batch)
            spent = sum(self.batch_s)
            if len(self.batch_s) >= steps or (self.batch_s and seconds and spent >= seconds):
                self.model.stop_evaluating = True

    return ValidationTimer()


def time_validation(session, arm, prepared: dict) -> None:
    """The arm's validation batches, where its run validates and its data has the split (else
    the reason there is none, in the arm's validation_note)."""
    run, result = arm.run, arm.result
    steps = run.train.validation_steps
    if not plan(run.train).validates:
        return
    if not steps:
        result.validation_note = "train.validation_steps=0: no validation timed, no whole run"
        return
    batches = (1 + steps) * run.block_steps
    data = feed.validation_data(session, run, prepared, batches=batches)
    if data is None:
        result.validation_note = "no validation split: the whole run is its steps alone"
        return
    timer = validation_clock(steps, run.train.validation_seconds)
    arm.model.make_test_function(force=True)
    try:
        arm.model.evaluate(data, steps=batches, callbacks=[timer], verbose=0)
    finally:
        # The test step traced for this pass holds its iterator; kept to the process's end,
        # TensorFlow waits for its tuning thread to exit (core/epochs.py). Let both go now.
        arm.model.test_function = None
    result.validation_first_s, result.validation_s = timer.first_s, timer.batch_s
