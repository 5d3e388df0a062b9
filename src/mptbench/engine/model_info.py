"""What a model is before any cell trains it: that it builds, its size, where its code came
from, and the FLOPs of one example's training step and forward pass, counted by the framework
(engine/flops.py). The model_info rule writes this once per model and image size; every cell
of the model reads its FLOPs from it.

TensorFlow counts where it is installed (the usual case: mptbench depends on it); a machine
with only JAX counts with JAX (KERAS_BACKEND=jax), from the traced program."""

from __future__ import annotations

import importlib.util
import os

from mptbench.core import frameworks
from mptbench.core.contract import DescribeJob, ModelConfig, ModelInfo
from mptbench.engine import flops
from mptbench.engine.environment import UNUSED_BY_KERAS, UNUSED_BY_TENSORFLOW, skipping
from mptbench.engine.networks import builder_source, make_network


def counter() -> str:
    """The framework that counts: of those that count FLOPs (core/frameworks.py), the one
    Keras runs on (KERAS_BACKEND, the default's where unset) where it is installed, else the
    last of them (JAX, from the traced program)."""
    chosen = os.environ.get("KERAS_BACKEND", frameworks.DEFAULT.name)
    counting = [f for f in frameworks.FRAMEWORKS if f.counts_flops]
    for found in counting:
        if found.name == chosen and importlib.util.find_spec(found.module):
            return found.name
    return counting[-1].name


def _counts(keras, network, input_shape, model_cfg: ModelConfig, num_classes: int) -> dict:
    loss, one_hot = model_cfg.loss, model_cfg.one_hot_labels
    if counter() == frameworks.TENSORFLOW.name:  # its profiler counts the graph
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


def conv_layers(keras, network) -> list[dict]:
    """The network's Conv2D layers (nested models' too) whose shape a calibration can time:
    square kernel and stride, no dilation, no groups, a known input size. Depthwise and
    separable convolutions are left out (the calibration's kernels are plain convolutions)."""
    found, seen = [], set()

    def walk(layer) -> None:
        for inner in getattr(layer, "layers", None) or []:
            walk(inner)
        if not isinstance(layer, keras.layers.Conv2D) or id(layer) in seen:
            return
        seen.add(id(layer))
        (kh, kw), (sh, sw) = layer.kernel_size, layer.strides
        try:
            shape = list(layer.input.shape[1:])
        except (AttributeError, ValueError):
            return  # a layer of a subclassed model: its input is not in the graph
        if layer.data_format == "channels_first":
            shape = shape[1:] + shape[:1]
        plain = kh == kw and sh == sw and tuple(layer.dilation_rate) == (1, 1)
        if plain and getattr(layer, "groups", 1) == 1 and None not in shape:
            found.append({
                "name": layer.name, "input": [int(d) for d in shape],
                "filters": int(layer.filters), "kernel": int(kh), "stride": int(sh),
            })

    walk(network)
    return found


def describe(job: DescribeJob) -> ModelInfo:
    """Build the network in float32 and count it. Raises ModelError for a model that does not
    build (a builder that cannot be imported, raises, or returns something else)."""
    counting = counter()
    on_jax = counting != frameworks.TENSORFLOW.name
    if on_jax:
        os.environ.setdefault("KERAS_BACKEND", counting)
    with skipping(*UNUSED_BY_KERAS, *(() if on_jax else UNUSED_BY_TENSORFLOW)):
        import keras

    keras.mixed_precision.set_global_policy("float32")
    model_cfg, input_shape = job.model, (job.image_size, job.image_size, 3)
    network = make_network(model_cfg, input_shape, job.num_classes, "float32")
    counts = _counts(keras, network, input_shape, model_cfg, job.num_classes)
    source = builder_source(model_cfg.builder) if model_cfg.kind == "python" else {}
    info = ModelInfo(
        model=model_cfg.name, kind=model_cfg.kind, input_shape=list(input_shape),
        num_classes=job.num_classes, parameters=int(network.count_params()), **counts, **source,
        conv_layers=conv_layers(keras, network),
    )
    flops_ = info.training_flops_per_example
    print(f"{info.model}: {info.parameters} parameters, {sum(flops_.values()) / 1e9:.3f} "
          f"GFLOP per example per training step ({flops_})", flush=True)
    return info


def run(job: DescribeJob, start) -> ModelInfo:
    """The engine's entry point for a model's description (engine/__main__.py): it starts no
    backend of its own (describe picks what counts the FLOPs)."""
    return describe(job)
