"""A calibrate job: the device's matmul and convolution peaks per dtype, measured by the
engine in the variant's Python with the backend's own kernels (engine/calibrate.py)."""

from __future__ import annotations

from pathlib import Path

from mptbench.core import hardware
from mptbench.core.contract import (
    CalibrateJob,
    Calibration,
    ModelInfo,
    VariantConfig,
    decode,
    encode,
)
from mptbench.core.files import read_json, write_json
from mptbench.jobs.environment import interpreter
from mptbench.jobs.launcher import Engine, environment


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
    settings: dict,
    env_manifest: str | None,
    output: str,
    backend: str = "tensorflow",
    tf32: bool = True,
    model_infos: list[str] = (),
    model_batch: int = 0,
    machine: str = "local",
) -> Calibration:
    """Measure in the variant's Python, with its environment and the backend's; the result is
    written to `output` (and returned). `model_infos`: the model_info files of the models whose
    own convolutions the conv peak must cover, at batches up to `model_batch`."""
    python, _ = interpreter(env_manifest)
    engine = Engine(python, environment(variant.env, device, backend))
    out = Path(output)
    job = CalibrateJob(
        out=str(out.with_name(f".{out.name}.out")), device=device, backend=backend,
        variant=variant.name, settings=settings, jit_compile=variant.jit_compile, tf32=tf32,
        model_convs=model_convs(model_infos), model_batch=model_batch,
    )
    calibration = engine.result(job, Calibration)
    calibration.hardware, calibration.machine = hardware.identity(device), machine
    write_json(output, encode(calibration))
    return calibration
