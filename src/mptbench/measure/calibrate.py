"""The measured peak of a device: matmul and convolution TFLOP/s in float32, float16, bfloat16.

A policy can only speed training up where the device runs its dtype faster; these peaks,
measured with the same backend, build and settings as the train jobs, say whether it does.
The calibrate rule calls `calibrate_variant`, which measures in the variant's own Python with
the backend's own operations (measure/kernels.py: JAX's are jax.numpy and lax, jitted).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from mptbench.files import read_json, write_json
from mptbench.measure.kernels import kernels as kernels_of
from mptbench.measure.peaks import conv_peak, matmul_peak
from mptbench.policies import DTYPES

MODULE = "mptbench.measure.calibrate"


def calibrate(kernels, settings: dict, log=print) -> dict:
    """Matmul and convolution peaks per dtype; each dtype within settings["cap_s"], half of
    it for matmuls (the convolutions may use what the matmuls leave)."""
    result: dict = {"matmul": {}, "conv": {}, "settings": settings, "jit_compile": kernels.jit}
    for dtype in DTYPES:
        started = time.monotonic()
        mm = matmul_peak(kernels, dtype, settings, started + settings["cap_s"] / 2)
        conv = conv_peak(kernels, dtype, settings, started + settings["cap_s"])
        result["matmul"][dtype], result["conv"][dtype] = mm, conv
        log(
            f"{dtype}: matmul {mm['tflops']:.3f} TFLOP/s at {mm['size']} ({mm['stopped']}), "
            f"conv {conv['tflops']:.3f} TFLOP/s at {conv['shape']} k{conv['kernel']} "
            f"({conv['stopped']}); {time.monotonic() - started:.1f} s"
        )
    for kind in ("matmul", "conv"):
        base = result[kind]["float32"]["tflops"]
        result[f"{kind}_vs_float32"] = {d: result[kind][d]["tflops"] / base for d in DTYPES}
    return result


def calibrate_variant(
    device: str,
    variant: dict,
    settings: dict,
    env_manifest: str | None,
    output: str,
    backend: str = "tensorflow",
    tf32: bool = True,
) -> int:
    """Measure in the variant's Python, with its environment and the backend's; returns the
    child's exit code."""
    from mptbench.variants import process
    from mptbench.variants.environment import interpreter

    python, _ = interpreter(env_manifest)
    env = process.environment(variant.get("env"), device, backend)
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "calibrate.json"
        facts = {"device": device, "variant": variant, "settings": settings, "backend": backend}
        write_json(job, facts | {"tf32": tf32})
        done = process.run(
            python, MODULE, ["--job", str(job), "--output", output], env, capture=False
        )
    return done.returncode


def measure(job: dict) -> dict | str:
    """The calibration of one job, or why it cannot run (one line)."""
    from mptbench.backends import start, tf32_effective
    from mptbench.measure.fingerprint import fingerprint

    session = start(job.get("backend", "tensorflow"))
    device, variant = job["device"], job["variant"]
    try:
        session.require_gpu(device)
    except RuntimeError as exc:
        return str(exc)
    facts = fingerprint(session.backend, session.framework, session.keras, device)
    facts |= session.facts
    tf32 = job.get("tf32", True)
    if facts["gpu"]:
        session.set_tf32(tf32)
    facts["tf32"] = tf32_effective(tf32, device, (facts["gpu"] or {}).get("compute_capability"))
    # Measured as the variant's cells run: XLA-compiled where they are (jit_compile=True).
    kernels = kernels_of(session.name, session.framework, variant.get("jit_compile") is True)
    return {
        "device": device,
        "variant": variant.get("name"),
        "backend": session.name,
        "fingerprint": facts,
        **calibrate(kernels, job["settings"], log=lambda line: print(line, flush=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="JSON: device, variant, settings")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    result = measure(read_json(args.job))
    if isinstance(result, str):
        print(f"error: {result}", file=sys.stderr)
        return 1
    write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
