"""What the CPU's instructions buy, and what finding out costs: the cpu_generations experiment
run as a user runs it, in a fresh copy of this checkout (fixture, cache, every variant's
environment and calibration, every cell), timed from the command to its last line.

It prints the machine (its CPU, its flags' generations, the steal over the run), the wall
time, then per model the table the report's "What the CPU's instructions buy" shows: per
variant in order of generation, what oneDNN said the kernels were built for, float32's step
with its interval, each other policy's speedup over float32 with its interval (or why it did
not run), and each dtype's calibrated matmul peak over float32's under the same cap.

    python bench/bench_generations.py                 # about 45 minutes on 2 cores
    python bench/bench_generations.py --report-only   # the last run's summary, read again
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import ROOT, WORK, Steal, checkout, interval, machine, snakemake, summary

HERE = WORK / "generations"
EXPERIMENT = "cpu_generations"
OTHERS = ("mixed_bfloat16", "mixed_float16")


def run(fresh: bool, overrides: list[str]) -> tuple[Path, float, float | None]:
    """The experiment in a copy of this checkout: (the copy, its wall seconds, steal %)."""
    folder = checkout(ROOT, HERE / "checkout", fresh)
    steal, started = Steal(), time.monotonic()
    done = snakemake(folder, overrides, experiment=EXPERIMENT)
    took = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"the experiment failed; see {folder / 'last_run.log'}")
    return folder, took, steal.percent()


def table(rows) -> list[str]:
    """One model's generations, as markdown rows."""
    from mptbench.report.variants import generation

    head = ["variant", "instruction set", "kernels built for", "float32 ms"]
    head += [f"{p} vs float32" for p in OTHERS] + [f"{p} matmul peak" for p in OTHERS]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    order = sorted(set(rows["variant"]), key=lambda v: generation(
        rows[rows["variant"] == v].iloc[0]).place)
    for variant in order:
        mine = rows[rows["variant"] == variant].set_index("policy")
        base = mine.loc["float32"]
        cells = [variant, generation(base).words, str(base.get("kernel_isa") or "-"),
                 f"{base['ms_per_step']:.0f}{interval(base, 'ms_per_step', 0)}"]
        for policy in OTHERS:
            row = mine.loc[policy] if policy in mine.index else None
            if row is None:
                cells.append("-")
            elif row["outcome"] != "ok":
                cells.append(f"{row['outcome']}: {row['reason']}")
            else:
                cells.append(f"**{row['speedup_vs_baseline']:.2f}**{interval(row, 'speedup')}")
        for policy in OTHERS:
            peak = mine["matmul_peak_vs_float32"].get(policy) if policy in mine.index else None
            cells.append(f"{peak:.2f}" if peak == peak and peak is not None else "-")
        out.append("| " + " | ".join(cells) + " |")
    return out


def report(folder: Path, name: str = EXPERIMENT) -> None:
    for (model, device), rows in summary(folder, name).groupby(["model", "device"]):
        batch = sorted(set(rows["batch_size"]))
        print(f"\n{model} on {device}, batch {', '.join(map(str, batch))}, "
              f"{rows['image_size'].iloc[0]} px:")
        print("\n".join(table(rows)))
    headline = folder / "results" / name / "report" / "headline.txt"
    print("\n" + headline.read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--keep", action="store_true", help="reuse the last copy's results")
    parser.add_argument("--overrides", nargs="*", default=[], help="Hydra overrides, e.g. "
                        "name=gen128 model=[seed_convnet] dataset.image_size=128")
    args = parser.parse_args(argv)
    print(machine())
    name = next((o.split("=", 1)[1] for o in args.overrides if o.startswith("name=")),
                EXPERIMENT)
    if args.report_only:
        report(HERE / "checkout", name)
        return
    folder, took, steal = run(not args.keep, args.overrides)
    (HERE / "last.json").write_text(json.dumps({"seconds": took, "steal": steal}))
    print(f"{EXPERIMENT}: {took / 60:.1f} min from the command to its last line, steal "
          f"{steal if steal is None else round(steal, 1)}%")
    report(folder, name)


if __name__ == "__main__":
    main()
