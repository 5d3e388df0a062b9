"""dataset=synthetic: random tensors of the configured shape in place of images.

Nothing is downloaded or cached and nothing here needs TensorFlow, so a machine with only JAX
or PyTorch can time cells with it. Every step reads the same batch, already in memory: a cell
on synthetic data times its training step with no input pipeline at all.
"""

from __future__ import annotations

from typing import Any

BUILDER = "synthetic"


def prepared_info(dataset: dict[str, Any]) -> dict[str, Any]:
    """What the prepare rule writes for it: the shape and the counts the cells read."""
    return {
        "dataset": dataset["name"],
        "image_size": dataset["image_size"],
        "builder": BUILDER,
        "classes": [f"class_{i}" for i in range(dataset["num_classes"])],
        # An epoch is as many steps as this many examples make; there is nothing to validate.
        "splits": {"train": dataset["train_examples"], "validation": 0},
        "data_dir": None,
        "source": None,
        "digest": None,
    }


def is_synthetic(prepared: dict[str, Any]) -> bool:
    return prepared.get("builder") == BUILDER
