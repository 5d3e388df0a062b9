"""The calibration grows its problems until throughput stops rising, within its time cap."""

import time

import pytest

from mptbench.engine.kernels import kernels
from mptbench.engine.peaks import Series, conv_at, doublings, matmul_at


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

    for jit in (False, True):
        steps = kernels("tensorflow", tf, jit)
        assert matmul_at(steps, "float32", 128, 0.05)["tflops"] > 0
        assert conv_at(steps, "bfloat16", [2, 8, 8, 8, 8], 3, 0.05)["tflops"] > 0


def test_jax_peaks_are_measured_with_jitted_lax_kernels():
    import jax

    steps = kernels("jax", jax, True)
    for dtype in ("float32", "bfloat16", "float16"):
        assert matmul_at(steps, dtype, 128, 0.05)["tflops"] > 0
        assert conv_at(steps, dtype, [2, 8, 8, 8, 8], 3, 0.05)["tflops"] > 0


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
