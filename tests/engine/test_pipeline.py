"""The tf.data pipeline over the prepared cache, as a cell's fit reads it."""

import numpy as np
import pytest

from mptbench.core.contract import InputConfig
from mptbench.engine.pipeline import input_pipeline, shuffle_buffer

pytestmark = pytest.mark.slow


def test_input_pipeline_scales_shuffles_and_batches(prepared32):
    import tensorflow as tf

    cfg = InputConfig(shuffle_buffer="seed", cache="memory", deterministic=True)
    ds = input_pipeline(tf, prepared32, "train", 8, cfg, seed=0, training=True)
    x, y = next(iter(ds))
    assert x.shape == (8, 32, 32, 3) and x.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    assert y.shape == (8,)
    # Deterministic with a seed: the same pipeline yields the same first batch.
    x2, _ = next(iter(input_pipeline(tf, prepared32, "train", 8, cfg, seed=0, training=True)))
    assert np.array_equal(x.numpy(), x2.numpy())
    assert shuffle_buffer("seed", 12895, 32) == 402  # the 2020 rule: examples // batch size
    assert shuffle_buffer(1000, 12895, 32) == 1000
    val = input_pipeline(tf, prepared32, "validation", 8, cfg, seed=0, training=False)
    assert sum(int(b[0].shape[0]) for b in val) == 20  # validation keeps its last, short batch


def test_random_data_feeds_the_step_traced_for_the_cells_own(tf, prepared32):
    """The synthetic twin's in-memory batch has the element spec of the cell's training data
    (dtypes and shapes), so its fit reuses the step TensorFlow traced for the real one rather
    than tracing and optimising it again."""
    from workflow_helpers import smoke_cell_run

    from mptbench.engine import feed

    run = smoke_cell_run()
    real, _ = feed.cell_data(tf, run, prepared32)
    twin = feed.in_memory(tf, run, prepared32, run.cell.batch_size)
    assert twin.element_spec == real.element_spec
