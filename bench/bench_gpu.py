"""A GPU check in one go: JAX-backend cells on synthetic data, calibration peaks, run records.

Needs neither network nor TensorFlow, Snakemake, MLflow or pandas: only JAX, Keras, Hydra and
the packages `bench/gpu_wheels.txt` lists (carried as wheels where they are missing; a test
runs this script with all of those others hidden). It runs the
seed convnet on synthetic 256 px images and keras.applications.ResNet50 at 224 px for
float32, mixed_float16 and mixed_bfloat16, batch 32, 64, ... 512 (a model stops growing its
batch where every policy ran out of memory), the three policies of each batch size taking
turns in fresh trainer processes as the workflow runs them, plus the calibration peaks,
within --budget-s. It writes run records and the calibration in the workflow's layout under
--out, so the usual report reads them:

    python bench/bench_gpu.py                  # on the GPU machine: about 8 minutes
    python bench/bench_gpu.py --quick          # a CPU check of the script: small, ~3 minutes
    python -m mptbench.report.aggregate --runs OUT/runs \
        --calibration OUT/calibration/*/*/*/*/*.json \
        --report-dir OUT/report                # anywhere with pandas and matplotlib

and prints ms/step with its 95% interval, the speedup over float32 with its interval, and MFU
(achieved TFLOP/s over the calibrated peak of the policy's compute dtype).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from common import ROOT, WORK, interval

from mptbench.core import stats
from mptbench.core.policies import weighted_peak

MODELS = {"seed_convnet": 256, "resnet50": 224}  # the model and its image size
POLICIES = ["float32", "mixed_float16", "mixed_bfloat16"]


def compose(model: str, image_size: int, args) -> dict:
    from mptbench.plan import compose_config

    overrides = [
        "name=gpu_check", "dataset=synthetic", f"dataset.image_size={image_size}",
        "backend=[jax]", f"model=[{model}]", f"policy=[{','.join(POLICIES)}]",
        f"sweep.batch_sizes=[{','.join(map(str, args.batch_sizes))}]",
        f"sweep.devices=[{args.device}]", "device.check_present=false",
        f"train.repeats={args.repeats}", f"train.max_repeats={args.repeats}", "train.epochs=1",
        "train.warmup_epochs=0",
        f"train.warmup_steps={args.warmup}", f"train.timed_steps={args.steps}",
        f"train.steps_per_epoch={args.warmup + args.steps * args.block}",
        "train.min_timed_steps=3", "train.precision=null", "train.time_budget_s=null",
        "train.max_step_seconds=null", "train.validate=false", "train.synthetic_twin=false",
        "train.profile_steps=0", "tracking.system_metrics=false",
        f"device.gpu.block_steps={args.block}", f"device.cpu.block_steps={args.block}",
    ]
    if args.quick:
        overrides.append("device.cpu.calibrate.cap_s=3")
    return compose_config(ROOT / "conf", None, overrides)


def model_info(cfg: dict, out: Path) -> dict:
    """FLOPs of the model's training step, counted from JAX's jaxpr (an engine job: the
    counting process imports Keras on JAX)."""
    from mptbench.core.files import read_json
    from mptbench.jobs.launcher import EngineFailed
    from mptbench.jobs.model_info import describe_model
    from mptbench.plan import model_config

    model = next(iter(cfg["model"]))
    dataset = cfg["dataset"]
    path = out / "model_info" / f"{model}-{dataset['image_size']}px.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        config = model_config(cfg, model)
        try:
            describe_model(config, dataset["image_size"], dataset["num_classes"], str(path),
                           backend="jax")
        except EngineFailed as exc:
            raise SystemExit(f"error: counting {model}'s FLOPs failed: {exc}") from None
    return read_json(path)


def calibrate(cfg: dict, args, out: Path) -> dict | None:
    from mptbench.core.contract import Calibrate, VariantConfig, decode
    from mptbench.core.devices import Device
    from mptbench.core.files import read_json
    from mptbench.jobs.calibrate import calibrate_variant
    from mptbench.jobs.launcher import EngineFailed
    from mptbench.plan import layout

    settings = Device(args.device).settings(cfg["device"])
    key = layout.calibration_key(
        cfg["variant"]["pypi"], settings["calibrate"], settings.get("tf32")
    )
    path = out / "calibration" / "local" / "jax" / "pypi" / args.device / f"{key}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        variant = decode(VariantConfig, cfg["variant"]["pypi"] | {"name": "pypi"})
        try:
            calibrate_variant(
                args.device, variant, decode(Calibrate, settings["calibrate"]), None, str(path),
                backend="jax",
                tf32=settings.get("tf32", True),
            )
        except EngineFailed as exc:
            print(f"calibration failed ({exc}); MFU will be missing", flush=True)
            return None
    return read_json(path)


def run_group(cfg: dict, cells: list, info: dict, out: Path) -> list[dict]:
    """One comparison group as a train job runs it: the supervisor, a fresh trainer per repeat
    with the policies taking turns; no MLflow."""
    from mptbench.core.files import read_json, write_json
    from mptbench.data.synthetic import prepared_info
    from mptbench.jobs.supervisor import supervise
    from mptbench.plan import layout, run_config

    records = [out / "runs" / f"{layout.CELL.format(**c.wildcards('gpu_check'))}.json"
               for c in cells]
    if all(r.exists() for r in records):  # a rerun continues where it stopped
        return [read_json(r) for r in records]
    prepared = out / f"prepared-{cfg['dataset']['image_size']}px.json"
    write_json(prepared, prepared_info(cfg["dataset"]))
    info_file = out / "model_info" / f"{cells[0].model}-{cfg['dataset']['image_size']}px.json"
    write_json(info_file, info)
    for record in records:
        record.parent.mkdir(parents=True, exist_ok=True)
    runs = [run_config(cfg, c) for c in cells]
    code = supervise([runs], str(prepared), None, [[str(r) for r in records]],
                     model_info=str(info_file))
    if code:
        return [{"outcome": "failed", "reason": f"the supervisor exited with {code}"}] * len(cells)
    return [read_json(r) for r in records]


def grid(args, out: Path, deadline: float) -> list[dict]:
    from mptbench.plan import Cell

    rows = []
    for model in args.models:
        image_size = MODELS[model]
        if args.image_size:
            image_size = args.image_size
        cfg = compose(model, image_size, args)
        info = model_info(cfg, out)
        out_of_memory: set[str] = set()
        for batch_size in args.batch_sizes:
            cells = [Cell("local", model, "jax", "pypi", args.device, policy, batch_size)
                     for policy in POLICIES if policy not in out_of_memory]
            if time.monotonic() > deadline:
                rows += [{"cell": c, "outcome": "not run", "reason": "--budget-s spent"}
                         for c in cells]
                continue
            print(f"--- {model} at batch {batch_size}: {', '.join(c.policy for c in cells)}")
            for cell, record in zip(cells, run_group(cfg, cells, info, out), strict=True):
                if record["outcome"] == "oom":
                    out_of_memory.add(cell.policy)  # a larger batch runs out too
                rows.append({"cell": cell, **record})
            if len(out_of_memory) == len(POLICIES):
                break
    return rows


def peak(calibration: dict | None, record: dict) -> float | None:
    """The cell's peak TFLOP/s: its conv FLOPs at the conv peak of its compute dtype, its
    matmul FLOPs at the matmul peak, as the report weighs them (core/policies.py)."""
    if not calibration:
        return None
    work = {k: record.get(f"{k}_flops_per_step") or 0 for k in ("conv", "matmul")}
    return weighted_peak(calibration, record["compute_dtype"], work)


def table(rows: list[dict], calibration: dict | None) -> str:
    def timed(row):
        return [(r.get("process"), r["step_ms"], r.get("rounds") or [])
                for r in row.get("repeats") or [] if r.get("step_ms")]

    base = {
        (r["cell"].model, r["cell"].batch_size): r
        for r in rows
        if r["cell"].policy == "float32" and r.get("outcome") == "ok"
    }
    lines = [
        f"{'model':<13}{'policy':<16}{'batch':>6}  {'ms/step (95% CI)':<24}"
        f"{'speedup vs float32 (95% CI)':<30}{'TFLOP/s':>8}{'MFU':>7}",
    ]
    for r in rows:
        cell = r["cell"]
        head = f"{cell.model:<13}{cell.policy:<16}{cell.batch_size:>6}  "
        if r.get("outcome") != "ok":
            lines.append(head + f"{r.get('outcome')}: {(r.get('reason') or '')[:70]}")
            continue
        ms = f"{r['ms_per_step']:.2f}{interval(r, 'ms_per_step')}"
        speed = ""
        f32 = base.get((cell.model, cell.batch_size))
        paired = stats.paired_speedup(timed(f32), timed(r)) if f32 is not None else None
        if paired is not None and cell.policy != "float32":
            ends = f" ({paired.low:.2f}-{paired.high:.2f})" if paired.low else ""
            speed = f"{paired.value:.2f}x{ends}"
        flops = (r.get("flops_per_step") or math.nan) / (r["ms_per_step"] / 1000) / 1e12
        cell_peak = peak(calibration, r)
        mfu = f"{flops / cell_peak:.2f}" if cell_peak and math.isfinite(flops) else "-"
        lines.append(head + f"{ms:<24}{speed:<30}{flops:>8.1f}{mfu:>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WORK / "gpu")
    parser.add_argument("--device", default=None, help="gpu0 (default where a GPU shows), cpu")
    parser.add_argument("--budget-s", type=float, default=450, help="stop starting cells after")
    parser.add_argument("--batch-sizes", type=int, nargs="+", help="default 32 64 ... 512")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=3, help="processes per comparison group")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up steps per repeat")
    parser.add_argument("--steps", type=int, default=5, help="timed samples (blocks) per repeat")
    parser.add_argument("--block", type=int, default=None, help="steps per sample (GPU: 10)")
    parser.add_argument("--image-size", type=int, default=None, help="one size for both models")
    parser.add_argument("--quick", action="store_true", help="a CPU check: 32 px, batch 4 and 8")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from mptbench.core.devices import visible_gpus

    if args.device is None:
        args.device = "gpu0" if visible_gpus() else "cpu"
    if args.quick:
        args.image_size, args.steps = 32, 3
    args.batch_sizes = args.batch_sizes or ([4, 8] if args.quick else [32, 64, 128, 256, 512])
    if args.block is None:
        args.block = 10 if args.device != "cpu" else 1
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    calibration = calibrate(compose("seed_convnet", 256, args), args, args.out)
    rows = grid(args, args.out, started + args.budget_s)
    text = table(rows, calibration)
    print(f"\n{args.device}: {(calibration or {}).get('fingerprint', {}).get('gpu') or ''}")
    if calibration:
        peaks = ", ".join(
            f"{d} matmul {calibration['matmul'][d]['tflops']:.1f} / conv "
            f"{calibration['conv'][d]['tflops']:.1f}"
            for d in ("float32", "float16", "bfloat16")
        )
        print(f"calibrated peaks (TFLOP/s): {peaks}")
    print(text)
    print(f"\n{len(rows)} cells in {time.monotonic() - started:.0f} s; records under {args.out}")
    (args.out / "bench_gpu_last_run.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
