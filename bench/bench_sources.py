"""Where does a comparison group's step lose time against a policy trained alone?

bench_alone.py compares whole processes: a group process (the train job's trainer, launched
and watched by the supervisor) against single-policy ones (a plain subprocess). Their steps
differ by a few percent while the processes themselves spread 10-40%, so telling one source of
a few percent from another that way takes hours. This benchmark measures the candidates inside
one process instead, so the process's own speed, whatever sets it, cancels.

Segments (the default): short stretches alternated cycle by cycle (ABCDE, then EDCBA), each
compared with the same policy's alone segments of its cycle:

- **alone**: one policy's plain Keras ``fit`` (its model and input as the train job builds
  them; the other policy's model held in memory, idle);
- **group**: both policies' fits in threads taking turns (the engine's Rounds and step timer,
  the job's own turn length), the steps of rounds in which both took a turn;
- **poller**: alone, while another process watches this one as the supervisor watches its
  trainer (jobs/memory.py ``watch``: resident memory sampled, then ``Popen.wait`` with a
  timeout, whose loop wakes up every few milliseconds);
- **cgroup**: alone, this process moved into a memory cgroup of its own, as the supervisor
  moves its trainer (jobs/memory.py ``child_cgroup``), and back after the segment.

Every segment starts a fresh ``fit`` (its first steps are warm-up, left out). Per condition it
prints the mean over cycles of log(segment / the same policy's alone segments of that cycle),
of the mean step and of the median step, with a t interval over cycles.

Steps (``--steps N``): the two candidates of the launcher, which can be switched on and off
between two steps, each in one plain fit per policy whose timed steps alternate without and
with it in pairs (off, on), (on, off), ...; N pairs per policy and candidate. Each pair is two
steps back to back, so even a host whose speed wanders second by second cancels; the figure is
exp(mean log(on / off)) over pairs, with a t interval. A third fit alternates the same way and
switches nothing: what the design reads where there is no effect (an A/A).

    python bench/bench_sources.py                  # 2 processes of 8 cycles, seed convnet 128 px
    python bench/bench_sources.py --steps 100      # the launcher's candidates, step by step
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_alone import WORK, Cell, cell_files  # noqa: E402

CONDITIONS = ("alone", "group", "poller", "cgroup")
# Timed steps per segment: about 5 s of each policy at 128 px on a 2-core host.
STEPS = {"float32": 12, "mixed_bfloat16": 20}
# What by_steps switches, step by step: the supervisor's watch, the trainer's own cgroup, and
# nothing (an A/A: the same alternation with no switch, what the design reads with no effect).
CANDIDATES = ("poller", "cgroup", "none")
# A new fit's first steps wait on its input iterator's shuffle buffer and prefetch: left out.
WARMUP = 4


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", default="seed_convnet:128")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--cycles", type=int, default=8, help="per process")
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--train-per-class", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None, help="JSON lines of every step")
    parser.add_argument("--steps", type=int, default=0,
                        help="instead: the launcher's two candidates (and nothing) switched "
                             "step by step, this many pairs a policy and candidate per process")
    parser.add_argument("--report-only", nargs="+", type=Path, metavar="FILE",
                        help="the figures of kept runs' files again, their steps or segments "
                             "pooled (each run's processes counted apart)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--poll", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the supervisor's watch, alone


def poll(pid: int) -> None:
    """What jobs/memory.py's watch does while a trainer runs without a memory limit: sample its
    resident memory, then wait on a child with a timeout of 5 samples."""
    import psutil

    from mptbench.jobs.memory import SAMPLE_S

    watched = psutil.Process(pid)
    child = subprocess.Popen(["sleep", "100000"])
    try:
        while True:
            watched.memory_info()
            try:
                child.wait(timeout=5 * SAMPLE_S)
            except subprocess.TimeoutExpired:
                pass
    finally:
        child.kill()


# ---------------------------------------------------------------- one process of segments


class Moved:
    """This process in a memory cgroup of its own for a while, as the supervisor's trainer."""

    def __init__(self):
        from mptbench.jobs.memory import child_cgroup, own_cgroup

        self.parent = own_cgroup()
        self.own = child_cgroup(self.parent, os.getpid()) if self.parent else None
        if self.own is None:
            raise SystemExit("no memory cgroup can be made here: the cgroup condition needs one")
        self.back()

    def into(self) -> None:
        (self.own.path / "cgroup.procs").write_text(str(os.getpid()))

    def back(self) -> None:
        (self.parent.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        from mptbench.jobs.memory import remove

        self.back()
        remove(self.own)


def switch(condition: str, on: bool, poller, moved: Moved) -> None:
    """Turn a candidate source on or off."""
    if condition == "none":
        return
    if condition == "poller":
        os.killpg(poller.pid, signal.SIGCONT if on else signal.SIGSTOP)
    elif on:
        moved.into()
    else:
        moved.back()


def toggle(keras, condition: str, poller, moved: Moved):
    """A callback that turns `condition` on before the steps of by_steps' alternation that
    have it (before the step's clock starts: the switch itself is not timed)."""

    class Toggle(keras.callbacks.Callback):
        on = False

        def on_train_batch_begin(self, batch, logs=None):
            i = batch - WARMUP
            on = i >= 0 and bool(i % 2) != bool((i // 2) % 2)
            if on != self.on:
                switch(condition, on, poller, moved)
                self.on = on

    return Toggle()


def by_steps(models: dict, data: dict, poller, moved: Moved, pairs: int, out: str) -> None:
    """Per policy and launcher condition, one plain fit whose steps alternate without and
    with it, in pairs (off, on), (on, off), ...: each pair two steps back to back."""
    import keras

    from mptbench.engine.timing import StepClock, make_step_timer

    for name, model in models.items():
        for condition in CANDIDATES:
            clock = StepClock(WARMUP, 2 * pairs, 1, None)
            try:
                model.fit(data[name], epochs=1, steps_per_epoch=WARMUP + 2 * pairs, verbose=0,
                          callbacks=[toggle(keras, condition, poller, moved),
                                     make_step_timer(clock)], shuffle=False)
            finally:
                switch(condition, False, poller, moved)
            with open(out, "a") as sink:
                sink.write(json.dumps({"condition": condition, "policy": name,
                                       "step_s": clock.step_seconds}) + "\n")


def pair_logs(steps: list[float]) -> list[float]:
    """log(on / off) per pair of by_steps' alternation."""
    logs = []
    for k in range(len(steps) // 2):
        first, second = steps[2 * k], steps[2 * k + 1]
        logs.append(math.log(first / second) if k % 2 else math.log(second / first))
    return logs


def child(mode: str, run_files: str, prepared_json: str, count: str, out: str) -> None:
    import keras
    import tensorflow as tf

    from mptbench.core.contract import Run, decode
    from mptbench.engine.models import build_model, jit_setting
    from mptbench.engine.pipeline import input_pipeline
    from mptbench.engine.rounds import Rounds
    from mptbench.engine.timing import StepClock, make_step_timer

    runs = [decode(Run, json.loads(Path(f).read_text())) for f in run_files.split(",")]
    prepared = json.loads(Path(prepared_json).read_text())
    size, classes = prepared["image_size"], len(prepared["classes"])
    models, data = {}, {}
    for run in runs:
        keras.utils.set_random_seed(run.seed)
        name = run.policy.name
        models[name] = build_model(run.model, (size, size, 3), classes, run.policy,
                                   jit_setting(run.variant.jit_compile), run.block_steps)
        data[name] = input_pipeline(
            tf, prepared, "train", run.cell.batch_size, run.dataset.input, run.seed,
            training=True, one_hot_classes=classes if run.model.one_hot_labels else 0,
        )
    by_name = {r.policy.name: r for r in runs}
    names = list(models)

    def clock(name: str) -> StepClock:
        return StepClock(WARMUP, STEPS.get(name, 12), 1, None)

    def alone(name: str) -> list[float]:
        timed = clock(name)
        models[name].fit(data[name], epochs=1, steps_per_epoch=WARMUP + timed.timed_steps,
                         callbacks=[make_step_timer(timed)], verbose=0, shuffle=False)
        return timed.step_seconds

    def group() -> dict[str, list[float]]:
        """The arms in threads taking turns (the engine's Rounds and step timer), as
        engine/repeat.py's in_turns runs them, each fit's first step waiting until every fit
        has started: a new fit builds its input iterator before its first step, outside any
        turn, and in the job that happens once per process, not once per segment."""
        clocks = {n: clock(n) for n in models}
        turns = Rounds(names, by_name[names[0]].train.round_samples,
                       by_name[names[0]].train.round_seconds)
        started = threading.Barrier(len(names))

        class Start(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 0:
                    started.wait()

        def fit(n: str) -> None:
            try:
                models[n].fit(data[n], epochs=1, steps_per_epoch=WARMUP + clocks[n].timed_steps,
                              callbacks=[Start(), make_step_timer(clocks[n], turns, n)],
                              verbose=0, shuffle=False)
            finally:
                turns.leave(n)

        threads = [threading.Thread(target=fit, args=(n,)) for n in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        shared = min(max(c.rounds) for c in clocks.values())  # rounds in which both took turns
        return {n: [s for s, r in zip(c.step_seconds, c.rounds, strict=True) if r <= shared]
                for n, c in clocks.items()}

    poller = subprocess.Popen([sys.executable, __file__, "--poll", str(os.getpid())],
                              start_new_session=True)
    os.killpg(poller.pid, signal.SIGSTOP)
    moved = Moved()
    if mode == "steps":
        try:
            by_steps(models, data, poller, moved, int(count), out)
        finally:
            os.killpg(poller.pid, signal.SIGKILL)
            moved.remove()
        return
    order = [("alone", n) for n in names] + [("group", None)] + [
        (c, names[0]) for c in ("poller", "cgroup")]
    for n in names:  # traces each model's functions, and reads its data through once, so
        # its in-memory cache is kept (a fit that stops sooner discards it)
        examples = prepared["splits"]["train"]
        models[n].fit(data[n], epochs=1, verbose=0,
                      steps_per_epoch=2 * math.ceil(examples / by_name[n].cell.batch_size))
    try:
        with open(out, "a") as sink:
            for cycle in range(int(count)):
                for what, name in order if cycle % 2 == 0 else order[::-1]:
                    if what == "poller":
                        os.killpg(poller.pid, signal.SIGCONT)
                    elif what == "cgroup":
                        moved.into()
                    try:
                        got = group() if what == "group" else {name: alone(name)}
                    finally:
                        if what == "poller":
                            os.killpg(poller.pid, signal.SIGSTOP)
                        elif what == "cgroup":
                            moved.back()
                    for policy, steps in got.items():
                        sink.write(json.dumps({"cycle": cycle, "condition": what,
                                               "policy": policy, "step_s": steps}) + "\n")
                    sink.flush()
    finally:
        os.killpg(poller.pid, signal.SIGKILL)
        moved.remove()


# ---------------------------------------------------------------- the figures


def figures(rows: list[dict], how=statistics.fmean) -> dict:
    """Per condition and policy: exp(mean over (process, cycle) of log(segment's `how` step /
    that cycle's alone segments' of the policy)), a t interval over them."""
    from mptbench.core import stats

    alone: dict = {}
    for r in rows:
        if r["condition"] == "alone" and r["step_s"]:
            alone.setdefault((r["process"], r["cycle"], r["policy"]), []).append(
                how(r["step_s"]))
    out: dict = {}
    for r in rows:
        key = (r["process"], r["cycle"], r["policy"])
        if r["condition"] == "alone" or not r["step_s"] or key not in alone:
            continue
        base = statistics.fmean(alone[key])
        out.setdefault((r["condition"], r["policy"]), []).append(
            math.log(how(r["step_s"]) / base))
    return {k: stats.of_logs(v) for k, v in out.items() if len(v) >= 2}


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.poll:
        poll(args.poll)
        return
    if args.child:
        child(*args.child)
        return
    if args.report_only:
        report(_kept(args.report_only))
        return
    from mptbench.core import hardware

    cell = Cell.parse(args.cell, args.batch_size)
    folder = args.work.resolve() / f"sources-{cell.tag}"
    _, env, prepared, run_files = cell_files(cell, args.work, args.train_per_class, folder)
    files = ",".join(str(run_files[p]) for p in cell.policies)
    mode, count = ("steps", args.steps) if args.steps else ("segments", args.cycles)
    out = args.out or folder / ("steps.jsonl" if args.steps else "segments.jsonl")
    each = f"{args.steps} pairs a policy and candidate" if args.steps else f"{args.cycles} cycles"
    print(f"CPU: {hardware.cpu_name()}; {cell.tag}; {args.processes} processes of {each}; "
          f"every step in {out}", flush=True)
    rows = []
    for process in range(args.processes):
        part = folder / f"process-{process}.jsonl"
        part.unlink(missing_ok=True)
        ticks, started = hardware.cpu_ticks(), time.monotonic()
        subprocess.run([sys.executable, __file__, "--child", mode, files,
                        str(prepared), str(count), str(part)], env=env, check=True)
        stolen = hardware.stolen_percent(ticks, hardware.cpu_ticks())
        got = [json.loads(line) | {"process": process} for line in part.read_text().splitlines()]
        rows.extend(got)
        print(f"process {process + 1}: {time.monotonic() - started:.0f} s, steal "
              f"{stolen if stolen is None else round(stolen, 1)}%", flush=True)
    with open(out, "w") as sink:
        for row in rows:
            sink.write(json.dumps(row) + "\n")
    report(rows)


def _kept(files: list[Path]) -> list[dict]:
    """The rows of several runs' files, each run's processes numbered apart."""
    rows, first = [], 0
    for path in files:
        got = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows.extend(r | {"process": first + r["process"]} for r in got)
        first += 1 + max((r["process"] for r in got), default=-1)
    return rows


def report(rows: list[dict]) -> None:
    if rows and "cycle" not in rows[0]:
        report_steps(rows)
    else:
        report_segments(rows)


def report_steps(rows: list[dict]) -> None:
    from mptbench.core import stats

    print("with / without, steps paired back to back (t interval over pairs):")
    logs: dict = {}
    for r in rows:
        logs.setdefault((r["condition"], r["policy"]), []).extend(pair_logs(r["step_s"]))
        print(f"  process {r['process'] + 1} {r['condition']:6s} {r['policy']:15s} mean step "
              f"{1000 * statistics.fmean(r['step_s']):.1f} ms")
    for (condition, policy), values in sorted(logs.items()):
        e = stats.of_logs(values)
        print(f"  {condition:6s} {policy:15s} {e.value:.4f} ({e.low:.4f}-{e.high:.4f}), "
              f"{e.n} pairs")


def report_segments(rows: list[dict]) -> None:
    means = {}
    for r in rows:
        if r["condition"] == "alone":
            means.setdefault(r["policy"], []).extend(r["step_s"])
    for policy, steps in means.items():
        print(f"alone {policy}: mean step {1000 * statistics.fmean(steps):.1f} ms")
    print("condition / alone, same policy, same cycle (t interval over cycles):")
    medians = figures(rows, statistics.median)
    for key, e in sorted(figures(rows).items()):
        m = medians[key]
        print(f"  {key[0]:7s} {key[1]:15s} mean step {e.value:.3f} ({e.low:.3f}-{e.high:.3f}), "
              f"median step {m.value:.3f} ({m.low:.3f}-{m.high:.3f}), {e.n} segments")


if __name__ == "__main__":
    main()
