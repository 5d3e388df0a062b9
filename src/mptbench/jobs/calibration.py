"""A calibrate job: the device's matmul and convolution peaks per dtype, measured by the
engine in the variant's Python with the backend's own kernels (engine/calibrate.py)."""

from __future__ import annotations

from pathlib import Path

from mptbench.core.files import write_json
from mptbench.core.jobs import CalibrateJob, Calibration, VariantConfig, encode
from mptbench.jobs.environment import interpreter
from mptbench.jobs.launcher import Engine, environment


def calibrate_variant(
    device: str,
    variant: VariantConfig,
    settings: dict,
    env_manifest: str | None,
    output: str,
    backend: str = "tensorflow",
    tf32: bool = True,
) -> Calibration:
    """Measure in the variant's Python, with its environment and the backend's; the result is
    written to `output` (and returned)."""
    python, _ = interpreter(env_manifest)
    engine = Engine(python, environment(variant.env, device, backend))
    out = Path(output)
    job = CalibrateJob(
        out=str(out.with_name(f".{out.name}.out")), device=device, backend=backend,
        variant=variant.name, settings=settings, jit_compile=variant.jit_compile, tf32=tf32,
    )  # fmt: skip
    calibration = engine.result(job, Calibration)
    write_json(output, encode(calibration))
    return calibration
