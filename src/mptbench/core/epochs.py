"""What `fit` waits for at an epoch's start, and what that wait comes to in a whole run.

Keras' `fit` on a dataset without `.repeat()` makes a new iterator each epoch and destroys the
last one as the next epoch begins. In TensorFlow 2.21 an iterator of an autotuned tf.data
pipeline (the default: `AUTOTUNE` anywhere, or `options.autotune.enabled`) has a thread that
re-tunes it on a period that starts at 10 ms and doubles up to 60 s. Destroying the iterator
wakes that thread to end; in some epochs it goes back to sleep for the rest of its period
instead, and the destruction waits for it, the machine idle: the epoch starts late by that rest
(bench/README.md, bench_epochs.py: TensorFlow's own log shows the thread waiting again). Which
epochs wait is a race; how long is not: the rest of the period the old iterator's thread is in,
which depends on how long that iterator lived. So an epoch's start waits from nothing to about
as long as the last epoch took (the periods double), and a run of short epochs waits in
proportion to a run of long ones only where both lie alike in the periods.

So a timing process goes through several iterators, as `fit` does (engine/timing.py times each
epoch's start), and a whole run is projected from two measured things: the share of the epoch
starts that waited, and the rest of the period at the whole run's own epoch length. Built with
`.repeat()` and `steps_per_epoch`, or with `options.autotune.enabled = False`, a `fit` keeps one
iterator or none of these threads, and no epoch waits.
"""

from __future__ import annotations

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
# What to try, said where epochs waited.
REMEDY = ("build the dataset with .repeat() and give fit steps_per_epoch (one iterator for the "
          "whole run), or set options.autotune.enabled = False")


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


def expected_wait(share: float | None, epoch_s: float) -> float | None:
    """What an epoch start of a run whose epochs take `epoch_s` waits on average, where
    `share` of the starts wait the rest of the period; None where the share is not known."""
    return None if share is None else share * rest_of_period(epoch_s)
