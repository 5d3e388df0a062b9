"""The published models, built under a Keras dtype policy (final activation kept in float32)."""

from __future__ import annotations

from typing import Any


def build_model(
    model_cfg: dict[str, Any],
    input_shape: tuple[int, ...],
    num_classes: int,
    policy: str,
    jit_compile: Any = "auto",
):
    """Build and compile the configured model with `policy` as the global Keras policy."""
    import keras

    keras.mixed_precision.set_global_policy(policy)
    if model_cfg["name"] != "seed_convnet":
        raise ValueError(f"unknown model {model_cfg['name']!r}")
    layers = [keras.Input(shape=input_shape)]
    for conv in model_cfg["conv_layers"]:
        layers += [
            keras.layers.Conv2D(
                conv["filters"],
                conv["kernel_size"],
                strides=conv["strides"],
                padding="same",
                activation="relu",
            ),
            keras.layers.BatchNormalization(),
        ]
    layers += [
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(num_classes),
        # Softmax in float32: float16 probabilities near 0 and 1 lose the loss's precision.
        keras.layers.Activation("softmax", dtype="float32"),
    ]
    model = keras.Sequential(layers, name=model_cfg["name"])
    optimizer = keras.optimizers.get(
        {
            "class_name": model_cfg["optimizer"],
            "config": {"learning_rate": model_cfg["learning_rate"]},
        }
    )
    model.compile(
        optimizer=optimizer, loss=model_cfg["loss"], metrics=["accuracy"], jit_compile=jit_compile
    )
    return model
