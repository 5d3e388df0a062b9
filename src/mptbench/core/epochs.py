"""What `fit` waits for at an epoch's start, and what that wait comes to in a whole run.

Keras' `fit` on a dataset without `.repeat()` makes a new iterator each epoch and destroys the
last one as the next epoch begins. In TensorFlow 2.21 an iterator of an autotuned tf.data
pipeline (the default: `AUTOTUNE` anywhere, or `options.autotune.enabled`) has a thread that
re-tunes it on a period that starts at 10 ms and doubles up to 60 s. Destroying the iterator
wakes that thread to end; in some epochs it goes back to sleep for the rest of its period
instead, and the destruction waits for it, the machine idle: the epoch starts late by that rest
(bench/README.md, bench_epochs.py: TensorFlow's own log shows the thread waiting again). Why, as
TensorFlow's source reads: destroying the iterator cancels it, which runs the cancellation
callbacks its ops registered one after another (the tuning thread's wakes it) and marks the
iterator cancelled only after the last (framework/cancellation.cc `StartCancel`); a thread
that wakes and looks before that mark sees no cancellation and sleeps out its period
(framework/model.cc `OptimizeLoop`). Which epochs wait is that race, so it turns on what the
iterator's other ops do as it ends, and on how soon the woken thread runs; how long is not a
race: the rest of the period the old iterator's thread is in, which depends on how long that
iterator lived. So an epoch's start waits from nothing to about
as long as the last epoch took (the periods double), and a run of short epochs waits in
proportion to a run of long ones only where both lie alike in the periods.

So a timing process goes through several iterators, as `fit` does, and times what destroying
each waited, in a thread of its own (engine/timing.py EpochEnds: the wait holds up no step, and
on the default grid it was as long as the timed steps); a whole run is projected from two
measured things: the share of the epoch
starts that waited, and the rest of the period at the whole run's own epoch length. That rest is
a cliff: an epoch just past a wake waits nearly a whole period, one just before it almost
nothing (bench_epochs on the AMD EPYC: float32's iterators lived 9.2-9.6 s in one process and
10.3-11.3 s in the next, either side of the wake at 10.23 s, their rests 0.6-1.0 s against
9.2-10.2 s). A run's epochs are no more certain than the processes that projected them, so the
rest is averaged over the epoch lengths they spread over (`expected_rest`), and where a wake lies
within that spread the run's waits are named as the two they may be (`wake_within`). Built with
`.repeat()` and `steps_per_epoch`, or with `options.autotune.enabled = False`, a `fit` keeps one
iterator or none of these threads, and no epoch waits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# tf.data's autotuning period in TensorFlow 2.21 (tensorflow/core/framework/model.cc): the
# first wait and the most any wait lasts; each wait doubles the one before.
FIRST_PERIOD_S = 0.010
LONGEST_PERIOD_S = 60.0
# An epoch's start that waited at least half the predicted rest waited for the thread (with a
# floor: a rest this short cannot be told from the iterator's own start).
WAITED_SHARE = 0.5
SHORTEST_TOLD_S = 0.05
# How far a run's epoch length is taken to spread around its projection, at the least: one
# process's own later epochs lay within 2% of their mean (bench_epochs, the AMD EPYC); the
# processes' spread counts where it is wider (jobs/fullrun.py).
EPOCH_SPREAD_FLOOR = 0.02
# The averaging: a log-normal spread, read at this many standard deviations either side.
_SPREAD_SDS = 3.0
_SPREAD_POINTS = 121
# What to try, said where epochs waited.
REMEDY = ("build the dataset with .repeat() and give fit steps_per_epoch (one iterator for the "
          "whole run), or set options.autotune.enabled = False")
# Said beside the share: it is the timing epochs' own, and a user's feed may lose the race more
# often (bench/README.md, bench_fullrun: a fit from an image folder waited at 0.72 of its later
# starts where the pipeline's 1 s epochs waited at 0.42).
SHARE_CAVEAT = ("How often a start waits is a race at the last iterator's end, set by the input "
                "pipeline's ops and the machine, not by the model: a fit from your own dataset "
                "may wait more often than these timing epochs did")


def next_wake(lived_s: float) -> float:
    """When an iterator's tuning thread, started `lived_s` ago or earlier, next wakes: the end
    of the period it is in, counted from the thread's start."""
    wake, period = 0.0, FIRST_PERIOD_S
    while wake + period <= lived_s:
        wake += period
        period = min(2 * period, LONGEST_PERIOD_S)
    return wake + period


def rest_of_period(lived_s: float) -> float:
    """What destroying an iterator that lived `lived_s` waits where its thread sleeps again."""
    return next_wake(lived_s) - lived_s


@dataclass(frozen=True)
class Boundary:
    """One epoch's start in a timing process: how long the last epoch's iterator had lived
    (from its first batch to this epoch's start), how long this epoch's first batch waited
    (from the epoch's start), and the rest of the period that iterator's thread was in."""

    lived_s: float
    wait_s: float

    @property
    def rest_s(self) -> float:
        return rest_of_period(self.lived_s)

    @property
    def waited(self) -> bool:
        return self.wait_s >= max(SHORTEST_TOLD_S, WAITED_SHARE * self.rest_s)

    @property
    def telling(self) -> bool:
        """Whether it tells a wait from none: a rest long enough to see, or a wait seen."""
        return self.waited or self.rest_s >= 2 * SHORTEST_TOLD_S


def boundaries(rows: Iterable[dict]) -> list[Boundary]:
    """Boundaries from a record's rows ({"lived_s", "wait_s"})."""
    return [Boundary(float(r["lived_s"]), float(r["wait_s"])) for r in rows]


def waited_share(found: list[Boundary]) -> float | None:
    """The share of the telling epoch starts that waited; None without one."""
    telling = [b for b in found if b.telling]
    return sum(b.waited for b in telling) / len(telling) if telling else None


def expected_rest(epoch_s: float, spread: float = 0.0) -> float:
    """The rest of the period at an epoch length log-normal around `epoch_s`, `spread` its
    standard deviation (of the logarithm, about the relative spread): `rest_of_period`
    averaged, so that a projection near a wake gives the mean of the two sides, weighted by how
    likely each is, not the one side its point estimate happens to lie on."""
    if spread <= 0:
        return rest_of_period(epoch_s)
    total = weights = 0.0
    for i in range(_SPREAD_POINTS):
        z = _SPREAD_SDS * (2 * i / (_SPREAD_POINTS - 1) - 1)
        weight = math.exp(-z * z / 2)
        total += weight * rest_of_period(epoch_s * math.exp(spread * z))
        weights += weight
    return total / weights


def wake_within(epoch_s: float, spread: float) -> float | None:
    """The tuning thread's wake within two `spread`s of `epoch_s` (the epoch lengths a run may
    have), where one lies there: its epochs' starts then wait nearly nothing or nearly a whole
    period. None where no wake is that near."""
    low, high = epoch_s * math.exp(-2 * spread), epoch_s * math.exp(2 * spread)
    wake = next_wake(low)
    return wake if wake <= high else None


def period_from(wake_s: float) -> float:
    """The period the thread sleeps from `wake_s`, one of its wakes, on: what a start just past
    that wake waits."""
    return next_wake(wake_s + FIRST_PERIOD_S / 2) - wake_s


def expected_wait(share: float | None, epoch_s: float, spread: float = 0.0) -> float | None:
    """What an epoch start of a run whose epochs take `epoch_s` (spread as `expected_rest`
    says) waits on average, where `share` of the starts wait the rest of the period; None
    where the share is not known."""
    return None if share is None else share * expected_rest(epoch_s, spread)
