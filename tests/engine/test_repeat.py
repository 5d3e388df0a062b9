"""One repeat of a comparison group, trained for real in this process: its arms' steps, their
rounds, and outcomes."""

from dataclasses import replace

import pytest
from workflow_helpers import smoke_cell_run as smoke_run

from mptbench.core.contract import RepeatJob
from mptbench.core.policies import Policy
from mptbench.engine.repeat import PHASES, Phases, process_age_s, profiled_steps, run_repeat
from mptbench.engine.timing import PAST_EPOCHS

pytestmark = pytest.mark.slow


def _group(session, runs, prepared, progress=None, profile_dirs=()):
    job = RepeatJob("unused.json", tuple(runs), "prepared.json", 0, profile_dirs, progress)
    return run_repeat(session, job, prepared)


def _repeat(session, run, prepared):
    """A group of one arm: the arm's result."""
    (arm,) = _group(session, [run], prepared).arms
    return arm


def test_a_repeat_times_its_steps_and_its_twin(tf, prepared32):
    # Warm-up counted in steps alone: a first step of 10 s or more (a busy host) would end it
    # after one step (train.warmup_seconds; test_timing holds that rule).
    run = smoke_run(epochs=2, steps_per_epoch=4, warmup_steps=2, timed_steps=6, min_timed_steps=3,
                    warmup_seconds=None)
    result = _repeat(tf, run, prepared32)
    assert result.outcome == "ok" and result.reason is None
    assert len(result.step_s) == 6  # 8 steps in all, the first 2 warm-up
    assert result.stopped_by == "steps"
    assert len(result.warmup_s) == 2
    assert [e["epoch"] for e in result.epochs] == [1, 2]
    assert "val_accuracy" in result.epochs[-1]
    assert 1 <= len(result.synthetic_step_s) <= run.train.synthetic_max_steps
    assert result.fingerprint["tensorflow"] == "2.21.0"
    assert result.fingerprint["gpu"] is None and result.fingerprint["xla"] is False


@pytest.mark.parametrize("input_share, twin", [(0.5, True), (0.01, False)])
def test_a_twin_runs_only_where_the_input_alone_could_set_the_pace(
    tf, prepared32, monkeypatch, input_share, twin
):
    """synthetic_twin true: the input pipeline alone is timed; at half the step it could make
    the step 2x its compute (the twin runs), at 1% at most 1.01x (no twin, and why)."""
    from mptbench.engine import feed

    measured = {}
    real = feed.input_cost

    def cost(session, run, prepared, **kw):
        measured["real"] = real(session, run, prepared, **kw)
        step = measured["step"]
        return input_share * step, input_share * step / 2

    monkeypatch.setattr(feed, "input_cost", cost)
    run = smoke_run(epochs=1, steps_per_epoch=8, warmup_steps=2, timed_steps=4,
                    min_timed_steps=3, validate=False, synthetic_twin=True)
    first = _repeat(tf, replace(run, train=replace(run.train, synthetic_twin=False)), prepared32)
    measured["step"] = sorted(first.step_s)[len(first.step_s) // 2]
    result = _repeat(tf, run, prepared32)
    wall, cpu = measured["real"]  # the real pipeline, measured: some time per batch
    assert wall > 0 and cpu > 0
    input_ms = result.measured["input_ms_per_batch"]
    assert input_ms == pytest.approx(1000 * input_share * measured["step"])
    assert bool(result.synthetic_step_s) is twin
    if twin:
        assert result.twin_note is None
    else:
        assert "no synthetic twin" in result.twin_note and "at most 1.0" in result.twin_note


def test_a_repeat_records_the_cpu_the_hypervisor_took_while_its_arms_trained(
    tf, prepared32, monkeypatch
):
    from mptbench.core import hardware

    readings = iter([(1_000, 10_000), (1_250, 11_000)])  # before and after: 250 of 1000 ticks
    monkeypatch.setattr(hardware, "cpu_ticks", lambda: next(readings))
    run = smoke_run(epochs=1, steps_per_epoch=4, warmup_steps=1, timed_steps=3,
                    min_timed_steps=3, validate=False, synthetic_twin=False)
    runs = [run, replace(run, policy=Policy("float32_copy", "float32"))]
    arms = _group(tf, runs, prepared32).arms
    assert [a.measured["cpu_stolen_pct"] for a in arms] == [25.0, 25.0]


def test_timed_steps_account_for_the_timed_wall_time(tf, prepared32):
    run = smoke_run(batch_size=16, epochs=2, steps_per_epoch=6, warmup_steps=2, timed_steps=10,
               min_timed_steps=10, synthetic_twin=False)
    result = _repeat(tf, run, prepared32)
    assert len(result.step_s) == 10
    # The timed steps span two epochs; validation between them is not counted as step time.
    assert sum(result.step_s) == pytest.approx(result.timed_wall_s, rel=0.05)


def test_the_time_budget_stops_after_the_minimum_steps(tf, prepared32):
    run = smoke_run(epochs=1, steps_per_epoch=50, warmup_steps=1, timed_steps=None,
               min_timed_steps=3, time_budget_s=1e-6, validate=False,
               synthetic_twin=False)
    result = _repeat(tf, run, prepared32)
    assert result.outcome == "ok" and len(result.step_s) == 3
    assert result.stopped_by == "budget"


def test_a_first_timed_step_over_the_limit_ends_the_repeat_over_budget(tf, prepared32):
    run = smoke_run(epochs=1, steps_per_epoch=20, warmup_steps=1, min_timed_steps=3,
               max_step_seconds=1e-6, synthetic_twin=False, validate=False)
    result = _repeat(tf, run, prepared32)
    assert result.outcome == "over_budget" and len(result.step_s) == 2
    assert result.reason.startswith("the first two timed steps took")


def test_an_exploding_loss_is_recorded_as_nonfinite(tf, prepared32):
    run = smoke_run(epochs=1, steps_per_epoch=6, warmup_steps=1, timed_steps=4, min_timed_steps=1)
    run = replace(run, model=replace(run.model, learning_rate=1e38))
    result = _repeat(tf, run, prepared32)
    assert result.outcome == "nonfinite"
    assert "loss became" in result.reason


def test_a_block_of_steps_gives_one_sample_of_the_per_step_time(tf, prepared32):
    """With steps_per_execution (on GPUs, so the loss is read back once per block) Keras calls
    back once per block of 4 steps; each sample is the block's time over its steps, so the
    samples times 4 account for the timed wall time. Whether block and single-step timing
    agree within a few percent is a measurement (bench/README.md, bench_precision.py)."""
    run = smoke_run(batch_size=32, epochs=1, steps_per_epoch=28, warmup_steps=4, timed_steps=None,
               min_timed_steps=1, time_budget_s=None, validate=False,
               synthetic_twin=False, epoch_seconds=None)
    run = replace(run, device=replace(run.device, block_steps=4))
    result = _repeat(tf, run, prepared32)
    assert result.outcome == "ok"
    assert len(result.warmup_s) == 1 and len(result.step_s) == 24 // 4
    assert result.steps_per_sample == 4
    assert 4 * sum(result.step_s) == pytest.approx(result.timed_wall_s, rel=0.05)


def test_blocks_of_10_in_an_epoch_of_18_steps_still_time_the_minimum(tf, prepared32, tmp_path):
    """As a GPU runs Imagenette at batch 512: 18 steps an epoch in blocks of 10 (Keras runs
    2 whole blocks, the first warm-up), one epoch, one iterator. The engine gives fit a second
    epoch and the clock stops once 3 samples are timed; validation follows each epoch; the
    synthetic twin and the profile time their own blocks."""
    timing = {"warmup_steps": 2, "warmup_epochs": 0, "min_timed_steps": 3, "time_budget_s": None,
              "epoch_seconds": None}
    after = {"synthetic_twin": "always", "profile_steps": 1, "profile_seconds": None}
    run = smoke_run(batch_size=4, epochs=1, steps_per_epoch=18, validate=True, **timing, **after)
    run = replace(run, device=replace(run.device, block_steps=10))
    (result,) = _group(tf, [run], prepared32, profile_dirs=(str(tmp_path),)).arms
    assert result.outcome == "ok" and result.steps_per_sample == 10
    assert len(result.warmup_s) == 1 and len(result.step_s) == 3
    assert result.stopped_by == PAST_EPOCHS
    assert [e["epoch"] for e in result.epochs] == [1, 2] and "val_accuracy" in result.epochs[-1]
    assert len(result.synthetic_step_s) == 3
    assert result.profile.steps == 10 and len(result.profile.step_s) == 1


def test_two_policies_take_turns_in_one_process(tf, prepared32, tmp_path):
    """float32 and a copy of it under another name (an A/A pair), 4 steps a turn: each arm's
    timed steps carry their rounds and both share the process. Whether the two time alike is
    bench/bench_aa.py's question, not a unit test's: the first turn here ran 4x its later ones."""
    base = smoke_run(batch_size=16, epochs=1, steps_per_epoch=30, warmup_steps=2,
                     timed_steps=16, min_timed_steps=16, time_budget_s=None, validate=False,
                     round_samples=4, round_seconds=None)
    copy = replace(base, policy=Policy("float32_copy", "float32"))
    progress = tmp_path / "progress"
    result = _group(tf, [base, copy], prepared32, str(progress), (str(tmp_path / "a"), None))
    a, b = result.arms
    assert (a.policy, b.policy) == ("float32", "float32_copy")
    assert a.process == b.process == result.process
    assert a.outcome == b.outcome == "ok" and len(a.step_s) == len(b.step_s) == 16
    assert a.rounds == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 == b.rounds
    assert all(s > 0 for s in a.step_s + b.step_s)
    assert len(a.synthetic_step_s) == len(a.synthetic_rounds) > 0
    assert progress.read_text() in ("float32", "float32_copy")  # whose turn it was last
    # Where the process's time went, by phase: each measured, the turns split into both arms'
    # warm-up and timed steps and what else they took.
    phases = result.phases_s
    assert set(phases) == set(PHASES) and all(v >= 0 for v in phases.values())
    assert phases["timed"] == pytest.approx(sum(a.step_s) + sum(b.step_s))
    assert phases["warmup"] == pytest.approx(sum(a.warmup_s) + sum(b.warmup_s))
    assert phases["build"] > 0 and phases["profile"] > 0 and phases["twins"] > 0
    assert phases["start"] == 0  # no process start in a call from a test
    # Only the arm given a folder is profiled, one folder per repeat.
    assert a.profile.dir.endswith("a/repeat1") and b.profile is None


def test_a_one_epoch_run_goes_through_epochs_of_its_own_and_keeps_their_starts(tf, prepared32):
    """No prediction: epochs of train.round_samples (3) steps, each a new iterator; 2 warm-up
    and 12 timed steps are 5 epochs, each arm's starts kept from the third on, both arms
    taking turns across their epochs' starts."""
    base = smoke_run(batch_size=8, epochs=1, steps_per_epoch=None, warmup_steps=2,
                     warmup_seconds=None, timed_steps=12, min_timed_steps=12, time_budget_s=None,
                     validate=False, synthetic_twin=False, round_samples=3, round_seconds=None)
    assert base.train.epoch_seconds
    copy = replace(base, policy=Policy("float32_copy", "float32"))
    for arm in _group(tf, [base, copy], prepared32).arms:
        assert arm.outcome == "ok" and len(arm.step_s) == 12 and arm.stopped_by == "steps"
        assert len(arm.epochs) == 5 and len(arm.epoch_starts) == 3
        assert all(s["lived_s"] > 0 and s["wait_s"] >= 0 for s in arm.epoch_starts)
        # An epoch start is no step's time: the timed steps still account for the timed wall.
        assert sum(arm.step_s) == pytest.approx(arm.timed_wall_s, rel=0.05)


@pytest.mark.parametrize("step_s, steps", [(0.016, 4), (0.8, 3), (6.8, 1), (13.0, 1)])
def test_profiles_take_at_most_their_seconds_but_one_step_at_least(step_s, steps):
    train = smoke_run(profile_steps=4, profile_seconds=2.0).train
    assert profiled_steps(train, step_s) == steps
    assert profiled_steps(replace(train, profile_seconds=None), step_s) == 4


def test_the_arms_order_rotates_from_one_repeat_to_the_next_and_each_times_its_whole_run(
    tf, prepared32
):
    """Repeat 2 of a pair builds, starts and first runs the second policy: whatever going first
    does falls on each arm in turn. The host's own speed is sampled before, between turns and
    after; each arm times its validation batches after its steps, the first compiling."""
    base = smoke_run(batch_size=4, epochs=2, steps_per_epoch=12, warmup_steps=1,
                     timed_steps=8, min_timed_steps=8, time_budget_s=None, validate=True,
                     round_samples=2, round_seconds=None, synthetic_twin=False,
                     validation_steps=2, validation_seconds=None)
    copy = replace(base, policy=Policy("float32_copy", "float32"))
    job = RepeatJob("unused.json", (base, copy), "prepared.json", 1)
    a, b = run_repeat(tf, job, prepared32).arms
    assert (a.policy, a.position, b.policy, b.position) == ("float32", 1, "float32_copy", 0)
    # 8 timed steps of 2 a turn: 4 rounds, 8 turns, a sample before, after, and between.
    assert 2 <= len(a.host_s) == len(b.host_s) and a.host_s == b.host_s
    assert a.measured["host_ms"] == pytest.approx(1000 * min(a.host_s))  # its fastest sample
    for arm in (a, b):
        assert len(arm.validation_s) == 2 and arm.validation_note is None
        assert arm.validation_first_s > max(arm.validation_s)  # it compiled the test step


def test_what_the_fits_leave_is_destroyed_in_a_thread_of_its_own():
    """Destroying a finished fit's tf.data iterator waits for its autotune thread to wake, up
    to a minute. Whatever the fits leave (here a cycle, as Keras' iterators are, whose
    destruction waits until the repeat goes on) is destroyed apart: the repeat goes on meanwhile."""
    import gc
    import threading

    from mptbench.core.contract import ArmResult
    from mptbench.engine.repeat import Arm, in_turns
    from mptbench.engine.timing import StepClock

    going_on, destroyed = threading.Event(), {}

    class Iterator:
        def __del__(self):
            destroyed["waited"] = going_on.wait(timeout=10)  # False: nothing went on meanwhile
            destroyed["in"] = threading.current_thread().name

    class Model:
        def fit(self, **kwargs):
            iterator = Iterator()
            iterator.itself = iterator

    run = smoke_run()
    arm = Arm(run, ArmResult(repeat=0, policy=run.policy.name, fingerprint={}), Model())
    # Python's own collector, left on, may reach the cycle first on whatever thread allocates
    # (under a busy suite it did, and waited there): only the explicit collection may. And a
    # collection still running (an earlier test's "collect" thread) makes another return at
    # once without collecting: those finish first.
    for thread in threading.enumerate():
        if thread.name == "collect":
            thread.join(timeout=120)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        in_turns([arm], {arm.name: {}}, {arm.name: StepClock(0, 1, 1, None)}, None)
        going_on.set()  # the repeat goes on: here, at once
        for thread in threading.enumerate():
            if thread.name == "collect":
                thread.join(timeout=120)
    finally:
        if was_enabled:
            gc.enable()
    assert destroyed == {"waited": True, "in": "collect"}


def test_phases_add_what_each_block_took_and_a_process_knows_its_age():
    ticks = iter([1.0, 3.5, 10.0, 10.25])
    phases = Phases(now=lambda: next(ticks))
    with phases("build"):
        pass
    with phases("build"):
        pass
    assert phases.seconds["build"] == 2.75 and phases.seconds["profile"] == 0
    assert 0 < process_age_s() < 24 * 3600
