"""What sets the speed of an epoch of a user's own fit?

A user's fit from a folder of images, as Keras' guides write it: `image_dataset_from_directory`,
`cache()`, `shuffle`, `batch`, a cast `map`, `prefetch(AUTOTUNE)`, then `fit(epochs=N,
validation_data=...)`. Per cycle, each policy and each form in a fresh process of its own, the
order reversed every cycle:

- `as_written`: as above (fit makes a new iterator each epoch);
- `repeat`: the same dataset with `.repeat()` and fit given `steps_per_epoch` (one iterator);
- `no_autotune`: as written, with `options.autotune.enabled = False`.

Each process runs with TensorFlow's own log of tf.data's tuning threads
(`TF_CPP_VMODULE=model=2`: "Waiting for N ms." as each thread goes to sleep). Per epoch it
keeps how long its start waited (the epoch's begin to its first batch's), its steps, its
validation and the machine's idle CPU meanwhile; from TensorFlow's log, whether the last
epoch's iterator's thread went back to sleep as the epoch began and for how long; and the rest
of that thread's period that core/epochs.py predicts from how long the iterator lived.

    python bench/bench_epochs.py                                  # float32, mixed_bfloat16
    python bench/bench_epochs.py --policies float32 mixed_float16 --image-size 64
    python bench/bench_epochs.py --report-only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import (
    WORK,
    Steal,
    append_jsonl,
    compose_runs,
    image_folder,
    job_model,
    load_run,
    machine,
    read_jsonl,
    run_files,
    user_datasets,
)

from mptbench.core.epochs import rest_of_period

HERE = WORK / "epochs"
FORMS = ("as_written", "repeat", "no_autotune")
# TensorFlow's log line of a tuning thread going to sleep: its wall time, thread and wait.
WAITING = re.compile(r"^I\d{4} \d\d:\d\d:(\d+\.\d+)\s+(\d+) model\.cc:\d+\] Waiting for (\d+) ms")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--model", default="seed_convnet")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-per-class", type=int, default=150)
    parser.add_argument("--val-per-class", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--tag", default="run", help="names this run's kept processes")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- one user's fit


def _idle_ticks() -> int:
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return values[3] + values[4]


def child(run_json: str, folder: str, form: str, epochs: str, out: str) -> None:
    """A plain fit of `epochs` epochs in `form`; each epoch's figures, as JSON in `out`."""
    import keras
    import tensorflow as tf

    run = load_run(run_json)
    train, val, steps = user_datasets(tf, keras, Path(folder), run.dataset.image_size,
                                      run.cell.batch_size, run.seed, form)
    model = job_model(keras, run, {"image_size": run.dataset.image_size,
                                   "classes": sorted(p.name for p in (Path(folder) / "train")
                                                     .iterdir())})
    rows: list[dict] = []
    tick = os.sysconf("SC_CLK_TCK")

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.row = {"epoch": epoch + 1, "begin": time.time(), "idle0": _idle_ticks(),
                        "steps_s": []}

        def on_train_batch_begin(self, batch, logs=None):
            if not self.row["steps_s"] and "first_batch" not in self.row:
                self.row["first_batch"] = time.time()
                self.row["start_idle_s"] = (_idle_ticks() - self.row.pop("idle0")) / tick
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])
            self.row["steps_s"].append(time.perf_counter() - self.t0)

        def on_test_begin(self, logs=None):
            self.row["validation_begin"] = time.time()

        def on_epoch_end(self, epoch, logs=None):
            self.row["end"] = time.time()
            rows.append(self.row)

    model.fit(train, epochs=int(epochs), steps_per_epoch=steps, validation_data=val,
              callbacks=[Clock()], verbose=0)
    Path(out).write_text(json.dumps({"epochs": rows}))


def _waits_in(log: str) -> list[tuple[float, int, float]]:
    """TensorFlow's tuning threads going to sleep: (wall time, thread, seconds)."""
    found = []
    for line in log.splitlines():
        if match := WAITING.match(line):
            found.append((float(match.group(1)), int(match.group(2)), int(match.group(3)) / 1000))
    return found


def epoch_starts(fit: dict, log: str) -> list[dict]:
    """Each epoch's start after the first: how long it waited; whether, by TensorFlow's log,
    a thread that had been asleep before the epoch began went back to sleep between its begin
    and its first batch (and for how long); and core/epochs.py's rest for the iterator, which
    lived from the last epoch's first batch (its thread started then) to this one's begin."""
    waits = _waits_in(log)
    rows = fit["epochs"]
    found = []
    for last, row in zip(rows, rows[1:], strict=False):
        begin, first = row["begin"], row["first_batch"]
        older = {tid for t, tid, _ in waits if t < begin}
        again = [s for t, tid, s in waits if begin <= t <= first and tid in older and s > 0.01]
        lived = begin - last["first_batch"]
        found.append({"epoch": row["epoch"], "wait_s": first - begin, "lived_s": lived,
                      "rest_s": rest_of_period(lived), "slept_again_s": max(again, default=None),
                      "idle_s": row["start_idle_s"], "steps_s": sum(row["steps_s"]),
                      "median_step_s": statistics.median(row["steps_s"]),
                      "validation_s": row["end"] - row["validation_begin"],
                      "epoch_s": row["end"] - row["begin"]})
    return found


def fit_process(run_file: Path, folder: Path, form: str, epochs: int, log: Path) -> dict:
    out = log.with_suffix(".json")
    out.unlink(missing_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "model=2"}
    steal = Steal()
    with open(log, "w") as sink:
        done = subprocess.run([sys.executable, __file__, "--child", str(run_file), str(folder),
                               form, str(epochs), str(out)], env=env, stdout=sink,
                              stderr=subprocess.STDOUT, timeout=7200)
    if done.returncode or not out.exists():
        raise SystemExit(f"a fit failed (exit {done.returncode}): {log}")
    fit = json.loads(out.read_text())
    return {"starts": epoch_starts(fit, log.read_text()), "stolen_pct": steal.percent(),
            "first_epoch_s": fit["epochs"][0]["end"] - fit["epochs"][0]["begin"]}


# ---------------------------------------------------------------- the driver


def measure(args, log) -> list[dict]:
    tag = f"{args.model}-{args.image_size}px-bs{args.batch_size}"
    folder = HERE / args.tag / tag
    folder.mkdir(parents=True, exist_ok=True)
    images = image_folder(HERE, args.image_size, args.train_per_class, args.val_per_class)
    runs = compose_runs(args.model, args.image_size, args.policies, args.batch_size)
    files = run_files(runs, folder)
    kept = HERE / args.tag / f"{tag}.jsonl"
    rows = read_jsonl(kept)
    order = [(p, f) for p in args.policies for f in args.forms]
    for cycle in range(len({r["cycle"] for r in rows}), args.cycles):
        for policy, form in order if cycle % 2 == 0 else order[::-1]:
            got = fit_process(files[policy], images, form, args.epochs,
                              folder / f"{policy}-{form}-{cycle}.log")
            row = {"cycle": cycle, "policy": policy, "form": form, **got}
            append_jsonl(kept, row)
            rows.append(row)
            log(f"  cycle {cycle + 1} {policy} {form}: epoch starts waited " + ", ".join(
                f"{s['wait_s']:.2f}" for s in got["starts"]) + " s")
    return rows


def _range(values: list[float], digits: int = 2) -> str:
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}" if values else "-"


def report(rows: list[dict], args) -> list[str]:
    steal = [r["stolen_pct"] for r in rows if r.get("stolen_pct") is not None]
    lines = [f"{args.model} at {args.image_size} px, batch {args.batch_size}, {args.epochs} "
             f"epochs with validation, {len({r['cycle'] for r in rows})} cycles; steal "
             f"{_range(steal, 1)}%",
             "policy, form: epoch starts that waited (>= 0.5 s of the predicted rest, or 50 ms) "
             "| their waits | TensorFlow's log: the last iterator's thread slept again | "
             "predicted rest over wait | machine idle while waiting | median step, epochs that "
             "waited / did not | epoch, waited / not"]
    for policy in args.policies:
        for form in args.forms:
            starts = [s for r in rows if (r["policy"], r["form"]) == (policy, form)
                      for s in r["starts"]]
            if not starts:
                continue
            waited = [s for s in starts if s["wait_s"] >= max(0.05, 0.5 * s["rest_s"])]
            went = [s for s in starts if s not in waited]
            slept = [s for s in starts if s["slept_again_s"] is not None]
            ratio = [s["rest_s"] / s["wait_s"] for s in waited if s["wait_s"] > 0]
            lines.append(
                f"  {policy}, {form}: {len(waited)} of {len(starts)} | "
                f"{_range([s['wait_s'] for s in waited])} s | {len(slept)} of {len(starts)} "
                f"({_range([s['slept_again_s'] for s in slept])} s) | "
                f"{_range(ratio)} | {_range([s['idle_s'] for s in waited], 1)} s | "
                f"{_med(waited, 'median_step_s', 1000)} / {_med(went, 'median_step_s', 1000)} ms"
                f" | {_med(waited, 'epoch_s')} / {_med(went, 'epoch_s')} s")
    return lines


def _med(starts: list[dict], key: str, scale: float = 1.0) -> str:
    return f"{scale * statistics.median(s[key] for s in starts):.1f}" if starts else "-"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    print(f"a user's fit, epoch by epoch, on {machine()}", flush=True)
    tag = f"{args.model}-{args.image_size}px-bs{args.batch_size}"
    kept = HERE / args.tag / f"{tag}.jsonl"
    rows = read_jsonl(kept) if args.report_only else measure(
        args, lambda s: print(s, flush=True))
    print("\n".join(report(rows, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
