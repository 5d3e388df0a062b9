"""A cell's whole run from its processes, each process's own total, then over processes."""

import pytest
from records import unmeasured_record

from mptbench.core.contract import ArmResult
from mptbench.core.epochs import rest_of_period
from mptbench.jobs.fullrun import figures


def _record(epochs=1, validate=False, examples=3200, validation=320):
    return unmeasured_record(batch_size=32, train_examples=examples,
                             validation_examples=validation,
                             config={"train": {"epochs": epochs, "validate": validate}})


def _arm(step, first=None, batches=(), repeat=0):
    return ArmResult(repeat, "float32", {}, outcome="ok", step_s=[step] * 5,
                     warmup_s=[step + 2.0, step], validation_first_s=first,
                     validation_s=list(batches))


def test_the_2020_run_of_each_process_then_their_interval():
    """100 steps an epoch, 20 epochs; 10 validation batches after each; 2 s of compile."""
    arms = [_arm(s, s / 3 + 1.0, [s / 3] * 3, i) for i, s in enumerate((0.50, 0.52, 0.48))]
    found = figures(_record(), arms, 32, 0.0)
    each = [20 * 100 * s + 20 * 10 * s / 3 + 2.0 + 1.0 for s in (0.50, 0.52, 0.48)]
    assert found["fullrun_s"] == pytest.approx((each[0] * each[1] * each[2]) ** (1 / 3))
    assert found["fullrun_s_ci_low"] < found["fullrun_s"] < found["fullrun_s_ci_high"]
    assert found["fullrun_s_df"] == 2
    assert found["fullrun_first_epoch_s"] == pytest.approx(3.0)
    assert found["fullrun_validation_s"] > 0 and found["validation_ms_per_batch"] > 0
    assert (found["fullrun_epochs"], found["fullrun_validates"]) == (20, True)


def test_a_host_widening_widens_the_whole_run_too():
    arms = [_arm(s, 1.0, [0.2] * 3, i) for i, s in enumerate((0.50, 0.52, 0.48))]
    plain, wide = figures(_record(), arms, 32, 0.0), figures(_record(), arms, 32, 0.3)
    assert wide["fullrun_s"] == plain["fullrun_s"]
    assert wide["fullrun_s_ci_high"] > plain["fullrun_s_ci_high"]


def test_a_validating_run_whose_processes_timed_no_validation_has_no_whole_run():
    arm = _arm(0.5)
    arm.validation_note = "no validation split: the whole run is its steps alone"
    found = figures(_record(), [arm], 32, 0.0)
    assert "fullrun_s" not in found and found["fullrun_note"] == arm.validation_note


def test_a_run_without_validation_is_its_steps_and_first_epoch():
    found = figures(_record(epochs=3), [_arm(0.5, repeat=i) for i in range(2)], 32, 0.0)
    assert found["fullrun_s"] == pytest.approx(3 * 100 * 0.5 + 2.0)
    assert found["fullrun_validation_s"] == 0.0 and found["fullrun_validates"] is False


def _waiting_arm(step, repeat):
    """A process whose epoch starts all waited (its share 1)."""
    arm = _arm(step, repeat=repeat)
    arm.epoch_starts = [{"lived_s": 1.2, "wait_s": 0.07}] * 3  # rest 0.07 s: waited
    return arm


def test_epochs_either_side_of_a_wake_average_its_two_sides_and_name_it():
    """3 epochs of 100 steps: the processes' epochs take 9.9, 10.3 and 10.1 s, either side of
    the tuning thread's wake at 10.23 s. A process alone would count 0.33 s or 10.17 s a start;
    each counts the average over the processes' spread, and the wake is named."""
    steps = (0.099, 0.103, 0.101)
    found = figures(_record(epochs=3), [_waiting_arm(s, i) for i, s in enumerate(steps)], 32, 0.0)
    assert found["fullrun_epoch_s"] == pytest.approx(10.1)
    assert found["fullrun_epoch_spread"] == 0.02  # their own spread is 0.0198: the floor
    assert found["fullrun_epoch_wake_s"] == pytest.approx(10.23)
    wait = found["fullrun_epoch_wait_s"]
    assert 1.0 < wait < 9.0
    # Two later epoch starts, every one waiting: twice that average, about (the processes'
    # own averages, their geometric mean).
    assert found["fullrun_epoch_starts_s"] == pytest.approx(2 * wait, rel=0.3)
    assert found["fullrun_epoch_starts_s"] > 2 * rest_of_period(10.1)


def test_epochs_far_from_a_wake_wait_their_own_rest_and_name_none():
    """Epochs of 30 s (100 steps of 0.3 s): 9.5-11.4 s to the wake at 40.95 s."""
    found = figures(_record(epochs=3), [_waiting_arm(s, i) for i, s in enumerate(
        (0.30, 0.31, 0.29))], 32, 0.0)
    assert found["fullrun_epoch_wake_s"] is None
    assert found["fullrun_epoch_wait_s"] == pytest.approx(40.95 - 30.0, rel=0.02)
