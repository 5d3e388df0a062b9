"""The host's slowdown against its fastest, and the widening every process's share of it
asks of a cell's intervals."""

import math

import pytest

from mptbench.core import stats
from mptbench.core.host import HOST_TOLERANCE, slowdown


def test_a_host_at_its_own_speed_widens_nothing():
    found = slowdown([10.1, 10.3, 10.0], 10.0)
    assert found.least == 1.0 and found.most == pytest.approx(1.03)
    assert found.widening == 0.0 and not found.moved


def test_a_slowdown_every_process_shared_widens_by_what_the_least_slowed_lost():
    """All three ran at least 1.6x slower: what no spread over processes can show."""
    found = slowdown([16.0, 18.0, 20.0], 10.0)
    assert found.widening == pytest.approx(math.log(1.6) - math.log1p(HOST_TOLERANCE))
    assert found.moved and found.most == pytest.approx(2.0)
    assert found.mean == pytest.approx((1.6 * 1.8 * 2.0) ** (1 / 3))


def test_a_busy_spell_on_some_processes_is_left_to_their_spread():
    found = slowdown([10.0, 19.0, 10.2], 10.0)
    assert found.widening == 0.0 and found.moved


def test_a_faster_process_than_the_kept_fastest_is_the_host_at_its_own_speed():
    assert slowdown([9.0], 10.0).least == 1.0
    assert slowdown([], 10.0) is None and slowdown([10.0], None) is None


def test_a_widening_is_added_to_an_intervals_half_width_on_the_log_scale():
    plain = stats.Estimate(2.0, 3, 0.01, df=2)
    wide = stats.Estimate(2.0, 3, 0.01, df=2, widening=0.2)
    assert wide.log_half_width == pytest.approx(plain.log_half_width + 0.2)
    assert wide.high == pytest.approx(plain.high * math.exp(0.2))
    assert stats.verdict(wide.at(0.99)) == stats.verdict(wide) == "faster"
