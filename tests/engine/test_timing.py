"""The step clock: warm-up excluded; timing ends at a count or a budget (never before the
minimum), or after a first timed step that alone is over the limit; with arms taking turns,
each arm's budget and wall time count its own turns only. Where a cell's epochs hold too few
samples (blocks of 10 steps on a GPU at a large batch), fit runs on past them, only until the
minimum is timed. A one-epoch timing run goes through epochs of its own, each a new iterator,
and the clock keeps each epoch's start."""

import itertools
from dataclasses import replace

import pytest
from workflow_helpers import composed

from mptbench.engine.repeat import FitLength, fit_length, step_clock
from mptbench.engine.rounds import Rounds
from mptbench.engine.timing import PAST_EPOCHS, EpochEnds, StepClock, after_turn, fit_epochs
from mptbench.plan import Cell, run_config

IMAGENETTE_TRAIN = 9469  # imagenette2-320's training images: 18 steps an epoch at batch 512


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


def _keras_fit(clock: StepClock, time: FakeTime, fit: FitLength, block: int, seconds=None,
               start_wait=None) -> list:
    """Keras 3's fit loop (keras/src/backend/tensorflow/trainer.py) around the clock, as
    make_step_timer's callback feeds it: an epoch's blocks start at range(0, steps, block)
    (keras/src/trainers/epoch_iterator.py), each called back with its first and last step;
    stop_training is read after each block and after each epoch. On data that repeats
    (steps_per_epoch given) every block is whole; on data that ends each epoch (an epoch of
    fit.epoch_batches, or of the split's whole batches) the last block holds what is left.
    `seconds(i)` is block i's time per step (0.1 s); `start_wait(epoch)` what the epoch's
    first batch waits after its start (0). The blocks run, as (epoch, first step)."""
    steps = fit.steps_per_epoch or fit.epoch_batches or IMAGENETTE_TRAIN // 512
    ran = []
    for epoch in range(fit.epochs):
        clock.epoch_begin(epoch)
        time.t += start_wait(epoch) if start_wait else 0.0
        stop = False
        for begin in range(0, steps, block):
            end = begin + block - 1 if fit.steps_per_epoch else min(begin + block, steps) - 1
            clock.batch_begin()
            time.t += (end - begin + 1) * (seconds(len(ran)) if seconds else 0.1)
            ran.append((epoch, begin))
            if stop := clock.batch_end(loss=1.0, steps=end - begin + 1):
                break
        time.t += 2.0  # validation and the epoch's end: not step time
        if clock.epoch_end(epoch, {"loss": 1.0}) or stop:
            break
    clock.train_end()
    return ran


def _cell(device: str, batch_size: int = 512, **train):
    """The default experiment's run of a cell (conf/, conf/train/benchmark.yaml), train changed."""
    cfg = composed(None, "policy=[float32]")
    cell = Cell("local", "seed_convnet", "tensorflow", "pypi", device, "float32", batch_size)
    run = run_config(cfg, cell)
    return replace(run, train=replace(run.train, **train))


def _one_iterator(device: str, batch_size: int = 512, **train):
    """A cell whose one-epoch timing run keeps one iterator (train.epoch_seconds null)."""
    return _cell(device, batch_size, epoch_seconds=None, **train)


def _engine_clock(run, time: FakeTime, fit: FitLength | None = None) -> StepClock:
    own = fit is not None and fit.own_epochs
    clock = step_clock(run, epochs=not own)  # the engine's clock for the cell, on test time
    clock._now = time
    return clock


def test_a_gpu_cell_at_batch_512_times_its_minimum_past_its_one_epoch():
    """Blocks of 10 steps, 18 steps an epoch: the epoch is 2 blocks, the first warm-up, so
    one epoch times 1 sample; fit is given a second and stops once 3 are timed."""
    run = _one_iterator("gpu0")
    assert (run.block_steps, run.train.epochs, run.train.min_timed_steps) == (10, 1, 3)
    fit = fit_length(run, IMAGENETTE_TRAIN)
    assert fit.fit == {"epochs": 2, "steps_per_epoch": 18} and not fit.per_epoch
    time = FakeTime()
    clock = _engine_clock(run, time)
    ran = _keras_fit(clock, time, fit, run.block_steps)
    assert ran == [(0, 0), (0, 10), (1, 0), (1, 10)]
    assert len(clock.step_seconds) == 3 and clock.steps_per_sample == 10
    assert clock.stopped_by == PAST_EPOCHS == "min_timed_steps past epochs"
    assert [e["epoch"] for e in clock.epochs] == [1, 2]  # validation after whole epochs
    # One epoch, as fit was given before: one sample, and the cell says it is short.
    time = FakeTime()
    short = _engine_clock(run, time)
    _keras_fit(short, time, replace(fit, epochs=1), run.block_steps)
    assert short.stopped_by == "epochs (1 of train.min_timed_steps=3 timed)"


def test_a_cpu_cell_keeping_one_iterator_times_within_its_epoch():
    """Steps one by one: an epoch of 18 steps holds its 2 warm-up steps and 16 timed ones."""
    run = _one_iterator("cpu")
    fit = fit_length(run, IMAGENETTE_TRAIN)
    assert run.block_steps == 1 and fit.fit == {"epochs": 1, "steps_per_epoch": 18}
    time = FakeTime()
    clock = _engine_clock(run, time)
    assert len(_keras_fit(clock, time, fit, 1)) == 18
    assert clock.stopped_by == "epochs" and len(clock.step_seconds) == 16
    assert clock.epoch_starts == []


@pytest.mark.parametrize("predicted, block, samples", [
    (0.1, 1, 10),  # 1 s of 0.1 s steps
    (5.0, 1, 1),  # a step longer than an epoch: an epoch a step
    (0.01, 10, 10),  # a GPU's blocks of 10 steps: 10 blocks, 100 steps
    (None, 1, 5),  # no probe: train.round_samples
])
def test_a_one_epoch_timing_run_goes_through_epochs_of_about_epoch_seconds(
        predicted, block, samples):
    run = _cell("gpu0" if block > 1 else "cpu", batch_size=32)
    assert run.block_steps == block and run.train.epoch_seconds == 1
    fit = fit_length(run, IMAGENETTE_TRAIN, predicted)
    assert fit.per_epoch and fit.own_epochs and fit.steps_per_epoch is None  # a new iterator
    assert fit.epoch_batches == samples * block  # ... each epoch, of this many batches
    # Epochs enough for the warm-up and train.timed_steps (or the budget: the clock stops fit
    # before), and no more than the cell's own epoch holds (295 steps: 30 blocks on the GPU).
    most = min(295 if block == 1 else 30, 2 // block + run.train.timed_steps)
    assert most <= fit.epochs * samples < most + samples


def test_each_epoch_start_is_kept_after_the_second_with_how_long_its_iterator_lived():
    """Epochs of 10 steps of 0.1 s, 2 s of epoch's end after each; epoch k's first batch
    waits 0.5 k s. The start of the second epoch is left out (the iterator before it lived
    through the compile); timing ends at train.timed_steps (100), in the eleventh epoch, the
    last fit was given."""
    run = _cell("cpu", batch_size=32)
    fit = fit_length(run, IMAGENETTE_TRAIN, predicted_s=0.1)
    time = FakeTime()
    clock = _engine_clock(run, time, fit)
    ran = _keras_fit(clock, time, fit, 1, start_wait=lambda epoch: 0.5 * epoch)
    assert len(ran) == 102 and clock.stopped_by == "steps" and len(clock.step_seconds) == 100
    starts = clock.epoch_starts
    assert [round(s["wait_s"], 6) for s in starts] == [0.5 * k for k in range(2, 11)]
    assert all(s["lived_s"] == pytest.approx(10 * 0.1 + 2.0) for s in starts)
    assert clock.timed_wall_s == pytest.approx(sum(clock.step_seconds))  # no wait in it


def test_an_iterator_destroyed_off_the_clock_holds_up_no_step_and_its_wait_is_timed():
    """Each epoch's iterator waits 0.3 s in its destructor (a tuning thread sleeping out its
    period). Released at the next epoch's first batch, the destruction runs in a thread of its
    own: the epoch goes on at once, and the wait is still an epoch start's, after the second."""
    import time as clock_time

    class Slow:
        def __next__(self):
            raise StopIteration

        def __iter__(self):
            return self

        def __del__(self):
            clock_time.sleep(0.3)

    class Data:
        def __iter__(self):
            return Slow()

    found = []
    ends = EpochEnds(found)
    data = ends.track(Data())
    assert isinstance(data, Data)
    held = []
    for epoch in range(4):  # fit: a new iterator each epoch, the last one let go of
        held = [iter(data)]
        if epoch >= 1:
            started = clock_time.perf_counter()
            ends.release(lived_s=1.5 * epoch, keep=epoch >= 2)
            assert clock_time.perf_counter() - started < 0.25  # not waited for here
    ends.join()
    assert [s["lived_s"] for s in found] == [3.0, 4.5]
    assert all(0.29 <= s["wait_s"] < 1.0 for s in found)
    assert held  # the newest stays with fit


def test_a_training_run_runs_its_own_epochs_each_a_new_iterator():
    """train.epochs 3 of train.steps_per_epoch 40: the data ends each epoch (fit gets no
    steps_per_epoch, so it makes a new iterator), the clock stops past the cell's epochs."""
    run = _cell("cpu", batch_size=32, epochs=3, steps_per_epoch=40)
    fit = fit_length(run, IMAGENETTE_TRAIN, predicted_s=0.1)
    assert (fit.epochs, fit.steps_per_epoch, fit.per_epoch, fit.epoch_batches) == (
        3, None, True, 40)
    assert not fit.own_epochs
    random = fit_length(run, IMAGENETTE_TRAIN, 0.1, synthetic=True)
    assert random.fit == {"epochs": 3, "steps_per_epoch": 40} and not random.per_epoch


@pytest.mark.parametrize(
    "train, epochs, blocks",
    [
        ({"min_timed_steps": 4}, 3, 5),  # 1 + 2 + 1 of the third epoch's 2
        ({"warmup_epochs": 1}, 3, 5),  # the one epoch is warm-up: 2 + 2 + 1
        ({"steps_per_epoch": 10}, 4, 4),  # a user's epoch of one block: 1 warm-up + 3
        ({"steps_per_epoch": 5}, 4, 4),  # shorter than a block: Keras runs a whole block
    ],
)
def test_past_the_epochs_fit_times_the_minimum_and_no_more(train, epochs, blocks):
    run = _one_iterator("gpu0", **train)
    fit = fit_length(run, IMAGENETTE_TRAIN)
    assert fit.epochs == epochs
    time = FakeTime()
    clock = _engine_clock(run, time)
    assert len(_keras_fit(clock, time, fit, 10)) == blocks
    assert len(clock.step_seconds) == run.train.min_timed_steps
    assert clock.stopped_by == PAST_EPOCHS


def test_a_training_runs_epochs_end_their_data_and_fit_times_past_them_to_the_minimum():
    """2 epochs of 18 steps in blocks of 10 and 8 (the data ends: the last block holds what
    is left), 15 warm-up steps: 2 warm-up blocks, then 1 + 2 timed, past the 2 epochs."""
    run = _cell("gpu0", warmup_steps=15, epochs=2)
    fit = fit_length(run, IMAGENETTE_TRAIN)
    assert fit.epochs == 3 and fit.per_epoch
    time = FakeTime()
    clock = _engine_clock(run, time, fit)
    ran = _keras_fit(clock, time, fit, 10)
    assert ran == [(0, 0), (0, 10), (1, 0), (1, 10), (2, 0)]
    assert len(clock.step_seconds) == 3 and clock.stopped_by == PAST_EPOCHS


def test_epochs_that_timed_enough_end_fit_though_it_was_given_more():
    """Warm-up counted for 2 blocks ends after the first (it took warmup_seconds): the cell's
    2 epochs time 3 samples, and fit stops at their end, as it would have without more."""
    run = _cell("gpu0", warmup_steps=15, epochs=2)
    fit = fit_length(run, IMAGENETTE_TRAIN)
    time = FakeTime()
    clock = _engine_clock(run, time, fit)
    ran = _keras_fit(clock, time, fit, 10, seconds=lambda i: 1.2 if i == 0 else 0.1)
    assert fit.epochs == 3 and len(ran) == 4
    assert clock.stopped_by == "epochs" and len(clock.step_seconds) == 3


def test_within_the_epochs_the_count_and_the_budget_stop_as_before():
    """Enough blocks in one epoch: fit is given the cell's epoch, and the budget (20 s a
    repeat) or timed_steps ends it inside."""
    time = FakeTime()
    run = _one_iterator("gpu0", batch_size=32)  # 295 steps: 30 blocks
    fit = fit_length(run, IMAGENETTE_TRAIN)
    clock = _engine_clock(run, time)
    _keras_fit(clock, time, fit, 10, seconds=lambda i: 0.5)
    assert fit.epochs == 1 and clock.stopped_by == "budget" and len(clock.step_seconds) == 4
    time = FakeTime()
    clock = _engine_clock(replace(run, train=replace(run.train, timed_steps=5)), time)
    _keras_fit(clock, time, fit, 10)
    assert clock.stopped_by == "steps" and len(clock.step_seconds) == 5


@pytest.mark.parametrize(
    "epochs, warmup_epochs, warmup_steps, least, steps, block, expected",
    [
        (1, 0, 2, 3, 18, 10, 2),  # Imagenette at batch 512 on a GPU
        (1, 0, 2, 3, 18, 1, 1),  # the same on a CPU: 16 timed
        (1, 0, 2, 3, 20, 10, 2),  # a whole number of blocks: the same
        (5, 0, 2, 3, 18, 10, 5),  # more epochs than needed are kept
        (20, 19, 0, 3, 18, 10, 21),  # the 2020 experiment's timed 20th epoch, in 2 blocks
        (1, 0, 0, 0, 18, 10, 1),
    ],
)
def test_fit_epochs(epochs, warmup_epochs, warmup_steps, least, steps, block, expected):
    warmup = {"warmup_epochs": warmup_epochs, "warmup_steps": warmup_steps}
    train = _cell("cpu", epochs=epochs, min_timed_steps=least, **warmup).train
    assert fit_epochs(train, steps, block) == expected


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


def test_two_first_timed_steps_over_the_limit_stop_there_and_are_kept():
    time = FakeTime()
    clock = StepClock(1, 100, 5, None, step_limit_s=2.0, now=time)
    fed = _run(clock, time, [30.0, 2.75, 2.5, 2.5, 2.5])
    assert fed == 3 and clock.stopped_by == "over_budget"
    assert clock.over_budget == 2.5 and clock.step_seconds == [2.75, 2.5]


def test_one_slow_first_timed_step_is_an_outlier_not_over_budget():
    time = FakeTime()
    clock = StepClock(1, 5, 3, None, step_limit_s=2.0, now=time)
    fed = _run(clock, time, [30.0, 3.0, 1.5, 1.5, 1.5, 1.5, 1.5])
    assert clock.over_budget is None and clock.stopped_by == "steps"
    assert fed == 6 and clock.step_seconds == [3.0, 1.5, 1.5, 1.5, 1.5]


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
                      now=time)
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


def test_the_host_check_between_an_arm_alone_s_turns_is_no_step_time():
    """One arm alone takes turn after turn; the host's check runs as each turn ends (0.3 s
    here) and its time is neither in a step nor in the arm's timed wall time."""
    time = FakeTime()
    turns = Rounds(["a"], samples=2, between_turns=lambda: setattr(time, "t", time.t + 0.3))
    clock = StepClock(1, 6, 1, None, now=time)
    clock.epoch_begin(0)
    while turns.live:
        clock.batch_begin()
        time.t += 0.1
        after_turn(clock, turns, "a", clock.batch_end(1.0))
    assert turns.turns == 3 and len(clock.step_seconds) == 6
    assert clock.timed_wall_s == pytest.approx(sum(clock.step_seconds))
