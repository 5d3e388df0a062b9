"""The step clock: warm-up excluded; timing ends at the precision asked for, a count, a budget,
or after a first timed step that alone is over the limit."""

import itertools

import pytest

from mptbench.engine.timing import StepClock


class FakeTime:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _run(clock: StepClock, time: FakeTime, durations) -> int:
    """Feed step durations until the clock says stop; the number of steps fed."""
    clock.epoch_begin(0)
    for n, seconds in enumerate(durations, start=1):
        clock.batch_begin()
        time.t += seconds
        if clock.batch_end(loss=1.0):
            return n
    return n


def test_steady_steps_stop_once_the_median_is_known_to_the_precision():
    time = FakeTime()
    clock = StepClock(2, 100, 10, None, precision=0.02, now=time)
    steady = itertools.cycle([0.100, 0.101, 0.099, 0.1005])
    fed = _run(clock, time, (next(steady) for _ in range(200)))
    assert clock.stopped_by == "precision"
    assert fed == 2 + 10  # warm-up, then the minimum: already precise enough
    assert clock.half_width <= 0.02


def test_noisy_steps_run_to_the_count():
    time = FakeTime()
    clock = StepClock(0, 30, 10, None, precision=0.001, now=time)
    noisy = itertools.cycle([0.1, 0.3, 0.05, 0.2])
    _run(clock, time, (next(noisy) for _ in range(100)))
    assert clock.stopped_by == "steps" and len(clock.step_seconds) == 30
    assert clock.half_width > 0.001


def test_the_budget_stops_timing():
    time = FakeTime()
    clock = StepClock(0, None, 3, 1.0, now=time)
    _run(clock, time, [0.3] * 100)
    assert clock.stopped_by == "budget" and len(clock.step_seconds) == 4


def test_a_first_timed_step_over_the_limit_stops_there_and_is_kept():
    time = FakeTime()
    clock = StepClock(1, 100, 5, None, step_limit_s=2.0, now=time)
    fed = _run(clock, time, [30.0, 2.5, 2.5, 2.5])
    assert fed == 2 and clock.stopped_by == "over_budget"
    assert clock.over_budget == 2.5 and clock.step_seconds == [2.5]


def test_nonfinite_loss_stops_at_once():
    time = FakeTime()
    clock = StepClock(0, 10, 1, None, now=time)
    clock.epoch_begin(0)
    clock.batch_begin()
    assert clock.batch_end(float("nan"))
    assert clock.nonfinite[0] == 1


def test_a_block_is_one_sample_of_its_mean_step_and_warm_up_counts_steps():
    time = FakeTime()
    clock = StepClock(warmup_steps=2, timed_steps=3, min_timed_steps=1, time_budget_s=None,
                      now=time)  # fmt: skip
    clock.epoch_begin(0)
    stops = []
    for seconds in (2.0, 0.4, 0.8, 0.4):  # blocks of 4 steps; the first holds the warm-up
        clock.batch_begin()
        time.t += seconds
        stops.append(clock.batch_end(loss=1.0, steps=4))
        time.t += 0.01  # the host's work between blocks is not step time
    clock.close_segment()
    assert clock.warmup_seconds == [0.5]  # a block that starts in the warm-up is warm-up
    assert clock.step_seconds == pytest.approx([0.1, 0.2, 0.1]) and clock.steps_per_sample == 4
    assert stops == [False, False, False, True] and clock.stopped_by == "steps"
    assert clock.timed_wall_s == pytest.approx(0.4 + 0.8 + 0.4 + 2 * 0.01)
