"""What a cell's `fit` reads, in a form its backend takes.

Images come from the prepared tfds cache through tf.data (engine/pipeline.py) for every backend
(Keras hands a JAX or PyTorch model the same batches as numpy arrays). Random data (the
synthetic twin, and dataset=synthetic) is one batch made once and kept on the device: a
tf.data dataset for TensorFlow, a Python generator of the backend's own tensors for the others,
so that path never imports TensorFlow.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mptbench.core.contract import Run
from mptbench.data.synthetic import is_synthetic
from mptbench.engine.backends import Session
from mptbench.engine.pipeline import input_pipeline


def random_batch(seed: int, batch_size: int, input_shape, num_classes: int, one_hot: bool):
    """Images uniform in [0, 1) and random labels (class indices, or one-hot rows)."""
    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *input_shape), dtype=np.float32)
    y = rng.integers(0, num_classes, size=(batch_size,), dtype=np.int32)
    if one_hot:
        y = np.eye(num_classes, dtype=np.float32)[y]
    return x, y


# The labels' dtype in the tfds cache (a ClassLabel feature): random class indices take it on
# TensorFlow, so that a model whose steps ran on the cell's data runs random data (the synthetic
# twin) through the same traced step. With another dtype TensorFlow traces and optimises the step
# again for the new input: 1.5-1.9 s a policy a process for the seed convnet on a 2-core CPU.
LABEL_DTYPE = "int64"


def repeated(session: Session, x, y):
    """The same batch for every step, kept where the backend computes (on TensorFlow, with the
    element spec of the cell's own training data: engine/pipeline.py)."""
    if session.backend.facts.feeds == "dataset":
        tf = session.framework
        labels = tf.constant(y, dtype=LABEL_DTYPE if np.issubdtype(y.dtype, np.integer) else None)
        return tf.data.Dataset.from_tensors((tf.constant(x), labels)).repeat()
    ops = session.keras.ops
    xt, yt = ops.convert_to_tensor(x), ops.convert_to_tensor(y)

    def forever():
        while True:
            yield xt, yt

    return forever()


def in_memory(session: Session, run: Run, prepared: dict, batch_size: int):
    """The cell's model on random data of its shape, in memory."""
    size, classes = prepared["image_size"], len(prepared["classes"])
    x, y = random_batch(run.seed, batch_size, (size, size, 3), classes, run.model.one_hot_labels)
    return repeated(session, x, y)


def cell_data(
    session: Session, run: Run, prepared: dict, epochs: bool = False,
    epoch_batches: int | None = None,
) -> tuple[Any, Any]:
    """(training data, validation data or None) for a cell's fit: the training data for ever,
    or with `epochs` an epoch at a time, as a user's dataset ends each epoch (of
    `epoch_batches` batches: engine/pipeline.py). Random data is for ever, whatever is asked."""
    batch_size = run.cell.batch_size
    if is_synthetic(prepared):
        return in_memory(session, run, prepared, batch_size), None
    import tensorflow as tf  # tf.data reads the cache whatever the backend

    num_classes = len(prepared["classes"])
    pipeline = {
        "input_cfg": run.dataset.input,
        "seed": run.seed,
        "one_hot_classes": num_classes if run.model.one_hot_labels else 0,
    }
    train = input_pipeline(tf, prepared, "train", batch_size, training=True, epochs=epochs,
                           epoch_batches=epoch_batches, **pipeline)
    return train, validation_data(session, run, prepared) if run.train.validate else None


def validation_data(
    session: Session, run: Run, prepared: dict, batches: int | None = None
) -> Any:
    """The validation split as a cell's fit reads it after an epoch; None where the data has
    none (random data, or a dataset without one). With `batches`, its first batches alone (a
    timed pass reads no more, and caches no more)."""
    if is_synthetic(prepared) or not prepared["splits"].get("validation"):
        return None
    import tensorflow as tf

    classes = len(prepared["classes"])
    return input_pipeline(
        tf, prepared, "validation", run.cell.batch_size, training=False,
        input_cfg=run.dataset.input, seed=run.seed,
        one_hot_classes=classes if run.model.one_hot_labels else 0,
        examples=None if batches is None else batches * run.cell.batch_size,
    )


def input_cost(
    session: Session, run: Run, prepared: dict, batches: int = 3, seconds: float = 0.5
) -> tuple[float, float] | None:
    """The cell's input pipeline alone, no model: (wall seconds, CPU seconds of this process)
    per batch, from at least `batches` batches and `seconds` after the first (which starts the
    iterator); None for in-memory data, which has no pipeline to wait for."""
    if is_synthetic(prepared):
        return None
    train, _ = cell_data(session, run, prepared)
    iterator = iter(train) if session.backend.facts.feeds == "dataset" else (
        train.as_numpy_iterator())
    drawn, wall, cpu = 0, 0.0, 0.0
    try:
        next(iterator)
        wall, cpu = time.perf_counter(), time.process_time()
        while drawn < batches or time.perf_counter() - wall < seconds:
            next(iterator)
            drawn += 1
    except StopIteration:  # a dataset of a few batches: what was drawn
        pass
    if not drawn:
        return None
    return (time.perf_counter() - wall) / drawn, (time.process_time() - cpu) / drawn
