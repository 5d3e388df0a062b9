"""The synthetic twin: the same model, policy and batch on random tensors already in memory.

Its step time is the step with no input pipeline at all, so the ratio to it tells an input
bottleneck (well above 1) from compute (about 1), and its FLOP rate is the compute-only one.
"""

from __future__ import annotations

from mptbench.core.jobs import Run
from mptbench.engine import feed, timing
from mptbench.engine.backends import Session


def synthetic_twin(
    session: Session, model, run: Run, prepared: dict, batch_size: int, timed_steps: int
) -> list[float]:
    """Seconds of the twin's steps: until its median is known to train.precision (in-memory
    steps vary little, so that comes soon), at most as many as the real run timed and
    train.synthetic_max_steps."""
    data = feed.in_memory(session, run, prepared, batch_size)
    timed_steps = min(timed_steps, run.train.synthetic_max_steps)
    # The model is warm already; a few steps let the new input's function trace settle.
    warmup = max(2, run.train.warmup_steps)
    minimum = min(timed_steps, run.train.min_timed_steps)
    timer = timing.make_step_timer(
        warmup, timed_steps, minimum, None, precision=run.train.precision
    )
    block = run.block_steps  # a timed sample is a block of steps
    model.fit(
        data, epochs=1, steps_per_epoch=warmup + timed_steps * block, callbacks=[timer],
        verbose=0, shuffle=False,
    )  # fmt: skip
    return timer.clock.step_seconds
