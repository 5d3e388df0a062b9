"""The network a cell trains, by its model's kind:

  layers       the published models, from a list of Conv2D/Dense layers in the yaml
  application  a keras.applications architecture (ResNet50, MobileNetV2, EfficientNetB0, ...),
               always with weights=None (nothing is downloaded), its top replaced by a Dense
               layer for the dataset's classes
  python       the user's own: model.builder names `package.module:function`, which takes the
               input shape, the number of classes and the dtype policy's name and returns an
               uncompiled keras.Model

Every network ends in its output activation in float32, as Keras' mixed-precision guide asks
(float16 probabilities near 0 and 1 lose the precision the loss needs); a user's builder is
checked for that too.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys

from mptbench.core.contract import ModelConfig
from mptbench.core.outcomes import first_line

KINDS = ("layers", "application", "python")


class ModelError(RuntimeError):
    """A model that cannot be built as configured; the message is one line naming it."""


def _layers(keras, model_cfg: ModelConfig, input_shape, num_classes: int):
    layers = [keras.Input(shape=input_shape)]
    for conv in model_cfg.conv_layers:
        layers += [
            keras.layers.Conv2D(conv.filters, conv.kernel_size, strides=conv.strides,
                                padding="same", activation="relu"),
            keras.layers.BatchNormalization(),
        ]
    pooling = keras.layers.GlobalAveragePooling2D() if model_cfg.conv_layers else None
    layers.append(pooling or keras.layers.Flatten())
    layers += [keras.layers.Dense(units, activation="relu") for units in model_cfg.dense_layers]
    layers += [
        keras.layers.Dense(num_classes),
        keras.layers.Activation(model_cfg.output_activation, dtype="float32"),
    ]
    return keras.Sequential(layers, name=model_cfg.name)


def _application(keras, model_cfg: ModelConfig, input_shape, num_classes: int):
    factory = getattr(keras.applications, model_cfg.application, None)
    if factory is None:
        raise ModelError(
            f"model {model_cfg.name}: keras.applications has no {model_cfg.application}"
        )
    try:
        base = factory(weights=None, include_top=False, input_shape=input_shape, pooling="avg")
    except ValueError as exc:  # e.g. an input smaller than the architecture takes
        raise ModelError(f"model {model_cfg.name} at {input_shape}: {first_line(exc)}") from None
    logits = keras.layers.Dense(num_classes, name="logits")(base.output)
    outputs = keras.layers.Activation(model_cfg.output_activation, dtype="float32")(logits)
    return keras.Model(base.input, outputs, name=model_cfg.name)


def load_builder(path: str):
    """The function `package.module:function` names, importable from the working directory
    or an installed package."""
    module_name, _, function = path.partition(":")
    if not module_name or not function:
        raise ModelError(f"model.builder {path!r}: expected package.module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the import raises, the user must fix it
        raise ModelError(
            f"model.builder {path}: cannot import {module_name}: {first_line(exc)}"
        ) from None
    builder = getattr(module, function, None)
    if not callable(builder):
        raise ModelError(f"model.builder {path}: {module_name} has no function {function}")
    return builder


def builder_source(path: str) -> dict[str, str]:
    """Where the builder's code is and its sha256: what the record and MLflow keep of it."""
    source = inspect.getsourcefile(load_builder(path))
    digest = hashlib.sha256(open(source, "rb").read()).hexdigest() if source else None
    return {"builder": path, "builder_file": source, "builder_sha256": digest}


def _python(keras, model_cfg: ModelConfig, input_shape, num_classes: int, policy_name: str):
    path = model_cfg.builder
    try:
        network = load_builder(path)(tuple(input_shape), num_classes, policy_name)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - a builder that raises is the user's to fix
        raise ModelError(
            f"model.builder {path} raised {type(exc).__name__}: {first_line(exc)}"
        ) from None
    if not isinstance(network, keras.Model):
        raise ModelError(
            f"model.builder {path} returned {type(network).__name__}, not a keras.Model"
        )
    return network


def make_network(model_cfg: ModelConfig, input_shape, num_classes: int, policy_name: str):
    """The uncompiled network, built under the global dtype policy the caller has set."""
    import keras

    if model_cfg.kind == "layers":
        return _layers(keras, model_cfg, input_shape, num_classes)
    if model_cfg.kind == "application":
        return _application(keras, model_cfg, input_shape, num_classes)
    return _python(keras, model_cfg, input_shape, num_classes, policy_name)
