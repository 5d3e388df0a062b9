"""The default grid, end to end, on 2 cores: how long it takes and what each cell recorded.

Runs `snakemake --cores N` on a copy of this checkout with the default experiment, reading a
synthetic archive in Imagenette-320's exact layout and size (bench_data.py's, built once and
reused) instead of the real download. Prints the wall time, each rule's time (from Snakemake's
log), the outcome of every cell and its ms/step, and the share of the machine's CPU the
hypervisor gave to other guests meanwhile (steal time: two runs compare only where both were
quiet), and writes them to <workdir>/bench_grid_last_run.json. Inside the train jobs, the timing
processes' wall time by phase (framework start, build, warm-up, timed steps, the rest of the
turns, validation, input cost, twins, profiles, the last epochs' iterators still being destroyed:
engine/repeat.py PHASES), summed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench_data import bench_archive
from bench_tryout import rule_seconds
from common import ROOT, WORK, Steal, checkout, records, snakemake

from mptbench.core.files import sha256_of

HERE = WORK / "grid"
FIELDS = ("variant", "device", "policy", "batch_size", "outcome", "ms_per_step",
          "predicted_step_s", "duration_s", "cpu_stolen_pct_most")


def cells(folder: Path) -> list[dict]:
    """What each cell's run record says, of the fields this benchmark prints."""
    return [{k: record.get(k) for k in FIELDS} for record in records(folder, "benchmark")]


def process_phases(folder: Path) -> dict[str, float]:
    """Seconds by phase (engine/repeat.py PHASES) summed over every timing process of the train
    jobs, each process once (its arms' records all hold its phases); {} where the records say
    none (a checkout from before they did)."""
    seen, totals = set(), {}
    for record in records(folder, "benchmark"):
        for repeat in record.get("repeats") or []:
            if repeat.get("process") in seen or not repeat.get("phases_s"):
                continue
            seen.add(repeat["process"])
            for phase, seconds in repeat["phases_s"].items():
                totals[phase] = totals.get(phase, 0.0) + seconds
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="2")
    parser.add_argument("--workdir", type=Path, default=HERE)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to time")
    parser.add_argument("--overrides", nargs="*", default=[], help="more Hydra overrides")
    args = parser.parse_args(argv)
    archive = bench_archive(WORK / "data", 13394)
    # A fresh copy: results of an earlier run are not reused.
    target = checkout(args.source.resolve(), args.workdir.resolve() / "checkout", fresh=True)
    overrides = [f"dataset.url={archive['path']}", f"dataset.sha256={sha256_of(archive['path'])}"]
    steal, started = Steal(), time.monotonic()
    done = snakemake(target, overrides + args.overrides, experiment=None, cores=args.cores,
                     hide_gpus=False, show=True)
    wall = time.monotonic() - started
    stolen = steal.percent()
    log = done.stdout + done.stderr
    (args.workdir / "snakemake.log").write_text(log)
    rows = cells(target)
    for row in rows:
        print(json.dumps(row))
    rules = rule_seconds(log)
    print("per rule (each rule's jobs summed, so they add to more than the wall time), min: "
          + ", ".join(f"{name} {s / 60:.1f}" for name, s in sorted(rules.items())))
    phases = process_phases(target)
    if phases:
        print("inside the train jobs' timing processes, by phase, min: "
              + ", ".join(f"{name} {sec / 60:.1f}" for name, sec in phases.items()))
    print(f"default grid: {wall / 60:.1f} min wall time, exit code {done.returncode}, "
          f"{sum(r['outcome'] == 'ok' for r in rows)} of {len(rows)} cells ok; the hypervisor "
          f"took {'-' if stolen is None else f'{stolen:.1f}%'} of the machine's CPU meanwhile "
          "(steal time: a run on a quieter host is that much shorter)")
    result = {"wall_s": wall, "returncode": done.returncode, "cpu_stolen_pct": stolen,
              "rules_s": rules, "phases_s": phases, "cells": rows}
    (args.workdir / "bench_grid_last_run.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
