"""A cell's model: its network (engine/networks.py) under the dtype policy, compiled with the
model's optimizer and loss."""

from __future__ import annotations

from typing import Any

from mptbench.core.contract import ModelConfig
from mptbench.core.policies import Policy
from mptbench.engine.networks import ModelError, make_network


def _optimizer(keras, model_cfg: ModelConfig, policy: Policy):
    optimizer = keras.optimizers.get(
        {"class_name": model_cfg.optimizer, "config": {"learning_rate": model_cfg.learning_rate}}
    )
    # Keras' compile wraps a mixed_float16 model's optimizer itself (from 2**15); a policy that
    # asks for loss scaling from another start, or any other policy that asks for it, gets it
    # here (compile then leaves it as it is).
    if policy.loss_scaling == "dynamic" and (
        policy.keras_name != "mixed_float16" or policy.initial_loss_scale is not None
    ):
        start = {"initial_scale": policy.initial_loss_scale} if policy.initial_loss_scale else {}
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimizer, name="loss_scale_optimizer", **start
        )
    return optimizer


def build_model(
    model_cfg: ModelConfig,
    input_shape: tuple[int, ...],
    num_classes: int,
    policy: Policy,
    jit_compile: Any = "auto",
    steps_per_execution: int = 1,
):
    """Build and compile the configured model with `policy` as the global Keras policy;
    `steps_per_execution` steps run per call of the compiled step (timing.py's blocks)."""
    import keras

    keras.mixed_precision.set_global_policy(policy.keras_name)
    model = make_network(model_cfg, input_shape, num_classes, policy.keras_name)
    model = keep_float32(keras, model, policy.float32_layers)
    model.compile(
        optimizer=_optimizer(keras, model_cfg, policy),
        loss=model_cfg.loss,
        metrics=["accuracy"],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return model


def keep_float32(keras, model, classes: tuple[str, ...]):
    """The model with its layers of `classes` (Keras class names: DepthwiseConv2D) computing in
    float32, the others in the global policy: a clone (keras.models.clone_model) whose layers
    of those classes are made again from their config with dtype float32. Keras casts what
    goes into a layer to its own compute dtype. A model without such layers is returned as it
    is; one that clone_model cannot clone (a subclassed model) is a ModelError."""
    if not classes:
        return model
    kept = set(classes)

    def clone(layer):
        config = layer.get_config()
        if type(layer).__name__ in kept:
            config["dtype"] = "float32"
        return type(layer).from_config(config)

    try:
        return keras.models.clone_model(model, clone_function=clone)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ModelError(f"cannot keep {', '.join(classes)} in float32 in {model.name}: "
                         f"keras.models.clone_model says {str(exc).splitlines()[0]}") from None


def jit_setting(value: Any) -> Any:
    """A variant's jit_compile as Keras takes it: True, False or "auto"."""
    return value if isinstance(value, bool) else "auto"
