"""The measured peak of a device: matmul and convolution TFLOP/s in float32, float16, bfloat16.

A policy can only speed training up where the device runs its dtype faster; these peaks,
measured with the same backend, build and settings as the train jobs, say whether it does.
The calibrate rule runs this as an engine job in the variant's own Python, with the backend's
own operations (engine/kernels.py: JAX's are jax.numpy and lax, jitted).
"""

from __future__ import annotations

import time
from pathlib import Path

from mptbench.core.contract import Calibrate, CalibrateJob, Calibration, encode
from mptbench.core.policies import DTYPES
from mptbench.engine.backends import Session
from mptbench.engine.fingerprint import on_device
from mptbench.engine.kernels import kernels as kernels_of
from mptbench.engine.peaks import conv_peak, matmul_peak, model_conv_peak


def calibrate(
    kernels, settings: Calibrate, log=print, model_convs: list[dict] | None = None,
    max_batch: int = 0,
    dtypes: tuple[str, ...] = DTYPES, turn=lambda dtype: None,
) -> dict:
    """Matmul and convolution peaks per dtype; each dtype within settings.cap_s, half of
    it for matmuls (the convolutions may use what the matmuls leave), and half as much again
    for the models' own convolutions (`model_convs`, model_info's conv_layers, at batches up
    to `max_batch`): the conv peak is the best of the generic series and the models' own."""
    result: dict = {"settings": encode(settings), "jit_compile": kernels.jit}
    result |= {"matmul": {}, "conv": {}}
    result["model_batch"] = max_batch
    for dtype in dtypes:
        turn(dtype)
        started = time.monotonic()
        mm = matmul_peak(kernels, dtype, settings, started + settings.cap_s / 2)
        conv = conv_peak(kernels, dtype, settings, started + settings.cap_s)
        conv["source"] = "generic series"
        if model_convs:
            deadline = time.monotonic() + settings.cap_s / 2
            own = model_conv_peak(kernels, dtype, model_convs, settings, deadline, max_batch)
            conv["model_layers"] = own
            if own.get("tflops", 0) > conv["tflops"]:
                conv |= {k: own[k] for k in ("tflops", "shape", "kernel", "stride", "layer")}
                conv["source"] = f"the models' own layer {own['layer']}"
        result["matmul"][dtype], result["conv"][dtype] = mm, conv
        log(
            f"{dtype}: matmul {mm['tflops']:.3f} TFLOP/s at {mm['size']} ({mm['stopped']}), "
            f"conv {conv['tflops']:.3f} TFLOP/s at {conv['shape']} k{conv['kernel']} "
            f"({conv['stopped']}; {conv['source']}); {time.monotonic() - started:.1f} s"
        )
    for kind in ("matmul", "conv"):
        base = result[kind][DTYPES[0]]["tflops"]
        result[f"{kind}_vs_float32"] = {d: result[kind][d]["tflops"] / base for d in dtypes}
    return result


def measure(session: Session, job: CalibrateJob) -> Calibration:
    """The calibration of one job in this process; a GPU job that sees no GPU raises."""
    facts = on_device(session, job.device, job.tf32)
    # Measured as the variant's cells run: XLA-compiled where they are (jit_compile=True).
    kernels = kernels_of(session.name, session.framework, job.jit_compile is True)
    def turn(dtype: str) -> None:
        if job.progress:
            Path(job.progress).write_text(dtype)

    measured = calibrate(kernels, job.settings, lambda line: print(line, flush=True),
                         job.model_convs, job.model_batch, job.dtypes or DTYPES, turn)
    return Calibration(device=job.device, variant=job.variant, backend=session.name,
                       fingerprint=facts, **measured)


def run(job: CalibrateJob, start) -> Calibration:
    """Do a calibration (the engine's entry point: `start` starts its backend)."""
    return measure(start(job.backend), job)
