"""Step timing inside Keras `fit`: warm-up excluded, then timed steps up to a count or a time
budget; with arms taking turns (engine/rounds.py), each timed step's round is kept beside it.
Where the cell's epochs hold too few samples to time (blocks of steps on a GPU at a large
batch), `fit_epochs` says how many epochs `fit` must be given, and the clock stops past the
cell's epochs as soon as it has its minimum. A one-epoch timing run goes through epochs of its
own (`epoch_samples`), each a new iterator as `fit` makes one per epoch, and the clock keeps how
long each epoch's start waited (core/epochs.py)."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from mptbench.core.outcomes import Outcome
from mptbench.engine.rounds import Rounds

# What stopped_by says of a cell whose epochs held too few samples: it ran on past them, only
# until it had timed train.min_timed_steps.
PAST_EPOCHS = "min_timed_steps past epochs"
# A cell is over budget when its first two timed samples are both over train.max_step_seconds:
# one alone may be a slow outlier of a step under the limit (in bench_coverage.py's regime of
# 12 s steps with rare slow samples, one sample over the limit lost arms that were not over
# it), two in a row are not; the second costs one step of a cell predicted under the limit.
OVER_BUDGET_SAMPLES = 2


def epoch_samples(train, predicted_s: float | None, block_steps: int) -> int | None:
    """The samples an epoch of a one-epoch timing run holds: about train.epoch_seconds at the
    step the probe predicted (one at least), or without a prediction train.round_samples; None
    where the run keeps one iterator (train.epoch_seconds null) or runs epochs of its own
    (train.epochs over one: a training run)."""
    if not train.epoch_seconds or train.epochs > 1:
        return None
    if predicted_s:
        return max(1, round(train.epoch_seconds / (predicted_s * block_steps)))
    return train.round_samples


class EpochEnds:
    """The tf.data iterators a timing run's fit makes, each destroyed in a thread of its own
    once the next epoch's first batch is under way, and timed there: what destroying it waited
    for its tuning thread (core/epochs.py) is measured as a user's fit would wait it, and holds
    up no step meanwhile. A user's fit waits it at the epoch's start, the machine idle; the
    whole run counts that wait (core/fullrun.py), the timing process need not spend it: on the
    default grid those waits were as long as the timed steps (bench/README.md, bench_grid).

    `track` makes a dataset keep each iterator it makes; the clock calls `release` at each
    epoch's first batch, when `fit` has let go of the last epoch's; each destruction's start
    goes into `found` (the clock's epoch_starts) as it ends; `join` waits for those still
    waiting."""

    def __init__(self, found: list[dict[str, float]], now=time.perf_counter):
        self.found, self._now = found, now
        self._made: list[Any] = []
        self._threads: list[threading.Thread] = []

    def track(self, dataset):
        """`dataset`, keeping each iterator it makes (the same object, its class a subclass of
        its own that does)."""
        made = self._made

        class Kept(type(dataset)):
            def __iter__(self):
                iterator = super().__iter__()
                made.append(iterator)
                return iterator

        dataset.__class__ = Kept
        return dataset

    def release(self, lived_s: float, keep: bool) -> None:
        """Every iterator but the newest, destroyed in a thread of its own; with `keep`, how
        long that took is an epoch start's wait, after an iterator that lived `lived_s`."""
        old = self._made[:-1]
        del self._made[:-1]
        if not old:
            return
        thread = threading.Thread(target=self._destroy, args=(old, lived_s, keep),
                                  name="epoch-end", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _destroy(self, old: list[Any], lived_s: float, keep: bool) -> None:
        started = self._now()
        while old:
            old.pop()  # the last reference: its destructor runs here
        if keep:  # one append: atomic, whichever thread ends first
            self.found.append({"lived_s": lived_s, "wait_s": self._now() - started})

    def join(self, timeout_s: float = 120.0) -> None:
        """Once the destructions still waiting are over (a wait is at most the tuning thread's
        longest period: core/epochs.py LONGEST_PERIOD_S)."""
        for thread in self._threads:
            thread.join(timeout_s)


def fit_epochs(train, steps_per_epoch: int, block_steps: int) -> int:
    """How many epochs `fit` must be given to time train.min_timed_steps samples: train.epochs,
    or more where those hold too few.

    Keras runs an epoch as ceil(steps_per_epoch / block_steps) blocks and calls back once per
    block, one sample (the data repeats, so an epoch's last block is a whole block too: Keras 3
    runs 20 steps for an epoch of 18 in blocks of 10). A block is warm-up in the first
    train.warmup_epochs epochs, or when it starts before step train.warmup_steps; the clock's
    warmup_seconds can only end warm-up sooner, and the clock stops as soon as it has enough.
    """
    blocks = math.ceil(steps_per_epoch / block_steps)
    warmup = max(train.warmup_epochs * blocks, math.ceil(train.warmup_steps / block_steps))
    return max(train.epochs, math.ceil((warmup + train.min_timed_steps) / blocks))


class StepClock:
    """Times every step, or every block of steps; says when the timed phase has what it needs.

    A step's time runs from batch begin to batch end, after reading the loss back to the host,
    so it covers finished device work and the wait for input data. With Keras'
    steps_per_execution > 1 (device.<kind>.block_steps; on GPUs, where reading the loss back
    after every step leaves the device idle between steps), Keras calls the callback once per
    block: the block's time over its steps is one sample of the step time. Warm-up is counted
    in steps (a block that starts inside it is warm-up), and ends sooner, after one step at
    least, once it has taken `warmup_seconds`: the first step compiles, and a step that long
    has settled by its end (the default grid's second warm-up steps after such a first one
    were about its process's timed median: bench/README.md, figures read off workflow runs).
    Given the cell's `epochs` (fit may be given more: `fit_epochs`), the end of the last of
    them ends fit once min_timed_steps samples are timed, and past them the sample that makes
    that many does. Framework-free: the Keras callback (`make_step_timer`) feeds it.
    """

    def __init__(
        self,
        warmup_steps: int,
        timed_steps: int | None,
        min_timed_steps: int,
        time_budget_s: float | None,
        warmup_epochs: int = 0,
        step_limit_s: float | None = None,
        warmup_seconds: float | None = None,
        epochs: int | None = None,
        now=time.perf_counter,
    ):
        self._now = now
        self.cell_epochs = epochs  # train.epochs; fit may be given more (fit_epochs)
        self.warmup_steps, self.warmup_epochs = warmup_steps, warmup_epochs
        self.warmup_limit_s = warmup_seconds
        self._warmup_wall = 0.0
        self.timed_steps, self.min_timed_steps = timed_steps, min_timed_steps
        self.time_budget_s, self.step_limit_s = time_budget_s, step_limit_s
        self.step = 0
        self.step_seconds: list[float] = []  # one per step, or per block (its mean step)
        self.rounds: list[int] = []  # the round of each timed sample, when arms take turns
        self.last_timed, self.last_seconds = False, 0.0  # the sample that just ended
        self.steps_per_sample = 1
        self.warmup_seconds: list[float] = []
        # Wall time of the timed steps, epoch by epoch: validation and the epoch's end are
        # not steps, so the span between epochs is left out.
        self.timed_wall_s = 0.0
        self._segment_start = self._segment_end = None
        self.epochs: list[dict[str, Any]] = []
        self.nonfinite: tuple[int, float] | None = None
        # The faster of the first two timed samples, when both were over the step limit.
        self.over_budget: float | None = None
        self.stopped_by = "epochs"  # until a rule below stops fit earlier
        self._t0 = self._epoch_t0 = 0.0
        self._epoch = 0
        # Each epoch's start from the third on: how long the last epoch's iterator lived (from
        # its first batch) and how long this epoch's first batch waited (core/epochs.py). The
        # second's is left out: the iterator before it lived through the compile, so when its
        # tuning thread started is not known.
        self.epoch_starts: list[dict[str, float]] = []
        # Where set (EpochEnds), the last epoch's iterator is destroyed off this clock, and its
        # thread adds the start here once the destruction is over.
        self.ends: EpochEnds | None = None
        self._first_batch: float | None = None
        self._last_first_batch: float | None = None

    def epoch_begin(self, epoch: int) -> None:
        self._epoch = epoch
        self._epoch_t0 = self._now()
        self._last_first_batch, self._first_batch = self._first_batch, None

    def epoch_end(self, epoch: int, logs: dict | None) -> bool:
        """Record the epoch; True when `fit` should stop: the cell's epochs are over and they
        timed enough (more epochs were given only in case they would not)."""
        self.close_segment()
        entry = {"epoch": epoch + 1, "wall_s": self._now() - self._epoch_t0}
        entry.update({k: float(v) for k, v in (logs or {}).items() if isinstance(v, int | float)})
        self.epochs.append(entry)
        last = self.cell_epochs is not None and epoch + 1 >= self.cell_epochs
        return last and len(self.step_seconds) >= self.min_timed_steps

    def batch_begin(self) -> None:
        self._t0 = self._now()
        if self._first_batch is None:
            self._first_batch = self._t0
            told = self._epoch >= 2 and self._last_first_batch is not None
            if self.ends is not None and self._epoch >= 1:
                lived = self._t0 - self._last_first_batch if told else 0.0
                self.ends.release(lived, keep=told)
            elif told:
                self.epoch_starts.append({"lived_s": self._epoch_t0 - self._last_first_batch,
                                          "wait_s": self._t0 - self._epoch_t0})

    def batch_end(self, loss: float, steps: int = 1) -> bool:
        """Record the step (or block of `steps` steps) that just ended; True when `fit` should
        stop."""
        now = self._now()
        warmup = self._in_warmup()
        self.step += steps
        per_step = (now - self._t0) / steps
        self.last_timed, self.last_seconds = not warmup, now - self._t0
        if warmup:
            self.warmup_seconds.append(per_step)
            self._warmup_wall += now - self._t0
        else:
            if self._segment_start is None:
                self._segment_start = self._t0
            self.step_seconds.append(per_step)
            self.steps_per_sample = max(self.steps_per_sample, steps)
            self._segment_end = now
        if not math.isfinite(loss):
            self.nonfinite = (self.step, loss)
            return True
        return self.enough(now)

    def _in_warmup(self) -> bool:
        if self._epoch < self.warmup_epochs:
            return True
        if self.step >= self.warmup_steps:
            return False
        settled = self.warmup_limit_s is not None and self._warmup_wall >= self.warmup_limit_s
        return not (self.step > 0 and settled)

    def enough(self, now: float) -> bool:
        """Whether the timed phase is done; `stopped_by` says which rule ended it."""
        n = len(self.step_seconds)
        if n <= OVER_BUDGET_SAMPLES and self._over_the_limit():
            if n == OVER_BUDGET_SAMPLES:
                self.over_budget, self.stopped_by = min(self.step_seconds), Outcome.OVER_BUDGET
                return True
            return False
        if n < self.min_timed_steps:
            return False
        if self.cell_epochs is not None and self._epoch >= self.cell_epochs:
            self.stopped_by = PAST_EPOCHS
            return True
        if self.timed_steps is not None and n >= self.timed_steps:
            self.stopped_by = "steps"
            return True
        running = now - self._segment_start if self._segment_start is not None else 0.0
        if self.time_budget_s is not None and self.timed_wall_s + running >= self.time_budget_s:
            self.stopped_by = "budget"
            return True
        return False

    def _over_the_limit(self) -> bool:
        """Every timed sample so far (the first OVER_BUDGET_SAMPLES at most) is over the
        step limit."""
        limit = self.step_limit_s
        return bool(limit) and all(s > limit for s in self.step_seconds[:OVER_BUDGET_SAMPLES])

    def close_segment(self) -> None:
        if self._segment_start is not None:
            self.timed_wall_s += self._segment_end - self._segment_start
            self._segment_start = None

    def train_end(self) -> None:
        """`fit` is over: a fit that ran out of epochs short of the minimum says so (fit was
        given fewer epochs than `fit_epochs`)."""
        self.close_segment()
        n, least = len(self.step_seconds), self.min_timed_steps
        if self.stopped_by == "epochs" and 0 < n < least and self.nonfinite is None:
            self.stopped_by = f"epochs ({n} of train.min_timed_steps={least} timed)"


def after_turn(clock: StepClock, turns: Rounds, arm: str, stop: bool) -> None:
    """After each sample of an arm taking turns: tell the rounds, keep the sample's round, and
    when the turn has passed to another arm, close the clock's timed span (its wall time and
    its budget count its own turns only). A turn's end closes it even where the same arm goes
    on (an arm alone): the host check between turns is no step's time."""
    ended = turns.turns
    round_ = turns.end(arm, clock.last_timed, clock.last_seconds, done=stop)
    if clock.last_timed:
        clock.rounds.append(round_)
    if turns.turns != ended:  # the turn passed on, or came back to this arm alone
        clock.close_segment()


def make_step_timer(clock: StepClock, turns: Rounds | None = None, arm: str | None = None):
    """A Keras callback around a StepClock (Keras is imported here: only once the backend is
    chosen). With `turns`, the arm waits for its turn before each sample and passes the turn
    on when its turn is over."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.clock = clock
            self.first_batch = 0

        def on_epoch_begin(self, epoch, logs=None):
            # An epoch's start, where fit destroys the last epoch's iterator, runs in the arm's
            # turn, as it does in a fit of its own: no other arm computes meanwhile.
            if turns is not None:
                turns.begin(arm)
            self.clock.epoch_begin(epoch)

        def on_epoch_end(self, epoch, logs=None):
            if self.clock.epoch_end(epoch, logs):
                self.model.stop_training = True  # Keras checks it after each epoch too

        def on_train_batch_begin(self, batch, logs=None):
            if turns is not None:
                turns.begin(arm)
            self.first_batch = batch
            self.clock.batch_begin()

        def on_train_batch_end(self, batch, logs=None):
            loss = float((logs or {}).get("loss", 0.0))  # reading it back waits for the device
            # Keras passes a block's first step to begin and its last to end.
            stop = self.clock.batch_end(loss, steps=batch - self.first_batch + 1)
            if stop:
                self.model.stop_training = True
            if turns is not None:
                after_turn(self.clock, turns, arm, stop)
                if stop:  # what fit does after its last step waits for the others' steps
                    turns.wait_done()

        def on_test_begin(self, logs=None):
            # A validation pass between epochs waits for the arm's turn and runs in it, never
            # beside another arm's timed steps (its time lies between two steps: no step's).
            if turns is not None:
                turns.begin(arm)

        def on_train_end(self, logs=None):
            self.clock.train_end()
            if turns is not None:
                turns.leave(arm)

    return StepTimer()
