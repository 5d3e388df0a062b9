"""Intervals over processes: a step's, and a speedup's paired round by round."""

import math
import random
import statistics

import pytest

from mptbench.core import stats


def test_a_step_is_the_geometric_mean_of_process_means_with_a_t_interval():
    processes = [[0.10, 0.11, 0.10], [0.20, 0.21, 0.20], [0.15, 0.15, 0.16]]
    estimate = stats.step_estimate(processes)
    means = (0.31 / 3, 0.61 / 3, 0.46 / 3)
    assert estimate.value == pytest.approx((means[0] * means[1] * means[2]) ** (1 / 3))
    median = stats.step_estimate(processes, center=statistics.median).value
    assert median == pytest.approx((0.10 * 0.20 * 0.15) ** (1 / 3)) and median < estimate.value
    logs = [math.log(m) for m in means]
    se = (sum((x - sum(logs) / 3) ** 2 for x in logs) / 2) ** 0.5 / 3**0.5
    assert estimate.log_se == pytest.approx(se)
    # Student's t with 2 degrees of freedom: 4.30, not the normal 1.96.
    assert estimate.high == pytest.approx(estimate.value * math.exp(4.3027 * se), rel=1e-4)
    assert estimate.low < 0.10 < 0.20 < estimate.high


def test_one_process_has_no_interval_and_more_processes_narrow_it():
    assert stats.step_estimate([[0.1, 0.2, 0.3]]).low is None
    rng = random.Random(1)

    def widths(n):
        procs = [[0.1 * math.exp(rng.gauss(0, 0.05))] for _ in range(n)]
        return stats.step_estimate(procs).half_width

    assert widths(20) < widths(3)
    with pytest.raises(ValueError):
        stats.step_estimate([[]])


def test_round_medians_and_a_paired_ratio_cancel_drift_within_a_process():
    # Both arms drift upward 1% a round; the policy is 20% faster throughout.
    rounds = list(range(10))
    base = [1.0 * 1.01**r for r in rounds]
    fast = [b / 1.2 for b in base]
    figure = stats.paired_log_ratio(
        stats.round_medians(base, rounds), stats.round_medians(fast, rounds)
    )
    assert math.exp(figure) == pytest.approx(1.2)
    assert stats.paired_log_ratio({0: 1.0}, {1: 1.0}) is None  # no round shared


def test_a_paired_speedup_pairs_by_process_and_ignores_processes_not_shared():
    rng = random.Random(2)
    baseline, other = [], []
    for p in range(5):
        level = math.exp(rng.gauss(0, 0.08))  # what the process does to both arms
        steps = [level * (1 + 0.01 * rng.random()) for _ in range(6)]
        baseline.append((f"p{p}", steps, [0, 0, 1, 1, 2, 2]))
        other.append((f"p{p}", [s / 1.1 for s in steps], [0, 0, 1, 1, 2, 2]))
    other.append(("elsewhere", [5.0, 5.0], [0, 1]))  # not timed beside the baseline
    estimate = stats.paired_speedup(baseline, other)
    assert estimate.n == 5 and estimate.value == pytest.approx(1.1, rel=0.01)
    assert estimate.half_width < 0.01  # the 8% between processes cancelled
    assert stats.paired_speedup(baseline, [("elsewhere", [1.0], [0])]) is None


def test_an_outlier_in_an_added_process_widens_the_interval_not_only_moves_it():
    """Three processes planned agree within 1-2%; two were added for precision. Where the
    added ones agree too, the interval is Stein's: the first three's spread and degrees of
    freedom. Where the last is 35% off, it moves the mean and widens the interval as well,
    so a copy of the baseline is not called faster on the strength of one process."""
    first = [0.0, 0.02, -0.01]
    quiet = stats.of_logs([*first, 0.01, 0.0], first=3)
    outlier = stats.of_logs([*first, 0.01, 0.3], first=3)
    stein_se = statistics.stdev(first) / math.sqrt(5)
    assert quiet.log_se == pytest.approx(stein_se) and quiet.df == outlier.df == 2
    assert outlier.value > quiet.value and outlier.half_width > 5 * quiet.half_width
    assert outlier.low < 1 < outlier.high
    assert stats.verdict(outlier) == "no measurable difference"
    # The first stage's spread alone would have moved the interval off 1 without widening it.
    moved_only = stats.Estimate(outlier.value, 5, stein_se, df=2)
    assert moved_only.half_width == pytest.approx(quiet.half_width)
    assert stats.verdict(moved_only) == "faster"


def test_an_unpaired_speedup_keeps_the_spread_between_processes():
    estimate = stats.unpaired_log_ratios([1.0, 1.2, 0.9], [0.5, 0.6, 0.45])
    assert estimate.value == pytest.approx(2.0)
    assert estimate.low < 2.0 < estimate.high and estimate.half_width > 0.05
    assert stats.unpaired_log_ratios([1.0], [0.5]).low is None


def test_verdicts_need_the_interval_on_one_side_and_a_change_beyond_the_noise():
    def verdict(value, se, n=5):
        return stats.verdict(stats.Estimate(value, n, se))

    assert verdict(1.2, 0.01) == "faster" and verdict(0.8, 0.01) == "slower"
    assert verdict(1.2, 0.2) == "no measurable difference"  # the interval holds 1
    assert verdict(1.005, 0.0001) == "no measurable difference"  # within the 1% noise
    assert stats.verdict(stats.Estimate(1.5, 1, None)) is None  # one process: unjudged


def test_the_best_of_n_needs_a_wider_interval():
    assert stats.simultaneous(0.95, 1) == 0.95
    assert stats.simultaneous(0.95, 4) == pytest.approx(0.9875)
    one = stats.Estimate(1.05, 4, 0.01)
    assert one.at(stats.simultaneous(0.95, 8)).half_width > one.half_width


def test_percentiles_interpolate_between_steps():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([4, 1, 3, 2], 10) == pytest.approx(1.3)
    assert stats.percentile([5.0], 90) == 5.0


def test_a_ratio_of_two_independent_estimates_adds_their_log_errors_with_welch_s_df():
    from mptbench.core import stats as s

    first, second = s.Estimate(3.0, 4, 0.03, df=3), s.Estimate(1.5, 6, 0.04, df=5)
    found = s.ratio_of(first, second)
    assert found.value == 2.0 and found.n == 4
    assert found.log_se == pytest.approx(0.05)
    # (0.0009 + 0.0016)^2 / (0.0009^2 / 3 + 0.0016^2 / 5) = 7.69: 7 degrees of freedom
    assert found.df == 7
    assert s.ratio_of(first, s.Estimate(1.5, 1, None)).log_se is None
