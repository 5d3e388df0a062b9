"""The measured peak of a device: matmul and convolution TFLOP/s in float32, float16, bfloat16.

A policy can only speed training up where the device runs its dtype faster; these peaks,
measured with the same TensorFlow build and settings as the train jobs, say whether it does.
The calibrate rule calls `calibrate_variant`, which measures in the variant's own Python.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from mptbench.devices import require_visible
from mptbench.files import read_json, write_json
from mptbench.measure.peaks import conv_peak, matmul_peak
from mptbench.policies import DTYPES

MODULE = "mptbench.measure.calibrate"


def calibrate(tf, settings: dict, jit: bool = False, log=print) -> dict:
    """Matmul and convolution peaks per dtype; each dtype within settings["cap_s"], half of
    it for matmuls (the convolutions may use what the matmuls leave)."""
    result: dict = {"matmul": {}, "conv": {}, "settings": settings, "jit_compile": jit}
    for dtype in DTYPES:
        started = time.monotonic()
        mm = matmul_peak(tf, dtype, settings, started + settings["cap_s"] / 2, jit)
        conv = conv_peak(tf, dtype, settings, started + settings["cap_s"], jit)
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
    device: str, variant: dict, settings: dict, env_manifest: str | None, output: str
) -> int:
    """Measure in the variant's Python, with its environment; returns the child's exit code."""
    from mptbench.variants import process
    from mptbench.variants.environment import interpreter

    python, _ = interpreter(env_manifest)
    env = process.environment(variant.get("env"), device)
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "calibrate.json"
        write_json(job, {"device": device, "variant": variant, "settings": settings})
        done = process.run(
            python, MODULE, ["--job", str(job), "--output", output], env, capture=False
        )
    return done.returncode


def measure(job: dict) -> dict | str:
    """The calibration of one job, or why it cannot run (one line)."""
    from mptbench.measure.fingerprint import fingerprint
    from mptbench.measure.startup import import_tensorflow

    tf, keras, startup = import_tensorflow()
    device, variant = job["device"], job["variant"]
    try:
        require_visible(tf, device)
    except RuntimeError as exc:
        return str(exc)
    # Measured as the variant's cells run: XLA-compiled where they are (jit_compile=True).
    jit = variant.get("jit_compile") is True
    return {
        "device": device,
        "variant": variant.get("name"),
        "fingerprint": fingerprint(tf, keras, device) | startup,
        **calibrate(tf, job["settings"], jit, log=lambda line: print(line, flush=True)),
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
