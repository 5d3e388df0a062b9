"""Floating-point work of a training step, counted from the model's layers.

Only convolutions and dense layers are counted (multiply-adds as 2 FLOPs): they are what
Tensor Cores and AMX accelerate. BatchNorm, activations and pooling are memory-bound and
left out, as model-FLOPs utilisation (MFU) conventionally does. A training step is counted
as three forward passes: the forward pass, and the gradients with respect to activations
and to weights, each about as costly.
"""

from __future__ import annotations

import math

TRAINING_PASSES = 3


def forward_flops_per_example(model) -> int:
    """FLOPs of one example's forward pass through the model's Conv2D and Dense layers."""
    import keras

    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            kh, kw, c_in, c_out = layer.kernel.shape
            _, h_out, w_out, _ = layer.output.shape
            total += 2 * h_out * w_out * kh * kw * c_in * c_out
        elif isinstance(layer, keras.layers.Dense):
            n_in, n_out = layer.kernel.shape
            # A Dense layer on a rank-3+ input applies to every position.
            positions = math.prod(layer.output.shape[1:-1]) if len(layer.output.shape) > 2 else 1
            total += 2 * n_in * n_out * positions
    return int(total)


def training_flops_per_step(model, batch_size: int) -> int:
    return TRAINING_PASSES * forward_flops_per_example(model) * batch_size
