"""What profiling costs: the smoke grid's cells with train.profile_steps=3 against 0.

Both run in one checkout, alternating (A B A B ...), each round from fresh results (the
fixture, cache and calibration are kept, so only the cells run). A cell's cost is its
record's duration_s: the train job from supervisor start to record, every repeat, the twin,
the profiled steps and reading the profile included. Prints per cell and in total how much
longer the profiled cells took. Target (issue): at most 15%.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

from common import ROOT, WORK, checkout, records, snakemake

HERE = WORK / "profile"


def run(folder: Path, steps: int) -> dict[str, float]:
    """The smoke grid with train.profile_steps=`steps`, from fresh results: each cell's
    duration_s."""
    name = f"smoke_p{steps}"
    shutil.rmtree(folder / "results" / name, ignore_errors=True)
    done = snakemake(folder, [f"name={name}", f"train.profile_steps={steps}"], "smoke",
                     hide_gpus=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return {f"{r['policy']}/bs{r['batch_size']}": r["duration_s"] for r in records(folder, name)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    target = checkout(ROOT, HERE / "checkout", fresh=True)
    run(target, 0)  # the fixture, cache and calibration, once, outside the comparison
    rounds = {0: [], 3: []}
    for i in range(args.rounds):
        for steps in (3, 0) if i % 2 else (0, 3):
            rounds[steps].append(run(target, steps))
            print(f"round {i + 1}, profile_steps={steps}: {rounds[steps][-1]}", flush=True)
    cells = sorted(rounds[0][0])
    ratios = []
    for cell in cells:
        on = statistics.median(r[cell] for r in rounds[3])
        off = statistics.median(r[cell] for r in rounds[0])
        ratios.append(on / off)
        print(f"{cell:22} profiled {on:6.1f} s, not {off:6.1f} s: {100 * (on / off - 1):+.0f}%")
    total_on = sum(statistics.median(r[c] for r in rounds[3]) for c in cells)
    total_off = sum(statistics.median(r[c] for r in rounds[0]) for c in cells)
    print(f"all cells: profiled {total_on:.1f} s, not {total_off:.1f} s: "
          f"{100 * (total_on / total_off - 1):+.1f}% (target <= +15%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
