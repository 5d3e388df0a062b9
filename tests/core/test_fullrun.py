"""A whole training run from one process's figures: steps, validation after each epoch, the
first epoch's one-time extra and what the later epochs' starts wait."""

import pytest

from mptbench.core.fullrun import PUBLISHED, epoch_starts, parts, plan


def test_a_one_epoch_timing_run_is_projected_onto_the_2020_experiments_run():
    run = plan({"epochs": 1, "validate": False, "steps_per_epoch": 110})
    assert (run.epochs, run.validates, run.source) == (20, True, PUBLISHED)
    assert run.words == "20 epochs with validation after each"
    # The 2020 run trains whole epochs: the split's batches, not the timing's 110 steps; fit
    # runs the last partial one (29 images), counted at its share of a batch.
    assert run.steps(9469, 32) == pytest.approx(295 + 29 / 32)


def test_a_longer_run_is_its_own_and_validates_as_it_says():
    run = plan({"epochs": 5, "validate": False, "steps_per_epoch": 40})
    assert (run.epochs, run.validates, run.source, run.steps(9469, 32)) == (
        5, False, "train.epochs", 40)
    assert run.words == "5 epochs"


def test_parts_add_steps_validation_and_the_first_epochs_extra():
    """20 epochs of 100 steps at 0.5 s; 10 validation batches of 0.2 s; two warm-up steps of
    3.0 and 0.6 s (2.6 s over two steady ones); a first validation batch of 1.2 s (1.0 over)."""
    found = parts(plan({"epochs": 1}), 100, 10, [0.5, 0.5], [3.0, 0.6], 1.2, [0.2, 0.2])
    assert found["steps"] == pytest.approx(20 * 100 * 0.5)
    assert found["validation"] == pytest.approx(20 * 10 * 0.2)
    assert found["first_epoch"] == pytest.approx(2.6 + 1.0)
    assert found["total"] == pytest.approx(1000 + 40 + 3.6)


def test_a_run_that_does_not_validate_has_no_validation_part():
    found = parts(plan({"epochs": 3, "validate": False}), 10, 4, [1.0], [2.0], None, [])
    assert found == {"steps": 30.0, "validation": 0.0, "first_epoch": 1.0, "epoch_starts": 0.0,
                     "total": 31.0}


def test_the_epochs_starts_wait_their_share_of_the_rest_of_the_tuning_period():
    """20 epochs of 100 steps at 0.3 s and 10 validation batches of 0.2 s: 32 s an epoch, whose
    iterator's tuning thread sleeps from 20.47 s to 40.95 s; half the 19 later starts wait
    the 8.95 s left of it."""
    found = parts(plan({"epochs": 1}), 100, 10, [0.3], [0.3], 0.2, [0.2], waited_share=0.5)
    assert found["epoch_starts"] == pytest.approx(19 * 0.5 * (40.95 - 32.0))
    assert found["total"] == pytest.approx(600 + 40 + found["epoch_starts"])
    none_timed = parts(plan({"epochs": 1}), 100, 10, [0.3], [0.3], 0.2, [0.2])
    assert none_timed["epoch_starts"] == 0.0


@pytest.mark.parametrize("first, batches, why", [(None, [0.2], "no first batch"),
                                                 (1.0, [], "no steady batch")])
def test_a_validating_run_without_its_validation_timed_has_no_whole_run(first, batches, why):
    assert parts(plan({"epochs": 1}), 10, 4, [1.0], [2.0], first, batches) is None, why
    assert parts(plan({"epochs": 1}), 10, 4, [], [2.0], 1.0, [0.2]) is None  # no timed step


def test_epoch_starts_average_the_rest_over_the_spread_and_count_nothing_unknown():
    """3 epochs of 10 s, 0.23 s before the tuning thread's wake at 10.23 s, spread 5%: the two
    later starts wait the average of nearly nothing and about 10 s, each where it waits."""
    assert epoch_starts(3, 1.0, 10.0) == pytest.approx(2 * 0.23)
    spread = epoch_starts(3, 1.0, 10.0, 0.05)
    assert 2 * 1.0 < spread < 2 * 8.0
    assert epoch_starts(3, 0.5, 10.0, 0.05) == pytest.approx(spread / 2)
    assert epoch_starts(3, None, 10.0, 0.05) == 0.0  # no share known: nothing counted
    assert epoch_starts(1, 1.0, 10.0) == 0.0  # no later epoch
