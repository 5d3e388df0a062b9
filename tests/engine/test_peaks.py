"""The calibration grows its problems until throughput stops rising, within its time cap."""

import time

import pytest

from mptbench.core.contract import Calibrate
from mptbench.core.contract.run import ConvSizes, MatmulSizes
from mptbench.engine import peaks
from mptbench.engine.kernels import kernels
from mptbench.engine.peaks import Series, conv_at, conv_flops, doublings, matmul_at, model_conv_peak


def _fake(rates):
    calls = []

    def measure(size):
        calls.append(size)
        return {"size": size, "tflops": rates[size]}

    return measure, calls


def test_a_series_stops_after_two_sizes_without_a_gain():
    rates = {1: 1.0, 2: 2.0, 4: 3.0, 8: 3.05, 16: 3.04, 32: 9.0}
    measure, calls = _fake(rates)
    best = Series(time.monotonic() + 60, 0.03).run([1, 2, 4, 8, 16, 32], lambda n: 1, measure)
    assert calls == [1, 2, 4, 8, 16]  # 8 and 16 gained less than 3% over 4: plateau
    assert best["tflops"] == 3.05 and best["size"] == 8
    assert best["stopped"].startswith("plateau")
    assert [t["size"] for t in best["tried"]] == calls


def test_a_series_skips_a_size_that_would_overrun_its_cap():
    rates = {1: 1e-12, 2: 1e-12}  # 1 FLOP/s: the next size's calls would take years
    measure, calls = _fake(rates)
    best = Series(time.monotonic() + 5, 0.03).run([1, 2], lambda n: 1e6, measure)
    assert calls == [1] and best["stopped"].startswith("time cap")


def test_a_strided_convolutions_flops_count_its_smaller_output():
    assert conv_flops([1, 8, 8, 2, 4], 3) == 3 * 2 * 64 * 9 * 2 * 4
    assert conv_flops([1, 8, 8, 2, 4], 3, stride=2) == 3 * 2 * 16 * 9 * 2 * 4
    assert conv_flops([1, 7, 7, 2, 4], 3, stride=2) == 3 * 2 * 16 * 9 * 2 * 4  # 7/2 -> 4


def test_the_models_own_layers_are_timed_largest_first_at_growing_batches(monkeypatch):
    """Each distinct layer shape once, the costliest first; its batch doubles to the grid's
    largest until throughput stops rising; a batch that fails ends no calibration."""
    calls = []

    def fake_conv_at(kernels, dtype, shape, kernel, min_seconds, stride=1):
        calls.append((shape[1], shape[0]))
        if shape[0] == 64:
            raise RuntimeError("OOM when allocating tensor\nmore")
        rate = {32: 1.0, 16: 2.0}[shape[1]] * shape[0]  # faster with batch, then no memory
        return {"shape": shape, "kernel": kernel, "stride": stride, "tflops": rate}

    monkeypatch.setattr(peaks, "conv_at", fake_conv_at)
    layers = [
        {"name": "m/small", "input": [16, 16, 8], "filters": 8, "kernel": 3, "stride": 1},
        {"name": "m/big", "input": [32, 32, 8], "filters": 8, "kernel": 3, "stride": 1},
        {"name": "m/big_again", "input": [32, 32, 8], "filters": 8, "kernel": 3, "stride": 1},
    ]
    settings = Calibrate(MatmulSizes(8, 8), ConvSizes(8, 8, 8, 8, (3,)), min_seconds=0.01,
                         min_gain=0.03, cap_s=60)
    best = model_conv_peak(None, "float32", layers, settings, time.monotonic() + 60, 64)
    # big (32 px) first, at 8, 16, 32 and 64 (out of memory); then small; big_again is big.
    assert calls == [(32, 8), (32, 16), (32, 32), (32, 64), (16, 8), (16, 16), (16, 32),
                     (16, 64)]
    assert best["layer"] == "m/small" and best["tflops"] == 64.0 and best["shape"][0] == 32
    assert [t["error"] for t in best["tried"] if "error" in t] == ["OOM when allocating tensor"] * 2
    assert best["stopped"] == "every layer shape timed (2)"
    late = model_conv_peak(None, "float32", layers, settings, time.monotonic() - 1, 64)
    assert late["stopped"] == "time cap (0 of 2 layer shapes timed)" and not late["tried"]


def test_a_neighbours_burst_does_not_lower_the_ceiling():
    """Each call is timed on its own and the peak is the fastest call's rate: one call slowed
    by another process (here a 60 ms stall among 2 ms calls) lowers the mean, not the peak."""
    calls = []

    def step():
        calls.append(None)
        time.sleep(0.06 if len(calls) == 3 else 0.002)
        return 0.0

    timed = peaks.time_calls(step, 1e12 * 0.002, min_seconds=0.08)
    assert timed["iterations"] == len(calls) - 1  # the first call warms up, untimed
    assert 0.5 < timed["tflops"] <= 1.0  # 2 ms at best: at most 1 "TFLOP/s"
    assert timed["mean_tflops"] < timed["tflops"] / 2


def test_doublings():
    assert doublings(256, 4096) == [256, 512, 1024, 2048, 4096]
    assert doublings(100, 150) == [100]


@pytest.mark.slow
def test_xla_compiled_peaks_measure_on_this_cpu():
    import tensorflow as tf

    for jit in (False, True):
        steps = kernels("tensorflow", tf, jit)
        assert matmul_at(steps, "float32", 128, 0.05)["tflops"] > 0
        assert conv_at(steps, "bfloat16", [2, 8, 8, 8, 8], 3, 0.05)["tflops"] > 0
        assert conv_at(steps, "float32", [2, 9, 9, 8, 8], 5, 0.05, stride=2)["tflops"] > 0


@pytest.mark.slow  # starts JAX and compiles a kernel per size and dtype
def test_jax_peaks_are_measured_with_jitted_lax_kernels():
    import jax

    steps = kernels("jax", jax, True)
    for dtype in ("float32", "bfloat16", "float16"):
        assert matmul_at(steps, dtype, 128, 0.05)["tflops"] > 0
        assert conv_at(steps, dtype, [2, 8, 8, 8, 8], 3, 0.05)["tflops"] > 0
        assert conv_at(steps, dtype, [2, 9, 9, 8, 8], 5, 0.05, stride=2)["tflops"] > 0


@pytest.mark.slow  # compiles JAX kernels in this process: about 4 s
def test_a_conv_step_computes_its_forward_pass_and_both_gradients():
    """A step that skipped the forward convolution would time two thirds of the FLOPs it is
    credited with: its value is the forward output's sum plus both gradients' sums."""
    import jax
    import jax.numpy as jnp

    steps = kernels("jax", jax, True)
    x, w = steps._inputs((1, 4, 4, 2), (3, 3, 2, 2), dtype="float32")
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    dx, dw = jax.grad(
        lambda x, w: jnp.sum(
            jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
        ),
        argnums=(0, 1),
    )(x, w)
    expected = float(jnp.sum(y) + jnp.sum(dx) + jnp.sum(dw))
    assert float(steps.conv("float32", [1, 4, 4, 2, 2], 3)()) == pytest.approx(expected, rel=1e-5)
