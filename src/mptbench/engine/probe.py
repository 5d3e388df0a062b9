"""The probe: a few steps of a cell's model at two small batch sizes, on random in-memory data,
so each cell can predict its step time before it runs (jobs/budget.py)."""

from __future__ import annotations

import statistics
import time

from mptbench.core.contract import ProbeJob, ProbePoint, ProbeResult
from mptbench.core.files import read_json
from mptbench.engine.backends import Session
from mptbench.engine.feed import random_batch
from mptbench.engine.fingerprint import on_device
from mptbench.engine.models import build_model, jit_setting

PROBE_STEPS = 3  # timed steps per probe batch size (after one that compiles); their median


def time_steps(model, x, y, batch_size: int, limit: float | None,
               enough: float | None = None) -> ProbePoint:
    """PROBE_STEPS steps after the one that compiles, fewer once they took `enough` seconds
    (one at least) or one took over `limit`; their median."""
    started = time.perf_counter()
    model.train_on_batch(x, y)  # traces and compiles
    first = time.perf_counter() - started
    steps = []
    for _ in range(PROBE_STEPS):
        started = time.perf_counter()
        model.train_on_batch(x, y)
        steps.append(time.perf_counter() - started)
        if limit and steps[-1] > limit:
            break  # one step over the limit is all the probe needs to know
        if enough and sum(steps) >= enough:
            break
    return ProbePoint(batch_size, first, steps, statistics.median(steps))


def probe_cell(session: Session, job: ProbeJob, prepared: dict) -> ProbeResult:
    """Median step seconds at each of train.probe_batch_sizes, on random in-memory data."""
    run = job.run
    facts = on_device(session, run.cell.device, run.device.tf32)
    size, limit = prepared["image_size"], run.train.max_step_seconds
    input_shape, num_classes = (size, size, 3), len(prepared["classes"])
    found = ProbeResult(backend=session.name, variant=run.cell.variant, device=run.cell.device,
                        policy=run.policy.name, image_size=size, points=[], fingerprint=facts)
    try:
        model = build_model(
            run.model, input_shape, num_classes, run.policy, jit_setting(run.variant.jit_compile)
        )
        to_tensor = session.keras.ops.convert_to_tensor
        for batch_size in run.train.probe_batch_sizes:
            x, y = random_batch(run.seed, batch_size, input_shape, num_classes,
                                run.model.one_hot_labels)
            enough = run.train.probe_seconds if run.train.plan == "fast" else None
            found.points.append(
                time_steps(model, to_tensor(x), to_tensor(y), batch_size, limit, enough))
            if limit and found.points[-1].step_s > limit:
                break  # a larger batch is only slower
    except Exception as exc:  # noqa: BLE001 - a known outcome is the probe's, others raised
        known = session.classify(exc)
        if known is None:
            raise
        found.outcome, found.reason = known
        print(f"probe: {found.outcome}: {found.reason}", flush=True)
        return found
    steps = ", ".join(f"{p.step_s:.3f} s at batch {p.batch_size}" for p in found.points)
    print(f"probe: {steps}", flush=True)
    return found


def run(job: ProbeJob, start) -> ProbeResult:
    """Do a probe (the engine's entry point: `start` starts its backend)."""
    return probe_cell(start(job.run.backend.name), job, read_json(job.prepared))
