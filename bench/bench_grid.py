"""The default grid, end to end, on 2 cores: how long it takes and what each cell recorded.

Runs `snakemake --cores N` on a copy of this checkout with the default experiment, reading a
synthetic archive in Imagenette-320's exact layout and size (bench_data.py's, built once and
reused) instead of the real download. Prints the wall time, each rule's time (from Snakemake's
log), the outcome of every cell and its ms/step, and the share of the machine's CPU the
hypervisor gave to other guests meanwhile (steal time: two runs compare only where both were
quiet), and writes them to <workdir>/bench_grid_last_run.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from common import WORKFLOW  # noqa: E402

WORK = ROOT / "bench" / ".work" / "grid"


def checkout(source: Path, workdir: Path) -> Path:
    """A fresh copy of the workflow: results of an earlier run are not reused."""
    target = workdir / "checkout"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in WORKFLOW:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, target / name)
    return target


def cells(results: Path) -> list[dict]:
    rows = []
    for path in sorted(results.rglob("runs/**/*.json")):
        record = json.loads(path.read_text())
        rows.append({
            k: record.get(k)
            for k in ("variant", "device", "policy", "batch_size", "outcome", "ms_per_step",
                      "predicted_step_s", "duration_s", "cpu_stolen_pct_most")
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="2")
    parser.add_argument("--workdir", type=Path, default=WORK)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to time")
    parser.add_argument("--overrides", nargs="*", default=[], help="more Hydra overrides")
    args = parser.parse_args(argv)
    from bench_data import bench_archive

    archive = bench_archive(ROOT / "bench" / ".work" / "data", 13394)
    target = checkout(args.source.resolve(), args.workdir.resolve())
    overrides = [f"dataset.url={archive['path']}", f"dataset.sha256={_sha256(archive['path'])}"]
    config = "overrides=" + json.dumps(overrides + args.overrides)
    command = [
        str(Path(sys.executable).with_name("snakemake")),
        "--cores",
        args.cores,
        "--config",
        config,
    ]
    print("+ " + " ".join(command), flush=True)
    from mptbench.core import hardware

    ticks = hardware.cpu_ticks()
    started = time.monotonic()
    done = subprocess.run(command, cwd=target, capture_output=True, text=True)
    wall = time.monotonic() - started
    stolen = hardware.stolen_percent(ticks, hardware.cpu_ticks())
    log = done.stdout + done.stderr
    (args.workdir / "snakemake.log").write_text(log)
    rows = cells(target / "results" / "benchmark")
    for row in rows:
        print(json.dumps(row))
    from bench_tryout import rule_seconds

    rules = rule_seconds(log)
    print("per rule (each rule's jobs summed, so they add to more than the wall time), min: "
          + ", ".join(f"{name} {s / 60:.1f}" for name, s in sorted(rules.items())))
    print(f"default grid: {wall / 60:.1f} min wall time, exit code {done.returncode}, "
          f"{sum(r['outcome'] == 'ok' for r in rows)} of {len(rows)} cells ok; the hypervisor "
          f"took {'-' if stolen is None else f'{stolen:.1f}%'} of the machine's CPU meanwhile "
          "(steal time: a run on a quieter host is that much shorter)")
    result = {"wall_s": wall, "returncode": done.returncode, "cpu_stolen_pct": stolen,
              "rules_s": rules, "cells": rows}
    (args.workdir / "bench_grid_last_run.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _sha256(path: str) -> str:
    from mptbench.core.files import sha256_of

    return sha256_of(path)


if __name__ == "__main__":
    sys.exit(main())
