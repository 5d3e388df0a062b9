"""Achievable TFLOP/s of one matmul and one convolution training step, in a given dtype."""

from __future__ import annotations

import time
from typing import Any

from mptbench.measure.flops import TRAINING_PASSES


def _measure(step, flops_per_call: float, min_seconds: float, max_iters: int) -> dict[str, Any]:
    """Call `step` until min_seconds have passed (after one warm-up call); TFLOP/s achieved.

    Each call returns a scalar that is read back, so the time covers finished device work.
    """
    float(step())  # warm-up: kernel selection, autotuning, first allocation
    iterations, started = 0, time.perf_counter()
    while True:
        float(step())
        iterations += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds or iterations >= max_iters:
            break
    return {
        "iterations": iterations,
        "seconds": elapsed,
        "tflops": flops_per_call * iterations / elapsed / 1e12,
    }


def matmul_peak(
    tf, dtype: str, size: int, min_seconds: float = 1.0, max_iters: int = 1000
) -> dict[str, Any]:
    """Achievable TFLOP/s of a size x size matmul in `dtype` on the default device."""
    a = tf.cast(tf.random.uniform((size, size), seed=1), dtype)
    b = tf.cast(tf.random.uniform((size, size), seed=2), dtype)

    @tf.function
    def step():
        return tf.cast(tf.matmul(a, b)[0, 0], tf.float32)

    result = _measure(step, 2 * size**3, min_seconds, max_iters)
    return {"dtype": dtype, "size": size, **result}


def conv_peak(
    tf, dtype: str, shape: list[int], kernel: int, min_seconds: float = 1.0, max_iters: int = 1000
) -> dict[str, Any]:
    """Achievable training TFLOP/s of a Conv2D (`shape`: batch, height, width, in, out channels)."""
    batch, height, width, c_in, c_out = shape
    x = tf.cast(tf.random.uniform((batch, height, width, c_in), seed=1), dtype)
    w = tf.cast(tf.random.uniform((kernel, kernel, c_in, c_out), seed=2), dtype)

    # Forward and both backward convolutions, as in training: a dtype's backward kernels can
    # be far slower than its forward one (TensorFlow's float16 on CPUs is).
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = tf.nn.conv2d(x, w, strides=1, padding="SAME")
            loss = tf.reduce_sum(tf.cast(y, tf.float32))
        dx, dw = tape.gradient(loss, [x, w])
        return tf.cast(dx[0, 0, 0, 0], tf.float32) + tf.cast(dw[0, 0, 0, 0], tf.float32)

    flops = TRAINING_PASSES * 2 * batch * height * width * kernel * kernel * c_in * c_out
    result = _measure(step, flops, min_seconds, max_iters)
    return {"dtype": dtype, "shape": shape, "kernel": kernel, **result}
