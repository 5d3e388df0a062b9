"""The lines that reproduce an answer's chosen configuration in a user's own Keras code: the
backend (set before Keras is first imported), the global dtype policy, the layer classes the
policy keeps in float32 (rebuilt through keras.models.clone_model, as the engine does:
engine/models.py keep_float32), the batch size, and loss scaling where the policy asks for it.
Python a user can paste above their model and run as it is (tests run it); the model, its
data and its fit are theirs, named in comments.
"""

from __future__ import annotations

import pandas as pd

from mptbench.core.policies import policy_of_record
from mptbench.report.choice import BASELINE_ONLY, KEEP, USE, Choice

# The decisions that name a configuration to train with.
NAMED = (USE, KEEP, BASELINE_ONLY)


def _text(row: pd.Series, column: str) -> str | None:
    value = row.get(column)
    return str(value) if isinstance(value, str) and value.strip() else None


def keras_policy(row: pd.Series) -> str:
    """Keras' name for the cell's policy (its record's keras_policy; records from before it
    was kept: the policy its facts make, core/policies.py policy_of_record)."""
    return _text(row, "keras_policy") or policy_of_record(row.to_dict()).keras_name


def float32_layers(row: pd.Series) -> list[str]:
    """The layer classes the cell's policy computed in float32."""
    return (_text(row, "float32_layers") or "").split()


def _keep_lines(kept: list[str]) -> list[str]:
    """KEEP_FLOAT32 and keep_float32(model): the layer classes rebuilt in float32."""
    classes = ", ".join(f"keras.layers.{k}" for k in kept)
    return [
        f"KEEP_FLOAT32 = ({classes},)",
        "",
        "",
        "def keep_float32(model):",
        '    """The model again, its KEEP_FLOAT32 layers computing in float32 (new weights:',
        '    call it before training)."""',
        "",
        "    def clone(layer):",
        "        config = layer.get_config()",
        "        if isinstance(layer, KEEP_FLOAT32):",
        '            config["dtype"] = "float32"',
        "        return layer.__class__.from_config(config)",
        "",
        "    return keras.models.clone_model(model, clone_function=clone)",
        "",
    ]


def _model_lines(row: pd.Series, policy: str, kept: list[str]) -> list[str]:
    """The user's model, compile and fit, as comments: what the policy asks of them."""
    build = "keep_float32(build_model())" if kept else "build_model()"
    lines = ["", f"# model = {build}  # yours, built after the policy is set"]
    if policy != "float32":
        lines.append('#   its last layer in float32: keras.layers.Activation("softmax", '
                     'dtype="float32")')
    if policy == "mixed_float16":
        lines.append("# model.compile(optimizer, loss)  # Keras scales the loss itself under "
                     "mixed_float16 (LossScaleOptimizer)")
    elif _text(row, "loss_scaling") == "dynamic":
        lines.append("# model.compile(keras.optimizers.LossScaleOptimizer(optimizer), loss)")
    else:
        lines.append("# model.compile(optimizer, loss)")
    return [*lines, "# model.fit(dataset.batch(BATCH_SIZE), epochs=...)"]


def recipe(c: Choice) -> str | None:
    """The chosen configuration as lines of Python; None where the answer names none."""
    if c.decision not in NAMED or c.chosen is None:
        return None
    row = c.chosen
    backend, policy, kept = str(row["backend"]), keras_policy(row), float32_layers(row)
    batch = int(row["batch_size"])
    variant = _text(row, "variant")
    built = ([f"# measured with the {variant} variant: "
              f"{_text(row, 'variant_description') or 'see conf/variant'}"]
             if variant and variant != "pypi" else [])
    lines = [
        f"# mptbench's answer for {row['model']}: {row['policy']} at batch {batch} on {backend}",
        *built,
        "import os",
        "",
        f'os.environ["KERAS_BACKEND"] = "{backend}"  # before Keras is first imported',
        "import keras",
        "",
        f'keras.mixed_precision.set_global_policy("{policy}")'
        + ("  # Keras' default" if policy == "float32" else ""),
        f"BATCH_SIZE = {batch}",
        *(_keep_lines(kept) if kept else []),
        *_model_lines(row, policy, kept),
    ]
    return "\n".join(lines) + "\n"
