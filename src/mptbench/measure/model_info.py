"""What a model is before any cell trains it: that it builds, its size, where its code came
from, and the FLOPs of one example's training step and forward pass, counted by the framework
(measure/flops.py). The model_info rule writes this once per model and image size; every cell
of the model reads its FLOPs from it."""

from __future__ import annotations

from typing import Any

from mptbench.measure.flops import forward_flops_per_example, training_flops_per_example
from mptbench.train.networks import builder_source, make_network


def describe(model_cfg: dict[str, Any], image_size: int, num_classes: int, one_hot: bool) -> dict:
    """Build the network in float32 and count it. Raises ModelError for a model that does not
    build (a builder that cannot be imported, raises, or returns something else)."""
    import keras
    import tensorflow as tf

    keras.mixed_precision.set_global_policy("float32")
    input_shape = (image_size, image_size, 3)
    network = make_network(model_cfg, input_shape, num_classes, "float32")
    labels = (
        tf.TensorSpec((1, num_classes), tf.float32) if one_hot else tf.TensorSpec((1,), tf.int64)
    )
    info = {
        "model": model_cfg["name"],
        "kind": model_cfg.get("kind", "layers"),
        "input_shape": list(input_shape),
        "num_classes": num_classes,
        "parameters": int(network.count_params()),
        "training_flops_per_example": training_flops_per_example(
            tf, keras, network, input_shape, model_cfg["loss"], labels
        ),
        "forward_flops_per_example": forward_flops_per_example(tf, network, input_shape),
        "flops_counted_by": f"TensorFlow {tf.__version__} profiler (float_operation), per example",
    }
    if info["kind"] == "python":
        info |= builder_source(model_cfg["builder"])
    return info
