"""Achievable TFLOP/s of matmuls and convolution training steps in one dtype: a ceiling.

A series of problem sizes is timed, each larger than the last, until throughput stops
rising; the best throughput seen is the peak. The problems themselves are the backend's
(engine/kernels.py); every call returns a scalar that is read back, so the time covers
finished device work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from mptbench.core.contract import Calibrate

# A convolution training step: the forward pass and both gradients (input and filter), each
# as costly as the forward pass.
TRAINING_PASSES = 3


def time_calls(step, flops_per_call: float, min_seconds: float) -> dict[str, Any]:
    """Call `step` for min_seconds (after one warm-up call), each call timed on its own; the
    TFLOP/s of the fastest call. A ceiling is what the device can do, and on a shared machine
    another process only ever slows a call down: the mean over the calls (`mean_tflops`, kept
    beside it) reads a neighbour's burst as a lower peak, which a cell timed at a quieter
    moment then beats."""
    started = time.perf_counter()
    float(step())  # warm-up: tracing, kernel selection, autotuning, first allocation
    warmup_s = time.perf_counter() - started
    calls: list[float] = []
    started = time.perf_counter()
    while True:
        before = time.perf_counter()
        float(step())
        calls.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            break
    return {
        "iterations": len(calls),
        "seconds": elapsed,
        "warmup_s": warmup_s,
        "tflops": flops_per_call / min(calls) / 1e12,
        "mean_tflops": flops_per_call * len(calls) / elapsed / 1e12,
    }


class Series:
    """Grow a problem until throughput stops rising, within a time budget."""

    def __init__(self, deadline: float, min_gain: float):
        """`min_gain`: a size that does not beat the best by this share is on the plateau."""
        self.deadline, self.min_gain = deadline, min_gain

    def run(self, sizes: Iterable, flops_of: Callable, measure: Callable) -> dict[str, Any]:
        """`measure(size)` times one size; returns the best result and every size tried."""
        best, tried, flat, stopped = None, [], 0, "largest size reached"
        for size in sizes:
            left = self.deadline - time.monotonic()
            # The next size costs a warm-up call and min_seconds of calls: skip what would overrun.
            if best and left < 3 * flops_of(size) / (best["tflops"] * 1e12):
                stopped = "time cap (the next size would overrun it)"
                break
            result = measure(size)
            tried.append(result)
            if best is None or result["tflops"] > best["tflops"] * (1 + self.min_gain):
                flat = 0
            else:
                flat += 1
            best = result if best is None or result["tflops"] > best["tflops"] else best
            if flat >= 2:
                stopped = f"plateau (two sizes without a {100 * self.min_gain:.0f}% gain)"
                break
        return {**(best or {}), "stopped": stopped, "tried": tried}


def matmul_at(kernels, dtype: str, size: int, min_seconds: float) -> dict[str, Any]:
    """TFLOP/s of a size x size matmul in `dtype` on the default device (engine/kernels.py)."""
    step = kernels.matmul(dtype, size)
    return {"dtype": dtype, "size": size, **time_calls(step, 2 * size**3, min_seconds)}


def conv_flops(shape: list[int], kernel: int, stride: int = 1) -> int:
    """A convolution training step's FLOPs: padding "SAME", so the output is the input over
    the stride, rounded up."""
    batch, height, width, c_in, c_out = shape
    out_h, out_w = -(-height // stride), -(-width // stride)
    return TRAINING_PASSES * 2 * batch * out_h * out_w * kernel * kernel * c_in * c_out


def conv_at(
    kernels, dtype: str, shape: list[int], kernel: int, min_seconds: float, stride: int = 1
) -> dict:
    """Training TFLOP/s of a Conv2D (`shape`: batch, height, width, in, out channels): the
    forward pass and both gradients, as in training, since a dtype's backward kernels can be
    far slower than its forward one (TensorFlow's float16 on CPUs is)."""
    step = kernels.conv(dtype, shape, kernel, stride)
    timed = time_calls(step, conv_flops(shape, kernel, stride), min_seconds)
    return {"dtype": dtype, "shape": shape, "kernel": kernel, "stride": stride, **timed}


def doublings(start: int, stop: int) -> list[int]:
    sizes = [start]
    while sizes[-1] * 2 <= stop:
        sizes.append(sizes[-1] * 2)
    return sizes


def matmul_peak(kernels, dtype: str, settings: Calibrate, deadline: float) -> dict:
    series = Series(deadline, settings.min_gain)
    sizes = doublings(settings.matmul.start, settings.matmul.max)
    return series.run(
        sizes,
        lambda n: 2 * n**3,
        lambda n: matmul_at(kernels, dtype, n, settings.min_seconds),
    )


def conv_peak(kernels, dtype: str, settings: Calibrate, deadline: float) -> dict:
    """The best over each kernel size's series of channel counts."""
    conv = settings.conv
    channels = doublings(conv.start_channels, conv.max_channels)
    best: dict = {}
    for i, kernel in enumerate(conv.kernels):
        # Each kernel size gets an equal share of the time left.
        share = (deadline - time.monotonic()) / (len(conv.kernels) - i)
        series = Series(time.monotonic() + share, settings.min_gain)

        def shape(c: int) -> list[int]:
            return [conv.batch, conv.spatial, conv.spatial, c, c]

        result = series.run(
            channels,
            lambda c, k=kernel: conv_flops(shape(c), k),
            lambda c, k=kernel: conv_at(kernels, dtype, shape(c), k, settings.min_seconds),
        )
        tried = best.get("tried", []) + result["tried"]
        if result.get("tflops", 0) > best.get("tflops", 0):
            best = result
        best["tried"] = tried
    return best


def _layer_series(kernels, dtype: str, key: tuple, settings: Calibrate, deadline: float,
                  batches: list[int]) -> dict:
    """One layer shape (h, w, in, out, kernel, stride) at growing batches."""
    h, w, c_in, c_out, kernel, stride = key

    def shape(b: int) -> list[int]:
        return [b, h, w, c_in, c_out]

    def measure(b: int) -> dict:
        try:
            return conv_at(kernels, dtype, shape(b), kernel, settings.min_seconds, stride)
        except Exception as exc:  # noqa: BLE001 - out of memory, mostly: the series ends
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            return {"shape": shape(b), "kernel": kernel, "stride": stride, "tflops": 0.0,
                    "error": why}

    series = Series(deadline, settings.min_gain)
    return series.run(batches, lambda b: conv_flops(shape(b), kernel, stride), measure)


def model_conv_peak(
    kernels, dtype: str, layers: list[dict], settings: Calibrate, deadline: float, max_batch: int
) -> dict:
    """The models' own convolutions (model_info's conv_layers: each model's Conv2D layers at
    its image size), largest first, within the deadline: each distinct shape's batch doubles
    from the calibration's (conv.batch) to the grid's largest (`max_batch`) until throughput
    stops rising, so a model whose own kernels run faster than the generic series is held to
    them. A size that fails (out of memory) counts as no gain; its error is kept."""
    start = settings.conv.batch
    shapes: dict[tuple, dict] = {}
    for layer in layers:
        h, w, c_in = layer["input"]
        shapes.setdefault((h, w, c_in, layer["filters"], layer["kernel"], layer["stride"]), layer)
    order = sorted(shapes, key=lambda k: -conv_flops([start, *k[:4]], k[4], k[5]))
    batches = doublings(start, max(start, max_batch))
    best: dict = {}
    tried: list[dict] = []
    stopped = f"every layer shape timed ({len(order)})"
    for n, key in enumerate(order):
        if time.monotonic() >= deadline:
            stopped = f"time cap ({n} of {len(order)} layer shapes timed)"
            break
        found = _layer_series(kernels, dtype, key, settings, deadline, batches)
        name = shapes[key]["name"]
        tried += [t | {"layer": name} for t in found["tried"]]
        if found.get("tflops", 0) > best.get("tflops", 0):
            best = {k: v for k, v in found.items() if k != "tried"} | {"layer": name}
    return best | {"stopped": stopped, "tried": tried}
