"""The step-time budget: a probe times a few images once per variant, device and policy, and
each cell predicts its own step from it, so a CPU skips what would take hours."""

from __future__ import annotations

import time
from typing import Any

from mptbench.devices import require_visible
from mptbench.policies import Policy
from mptbench.train.models import build_model, jit_setting, one_hot_labels


def probe_cell(run: dict, prepared: dict) -> dict[str, Any]:
    """Seconds of one training step on train.probe_batch_size images of random data."""
    import tensorflow as tf

    require_visible(tf, run["device"]["name"])
    probe_bs = run["train"]["probe_batch_size"]
    size = prepared["image_size"]
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    policy = Policy.of(run["policy"]["name"], run["policy"])
    model = build_model(
        run["model"], input_shape, num_classes, policy, jit_setting(run["variant"]["jit_compile"])
    )
    x = tf.random.uniform((probe_bs, *input_shape), seed=run["seed"])
    y = tf.zeros((probe_bs,), dtype=tf.int64)
    if one_hot_labels(run["model"]):
        y = tf.one_hot(y, num_classes)
    started = time.perf_counter()
    model.train_on_batch(x, y)  # traces and compiles
    first = time.perf_counter() - started
    started = time.perf_counter()
    model.train_on_batch(x, y)
    step = time.perf_counter() - started
    cell = run["cell"]
    return {
        "variant": cell["variant"],
        "device": cell["device"],
        "policy": run["policy"]["name"],
        "image_size": size,
        "batch_size": probe_bs,
        "first_step_s": first,
        "step_s": step,
    }


def over_budget(run: dict, probe: dict | None, record: dict, log) -> None:
    """Predict this cell's step from the probe; mark the record over_budget when it exceeds
    train.max_step_seconds."""
    limit, batch_size = run["train"]["max_step_seconds"], run["cell"]["batch_size"]
    if not (limit and probe and batch_size > probe["batch_size"]):
        return
    probe_s, probe_bs = probe["step_s"], probe["batch_size"]
    predicted = probe_s * batch_size / probe_bs
    record["predicted_step_s"] = predicted
    log(f"probe: {probe_s:.3f} s for {probe_bs} images -> about {predicted:.2f} s/step")
    if predicted > limit:
        record["outcome"] = "over_budget"
        record["reason"] = (
            f"predicted {predicted:.1f} s/step (probe: {probe_s:.2f} s for {probe_bs} images) "
            f"> train.max_step_seconds={limit}"
        )
