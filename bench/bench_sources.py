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
- **group**: both policies' fits in threads taking turns as the job runs them (engine/repeat.py
  ``in_turns``: the engine's rounds and step timer, the job's own turn length), the steps of
  rounds in which both took a turn;
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

from bench_alone import HERE, Cell, cell_files
from common import (
    Steal,
    append_jsonl,
    job_input,
    job_model,
    load_run,
    machine,
    read_jsonl,
    shown,
)

from mptbench.core import stats
from mptbench.core.contract import ArmResult
from mptbench.core.files import read_json
from mptbench.engine.repeat import Arm, in_turns
from mptbench.engine.timing import StepClock, make_step_timer

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
    parser.add_argument("--work", type=Path, default=HERE)
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


# ---------------------------------------------------------------- the candidates


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


# ---------------------------------------------------------------- steps: switched step by step


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

    for name, model in models.items():
        for condition in CANDIDATES:
            clock = StepClock(WARMUP, 2 * pairs, 1, None)
            try:
                model.fit(data[name], epochs=1, steps_per_epoch=WARMUP + 2 * pairs, verbose=0,
                          callbacks=[toggle(keras, condition, poller, moved),
                                     make_step_timer(clock)], shuffle=False)
            finally:
                switch(condition, False, poller, moved)
            append_jsonl(Path(out), {"condition": condition, "policy": name,
                                     "step_s": clock.step_seconds})


def pair_logs(steps: list[float]) -> list[float]:
    """log(on / off) per pair of by_steps' alternation."""
    logs = []
    for k in range(len(steps) // 2):
        first, second = steps[2 * k], steps[2 * k + 1]
        logs.append(math.log(first / second) if k % 2 else math.log(second / first))
    return logs


# ---------------------------------------------------------------- segments: alone, group, ...


def segment_clock(name: str) -> StepClock:
    return StepClock(WARMUP, STEPS.get(name, 12), 1, None)


def alone(models: dict, data: dict, name: str) -> list[float]:
    """One policy's plain fit: its timed steps."""
    timed = segment_clock(name)
    models[name].fit(data[name], epochs=1, steps_per_epoch=WARMUP + timed.timed_steps,
                     callbacks=[make_step_timer(timed)], verbose=0, shuffle=False)
    return timed.step_seconds


class Started:
    """A model whose fit waits, before its first step, until every fit of the group has
    started: a new fit builds its input iterator before its first step, outside any turn, and
    in the job that happens once per process, not once per segment. The wait comes before the
    step timer's callback, so no turn and no step holds it."""

    def __init__(self, keras, model, barrier: threading.Barrier):
        class Start(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 0:
                    barrier.wait()

        self.model, self.start = model, Start()

    def fit(self, callbacks=(), **kwargs):
        return self.model.fit(callbacks=[self.start, *callbacks], **kwargs)


def group(keras, runs: list, models: dict, data: dict) -> dict[str, list[float]]:
    """The arms in threads taking turns, as engine/repeat.py's in_turns runs them in the job,
    each fit's first step waiting until every fit has started (Started): per policy the steps
    of the rounds in which every arm took its turn."""
    names = [r.policy.name for r in runs]
    started = threading.Barrier(len(names))
    arms = [Arm(r, ArmResult(0, r.policy.name, {}), Started(keras, models[r.policy.name], started))
            for r in runs]
    clocks = {n: segment_clock(n) for n in names}
    fits = {n: dict(x=data[n], epochs=1, steps_per_epoch=WARMUP + clocks[n].timed_steps,
                    verbose=0) for n in names}
    in_turns(arms, fits, clocks, None)
    for arm in arms:
        if arm.error is not None:
            raise arm.error
    shared = min(max(c.rounds) for c in clocks.values())  # rounds in which both took turns
    return {n: [s for s, r in zip(c.step_seconds, c.rounds, strict=True) if r <= shared]
            for n, c in clocks.items()}


def warm(models: dict, data: dict, runs: list, prepared: dict) -> None:
    """Traces each model's functions, and reads its data through once, so its in-memory cache
    is kept (a fit that stops sooner discards it)."""
    examples = prepared["splits"]["train"]
    for run in runs:
        name = run.policy.name
        models[name].fit(data[name], epochs=1, verbose=0,
                         steps_per_epoch=2 * math.ceil(examples / run.cell.batch_size))


def by_segments(keras, runs: list, models: dict, data: dict, poller, moved: Moved,
                cycles: int, out: str) -> None:
    """Cycles of segments, in the order alone (each policy), group, poller, cgroup, then the
    reverse: the candidate switched on for its segment alone."""
    names = [r.policy.name for r in runs]
    order = [("alone", n) for n in names] + [("group", None)] + [
        (c, names[0]) for c in ("poller", "cgroup")]
    for cycle in range(cycles):
        for what, name in order if cycle % 2 == 0 else order[::-1]:
            candidate = what in ("poller", "cgroup")
            if candidate:
                switch(what, True, poller, moved)
            try:
                got = group(keras, runs, models, data) if what == "group" else {
                    name: alone(models, data, name)}
            finally:
                if candidate:
                    switch(what, False, poller, moved)
            for policy, steps in got.items():
                append_jsonl(Path(out), {"cycle": cycle, "condition": what, "policy": policy,
                                         "step_s": steps})


# ---------------------------------------------------------------- one process


def built(run_files: str, prepared_json: str):
    """The group's runs, the prepared data, and each policy's model and input as the train
    job builds them: (runs, prepared, models, data), the last two by policy."""
    import keras
    import tensorflow as tf

    runs = [load_run(f) for f in run_files.split(",")]
    prepared = read_json(prepared_json)
    models, data = {}, {}
    for run in runs:
        models[run.policy.name] = job_model(keras, run, prepared)
        data[run.policy.name] = job_input(tf, run, prepared)
    return runs, prepared, models, data


def child(mode: str, run_files: str, prepared_json: str, count: str, out: str) -> None:
    """One process of `mode` (steps or segments): the group's models built, the poller
    started and stopped at once, a memory cgroup of its own ready; both undone at its end."""
    import keras

    runs, prepared, models, data = built(run_files, prepared_json)
    poller = subprocess.Popen([sys.executable, __file__, "--poll", str(os.getpid())],
                              start_new_session=True)
    os.killpg(poller.pid, signal.SIGSTOP)
    moved = Moved()
    try:
        if mode == "steps":
            by_steps(models, data, poller, moved, int(count), out)
        else:
            warm(models, data, runs, prepared)
            by_segments(keras, runs, models, data, poller, moved, int(count), out)
    finally:
        os.killpg(poller.pid, signal.SIGKILL)
        moved.remove()


# ---------------------------------------------------------------- the figures


def figures(rows: list[dict], how=statistics.fmean) -> dict:
    """Per condition and policy: exp(mean over (process, cycle) of log(segment's `how` step /
    that cycle's alone segments' of the policy)), a t interval over them."""
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
    cell = Cell.parse(args.cell, args.batch_size)
    folder = args.work.resolve() / f"sources-{cell.tag}"
    _, env, prepared, run_files = cell_files(cell, args.work, args.train_per_class, folder)
    files = ",".join(str(run_files[p]) for p in cell.policies)
    mode, count = ("steps", args.steps) if args.steps else ("segments", args.cycles)
    out = args.out or folder / ("steps.jsonl" if args.steps else "segments.jsonl")
    each = f"{args.steps} pairs a policy and candidate" if args.steps else f"{args.cycles} cycles"
    print(f"CPU: {machine()}; {cell.tag}; {args.processes} processes of {each}; "
          f"every step in {out}", flush=True)
    rows = []
    for process in range(args.processes):
        part = folder / f"process-{process}.jsonl"
        part.unlink(missing_ok=True)
        steal, started = Steal(), time.monotonic()
        subprocess.run([sys.executable, __file__, "--child", mode, files,
                        str(prepared), str(count), str(part)], env=env, check=True)
        stolen = steal.percent()
        rows.extend(r | {"process": process} for r in read_jsonl(part))
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
        got = read_jsonl(path)
        rows.extend(r | {"process": first + r["process"]} for r in got)
        first += 1 + max((r["process"] for r in got), default=-1)
    return rows


def report(rows: list[dict]) -> None:
    if rows and "cycle" not in rows[0]:
        report_steps(rows)
    else:
        report_segments(rows)


def report_steps(rows: list[dict]) -> None:
    print("with / without, steps paired back to back (t interval over pairs):")
    logs: dict = {}
    for r in rows:
        logs.setdefault((r["condition"], r["policy"]), []).extend(pair_logs(r["step_s"]))
        print(f"  process {r['process'] + 1} {r['condition']:6s} {r['policy']:15s} mean step "
              f"{1000 * statistics.fmean(r['step_s']):.1f} ms")
    for (condition, policy), values in sorted(logs.items()):
        e = stats.of_logs(values)
        print(f"  {condition:6s} {policy:15s} {shown(e, 4)}, {e.n} pairs")


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
        print(f"  {key[0]:7s} {key[1]:15s} mean step {shown(e)}, median step "
              f"{shown(medians[key])}, {e.n} segments")


if __name__ == "__main__":
    main()
