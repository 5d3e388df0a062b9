"""Is the answer's whole run what a user's own `fit` spends?

The report projects a whole training run (core/fullrun.py): the cell's training steps, a
validation pass after each epoch and the first epoch's one-time extra, each measured in the
pipeline's own timing processes. This benchmark sets that projection against real runs: per
cycle, in fresh processes, interleaved (ABBA: the order reverses every cycle),

- **pipeline**: one process of the comparison group exactly as the train job runs it (the
  engine's RepeatJob through jobs/trainer.py, the default timing keys, train.epochs=3 with
  validation after each), its whole run per policy from its own figures (jobs/fullrun.py), and
- **fit**: per policy, a user's own `fit` of 3 epochs with validation after each, in a process
  of its own: the same images as a folder, read as Keras' guides write it
  (`image_dataset_from_directory`, `cache()`, `shuffle`, `batch`, a cast `map`,
  `prefetch(AUTOTUNE)`: common.py user_datasets), the same model builder and seed, timed from
  the call to the end of its last epoch (Keras' on_train_end), each epoch's training and
  validation apart. What `fit` takes after that to return (TensorFlow destroying the last
  iterator: the wait of core/epochs.py, once a run) is kept apart too.

Per policy it prints, paired by cycle with a t interval over cycles: the projected whole run
over the real one (and each part over the real part: steps, validation, the first epoch's
extra), what the projection before the whole run was measured said (the steps alone, as the
answer printed: epochs x steps x the mean step) over the real run, and the projected whole-run
speedup over the real one; then the same processes' whole runs with their epoch starts as
jobs/fullrun.py figures a cell's now, the rest of the tuning period averaged over the epoch
lengths the pipeline's processes spread over (core/epochs.py expected_rest), where each row
keeps the rest at its own epoch length alone. The goal: within 0.95-1.05 and holding 1. Each
process's steal and the host's own speed (engine/host.py's check: the pipeline's host_ms, and
the same kernel in each fit before its first epoch and after each) are kept beside it; a cycle
whose processes saw the host more than 15% apart is left out of the pairs, and said (a steady
host's mixed_float16 fits read their own checks 1.10x the pipeline's: the threshold is above
that). --neighbour makes the host busy on purpose, with a load that comes and goes.

Every process is kept in bench/.work/fullrun/<tag>/<cell>-<images>.jsonl: a rerun goes on
where it stopped.

    python bench/bench_fullrun.py                          # the three cells, quiet host
    python bench/bench_fullrun.py --neighbour 1 --tag busy # one neighbour thread, comes and goes
    python bench/bench_fullrun.py --report-only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import (
    WORK,
    Neighbour,
    Steal,
    append_jsonl,
    compose_runs,
    fixture,
    image_folder,
    job_env,
    job_model,
    load_run,
    machine,
    over,
    read_jsonl,
    run_files,
    shown,
    user_datasets,
)

from mptbench.core.files import read_json

HERE = WORK / "fullrun"
CELLS = ["seed_convnet:128", "seed_convnet:64", "mobilenet_v2:96"]
POLICIES = ["float32", "mixed_bfloat16"]
EPOCHS = 3
GOAL = 0.05
HOST_MOVED = 0.15  # a cycle's host checks this far apart compare two hosts (host_moved)
PARTS = ("steps", "validation", "first_epoch", "epoch_starts")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=CELLS, help="model:image_size ...")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--train-per-class", type=int, default=150)
    parser.add_argument("--val-per-class", type=int, default=50)
    parser.add_argument("--min-cycles", type=int, default=4)
    parser.add_argument("--max-cycles", type=int, default=12)
    parser.add_argument("--max-minutes", type=float, default=40.0, help="per cell")
    parser.add_argument("--neighbour", type=int, default=0,
                        help="threads of a neighbour whose load comes and goes (0: none)")
    parser.add_argument("--tag", default="quiet", help="names this run's kept processes")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--return-cycles", type=int, default=2,
                        help="cycles whose fits are waited for until fit returns")
    parser.add_argument("--policies", nargs=2, default=POLICIES, help="the baseline first")
    parser.add_argument("--child-fit", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- a user's own fit


def child_fit(run_json: str, prepared_json: str, folder: str, out: str,
              wait: str = "return") -> None:
    """EPOCHS epochs of a user's fit from the image folder with validation after each: the
    wall time from the call to the end of its last epoch and to its return, and each epoch's
    training and validation. With `wait` "trained", the process ends at the last epoch's end
    (its figures written): what fit then takes to return is not waited for."""
    from types import SimpleNamespace

    import keras
    import tensorflow as tf

    from mptbench.engine.host import HostCheck

    run, prepared = load_run(run_json), read_json(prepared_json)
    # The host's own speed, as the pipeline's process reads it (engine/host.py): before the
    # first epoch and after each, outside the epochs' clocks.
    host = HostCheck(SimpleNamespace(name="tensorflow", framework=tf), run.device.host_check)
    model = job_model(keras, run, prepared)
    train, val, _ = user_datasets(tf, keras, Path(folder), prepared["image_size"],
                                  run.cell.batch_size, run.seed)
    epochs: list[dict] = []
    ended: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epochs.append({"begin": time.perf_counter()})

        def on_train_batch_begin(self, batch, logs=None):
            if "start_wait_s" not in epochs[-1]:  # what the epoch's start waited
                epochs[-1]["start_wait_s"] = time.perf_counter() - epochs[-1]["begin"]

        def on_test_begin(self, logs=None):
            epochs[-1]["test_begin"] = time.perf_counter()

        def on_test_end(self, logs=None):
            epochs[-1]["validation_s"] = time.perf_counter() - epochs[-1]["test_begin"]

        def on_epoch_end(self, epoch, logs=None):
            epochs[-1]["wall_s"] = time.perf_counter() - epochs[-1]["begin"]
            host.sample()

        def on_train_end(self, logs=None):
            ended.append(time.perf_counter())
            if wait == "trained":
                write(None)
                os._exit(0)

    def write(wall: float | None) -> None:
        for e in epochs:
            e["train_s"] = e["wall_s"] - e.get("validation_s", 0.0) - e["start_wait_s"]
        Path(out).write_text(json.dumps({"policy": run.policy.name, "wall_s": wall,
                                         "trained_s": ended[0] - started, "epochs": epochs,
                                         "host_ms": host.process_ms(),
                                         "host_samples_ms": [1000 * t for t in host.samples]}))

    host.sample()
    started = time.perf_counter()
    model.fit(train, epochs=EPOCHS, validation_data=val, callbacks=[Clock()], verbose=0)
    write(time.perf_counter() - started)


def real_parts(fit: dict) -> dict[str, float]:
    """A real fit's parts as the projection names them: steady training and validation are
    the later epochs' mean times the epochs, the first epoch's extra its excess over them, and
    the epoch starts what the later epochs' first batches waited."""
    later = fit["epochs"][1:]
    train = statistics.fmean(e["train_s"] for e in later)
    validation = statistics.fmean(e["validation_s"] for e in later)
    first = fit["epochs"][0]
    return {"steps": EPOCHS * train, "validation": EPOCHS * validation,
            "first_epoch": first["train_s"] + first["start_wait_s"] - train
            + first["validation_s"] - validation,
            "epoch_starts": sum(e["start_wait_s"] for e in later),
            "total": fit["trained_s"],
            "return_tail": None if fit["wall_s"] is None else fit["wall_s"] - fit["trained_s"]}


def fit_process(run_file: Path, prepared: Path, folder: Path, env: dict, log: Path,
                wait: str) -> dict:
    out = log.with_suffix(".json")
    out.unlink(missing_ok=True)
    with open(log, "w") as sink:
        done = subprocess.run([sys.executable, __file__, "--child-fit", str(run_file),
                               str(prepared), str(folder), str(out), wait], env=env, stdout=sink,
                              stderr=subprocess.STDOUT, timeout=3600)
    if done.returncode or not out.exists():
        raise SystemExit(f"a fit failed (exit {done.returncode}): {log}")
    fit = json.loads(out.read_text())
    return {"kind": "fit", "policy": fit["policy"], "parts": real_parts(fit), "fit": fit,
            "host_ms": fit.get("host_ms")}


# ---------------------------------------------------------------- the pipeline's projection


def pipeline_process(trainer, prepared: Path, runs, index: int) -> list[dict]:
    """One process of the group as the train job runs it, each policy's whole run as the
    train job works it out."""
    from mptbench.jobs.fullrun import per_process
    from mptbench.jobs.series import base_record
    from mptbench.jobs.trainer import Death

    got = trainer.repeat(str(prepared), index, runs)
    if isinstance(got, Death):
        raise SystemExit(f"the pipeline's trainer died: {got.outcome}: {got.reason}")
    info, rows = read_json(prepared), []
    for run, arm in zip(runs, got.arms, strict=True):
        if arm.outcome != "ok":
            raise SystemExit(f"{arm.policy}: {arm.outcome}: {arm.reason}")
        record = base_record(run, info)
        record["config"]["train"] |= {"epochs": EPOCHS, "validate": True}  # fit's run
        parts = per_process(record, arm, run.cell.batch_size)
        rows.append({"kind": "pipeline", "policy": arm.policy, "parts": parts,
                     "host_ms": arm.measured.get("host_ms"), "step_s": arm.step_s,
                     "epoch_starts": arm.epoch_starts})
    return rows


def predictions(prepared: Path, runs) -> dict[str, float]:
    """Each policy's step at the cell's batch as its probe predicts it (jobs/budget.py): what
    the train job gives the engine to size the timing run's epochs."""
    from mptbench.jobs.budget import predict
    from mptbench.jobs.trainer import Trainer

    found = {}
    for run in runs:
        probe = Trainer(sys.executable, [run], [str(HERE / ".probe.record")]).probe(str(prepared))
        found[run.policy.name] = predict(probe.points, run.cell.batch_size)
    return found


# ---------------------------------------------------------------- the driver


def cell_of(text: str) -> tuple[str, int]:
    model, size = text.split(":")
    return model, int(size)


def kept_name(text: str, args) -> str:
    """What a cell's kept processes are named by: the cell and the images it trains on, so
    that processes of other data never pair."""
    model, size = cell_of(text)
    return (f"{model}-{size}px-bs{args.batch_size}-"
            f"{args.train_per_class}x{args.val_per_class}")


def measure(text: str, args, log) -> list[dict]:
    from mptbench.jobs.trainer import Trainer

    tag = kept_name(text, args)
    model, size = cell_of(text)
    folder = HERE / args.tag / tag
    folder.mkdir(parents=True, exist_ok=True)
    prepared = fixture(HERE, size, args.train_per_class, args.val_per_class)
    images = image_folder(HERE, size, args.train_per_class, args.val_per_class)
    # The default grid's one-epoch timing run of the cell, projected onto the 3 epochs fit runs.
    runs = compose_runs(model, size, args.policies, args.batch_size, [
        "train.synthetic_twin=false", "train.profile_steps=0", "train.max_step_seconds=null"])
    env, files = job_env(runs[0]), run_files(runs, folder)
    kept = HERE / args.tag / f"{tag}.jsonl"
    rows = read_jsonl(kept)
    trainer = Trainer(sys.executable, runs, [str(folder / f"{p}.record") for p in args.policies])
    trainer.predicted_s = predictions(prepared, runs)
    # A rerun goes on where it stopped: the cycle left half done is finished first.
    started, cycle = time.monotonic(), min(
        c for c in range(len(rows) + 1) if not complete(rows, c, args.policies))
    with Neighbour(args.neighbour, HERE / args.tag / "neighbour.log") as neighbour:
        while cycle < args.max_cycles:
            if cycle >= args.min_cycles and settled(rows, args.policies):
                break
            if time.monotonic() - started > 60 * args.max_minutes:
                log(f"  {tag}: --max-minutes={args.max_minutes} ran out after {cycle} cycles")
                break
            order = ["pipeline", *args.policies]
            for what in order if cycle % 2 == 0 else order[::-1]:
                if ran(rows, cycle, what):
                    continue
                steal, began = Steal(), time.time()
                if what == "pipeline":
                    got = pipeline_process(trainer, prepared, runs, cycle % 3)
                else:
                    wait = "return" if cycle < args.return_cycles else "trained"
                    got = [fit_process(files[what], prepared, images, env,
                                       folder / f"fit-{what}-{cycle}.log", wait)]
                for row in got:
                    row |= {"cycle": cycle, "stolen_pct": steal.percent(),
                            "neighbour_busy": neighbour.busy_share(began, time.time())}
                    append_jsonl(kept, row)
                    rows.append(row)
            cycle += 1
            log(f"  {tag} cycle {cycle}: " + "; ".join(
                f"{r['kind']} {r['policy']} {r['parts']['total']:.1f} s"
                for r in rows if r["cycle"] == cycle - 1)
                + f" ({time.monotonic() - started:.0f} s)")
    return rows


def ran(rows: list[dict], cycle: int, what: str) -> bool:
    """Whether the cycle's process `what` (pipeline, or a policy's fit) is kept."""
    kind, policy = ("pipeline", None) if what == "pipeline" else ("fit", what)
    return any(r["cycle"] == cycle and r["kind"] == kind
               and policy in (None, r["policy"]) for r in rows)


def complete(rows: list[dict], cycle: int, policies: list[str]) -> bool:
    return all(ran(rows, cycle, what) for what in ["pipeline", *policies])


def host_moved(rows: list[dict]) -> dict[int, float]:
    """The cycles whose processes did not all see the host at one speed: the slowest host
    check over the fastest (each process's fastest sample, engine/host.py), where that is more
    than 1 + HOST_MOVED. A pair across such a cycle compares two hosts, not two runs: it is
    left out, and said. A process kept before fits read the host has no figure and moves
    nothing."""
    found = {}
    for c in {r["cycle"] for r in rows}:
        host = [r["host_ms"] for r in rows if r["cycle"] == c and r.get("host_ms")]
        if len(host) > 1 and max(host) / min(host) > 1 + HOST_MOVED:
            found[c] = max(host) / min(host)
    return found


def paired(rows: list[dict]) -> list[dict]:
    """The rows of the cycles whose host held still (host_moved): the ones pairs are made of."""
    moved = host_moved(rows)
    return [r for r in rows if r["cycle"] not in moved]


def _by_cycle(rows: list[dict], kind: str, policy: str, part: str = "total") -> dict:
    return {r["cycle"]: r["parts"][part] for r in rows
            if r["kind"] == kind and r["policy"] == policy and r.get("parts")}


def ratios(rows: list[dict], policy: str, part: str = "total", real_part: str | None = None):
    """Per cycle, the pipeline's figure over the real fit's, and their estimate."""
    mine, real = _by_cycle(rows, "pipeline", policy, part), _by_cycle(
        rows, "fit", policy, real_part or part)
    return over([mine[c] / real[c] for c in sorted(set(mine) & set(real))])


def speedup_ratio(rows: list[dict], policies: list[str]):
    """Per cycle, the projected whole-run speedup over the real one."""
    base, other = policies
    found = []
    for c in sorted({r["cycle"] for r in rows}):
        p = {k: _by_cycle(rows, "pipeline", k).get(c) for k in policies}
        f = {k: _by_cycle(rows, "fit", k).get(c) for k in policies}
        if all(p.values()) and all(f.values()):
            found.append((p[base] / p[other]) / (f[base] / f[other]))
    return over(found)


def fit_boundaries(fit: dict) -> list[tuple[int, object]]:
    """A real fit's later epoch starts as core/epochs.py reads the pipeline's: how long the
    last epoch's iterator lived (from its first batch to this epoch's begin) and how long this
    epoch's first batch waited; each with its epoch's index (1: the second epoch's)."""
    from mptbench.core import epochs

    found = fit["epochs"]
    return [(i, epochs.Boundary(e["begin"] - found[i - 1]["begin"]
                                - found[i - 1]["start_wait_s"], e["start_wait_s"]))
            for i, e in enumerate(found) if i > 0]


def starts_waited(rows: list[dict], policy: str) -> str:
    """How many epoch starts waited (core/epochs.py's rule: at least half the rest of the
    tuning period, of the starts that tell), in the pipeline's timing epochs and in the real
    fits: the share the projection carries over from the one to the other. The fits' second
    epoch's start is apart: its iterator lived through the compile and the files' decoding."""
    from mptbench.core import epochs

    kept = [r for r in rows if r["policy"] == policy]
    told = [b for r in kept if r["kind"] == "pipeline"
            for b in epochs.boundaries(r["epoch_starts"]) if b.telling]
    real = [(i, b) for r in kept if r["kind"] == "fit" for i, b in fit_boundaries(r["fit"])
            if b.telling]

    def share(found) -> str:
        return f"{sum(b.waited for b in found)} of {len(found)}"

    waits = [b.wait_s for _, b in real if b.waited]
    return (f"epoch starts that waited: pipeline {share(told)}, real fits "
            f"{share([b for i, b in real if i > 1])} later and "
            f"{share([b for i, b in real if i == 1])} at the second epoch"
            + (f" ({min(waits):.1f}-{max(waits):.1f} s)" if waits else ""))


def averaged(rows: list[dict], policies: list[str]) -> list[dict]:
    """The rows with each pipeline process's epoch starts as jobs/fullrun.py figures them for a
    cell of all these processes (jobs/fullrun.py spread_over): the rest of the tuning period
    averaged over the epoch lengths the policy's processes spread over, where each row kept
    the rest at its own epoch length alone. The real fits are as they were."""
    from mptbench.core import epochs
    from mptbench.jobs.fullrun import share_of, spread_over

    out = [r for r in rows if r["kind"] != "pipeline"]
    for policy in policies:
        mine = [r for r in rows if r["kind"] == "pipeline" and r["policy"] == policy
                and r.get("parts")]
        pooled = epochs.waited_share([b for r in mine for b in epochs.boundaries(
            r["epoch_starts"])])
        each, _, spread = spread_over([r["parts"] for r in mine],
                                      [share_of(r["epoch_starts"], pooled) for r in mine], EPOCHS)
        out += [r | {"parts": parts, "epoch_spread": spread}
                for r, parts in zip(mine, each, strict=True)]
    return out


def settled(rows: list[dict], policies: list[str]) -> bool:
    """Every policy's projected-over-real interval within ±GOAL (widths only: stopping on it
    cannot bias where the figure lies)."""
    found = [ratios(paired(rows), p) for p in policies]
    return all(e is not None and e.half_width is not None and e.half_width <= GOAL
               for e in found)


def report(text: str, rows: list[dict], args) -> list[str]:
    model, size = cell_of(text)
    cycles = len({r["cycle"] for r in rows})
    steal = [r["stolen_pct"] for r in rows if r.get("stolen_pct") is not None]
    host = [r["host_ms"] for r in rows if r.get("host_ms")]
    moved, kept = host_moved(rows), paired(rows)
    busy = [r["neighbour_busy"] for r in rows if r.get("neighbour_busy") is not None]
    lines = [f"{model} at {size} px, batch {args.batch_size}, {EPOCHS} epochs with validation "
             f"after each: {cycles} cycles; steal {min(steal, default=0):.1f}-"
             f"{max(steal, default=0):.1f}%; host check {min(host, default=0):.2f}-"
             f"{max(host, default=0):.2f} ms"
             + (f"; neighbour busy {100 * statistics.fmean(busy):.0f}% of the time" if busy
                else "")]
    if moved:
        lines.append("  left out, the host's speed moved within the cycle (slowest host check "
                     "over the fastest): " + ", ".join(
                         f"cycle {c} {ratio:.2f}x" for c, ratio in sorted(moved.items())))
    for policy in args.policies:
        real = [r["parts"]["total"] for r in kept
                if r["kind"] == "fit" and r["policy"] == policy]
        tails = [r["parts"]["return_tail"] for r in rows if r["kind"] == "fit"
                 and r["policy"] == policy and r["parts"]["return_tail"] is not None] or [0.0]
        lines.append(f"  {policy:<15} real fit {statistics.fmean(real):.1f} s (then "
                     f"{min(tails):.1f}-{max(tails):.1f} s to return); projected / real: "
                     f"whole run {shown(ratios(kept, policy))}, steps alone (the answer before) "
                     f"{shown(ratios(kept, policy, 'steps', 'total'))}")
        lines.append("  " + " " * 15 + " per part, projected / real: " + ", ".join(
            f"{part} {shown(ratios(kept, policy, part))}" for part in PARTS))
        lines.append("  " + " " * 15 + " " + starts_waited(kept, policy))
    lines.append(f"  whole-run speedup, projected / real: "
                 f"{shown(speedup_ratio(kept, args.policies))}")
    # The same processes as jobs/fullrun.py now figures a cell's epoch starts.
    now = averaged(kept, args.policies)
    for policy in args.policies:
        spread = next((r["epoch_spread"] for r in now if r.get("epoch_spread") is not None
                       and r["policy"] == policy), None)
        lines.append(f"  {policy:<15} the rest averaged over the processes' epochs (spread "
                     f"{spread or 0:.3f}): whole run {shown(ratios(now, policy))}, epoch starts "
                     f"{shown(ratios(now, policy, 'epoch_starts'))}")
    lines.append(f"  whole-run speedup, the rest averaged: "
                 f"{shown(speedup_ratio(now, args.policies))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_fit:
        child_fit(*args.child_fit)
        return 0
    print(f"whole run against fit on {machine()}, {args.tag}", flush=True)
    lines = []
    for text in args.cells:
        kept = HERE / args.tag / f"{kept_name(text, args)}.jsonl"
        rows = read_jsonl(kept) if args.report_only else measure(
            text, args, lambda s: print(s, flush=True))
        if rows:
            lines += report(text, rows, args)
            print("\n".join(lines[-(2 * len(args.policies) + 2):]), flush=True)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
