"""What a model is before any cell trains it: that it builds, its size, where its code came
from, and the FLOPs of one example's training step and forward pass, counted by the framework
(measure/flops.py). The model_info rule writes this once per model and image size; every cell
of the model reads its FLOPs from it.

TensorFlow counts where it is installed (the usual case: mptbench depends on it); a machine
with only JAX counts with JAX (KERAS_BACKEND=jax), from the traced program."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from mptbench.measure import flops
from mptbench.train.networks import builder_source, make_network


def counter() -> str:
    """The framework that counts: tensorflow where installed and Keras runs on it, else jax."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow" and importlib.util.find_spec(
        "tensorflow"
    ):
        return "tensorflow"
    return "jax"


def _counts(keras, network, input_shape, model_cfg, num_classes: int, one_hot: bool) -> dict:
    loss = model_cfg["loss"]
    if counter() == "tensorflow":
        import tensorflow as tf

        labels = (
            tf.TensorSpec((1, num_classes), tf.float32)
            if one_hot
            else tf.TensorSpec((1,), tf.int64)
        )
        return {
            "training_flops_per_example": flops.training_flops_per_example(
                tf, keras, network, input_shape, loss, labels
            ),
            "forward_flops_per_example": flops.forward_flops_per_example(tf, network, input_shape),
            "flops_counted_by": f"TensorFlow {tf.__version__} profiler (float_operation)",
        }
    import jax
    import numpy as np

    labels = np.zeros((1, num_classes), np.float32) if one_hot else np.zeros((1,), np.int32)
    return {
        "training_flops_per_example": flops.jax_training_flops_per_example(
            jax, network, input_shape, loss, labels
        ),
        "forward_flops_per_example": flops.jax_forward_flops_per_example(jax, network, input_shape),
        "flops_counted_by": f"JAX {jax.__version__} traced program (convolutions, dots)",
    }


def describe(model_cfg: dict[str, Any], image_size: int, num_classes: int, one_hot: bool) -> dict:
    """Build the network in float32 and count it. Raises ModelError for a model that does not
    build (a builder that cannot be imported, raises, or returns something else)."""
    if counter() == "jax":
        os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    keras.mixed_precision.set_global_policy("float32")
    input_shape = (image_size, image_size, 3)
    network = make_network(model_cfg, input_shape, num_classes, "float32")
    info = {
        "model": model_cfg["name"],
        "kind": model_cfg.get("kind", "layers"),
        "input_shape": list(input_shape),
        "num_classes": num_classes,
        "parameters": int(network.count_params()),
        **_counts(keras, network, input_shape, model_cfg, num_classes, one_hot),
    }
    if info["kind"] == "python":
        info |= builder_source(model_cfg["builder"])
    return info
