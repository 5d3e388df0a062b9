"""Is a comparison group's verdict what a user gets training one policy alone?

The pipeline times a group's policies in threads of one process, taking turns (engine/rounds.py):
each arm's input pipeline prefetches while another has its turn, turns end on time, every
model's memory is held at once. All of that is the same in every process, so no interval over
processes can see it. This benchmark can: for each cell it interleaves, in fresh processes,

- **group**: one repeat of the comparison group exactly as the train job runs it (the engine's
  RepeatJob through jobs/trainer.py, default timing from conf/train/benchmark.yaml: the same
  warm-up, budget share, turn length and step limit), and
- **alone**: one policy trained by a plain Keras ``fit`` in a process of its own (the same
  model builder, tf.data input, seed and warm-up and stop rules; no turns, no other model),
  one process per policy,

in the order group, float32, other, then other, float32, group (ABBA), cycle after cycle, until
the alone speedup's 95% interval is within ±--precision and the ratio's within
±--ratio-precision (after --min-cycles), or --max-minutes per cell run out. Per cell it prints

- each policy's group ms/step over its alone ms/step (the mean timed step per process, a Welch
  t interval over processes on logs; the median too), and
- the group's speedup as the pipeline reports it (paired rounds, core/stats.py) over the alone
  speedup (the ratio of the alone processes' geometric mean steps), with a Welch interval;
- each of these paired by cycle too: per cycle, the figure from that cycle's processes alone
  (they ran back to back), then a t interval over cycles. Where the host's own speed wanders
  from one minute to the next, as shared 2-core machines' does, that wander is most of the
  Welch intervals' width; pairing takes it out, and the ABBA order takes out a steady drift
  within a cycle. What stays is each process's own noise, which is what a user's run has.

Each process also records the share of the CPU the hypervisor took while it ran (steal time,
/proc/stat): on a shared virtual machine a neighbour's burst can take a third of it for
minutes, and a cycle with such a process compares a fast host with a slow one. Cycles in which
any process lost more than --max-steal percent are left out of every figure, and the report
says which.

The goal: for the seed convnet, with the alone speedup within ±3%, the ratio's interval within
0.97-1.03 holding 1, each policy's group ms/step within 1.03x of alone.

Every process's steps are kept in bench/.work/alone/<cell>.jsonl, so a rerun goes on where it
stopped and ``--report-only`` prints the table again.

    python bench/bench_alone.py                        # the three cells below, up to 60 min
    python bench/bench_alone.py --cells seed_convnet:64 --max-minutes 10
    python bench/bench_alone.py --report-only
    python bench/bench_alone.py --report-only --from-cycle 3   # without the first three cycles
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    WORK,
    Steal,
    append_jsonl,
    compose_runs,
    fixture,
    holds,
    job_env,
    job_input,
    job_model,
    load_run,
    machine,
    read_jsonl,
    run_files,
    shown,
)

from mptbench.core import stats
from mptbench.core.files import read_json

HERE = WORK / "alone"
# model:image size[:policy,policy...]; the seed convnet at two sizes (at 64 px with
# mixed_float16 too, its CPU step there under the budget: a group of three, as the grid runs),
# one keras.applications model.
CELLS = [
    "seed_convnet:64:float32,mixed_bfloat16,mixed_float16",
    "seed_convnet:128",
    "mobilenet_v2:96",
]
BASELINE = "float32"
POLICIES = ("float32", "mixed_bfloat16")
GOAL = 0.03
VAL_PER_CLASS = 2  # validation is off in both kinds of process; the builder still wants the split


@dataclass(frozen=True)
class Cell:
    model: str
    image_size: int
    batch_size: int
    policies: tuple[str, ...] = POLICIES  # the baseline first

    @property
    def tag(self) -> str:
        return f"{self.model}-{self.image_size}px-bs{self.batch_size}-{len(self.policies)}"

    @property
    def others(self) -> tuple[str, ...]:
        return self.policies[1:]

    @classmethod
    def parse(cls, text: str, batch_size: int) -> Cell:
        model, size, *policies = text.split(":")
        names = tuple(policies[0].split(",")) if policies else POLICIES
        if names[0] != BASELINE:
            raise SystemExit(f"{text}: the first policy must be the baseline, {BASELINE}")
        return cls(model, int(size), batch_size, names)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=CELLS,
                        help="model:image_size[:float32,policy,...] ...")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precision", type=float, default=GOAL,
                        help="stop once the alone speedup is known to within this")
    parser.add_argument("--ratio-precision", type=float, default=GOAL / 2,
                        help="and the group/alone ratio to within this (a ratio within half the "
                             "goal of 1 then lies within the goal)")
    parser.add_argument("--max-steal", type=float, default=5.0,
                        help="leave out cycles in which a process lost more than this percent "
                             "of the CPU to the hypervisor (steal time, /proc/stat)")
    parser.add_argument("--min-cycles", type=int, default=4)
    parser.add_argument("--max-cycles", type=int, default=20)
    parser.add_argument("--max-minutes", type=float, default=20.0, help="per cell")
    parser.add_argument("--report-only", action="store_true", help="the kept processes again")
    parser.add_argument("--from-cycle", type=int, default=0,
                        help="leave out the first N cycles (a known disturbance then)")
    parser.add_argument("--work", type=Path, default=HERE)
    parser.add_argument("--train-per-class", type=int, default=60)
    # Internal: the pieces that run in fresh processes.
    parser.add_argument("--child-alone", nargs=3, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the runs, as the job gets them


def group_runs(cell: Cell):
    """The group's runs through Hydra, as the workflow composes them: the default timing, the
    twin and the profile off (they come after the timed steps and change no step)."""
    return compose_runs(cell.model, cell.image_size, list(cell.policies), cell.batch_size, [
        "train.synthetic_twin=false", "train.profile_steps=0", "train.validate=false",
        # The fixture's epoch is a few steps: one as long as the timing rules need (the input
        # repeats), so the budget, not the data, ends each process.
        "train.steps_per_epoch=2000",
    ], name="bench_alone")


def child_alone(run_json: str, prepared_json: str, out: str) -> None:
    """One policy alone: the job's model and input, a plain Keras fit, timed by a StepClock
    with the job's warm-up and stop rules and no turns."""
    import keras
    import tensorflow as tf

    from mptbench.engine.repeat import step_clock
    from mptbench.engine.timing import make_step_timer

    run, prepared = load_run(run_json), read_json(prepared_json)
    model = job_model(keras, run, prepared)
    data = job_input(tf, run, prepared)
    clock = step_clock(run)
    model.fit(data, epochs=1, steps_per_epoch=run.train.steps_per_epoch,
              callbacks=[make_step_timer(clock)], verbose=0, shuffle=False)
    Path(out).write_text(json.dumps({"policy": run.policy.name, "step_s": clock.step_seconds,
                                     "stopped_by": clock.stopped_by}) + "\n")


# ---------------------------------------------------------------- one process of each kind


def group_process(trainer, prepared: Path, runs, index: int) -> list[dict]:
    """One repeat of the group, as the train job runs it: each arm's steps and rounds."""
    from mptbench.jobs.trainer import Death

    got = trainer.repeat(str(prepared), index, runs)
    if isinstance(got, Death):
        raise SystemExit(f"the group's trainer died: {got.outcome}: {got.reason}")
    return [
        {"kind": "group", "policy": a.policy, "process": got.process, "step_s": a.step_s,
         "rounds": a.rounds, "stopped_by": a.stopped_by}
        for a in got.arms if a.outcome == "ok"
    ]


def alone_process(run_json: Path, prepared: Path, env: dict, log: Path) -> dict:
    out = log.with_suffix(".json")
    out.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child-alone", str(run_json), str(prepared), str(out)]
    with open(log, "w") as sink:
        done = subprocess.run(command, env=env, stdout=sink, stderr=subprocess.STDOUT,
                              timeout=1800)
    if done.returncode or not out.exists():
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"an alone process failed (exit {done.returncode}); {log}:\n{tail}")
    return {"kind": "alone", **json.loads(out.read_text())}


# ---------------------------------------------------------------- the figures


def _steps(rows: list[dict], kind: str, policy: str, how) -> list[float]:
    return [how(r["step_s"]) for r in rows if r["kind"] == kind and r["policy"] == policy]


def _timed(rows: list[dict], policy: str):
    return [(r["process"], r["step_s"], r["rounds"]) for r in rows
            if r["kind"] == "group" and r["policy"] == policy]


def _by_cycle(rows: list[dict], kind: str, policy: str) -> dict[int, float]:
    """Per cycle, the log of that process's mean timed step."""
    return {r["cycle"]: math.log(statistics.fmean(r["step_s"])) for r in rows
            if r["kind"] == kind and r["policy"] == policy and len(r["step_s"])}


def _group_log_speedups(rows: list[dict], policy: str) -> dict[int, float]:
    """Per cycle, the group process's own paired log speedup of `policy` over the baseline
    (round by round, core/stats.py), as the pipeline computes it for one process."""
    arms = {(r["cycle"], r["policy"]): r for r in rows if r["kind"] == "group"}
    out = {}
    for (cycle, name), row in arms.items():
        base = arms.get((cycle, BASELINE))
        if name != policy or base is None:
            continue
        figure = stats.paired_log_ratio(stats.round_medians(base["step_s"], base["rounds"]),
                                        stats.round_medians(row["step_s"], row["rounds"]))
        if figure is not None:
            out[cycle] = figure
    return out


def _differences(first: dict[int, float], second: dict[int, float]) -> dict[int, float]:
    """Per cycle both have, first - second: the processes of one cycle ran back to back, so
    what the host's speed did between cycles cancels (the ABBA order cancels a steady drift
    within them)."""
    return {c: first[c] - second[c] for c in sorted(set(first) & set(second))}


def _paired(logs: dict[int, float]):
    """exp(mean over cycles) of per-cycle log figures, with a t interval over the cycles."""
    return stats.of_logs(list(logs.values())) if logs else None


def figures(rows: list[dict], cell: Cell) -> dict:
    """The cell's group-over-alone figures from its kept processes: per policy its step (mean
    and median) in the group over alone; per other policy its speedup in each and their
    ratio."""
    out: dict = {"processes": {k: len(_steps(rows, k, BASELINE, len)) for k in ("group", "alone")}}
    for policy in cell.policies:
        group, alone = (_steps(rows, k, policy, statistics.fmean) for k in ("group", "alone"))
        out[policy] = {
            "group_ms": 1000 * statistics.geometric_mean(group) if group else math.nan,
            "alone_ms": 1000 * statistics.geometric_mean(alone) if alone else math.nan,
            "mean": stats.unpaired_log_ratios(group, alone) if group and alone else None,
            "median": stats.unpaired_log_ratios(_steps(rows, "group", policy, statistics.median),
                                                _steps(rows, "alone", policy, statistics.median))
            if group and alone else None,
            "mean_by_cycle": _paired(_differences(_by_cycle(rows, "group", policy),
                                                  _by_cycle(rows, "alone", policy))),
        }
    base_alone = _steps(rows, "alone", BASELINE, statistics.fmean)
    base_by_cycle = _by_cycle(rows, "alone", BASELINE)
    for policy in cell.others:
        mine = _steps(rows, "alone", policy, statistics.fmean)
        group = stats.paired_speedup(_timed(rows, BASELINE), _timed(rows, policy))
        alone = stats.unpaired_log_ratios(base_alone, mine) if base_alone and mine else None
        alone_logs = _differences(base_by_cycle, _by_cycle(rows, "alone", policy))
        ratio_logs = _differences(_group_log_speedups(rows, policy), alone_logs)
        per_cycle = {c: math.exp(v) for c, v in ratio_logs.items()}
        out[policy] |= {"group_speedup": group, "alone_speedup": alone,
                        "alone_by_cycle": _paired(alone_logs),
                        "ratio_by_cycle": _paired(ratio_logs),
                        "ratio_per_cycle": per_cycle,
                        "ratio_halves": _halves(per_cycle)}
        if group is not None and alone is not None:
            out[policy]["ratio"] = stats.ratio_of(group, alone)
    return out


def _halves(per_cycle: dict[int, float]):
    """The per-cycle figures' first half of the cycles over their second half (Welch), or None
    below two cycles a half: a ratio that holds 1 over the run can still have favoured one
    policy for a while (a neighbour's load that came and went), which this shows."""
    ordered = [per_cycle[c] for c in sorted(per_cycle)]
    half = len(ordered) // 2
    if half < 2:
        return None
    return stats.unpaired_log_ratios(ordered[:half], ordered[-half:])


def _within(e, goal: float) -> str:
    if e is None or e.low is None:
        return "no interval"
    inside = e.low >= 1 - goal and e.high <= 1 + goal
    return (f"{'holds 1' if holds(e, 1) else 'does not hold 1'}, "
            f"{'within' if inside else 'not within'} {1 - goal:.2f}-{1 + goal:.2f}")


def report_lines(cell: Cell, rows: list[dict]) -> list[str]:
    f = figures(rows, cell)
    n = f["processes"]
    lines = [f"{cell.model} at {cell.image_size} px, batch {cell.batch_size}: {n['group']} group "
             f"processes, {n['alone']} alone per policy"]
    for policy in cell.policies:
        p = f[policy]
        lines.append(
            f"  {policy:<15} ms/step group {p['group_ms']:8.1f}, alone {p['alone_ms']:8.1f}; "
            f"group/alone: mean {shown(p['mean'])}, median {shown(p['median'])}, "
            f"mean by cycle {shown(p['mean_by_cycle'])}"
        )
    for policy in cell.others:
        p = f[policy]
        alone = p["alone_speedup"]
        lines.append(f"  {policy} speedup: group {shown(p['group_speedup'])}, alone "
                     f"{shown(alone)}{_width(alone)}")
        lines.append(f"  {policy} alone speedup by cycle {shown(p['alone_by_cycle'])}"
                     f"{_width(p['alone_by_cycle'])}")
        if "ratio" in p:
            lines.append(f"  {policy} group speedup / alone speedup {shown(p['ratio'])}: "
                         f"{_within(p['ratio'], GOAL)}")
        lines.append(f"  {policy} group speedup / alone speedup by cycle "
                     f"{shown(p['ratio_by_cycle'])}{_width(p['ratio_by_cycle'])}: "
                     f"{_within(p['ratio_by_cycle'], GOAL)}")
        per_cycle = p["ratio_per_cycle"]
        lines.append(f"  {policy} group speedup / alone speedup, cycle by cycle: "
                     + " ".join(f"{c + 1}:{v:.2f}" for c, v in sorted(per_cycle.items())))
        halves = p["ratio_halves"]
        if halves is not None and halves.low is not None:
            moved = "moved" if not halves.low <= 1 <= halves.high else "did not move measurably"
            lines.append(f"  {policy} that ratio's first half of the cycles over its last half "
                         f"{shown(halves)}: it {moved} during the run")
    return lines


def _width(e) -> str:
    return f" (±{100 * e.half_width:.1f}%)" if e is not None and e.half_width else ""


# ---------------------------------------------------------------- the driver


def _settled(rows: list[dict], cell: Cell, precision: float, ratio_precision: float) -> bool:
    """Every alone speedup known to within `precision` and every group/alone ratio to within
    `ratio_precision`, both paired by cycle. The rule reads widths only, never where an
    estimate lies, so stopping on it does not bias the estimate."""
    found = figures(rows, cell)

    def narrow(e, goal: float) -> bool:
        return e is not None and e.half_width is not None and e.half_width <= goal

    return all(narrow(found[p]["alone_by_cycle"], precision)
               and narrow(found[p]["ratio_by_cycle"], ratio_precision) for p in cell.others)


def cell_files(cell: Cell, work: Path, train_per_class: int, folder: Path):
    """The cell's runs as the workflow composes them, the environment the supervisor gives its
    trainer, the prepared fixture (built once under `work`), and each run's JSON in `folder`
    by policy: what a fresh process needs to train the cell."""
    runs = group_runs(cell)
    prepared = fixture(work, cell.image_size, train_per_class, VAL_PER_CLASS)
    return runs, job_env(runs[0]), prepared, run_files(runs, folder)


def measure(cell: Cell, args, log) -> list[dict]:
    from mptbench.jobs.trainer import Trainer

    folder = args.work.resolve() / cell.tag
    runs, env, prepared, files = cell_files(cell, args.work, args.train_per_class, folder)
    kept = args.work.resolve() / f"{cell.tag}.jsonl"
    rows = read_jsonl(kept)
    trainer = Trainer(sys.executable, runs, [str(folder / f"{p}.record") for p in cell.policies])
    started = time.monotonic()
    cycle = len(_steps(rows, "group", BASELINE, len))
    while cycle < args.max_cycles:
        quiet, _ = quiet_cycles(rows, args.max_steal)
        if len({r["cycle"] for r in quiet}) >= args.min_cycles and _settled(
                quiet, cell, args.precision, args.ratio_precision):
            break
        if time.monotonic() - started > 60 * args.max_minutes:
            log(f"  {cell.tag}: --max-minutes={args.max_minutes} ran out after {cycle} cycles")
            break
        order = ["group", *cell.policies]
        got_cycle = []
        for what in order if cycle % 2 == 0 else order[::-1]:
            steal = Steal()
            if what == "group":
                got = group_process(trainer, prepared, runs, cycle % runs[0].train.repeats)
            else:
                got = [alone_process(files[what], prepared, env,
                                     folder / f"alone-{what}-{cycle}.log")]
            stolen = steal.percent()
            got = [row | {"cycle": cycle, "stolen_pct": stolen} for row in got]
            for row in got:
                append_jsonl(kept, row)
            rows.extend(got)
            got_cycle.extend(got)
        cycle += 1
        log(f"  cycle {cycle}: " + ", ".join(
            f"{r['kind']} {r['policy']} {1000 * statistics.fmean(r['step_s']):.1f} ms"
            f"{_stolen(r)}" for r in got_cycle) + f" ({time.monotonic() - started:.0f} s)")
    return rows


def _stolen(row: dict) -> str:
    stolen = row.get("stolen_pct")
    return f" (stolen {stolen:.0f}%)" if stolen is not None else ""


def quiet_cycles(rows: list[dict], max_steal: float) -> tuple[list[dict], dict[int, float]]:
    """The rows of cycles in which no process lost more than `max_steal` of the CPU to the
    hypervisor, and the cycles left out with the most any of their processes lost. A process
    that lost a share of the machine ran that much slower than its neighbours in the cycle, so
    its cycle's pairs compare a fast host with a slow one. Rows kept from before steal was
    read stay in."""
    worst: dict[int, float] = {}
    for r in rows:
        if r.get("stolen_pct") is not None:
            worst[r["cycle"]] = max(worst.get(r["cycle"], 0.0), r["stolen_pct"])
    out = {c: w for c, w in worst.items() if w > max_steal}
    return [r for r in rows if r["cycle"] not in out], out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_alone:
        child_alone(*args.child_alone)
        return 0
    print(f"group vs alone on {machine()}", flush=True)
    out = []
    for cell in [Cell.parse(c, args.batch_size) for c in args.cells]:
        if args.report_only:
            rows = read_jsonl(args.work.resolve() / f"{cell.tag}.jsonl")
        else:
            rows = measure(cell, args, lambda s: print(s, flush=True))
        rows, noisy = quiet_cycles([r for r in rows if r["cycle"] >= args.from_cycle],
                                   args.max_steal)
        if rows:
            lines = report_lines(cell, rows)
            if noisy:
                lines.insert(1, f"  left out: {len(noisy)} cycle(s) in which a process lost more "
                                f"than {args.max_steal:g}% of the CPU to the hypervisor ("
                                + ", ".join(f"cycle {c + 1} {w:.0f}%"
                                            for c, w in sorted(noisy.items())) + ")")
            print("\n".join(lines), flush=True)
            out += lines
    print("\n" + "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
