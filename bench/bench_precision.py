"""Do two independent runs of the same cell agree within their intervals?

Runs one cell (seed convnet, float32, on the smoke fixture at --image-size) through the real
train job (python -m mptbench.jobs.supervisor) six times, back to back: twice with
train.repeats=1 (the interval then covers the noise within one process only), twice with
train.repeats=3 (it covers the variation between processes too), and, with train.repeats=3,
once timing every step and once timing blocks of 4 steps (device.cpu.block_steps, as GPUs
time blocks of 10): a block's sample is its mean step, so both must find the same ms/step.
For each pair it prints both medians with their 95% intervals, whether they overlap, the
second's median over the first's, and each run's wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work" / "precision"


def setup(image_size: int) -> tuple[Path, Path]:
    from mptbench.core.files import write_json
    from mptbench.data.fixtures import make_imagenette_archive
    from mptbench.jobs.tracking import init_experiment

    WORK.mkdir(parents=True, exist_ok=True)
    archive = WORK / "imagenette.tgz"
    if not archive.exists():
        make_imagenette_archive(archive, train_per_class=40, val_per_class=2, short_side=96)
    prepared = WORK / f"prepared-{image_size}.json"
    if not prepared.exists():
        code = (
            "import sys; from mptbench.data.cache import prepare; from mptbench.core.files import "
            f"write_json; write_json(sys.argv[1], prepare({str(archive)!r}, 'bench-precision', "
            f"{image_size}, {str(WORK / 'tfds')!r}))"
        )
        subprocess.run([sys.executable, "-c", code, str(prepared)], check=True)
    tracking = WORK / "tracking.json"
    uri = f"sqlite:///{WORK / 'mlflow.db'}"
    write_json(tracking, init_experiment(uri, "bench_precision", str(WORK / "artifacts"), False))
    return prepared, tracking


PAIRS = {  # a pair's name: the overrides of its two runs
    "repeats=1": [["train.repeats=1"]] * 2,
    "repeats=3": [["train.repeats=3"]] * 2,
    "block_steps 1 vs 4": [
        ["train.repeats=3", "device.cpu.block_steps=1"],
        ["train.repeats=3", "device.cpu.block_steps=4"],
    ],
}


def run_cell(pair: list[str], args, prepared: Path, tracking: Path, tag: str) -> dict:
    from mptbench.core.contract import encode
    from mptbench.plan import Cell, compose_config, run_config

    overrides = [f"dataset.image_size={args.image_size}", *pair,
                 "train.epochs=50", "train.steps_per_epoch=null", "train.warmup_steps=3",
                 "train.timed_steps=100", "train.min_timed_steps=10", "train.precision=0.02",
                 "train.time_budget_s=60", "train.validate=false", "train.synthetic_twin=false",
                 "train.max_step_seconds=null", "tracking.system_metrics=false"]
    cfg = compose_config(ROOT / "conf", "smoke", overrides)
    run = run_config(
        cfg, Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", "float32", args.batch_size)
    )
    run_file, record = WORK / f"run-{tag}.json", WORK / f"record-{tag}.json"
    run_file.write_text(json.dumps(encode(run)))
    command = [
        sys.executable, "-m", "mptbench.jobs.supervisor", "--run", str(run_file),
        "--prepared", str(prepared), "--tracking", str(tracking), "--record", str(record),
    ]
    started = time.monotonic()
    with open(WORK / f"log-{tag}.txt", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    data = json.loads(record.read_text())
    data["wall_s"] = time.monotonic() - started
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    prepared, tracking = setup(args.image_size)
    results = {}
    for p, (name, runs) in enumerate(PAIRS.items()):
        pair = [run_cell(o, args, prepared, tracking, f"p{p}-{i}") for i, o in enumerate(runs, 1)]
        a, b = pair
        overlap = a["ms_per_step_ci_low"] <= b["ms_per_step_ci_high"] and (
            b["ms_per_step_ci_low"] <= a["ms_per_step_ci_high"]
        )
        for i, r in enumerate(pair, 1):
            block = r["config"]["device"]["block_steps"]
            print(f"{name} run {i}: {r['ms_per_step']:.2f} ms/step, 95% interval "
                  f"{r['ms_per_step_ci_low']:.2f}-{r['ms_per_step_ci_high']:.2f} "
                  f"({r['timed_steps']} samples of {block} step(s), stopped by "
                  f"{r['stopped_by']}, {r['wall_s']:.0f} s)")
        ratio = b["ms_per_step"] / a["ms_per_step"]
        print(f"{name}: the two runs {'agree' if overlap else 'DISAGREE'} (intervals "
              f"{'overlap' if overlap else 'do not overlap'}; run 2 / run 1 = {ratio:.3f})",
              flush=True)
        results[name] = {"runs": pair, "agree": overlap, "ratio": ratio}
    (WORK / "bench_precision_last_run.json").write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
