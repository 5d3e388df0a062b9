"""The calibration grows its problems until throughput stops rising, within its time cap."""

import time

import pytest

from mptbench.measure.peaks import Series, doublings


def _fake(rates):
    calls = []

    def measure(size):
        calls.append(size)
        return {"size": size, "tflops": rates[size]}

    return measure, calls


def test_a_series_stops_after_two_sizes_without_a_gain():
    rates = {1: 1.0, 2: 2.0, 4: 3.0, 8: 3.05, 16: 3.04, 32: 9.0}
    measure, calls = _fake(rates)
    best = Series(time.monotonic() + 60).run([1, 2, 4, 8, 16, 32], lambda n: 1, measure)
    assert calls == [1, 2, 4, 8, 16]  # 8 and 16 gained less than 3% over 4: plateau
    assert best["tflops"] == 3.05 and best["size"] == 8
    assert best["stopped"].startswith("plateau")
    assert [t["size"] for t in best["tried"]] == calls


def test_a_series_skips_a_size_that_would_overrun_its_cap():
    rates = {1: 1e-12, 2: 1e-12}  # 1 FLOP/s: the next size's calls would take years
    measure, calls = _fake(rates)
    best = Series(time.monotonic() + 5).run([1, 2], lambda n: 1e6, measure)
    assert calls == [1] and best["stopped"].startswith("time cap")


def test_doublings():
    assert doublings(256, 4096) == [256, 512, 1024, 2048, 4096]
    assert doublings(100, 150) == [100]


@pytest.mark.slow
def test_xla_compiled_peaks_measure_on_this_cpu():
    import tensorflow as tf

    from mptbench.measure.peaks import conv_at, matmul_at

    for jit in (False, True):
        assert matmul_at(tf, "float32", 128, 0.05, jit)["tflops"] > 0
        assert conv_at(tf, "bfloat16", [2, 8, 8, 8, 8], 3, 0.05, jit)["tflops"] > 0
