"""Does a batch fit: a few real training steps of one cell on random in-memory data, in a fresh
process, and the memory they took at their peak (jobs/fits.py searches the largest batch that
fits from these tries).

In-memory data keeps the input pipeline's cache out of the figure: what is measured is the
model, its optimizer state and activations at this batch size, and the framework around them.
On a GPU the figure is the framework's own peak of device memory; on a CPU it is this
process's own peak resident set (VmHWM: not ru_maxrss, which starts at the peak of the
supervisor it was started from), which the launcher replaces by the trainer's own cgroup's
peak where it has one.
"""

from __future__ import annotations

import os
import time

from mptbench.core.contract import FitJob, FitResult
from mptbench.core.devices import Device, gpu_facts
from mptbench.core.files import read_json
from mptbench.core.frameworks import framework
from mptbench.core.hardware import own_peak_mb
from mptbench.core.outcomes import Outcome
from mptbench.engine.backends import Session
from mptbench.engine.feed import random_batch
from mptbench.engine.fingerprint import on_device
from mptbench.engine.models import build_model, jit_setting


def jax_memory_fraction(job: FitJob) -> None:
    """JAX reads its GPU memory fraction when it starts: set it from the job's limit first."""
    device = Device(job.run.cell.device)
    at_start = framework(job.run.backend.name).memory_limit_at_start
    if not (job.memory_limit_mb and device.is_gpu and at_start):
        return
    total = (gpu_facts(device.index or 0) or {}).get("memory_mb")
    if total:
        fraction = min(1.0, job.memory_limit_mb / total)
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.4f}"
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"


def fit_try(session: Session, job: FitJob, prepared: dict) -> FitResult:
    """`job.steps` training steps at the cell's batch size; an error the backend knows (an
    out-of-memory error above all) is the try's outcome."""
    run, device = job.run, Device(job.run.cell.device)
    batch = run.cell.batch_size
    if device.is_gpu and job.memory_limit_mb:
        total = (gpu_facts(device.index or 0) or {}).get("memory_mb")
        session.backend.limit_gpu_memory(session.framework, job.memory_limit_mb, total)
    facts = on_device(session, run.cell.device, run.device.tf32)
    size, classes = prepared["image_size"], len(prepared["classes"])
    steps = []
    try:
        model = build_model(run.model, (size, size, 3), classes, run.policy,
                            jit_setting(run.variant.jit_compile))
        x, y = random_batch(run.seed, batch, (size, size, 3), classes, run.model.one_hot_labels)
        to_tensor = session.keras.ops.convert_to_tensor
        x, y = to_tensor(x), to_tensor(y)
        for _ in range(job.steps):
            started = time.perf_counter()
            model.train_on_batch(x, y)
            steps.append(time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
        known = session.classify(exc)
        if known is None:
            raise
        print(f"batch {batch}: {known[0]}: {known[1]}", flush=True)
        return FitResult(batch, known[0], known[1], fingerprint=facts)
    if device.is_gpu:
        peak, source = session.backend.gpu_peak_mb(session.framework)
    else:
        peak, source = own_peak_mb()
    print(f"batch {batch}: ok, peak {peak:.0f} MB ({source}), steps "
          + ", ".join(f"{s:.3f}" for s in steps) + " s", flush=True)
    return FitResult(batch, Outcome.OK, None, peak, source, steps, facts)


def run(job: FitJob, start) -> FitResult:
    """Do a fit try (the engine's entry point: `start` starts its backend)."""
    jax_memory_fraction(job)  # before JAX starts
    return fit_try(start(job.run.backend.name), job, read_json(job.prepared))
