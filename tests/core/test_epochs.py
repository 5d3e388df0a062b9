"""What fit waits for at an epoch's start: the tuning thread's periods, which starts waited,
and what a whole run's epochs would wait."""

import pytest

from mptbench.core.epochs import (
    Boundary,
    boundaries,
    expected_rest,
    expected_wait,
    next_wake,
    period_from,
    rest_of_period,
    waited_share,
    wake_within,
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


def test_near_a_wake_the_rest_is_the_mean_of_its_two_sides_and_far_from_one_its_own():
    """Seen on the AMD EPYC (bench_epochs): float32's iterators lived 9.2-9.6 s in one process
    and 10.3-11.3 s in the next, either side of the wake at 10.23 s. A run projected at 10.0 s,
    its epochs spread 5%, waits nearly nothing or about 10 s: the average lies between, where
    the point estimate alone said 0.23 s."""
    assert rest_of_period(10.0) == pytest.approx(0.23, abs=1e-6)
    near = expected_rest(10.0, 0.05)
    assert 2.0 < near < 8.0
    # Further past the wake, more of the spread lies after it: more is waited.
    assert expected_rest(10.2, 0.05) > near
    # Far from any wake the average is the point's own rest, within the spread's curvature.
    assert expected_rest(30.0, 0.02) == pytest.approx(rest_of_period(30.0), rel=0.01)
    assert expected_rest(30.0, 0.0) == rest_of_period(30.0)
    assert expected_wait(0.5, 10.0, 0.05) == pytest.approx(0.5 * near)


def test_a_wake_within_two_spreads_of_the_epoch_is_named_and_none_further():
    assert wake_within(9.9, 0.02) == pytest.approx(10.23)  # 9.51-10.30 s
    assert wake_within(10.6, 0.02) == pytest.approx(10.23)
    assert wake_within(9.0, 0.02) is None  # 8.65-9.37 s: no wake between
    assert wake_within(30.0, 0.05) is None
    assert period_from(10.23) == pytest.approx(10.24)  # a start just past it: to 20.47 s
    assert period_from(81.91) == pytest.approx(60.0)
