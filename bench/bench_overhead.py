"""The train job's ms/step against a bare Keras script of the same model, policy, batch, data."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, WORK, fixture, job_env, job_input, job_model, load_run

from mptbench.core.contract import encode
from mptbench.core.files import read_json, write_json
from mptbench.core.stats import percentile

HERE = WORK / "overhead"
TARGET_PCT = 2.0
VAL_PER_CLASS = 2  # validation is off in both runs; the builder still wants the split
EXPERIMENT = "bench_overhead"
JOB_TIMEOUT_S = 900


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--policy", default="float32", help="float32, mixed_float16, ...")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side, interleaved")
    parser.add_argument("--device", default="cpu", help="cpu or gpuN")
    parser.add_argument(
        "--train-per-class", type=int, default=60, help="fixture train images per class"
    )
    parser.add_argument("--work", type=Path, default=HERE, help="reused between runs")
    # Internal: the bare side, in a fresh process.
    parser.add_argument("--child-bare", nargs=3, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- set-up (built once, reused)


def setup(args: argparse.Namespace) -> tuple[Path, Path]:
    """The fixture archive, its cache at this image size and an MLflow store; JSON paths."""
    from mptbench.jobs.tracking import init_experiment

    work = args.work.resolve()
    prepared = fixture(work, args.image_size, args.train_per_class, VAL_PER_CLASS)
    tracking = work / "tracking.json"
    if not tracking.exists():
        write_json(
            tracking,
            init_experiment(
                f"sqlite:///{work / 'mlflow.db'}", EXPERIMENT, str(work / "mlartifacts")
            ),
        )
    return prepared, tracking


def compose_run(args: argparse.Namespace):
    """The train job's run config: experiment smoke, timing only, with this bench's sizes."""
    from mptbench.plan import Cell, compose_config, run_config

    # Through Hydra and check_config, as the workflow composes it; only timing is left on.
    overrides = [
        f"name={EXPERIMENT}",
        f"dataset.image_size={args.image_size}",
        f"policy=[{args.policy}]",
        "train.epochs=1",
        f"train.steps_per_epoch={args.warmup + args.steps}",
        f"train.warmup_steps={args.warmup}",
        "train.warmup_epochs=0",
        f"train.timed_steps={args.steps}",
        f"train.min_timed_steps={args.steps}",
        "train.time_budget_s=null",
        "train.max_step_seconds=null",
        "train.synthetic_twin=false",
        "train.validate=false",
        "train.kill_above_mb=null",
    ]
    cfg = compose_config(ROOT / "conf", "smoke", overrides)
    return run_config(
        cfg,
        Cell(
            "local", "seed_convnet", "tensorflow", "pypi", args.device, args.policy, args.batch_size
        ),
    )


# ---------------------------------------------------------------- side B: bare Keras


def child_bare(run_json: str, prepared_json: str, out: str) -> None:
    """Plain model.fit on the job's model and tf.data input, timed by a minimal callback."""
    import keras
    import tensorflow as tf

    run, prepared = load_run(run_json), read_json(prepared_json)
    warmup, steps = run.train.warmup_steps, run.train.timed_steps
    # The same initial weights and shuffle order; one step per call, as Keras' default.
    model = job_model(keras, run, prepared, steps_per_execution=1)
    data = job_input(tf, run, prepared)

    class Clock(keras.callbacks.Callback):
        # Overriding on_train_batch_end makes Keras hand over the loss as a Python float, so
        # the step ends once the device is done, exactly as the job's StepTimer sees it.
        def __init__(self):
            super().__init__()
            self.seconds: list[float] = []
            self.t0 = 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.seconds.append(time.perf_counter() - self.t0)

    clock = Clock()
    model.fit(data, epochs=1, steps_per_epoch=warmup + steps, callbacks=[clock], verbose=0)
    timed = clock.seconds[warmup:]
    Path(out).write_text(json.dumps(summary(timed)) + "\n")


# ---------------------------------------------------------------- the comparison


def summary(seconds: list[float]) -> dict:
    """The bare run's figures, computed as the job's record computes them."""
    return {
        "timed_steps": len(seconds),
        "ms_per_step": 1000 * statistics.median(seconds),
        "ms_per_step_p10": 1000 * percentile(seconds, 10),
        "ms_per_step_p90": 1000 * percentile(seconds, 90),
    }


def run_side(side: str, command: list[str], env: dict, log: Path, result: Path) -> dict:
    """One fresh process; its timing from the JSON it writes, plus its wall time."""
    result.unlink(missing_ok=True)
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=JOB_TIMEOUT_S
        )
    wall = time.perf_counter() - started
    if done.returncode != 0 or not result.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"side {side} failed (exit {done.returncode}); {log}:\n{tail}")
    data = json.loads(result.read_text())
    if data.get("outcome", "ok") != "ok" or not data.get("ms_per_step"):
        raise SystemExit(f"side {side}: no timing ({data.get('outcome')}: {data.get('reason')})")
    data["wall_s"] = wall
    return data


def fmt(data: dict) -> str:
    return (
        f"{data['ms_per_step']:8.1f} ms/step  "
        f"(p10 {data['ms_per_step_p10']:.1f}, p90 {data['ms_per_step_p90']:.1f}, "
        f"{data['timed_steps']} steps, process {data['wall_s']:.0f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_bare:
        child_bare(*args.child_bare)
        return 0

    run = compose_run(args)
    env = job_env(run)
    prepared, tracking = setup(args)
    runs = args.work.resolve() / "runs"
    runs.mkdir(exist_ok=True)
    tag = f"{args.policy}-bs{args.batch_size}-{args.image_size}px"
    run_json = runs / f"run-{tag}.json"
    run_json.write_text(json.dumps(encode(run)))
    print(
        f"train job (A) vs bare Keras (B): {args.policy}, batch {args.batch_size}, "
        f"{args.image_size}px, {args.warmup} warm-up + {args.steps} timed steps, "
        f"{args.repeats} repeats each, interleaved; device {args.device}",
        flush=True,
    )
    sides = {"A": [], "B": []}
    for i in range(1, args.repeats + 1):
        # A then B in every repeat: drifting machine load hits both sides alike.
        record = runs / f"{tag}-A{i}.json"
        job = [sys.executable, "-m", "mptbench.jobs.supervisor", "--run", str(run_json)]
        job += ["--prepared", str(prepared), "--tracking", str(tracking), "--record", str(record)]
        a = run_side("A", job, env, runs / f"{tag}-A{i}.log", record)
        print(f"  repeat {i}  A train job  {fmt(a)}", flush=True)
        result = runs / f"{tag}-B{i}.json"
        bare = [sys.executable, __file__, "--child-bare", str(run_json), str(prepared)]
        b = run_side("B", [*bare, str(result)], env, runs / f"{tag}-B{i}.log", result)
        print(f"  repeat {i}  B bare Keras {fmt(b)}", flush=True)
        sides["A"].append(a["ms_per_step"])
        sides["B"].append(b["ms_per_step"])

    a_ms, b_ms = statistics.median(sides["A"]), statistics.median(sides["B"])
    overhead = 100 * (a_ms / b_ms - 1)
    paired = [100 * (a / b - 1) for a, b in zip(sides["A"], sides["B"], strict=True)]
    verdict = "PASS" if overhead <= TARGET_PCT else "FAIL"
    print(f"median of {args.repeats}: A {a_ms:.1f} ms/step, B {b_ms:.1f} ms/step")
    print("per-repeat A/B - 1: " + ", ".join(f"{p:+.1f}%" for p in paired))
    print(f"overhead A/B - 1 = {overhead:+.1f}% (target <= {TARGET_PCT:.0f}%): {verdict}")
    # Repeat-to-repeat spread of each side: a verdict is only as good as this is small.
    spread = {k: 100 * (max(v) - min(v)) / statistics.median(v) for k, v in sides.items()}
    print(f"spread across repeats: A {spread['A']:.0f}%, B {spread['B']:.0f}%", end="")
    noisy = max(spread.values()) > TARGET_PCT
    print(" - wider than the target: the verdict is within machine noise" if noisy else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
