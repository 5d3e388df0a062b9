"""The synthetic twin: the same model, policy and batch on random tensors already in memory.

Its step time is the step with no input pipeline at all, so the ratio to it tells an input
bottleneck (well above 1) from compute (about 1), and its FLOP rate is the compute-only one.
"""

from __future__ import annotations

from mptbench.train import timing
from mptbench.train.models import one_hot_labels


def synthetic_twin(
    tf, model, run: dict, input_shape, num_classes: int, batch_size: int, timed_steps: int
) -> list[float]:
    """Seconds of the twin's steps: until its median is known to train.precision (in-memory
    steps vary little, so that comes soon), at most as many as the real run timed and
    train.synthetic_max_steps."""
    x = tf.random.uniform((batch_size, *input_shape), seed=run["seed"])
    y = tf.random.uniform((batch_size,), maxval=num_classes, dtype=tf.int64, seed=run["seed"])
    if one_hot_labels(run["model"]):
        y = tf.one_hot(y, num_classes)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    timed_steps = min(timed_steps, run["train"]["synthetic_max_steps"])
    # The model is warm already; a few steps let the new input's function trace settle.
    warmup = max(2, run["train"]["warmup_steps"])
    minimum = min(timed_steps, run["train"]["min_timed_steps"])
    timer = timing.make_step_timer(
        warmup, timed_steps, minimum, None, precision=run["train"]["precision"]
    )
    model.fit(
        data, epochs=1, steps_per_epoch=warmup + timed_steps, callbacks=[timer], verbose=0,
        shuffle=False,
    )  # fmt: skip
    return timer.clock.step_seconds
