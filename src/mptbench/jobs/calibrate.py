"""A calibrate job: the device's matmul and convolution peaks per dtype, measured by the
engine in the variant's Python with the backend's own kernels (engine/calibrate.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mptbench.core import frameworks, hardware
from mptbench.core.contract import (
    Calibrate,
    CalibrateJob,
    Calibration,
    ModelInfo,
    VariantConfig,
    decode,
    encode,
)
from mptbench.core.files import read_json, write_json
from mptbench.core.outcomes import Outcome
from mptbench.core.policies import DTYPES
from mptbench.jobs.environment import interpreter
from mptbench.jobs.launcher import Engine, EngineFailed, environment


def model_convs(model_infos: list[str]) -> list[dict]:
    """Every Conv2D layer of the models described in `model_infos`, each with its model's name
    in its own."""
    layers = []
    for path in model_infos:
        info = decode(ModelInfo, read_json(path))
        layers += [c | {"name": f"{info.model}/{c['name']}"} for c in info.conv_layers]
    return layers


def calibrate_variant(
    device: str,
    variant: VariantConfig,
    settings: Calibrate,
    env_manifest: str | None,
    output: str,
    backend: str = frameworks.DEFAULT.name,
    tf32: bool = True,
    model_infos: list[str] = (),
    model_batch: int = 0,
    machine: str = "local",
) -> Calibration:
    """Measure in the variant's Python, with its environment and the backend's; the result is
    written to `output` (and returned). `model_infos`: the model_info files of the models whose
    own convolutions the conv peak must cover, at batches up to `model_batch`."""
    python, _ = interpreter(env_manifest)
    engine = Engine(python, environment(variant.environment(backend), device, backend))
    out = Path(output)
    job = CalibrateJob(
        out=str(out.with_name(f".{out.name}.out")), device=device, backend=backend,
        variant=variant.name, settings=settings, jit_compile=variant.jit_compile, tf32=tf32,
        model_convs=model_convs(model_infos), model_batch=model_batch,
        progress=str(out.with_name(f".{out.name}.progress")),
    )
    calibration, refused = _measure(engine, job)
    for dtype, reason in refused.items():  # no peak: the library has no kernel for it here
        for kind in ("matmul", "conv"):
            getattr(calibration, kind)[dtype] = {"tflops": None, Outcome.UNSUPPORTED.value: reason}
    return _finish(calibration, output, device, machine)


def _measure(engine: Engine, job: CalibrateJob) -> tuple[Calibration, dict[str, str]]:
    """The calibration of every dtype the library runs, and why each other has none: a dtype
    whose kernels it refuses aborts the process, which starts again without it."""
    dtypes, refused = list(DTYPES), {}
    progress = Path(job.progress)
    while True:
        progress.unlink(missing_ok=True)
        finished = engine.launch(replace(job, dtypes=tuple(dtypes)), Calibration)
        turn = progress.read_text().strip() if progress.exists() else None
        progress.unlink(missing_ok=True)
        if not finished.death:
            break
        outcome, reason = finished.death
        if outcome != Outcome.UNSUPPORTED or turn in (None, DTYPES[0]):
            raise EngineFailed(f"the calibration's engine died: {reason}")
        print(f"{turn}: unsupported here, {reason}; the other dtypes measured again", flush=True)
        refused[turn] = reason
        dtypes.remove(turn)
    calibration = finished.result
    if finished.kernels is not None:  # what each dtype's kernels were built for (core/isa.py)
        calibration.fingerprint["kernel_isa"] = finished.kernels.highest()
        calibration.fingerprint["kernel_isa_by_dtype"] = {
            dtype: finished.kernels.highest((dtype,)) for dtype in finished.kernels.by_dtype
        }
        calibration.fingerprint["onednn_isa"] = finished.kernels.words
    return calibration, refused


def _finish(calibration: Calibration, output: str, device: str, machine: str) -> Calibration:
    calibration.hardware, calibration.machine = hardware.identity(device), machine
    write_json(output, encode(calibration))
    return calibration
