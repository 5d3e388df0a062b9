"""Floating-point work of a training step, counted from the model's layers, by kind.

Only convolutions and dense layers are counted (multiply-adds as 2 FLOPs): they are what
Tensor Cores and AMX accelerate, and they are timed against different peaks (convolution
FLOPs against the convolution peak, dense FLOPs against the matmul peak). BatchNorm,
activations and pooling are memory-bound and left out, as model-FLOPs utilisation (MFU)
conventionally does. A training step is counted as three forward passes: the forward pass,
and the gradients with respect to activations and to weights, each about as costly.
"""

from __future__ import annotations

import math

TRAINING_PASSES = 3
KINDS = ("conv", "matmul")


def forward_flops_by_kind(model) -> dict[str, int]:
    """FLOPs of one example's forward pass: Conv2D layers as conv, Dense layers as matmul."""
    import keras

    total = dict.fromkeys(KINDS, 0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            kh, kw, c_in, c_out = layer.kernel.shape
            _, h_out, w_out, _ = layer.output.shape
            total["conv"] += 2 * h_out * w_out * kh * kw * c_in * c_out
        elif isinstance(layer, keras.layers.Dense):
            n_in, n_out = layer.kernel.shape
            # A Dense layer on a rank-3+ input applies to every position.
            positions = math.prod(layer.output.shape[1:-1]) if len(layer.output.shape) > 2 else 1
            total["matmul"] += 2 * n_in * n_out * positions
    return {k: int(v) for k, v in total.items()}


def forward_flops_per_example(model) -> int:
    return sum(forward_flops_by_kind(model).values())


def training_flops_by_kind(model, batch_size: int) -> dict[str, int]:
    return {k: TRAINING_PASSES * v * batch_size for k, v in forward_flops_by_kind(model).items()}


def training_flops_per_step(model, batch_size: int) -> int:
    return sum(training_flops_by_kind(model, batch_size).values())
