"""A cell's model: its network (engine/networks.py) under the dtype policy, compiled with the
model's optimizer and loss."""

from __future__ import annotations

from typing import Any

from mptbench.core.contract import ModelConfig
from mptbench.core.policies import Policy
from mptbench.engine.networks import make_network


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
    model.compile(
        optimizer=_optimizer(keras, model_cfg, policy),
        loss=model_cfg.loss,
        metrics=["accuracy"],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return model


def jit_setting(value: Any) -> Any:
    """A variant's jit_compile as Keras takes it: True, False or "auto"."""
    return value if isinstance(value, bool) else "auto"
