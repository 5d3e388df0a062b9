"""Intervals of a median step and of a speedup, from the steps themselves."""

import random
import statistics

import pytest

from mptbench.core import stats


def _steps(n, centre, spread, seed):
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_the_interval_holds_the_estimate_and_narrows_with_more_steps():
    few, many = _steps(10, 100, 0.1, 1), _steps(400, 100, 0.1, 1)
    for steps in (few, many):
        low, high = stats.interval([steps])
        assert low <= stats.estimate([steps]) <= high
    assert (lambda lo, hi: hi - lo)(*stats.interval([many])) < (lambda lo, hi: hi - lo)(
        *stats.interval([few])
    )


def test_repeats_that_disagree_widen_the_interval_to_cover_both():
    """Two processes at 100 and 130 ms: within-process noise alone would claim 1% precision."""
    a, b = _steps(100, 100, 0.02, 1), _steps(100, 130, 0.02, 2)
    low, high = stats.interval([a, b])
    assert low < 102 and high > 128
    assert stats.half_width(a) < 0.01


def test_a_ratio_of_the_same_distribution_holds_one():
    a, b = _steps(60, 50, 0.1, 3), _steps(60, 50, 0.1, 4)
    low, high = stats.ratio_interval([a], [b])
    assert low < 1 < high
    faster = _steps(60, 25, 0.1, 5)
    low, high = stats.ratio_interval([a], [faster])
    assert 1.8 < low < 2 < high < 2.2


def test_the_estimate_of_three_repeats_is_the_middle_median():
    repeats = [[1, 1, 1], [5, 5, 5], [3, 3, 3]]
    assert stats.estimate(repeats) == 3 == statistics.median([1, 5, 3])


def test_no_steps_is_an_error():
    with pytest.raises(ValueError, match="no timed steps"):
        stats.interval([[]])


def test_percentiles_interpolate_between_steps():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([4, 1, 3, 2], 10) == pytest.approx(1.3)
    assert stats.percentile([5.0], 90) == 5.0
