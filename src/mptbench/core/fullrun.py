"""A whole training run, as Keras' `fit` spends it, from what one process measured.

A timing run times steady steps; a user's `fit` also validates after every epoch (where it
validates), pays once, in its first epoch, for compiling its train and test steps and for its
first batches, and may wait at each later epoch's start for the last epoch's tf.data tuning
thread (core/epochs.py). So a whole run is four parts, each from what the process that timed
the cell's steps measured (engine/fullrun.py times the validation):

- steps: epochs x steps per epoch (the split's batches, the last partial one at its share) x the
  process's mean timed step;
- validation: epochs x the validation split's batches (its last, partial one at its share of
  a batch) x the mean timed validation batch, where the run validates;
- the first epoch's one-time extra: the warm-up steps over as many steady steps, and the
  first validation batch (it compiles the test step) over a steady one;
- the epoch starts: each epoch after the first, the share of the process's epoch starts that
  waited times the rest of the tuning thread's period at the run's own epoch length (its
  steps and validation), averaged over the epoch lengths the cell's processes spread over
  (core/epochs.py expected_rest: the rest is a cliff at each wake); nothing where the process
  timed no epoch start.

Which run: train.epochs where that is more than one epoch (validating where train.validate
says), else the 2020 experiment's: 20 epochs, validation after each (a one-epoch timing run is
no training run). Each process gives its own total, so the whole run's interval is over
processes like every other, and two policies timed in the same processes give a paired
whole-run speedup (report/summary.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from mptbench.core.epochs import expected_wait

# The 2020 experiment trained 20 epochs with validation after each (and timed the 20th).
PUBLISHED_EPOCHS = 20
PUBLISHED = "the 2020 experiment's"
PARTS = ("steps", "validation", "first_epoch", "epoch_starts")


@dataclass(frozen=True)
class Plan:
    """The training run a cell's figures are projected onto."""

    epochs: int
    validates: bool
    source: str  # "train.epochs" or PUBLISHED
    steps_per_epoch: int | None = None  # train.steps_per_epoch; None: the whole split

    @property
    def words(self) -> str:
        """'20 epochs with validation after each'."""
        run = f"{self.epochs} epoch{'s' * (self.epochs != 1)}"
        return f"{run} with validation after each" if self.validates else run

    def steps(self, train_examples: int, batch_size: int) -> float:
        """Steps per epoch: train.steps_per_epoch, or the split's batches, the last partial one
        at its share of a batch: a user's `fit` runs it (a dataset batched as Keras' guides
        write it keeps its remainder), as the validation pass does. 1,500 images at batch 32
        are 46.875 steps, where the whole batches alone (46) left out 2% of the epoch."""
        return self.steps_per_epoch or max(1.0, train_examples / batch_size)


def plan(train: Any) -> Plan:
    """The run for `train` (a TrainConfig, or its dict in a record's config)."""
    get = train.get if isinstance(train, dict) else lambda key: getattr(train, key)
    epochs = int(get("epochs") or 1)
    if epochs > 1:
        return Plan(epochs, bool(get("validate")), "train.epochs", get("steps_per_epoch"))
    return Plan(PUBLISHED_EPOCHS, True, PUBLISHED)


def parts(
    run: Plan,
    steps_per_epoch: float,
    validation_batches: float,
    step_s: list[float],
    warmup_s: list[float],
    validation_first_s: float | None,
    validation_s: list[float],
    waited_share: float | None = None,
) -> dict[str, float] | None:
    """One process's whole run in seconds, part by part and in all; None where it lacks a part
    the run has (no timed step; or a validating run without a timed validation batch).
    `waited_share`: the share of its epoch starts that waited (core/epochs.py; None: none
    timed, and the epoch starts count nothing). Its epoch starts take the rest at its own
    epoch length; `with_spread` averages it over the cell's processes' spread."""
    if not step_s:
        return None
    step = statistics.fmean(step_s)
    found = {
        "steps": run.epochs * steps_per_epoch * step,
        "validation": 0.0,
        "first_epoch": sum(warmup_s) - len(warmup_s) * step,
    }
    if run.validates:
        if not validation_s or validation_first_s is None or not validation_batches:
            return None
        batch = statistics.fmean(validation_s)
        found["validation"] = run.epochs * validation_batches * batch
        found["first_epoch"] += validation_first_s - batch
    found["epoch_starts"] = epoch_starts(run.epochs, waited_share,
                                         epoch_length(found, run.epochs))
    return found | {"total": sum(found.values())}


def epoch_length(found: dict[str, float], epochs: int) -> float:
    """A whole run's epoch, from its parts: its steps and validation over the epochs."""
    return (found["steps"] + found["validation"]) / epochs


def with_spread(found: dict[str, float], epochs: int, share: float | None,
                spread: float) -> dict[str, float]:
    """A process's whole run (`parts`) with its epoch starts' rest averaged over epoch lengths
    `spread` around its own (core/epochs.py expected_rest), and its total again."""
    out = found | {"epoch_starts": epoch_starts(epochs, share, epoch_length(found, epochs),
                                                spread)}
    return out | {"total": sum(out[part] for part in PARTS)}


def epoch_starts(epochs: int, share: float | None, epoch_s: float, spread: float = 0.0) -> float:
    """What a run's later epoch starts wait in all: `share` of them the rest of the tuning
    period at epochs of `epoch_s`, averaged over `spread` (core/epochs.py expected_rest); 0
    where the share is not known."""
    return max(0, epochs - 1) * (expected_wait(share, epoch_s, spread) or 0.0)
