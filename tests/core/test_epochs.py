"""What fit waits for at an epoch's start: the tuning thread's periods, which starts waited,
and what a whole run's epochs would wait."""

import pytest

from mptbench.core.epochs import (
    Boundary,
    boundaries,
    expected_wait,
    next_wake,
    rest_of_period,
    waited_share,
)


@pytest.mark.parametrize("lived, wake", [
    (0.0, 0.01), (0.005, 0.01), (0.02, 0.03), (5.0, 5.11), (5.2, 10.23), (38.6, 40.95),
    (41.0, 81.91), (82.0, 141.91), (142.0, 201.91),  # a period stops doubling at 60 s
])
def test_the_tuning_thread_wakes_on_periods_that_double_from_10_ms_to_60_s(lived, wake):
    """TensorFlow 2.21's own log (TF_CPP_VMODULE=model=2) of one iterator: 'Waiting for 20
    ms', 40, ... 40960 ms; its wait of 40960 ms began 40.95 s after its first."""
    assert next_wake(lived) == pytest.approx(wake, abs=1e-6)
    assert rest_of_period(lived) == pytest.approx(wake - lived, abs=1e-6)


def test_an_epoch_just_past_a_wake_waits_nearly_a_whole_period_and_one_just_before_none():
    assert rest_of_period(5.12) == pytest.approx(5.11, abs=0.01)
    assert rest_of_period(5.10) == pytest.approx(0.01, abs=0.001)


def test_a_start_that_waited_the_rest_of_the_period_is_told_from_one_that_did_not():
    """Seen on a 2-core AMD EPYC (bench_epochs.py): an iterator that lived 13.6 s, the next
    epoch's first batch 6.9 s late (the rest: 6.87 s); the next one 0.02 s late."""
    waited, went_on = Boundary(13.6, 6.9), Boundary(13.6, 0.02)
    assert waited.waited and waited.telling
    assert not went_on.waited and went_on.telling
    # A rest too short to see tells nothing either way: it is left out of the share.
    assert not Boundary(5.105, 0.004).telling
    assert Boundary(5.105, 0.2).telling  # ... unless something waited anyway


def test_the_share_is_over_the_starts_that_tell_and_the_whole_runs_wait_follows_it():
    found = boundaries([{"lived_s": 13.6, "wait_s": 6.9}, {"lived_s": 13.6, "wait_s": 0.02},
                        {"lived_s": 11.2, "wait_s": 9.2}, {"lived_s": 5.105, "wait_s": 0.0}])
    assert waited_share(found) == pytest.approx(2 / 3)
    assert waited_share([]) is None
    assert expected_wait(2 / 3, 34.0) == pytest.approx(2 / 3 * (40.95 - 34.0))
    assert expected_wait(None, 34.0) is None
