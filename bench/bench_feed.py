"""Does the pipeline's feed train as fast as a user's own, step for step?

One process, one compiled model (the run's, as the train job builds it), two feeds taking turns:
the pipeline's (engine/pipeline.py: the prepared tfds cache, its shuffle, batch and scale) and a
user's from the same images as a folder (`image_dataset_from_directory`, `cache()`, `shuffle`,
`batch`, a cast `map`, `prefetch(AUTOTUNE)`, with `.repeat()`: common.py user_datasets). Each
turn is one `fit` call of --steps steps; its median step (the first two left out) is paired with
the other feed's turn beside it, the order reversing every round, the first round a warm-up.

It prints each turn, then the user's median step over the pipeline's with a t interval over the
rounds (goal: holding 1) and each feed's wall time a step (the turn's `fit` call over its steps:
what a new iterator costs, its wait at the start included: core/epochs.py).

    python bench/bench_feed.py                                  # seed convnet, 128 px, float32
    python bench/bench_feed.py --policy mixed_float16 --rounds 9
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import (
    WORK,
    Steal,
    compose_runs,
    fixture,
    image_folder,
    job_env,
    job_input,
    job_model,
    machine,
    over,
    shown,
    user_datasets,
)

HERE = WORK / "fullrun"  # bench_fullrun's images: built once for both


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="seed_convnet")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--policy", default="float32")
    parser.add_argument("--steps", type=int, default=15, help="steps a turn")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the first a warm-up")
    parser.add_argument("--train-per-class", type=int, default=150)
    parser.add_argument("--val-per-class", type=int, default=50)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def child(args) -> None:
    import keras
    import tensorflow as tf

    from mptbench.core.files import read_json

    prepared_path = fixture(HERE, args.image_size, args.train_per_class, args.val_per_class)
    folder = image_folder(HERE, args.image_size, args.train_per_class, args.val_per_class)
    run = compose_runs(args.model, args.image_size, [args.policy], args.batch_size)[0]
    prepared = read_json(prepared_path)
    model = job_model(keras, run, prepared)
    user, _, _ = user_datasets(tf, keras, Path(folder), args.image_size, args.batch_size,
                               run.seed, form="repeat")
    feeds = {"user": user, "pipeline": job_input(tf, run, prepared)}

    class Steps(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times: list[float] = []

        def on_train_batch_begin(self, batch, logs=None):
            self.began = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.began)

    for round_ in range(args.rounds):
        for name in ("user", "pipeline") if round_ % 2 == 0 else ("pipeline", "user"):
            clock, began = Steps(), time.perf_counter()
            model.fit(feeds[name], steps_per_epoch=args.steps, epochs=1, verbose=0,
                      callbacks=[clock])
            wall = (time.perf_counter() - began) / args.steps
            print(f"turn {round_} {name} {statistics.median(clock.times[2:]):.6f} {wall:.6f}",
                  flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    print(f"the pipeline's feed against a user's, one process, on {machine()}", flush=True)
    run = compose_runs(args.model, args.image_size, [args.policy], args.batch_size)[0]
    steal = Steal()
    done = subprocess.run([sys.executable, __file__, "--child", *(argv or sys.argv[1:])],
                          env=job_env(run) | {"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                          capture_output=True, text=True, timeout=3600)
    turns = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("turn ")]
    if done.returncode or not turns:
        raise SystemExit(f"the process failed (exit {done.returncode}): {done.stderr[-2000:]}")
    steps = {(int(r), name): float(step) for r, name, step, _ in turns}
    walls = {(int(r), name): float(wall) for r, name, _, wall in turns}
    for (r, name), step in sorted(steps.items()):
        print(f"  round {r} {name:<8} median step {1000 * step:.0f} ms, "
              f"wall a step {1000 * walls[r, name]:.0f} ms" + ("  (warm-up)" if r == 0 else ""))
    rounds = sorted({r for r, _ in steps if r > 0})
    ratio = over([steps[r, "user"] / steps[r, "pipeline"] for r in rounds])
    print(f"{args.model} at {args.image_size} px, batch {args.batch_size}, {args.policy}, "
          f"{len(rounds)} rounds of {args.steps} steps: user's median step over the "
          f"pipeline's {shown(ratio)}; steal {steal.percent() or 0.0:.1f}%")
    for name in ("user", "pipeline"):
        wall = [walls[r, name] for r in rounds]
        print(f"  {name}: wall a step {1000 * statistics.median(wall):.0f} ms (median), "
              f"{1000 * min(wall):.0f}-{1000 * max(wall):.0f}; its steps "
              f"{1000 * math.exp(statistics.fmean(math.log(steps[r, name]) for r in rounds)):.0f}"
              " ms (geometric mean)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
