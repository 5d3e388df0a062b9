"""The input pipeline: tf.data from the prepared cache, as the seed experiment fed its model."""

from __future__ import annotations

from typing import Any

from mptbench.core.contract import InputConfig
from mptbench.data.cache import load


def shuffle_buffer(rule: Any, train_examples: int, batch_size: int) -> int:
    """The seed's rule ("seed"): train examples // batch size; or a fixed number."""
    if rule == "seed":
        return max(1, train_examples // batch_size)
    return int(rule)


def input_pipeline(
    tf,
    info: dict,
    split: str,
    batch_size: int,
    input_cfg: InputConfig,
    seed: int,
    training: bool,
    one_hot_classes: int = 0,
    examples: int | None = None,
    epochs: bool = False,
    epoch_batches: int | None = None,
):
    """[0,1] floats, shuffled, batched, prefetched.

    Labels stay class indices, or become one-hot vectors of `one_hot_classes` entries. With
    `examples`, the split's first ones alone (taken before the cache). Training data repeats
    for ever (one iterator for every step); with `epochs`, it ends after one epoch as a user's
    does, so `fit` makes a new iterator each epoch: the split's whole batches, or with
    `epoch_batches` that many batches of the split's first examples (taken before the cache,
    so every epoch after the first reads them from memory; reshuffled, and where the split is
    smaller, gone through again within the epoch).
    """
    _, ds = load(info, split)
    if examples is not None:
        ds = ds.take(examples)
    short = training and epochs and epoch_batches
    if short:
        ds = ds.take(epoch_batches * batch_size)
    if input_cfg.cache == "memory":
        ds = ds.cache()  # uint8 after resizing: a quarter of the memory float32 would take
    if training:
        buffer = shuffle_buffer(input_cfg.shuffle_buffer, info["splits"][split], batch_size)
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        ds = ds if epochs and not short else ds.repeat()
    ds = ds.batch(batch_size, drop_remainder=training)
    if short:
        ds = ds.take(epoch_batches)

    def scale(x, y):
        labels = tf.one_hot(y, one_hot_classes) if one_hot_classes else y
        return tf.cast(x, tf.float32) / 255.0, labels

    ds = ds.map(scale, num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = bool(input_cfg.deterministic)
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)
