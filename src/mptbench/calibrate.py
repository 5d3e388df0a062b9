"""The measured peak of a device: matmul and convolution TFLOP/s in float32, float16, bfloat16.

A policy can only speed training up where the device runs its dtype faster; these peaks,
measured with the same TensorFlow build and settings as the train jobs, say whether it does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mptbench.dataset import write_json

DTYPES = ("float32", "float16", "bfloat16")


def calibrate(tf, settings: dict, log=print) -> dict:
    from mptbench.flops import conv_peak, matmul_peak

    result: dict = {"matmul": {}, "conv": {}}
    for dtype in DTYPES:
        mm = matmul_peak(tf, dtype, settings["matmul_size"], settings["min_seconds"])
        conv = conv_peak(
            tf, dtype, settings["conv_shape"], settings["conv_kernel"], settings["min_seconds"]
        )
        result["matmul"][dtype], result["conv"][dtype] = mm, conv
        log(f"{dtype}: matmul {mm['tflops']:.3f} TFLOP/s, conv {conv['tflops']:.3f} TFLOP/s")
    for kind in ("matmul", "conv"):
        base = result[kind]["float32"]["tflops"]
        result[f"{kind}_vs_float32"] = {d: result[kind][d]["tflops"] / base for d in DTYPES}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True, help="cpu, gpu0, gpu1, ...")
    parser.add_argument("--variant", required=True, help="the variant's config (JSON)")
    parser.add_argument("--settings", required=True, help="sizes and duration (JSON)")
    parser.add_argument("--env", default=None, help="the variant_env rule's manifest")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    variant = json.loads(args.variant)
    if args.env:
        python = json.loads(Path(args.env).read_text())["python"]
        if Path(python).resolve() != Path(sys.executable).resolve():
            # Measure with the variant's own TensorFlow: start again in its interpreter.
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p
                for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH"))
                if p
            )
            argv = sys.argv[1:] if argv is None else argv
            os.execv(python, [python, "-m", "mptbench.calibrate", *argv])
    # Before TensorFlow starts: the device it may see, and the variant's settings.
    os.environ["CUDA_VISIBLE_DEVICES"] = "" if args.device == "cpu" else args.device[3:]
    os.environ.update({str(k): str(v) for k, v in (variant.get("env") or {}).items()})
    from mptbench.cell import import_tensorflow
    from mptbench.fingerprint import fingerprint

    tf, keras, startup = import_tensorflow()
    if args.device != "cpu" and not tf.config.list_physical_devices("GPU"):
        print(f"error: {args.device} was asked for but TensorFlow sees no GPU", file=sys.stderr)
        return 1
    if variant.get("jit_compile") is True:
        tf.config.optimizer.set_jit(True)
    data = {
        "device": args.device,
        "variant": variant.get("name"),
        "fingerprint": fingerprint(tf, keras, args.device) | startup,
        **calibrate(tf, json.loads(args.settings), log=lambda line: print(line, flush=True)),
    }
    write_json(args.output, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
