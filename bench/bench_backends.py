"""The three Keras backends side by side on this machine: float32 against mixed_bfloat16, each
model on TensorFlow, JAX and PyTorch, through the pipeline (the default timing: 3 processes a
comparison or more, the policies taking turns in each, so each speedup is paired), on the
offline fixture's images at --image-size.

It prints the machine, then per model and backend float32's and mixed_bfloat16's step with
their intervals and the paired speedup with its interval, and the run's wall time.

    python bench/bench_backends.py                                  # seed convnet, 128 px
    python bench/bench_backends.py --models seed_convnet mobilenet_v2 --image-size 96
    python bench/bench_backends.py --report-only
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import ROOT, WORK, Steal, checkout, interval, machine, snakemake, summary

HERE = WORK / "backends"
NAME = "backends"


def overrides(args) -> list[str]:
    return [
        f"name={NAME}", "dataset=imagenette_smoke", f"dataset.image_size={args.image_size}",
        f"model=[{','.join(args.models)}]", "backend=[tensorflow,jax,torch]",
        "policy=[float32,mixed_bfloat16]", "sweep.devices=[cpu]",
        f"sweep.batch_sizes=[{args.batch_size}]", "sweep.fit_search=false",
        "train.parity_steps=0", "train.synthetic_twin=false", "train.profile_steps=0",
        f"train.max_repeats={args.max_repeats}",
        # The fixture's 120 images are a few steps: an epoch as long as the real data's (the
        # input repeats), so the timing rules, not the data, end each turn.
        "train.steps_per_epoch=100",
    ]


def report(folder: Path) -> None:
    print("| model | backend | float32 ms | mixed_bfloat16 ms | mixed_bfloat16 vs float32, "
          "paired | processes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (model, backend), rows in summary(folder, NAME).groupby(["model", "backend"]):
        mine = rows.set_index("policy")
        base, other = mine.loc["float32"], mine.loc["mixed_bfloat16"]
        speedup = (f"**{other['speedup_vs_baseline']:.2f}**"
                   f"{interval(other, 'speedup')}" if other["outcome"] == "ok"
                   else f"{other['outcome']}: {other['reason']}")
        print(f"| {model} | {backend} | {base['ms_per_step']:.0f}"
              f"{interval(base, 'ms_per_step', 0)} | {other['ms_per_step']:.0f}"
              f"{interval(other, 'ms_per_step', 0)} | {speedup} | "
              f"{int(other['speedup_processes'] or 0)} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["seed_convnet"])
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-repeats", type=int, default=5, help="processes a comparison")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    print(machine())
    folder = HERE / "checkout"
    if not args.report_only:
        checkout(ROOT, folder)
        steal, started = Steal(), time.monotonic()
        done = snakemake(folder, overrides(args))
        if done.returncode != 0:
            sys.exit(f"the run failed; see {folder / 'last_run.log'}")
        print(f"{(time.monotonic() - started) / 60:.1f} min, steal {steal.percent()}%")
    report(folder)


if __name__ == "__main__":
    main()
