"""The step clock: warm-up excluded; timing ends at a count or a budget (never before the
minimum), or after a first timed step that alone is over the limit; with arms taking turns,
each arm's budget and wall time count its own turns only."""

import itertools

import pytest

from mptbench.engine.rounds import Rounds
from mptbench.engine.timing import StepClock, after_turn


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


def test_steps_are_timed_to_the_count_however_steady_they_are():
    """No stop on a within-process precision: three steady steps say nothing of the next
    process (the interval is over processes)."""
    time = FakeTime()
    clock = StepClock(2, 30, 10, None, now=time)
    steady = itertools.cycle([0.100, 0.101, 0.099, 0.1005])
    fed = _run(clock, time, (next(steady) for _ in range(200)))
    assert clock.stopped_by == "steps" and fed == 2 + 30 and len(clock.step_seconds) == 30


def test_the_minimum_holds_against_the_budget():
    time = FakeTime()
    clock = StepClock(0, 100, 5, 0.1, now=time)
    _run(clock, time, [0.3] * 100)
    assert clock.stopped_by == "budget" and len(clock.step_seconds) == 5


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


def test_warm_up_ends_after_one_step_at_least_once_it_took_warmup_seconds():
    time = FakeTime()
    slow = StepClock(3, 10, 2, None, warmup_seconds=10.0, now=time)
    _run(slow, time, [12.0, 9.0, 9.0])  # the first step compiled for 12 s: warm-up is over
    assert slow.warmup_seconds == [12.0] and slow.step_seconds == [9.0, 9.0]
    time = FakeTime()
    fast = StepClock(3, 10, 2, None, warmup_seconds=10.0, now=time)
    _run(fast, time, [4.0, 5.0, 2.0, 2.0, 2.0])  # 9 s after two steps: the third is warm-up
    assert fast.warmup_seconds == [4.0, 5.0, 2.0] and fast.step_seconds == [2.0, 2.0]
    time = FakeTime()
    none = StepClock(2, 10, 2, None, warmup_seconds=0.001, now=time)
    _run(none, time, [5.0, 1.0, 1.0])  # never fewer than one warm-up step
    assert none.warmup_seconds == [5.0] and len(none.step_seconds) == 2


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


def test_arms_taking_turns_count_their_own_turns_only():
    """Two arms, turns of 2 steps: each arm's budget and wall time leave out the other's
    turns, each timed step keeps its round, and the rounds alternate AB, BA, AB."""
    time = FakeTime()
    turns = Rounds(["a", "b"], samples=2)
    clocks = {name: StepClock(1, 6, 1, 0.45, now=time) for name in ("a", "b")}
    order = []
    while turns.live:
        arm = turns.current
        order.append(arm)
        clocks[arm].epoch_begin(0) if clocks[arm].step == 0 else None
        clocks[arm].batch_begin()
        time.t += 0.1 if arm == "a" else 0.05
        after_turn(clocks[arm], turns, arm, clocks[arm].batch_end(1.0))
    a, b = clocks["a"], clocks["b"]
    assert order[:7] == ["a", "a", "a", "b", "b", "b", "b"]  # warm-up + 2, then b's, then b's
    # a's budget (0.45 s of its own timed steps) ends it after 5; b's steps are shorter: 6.
    assert (a.stopped_by, len(a.step_seconds)) == ("budget", 5)
    assert (b.stopped_by, len(b.step_seconds)) == ("steps", 6)
    assert a.timed_wall_s == pytest.approx(sum(a.step_seconds))
    assert b.timed_wall_s == pytest.approx(sum(b.step_seconds))
    assert a.rounds == [0, 0, 1, 1, 2] and b.rounds == [0, 0, 1, 1, 2, 2]
