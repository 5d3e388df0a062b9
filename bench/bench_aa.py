"""An A/A test of the timing method, through the whole pipeline: float32 against a copy of
itself under another name (float32_copy: the same yaml facts, not the baseline).

Every verdict other than "no measurable difference" is false. The experiment (the seed
convnet on the offline fixture at --image-size, each --batch-sizes a comparison group) runs
--experiments times under different names, with the default timing settings
(conf/train/benchmark.yaml: 3 processes at least, the policies taking turns in each, more
processes while a speedup is wider than ±3%, up to 5); the synthetic twin, the profile, the
fits search and the parity check are off (they do not change a verdict). It prints every
comparison, then the share of false verdicts (the target: at most 5%), the median half-width
of the speedup's interval over the cells whose step is 50 ms or more (the target: at most 5%,
to see the published 7-10%), and the mean A/A ratio over all comparisons with its t interval,
which must hold 1 (a method whose position in the process favours one arm leans one way),
with how many ratios lie below 1.
With several --source checkouts (before and after a change), their experiments alternate.

    python bench/bench_aa.py            # 4 x 6 = 24 comparisons: about 35 minutes on 2 cores
    python bench/bench_aa.py --source . OLD_CHECKOUT   # both, alternating: about 70 minutes
    python bench/bench_aa.py --report-only   # the last run's records, read again
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import ROOT, WORK, checkout, holds, machine, over, shown, snakemake, summary

HERE = WORK / "aa"
COPY = "{compute_dtype:float32,variable_dtype:float32,loss_scaling:none,baseline:false}"


def run(folder: Path, name: str, args) -> list[dict]:
    """One experiment: the summary rows of float32_copy (its speedups over float32)."""
    overrides = [
        f"name={name}", "dataset=imagenette_smoke", f"dataset.image_size={args.image_size}",
        "model=[seed_convnet]", "backend=[tensorflow]", "policy=[float32]",
        f"+policy.float32_copy={COPY}", "sweep.devices=[cpu]",
        f"sweep.batch_sizes=[{','.join(map(str, args.batch_sizes))}]",
        "train.synthetic_twin=false", "train.profile_steps=0", "tracking.system_metrics=false",
        "sweep.fit_search=false", "train.parity_steps=0",  # what fits, does it learn: no verdict
        # The fixture's 120 images are one step at batch 64: an epoch as long as the real
        # data's (the input repeats), so the timing rules, not the data, end each turn.
        "train.steps_per_epoch=110",
    ]
    started = time.monotonic()
    # --report-only: the last run's records again, only the report rule rerun (after a change
    # to how an interval is read from the steps; the steps themselves are not timed again).
    again = ["--forcerun", "aggregate", "--allowed-rules", "aggregate"] if args.report_only else []
    done = snakemake(folder, overrides, extra=again)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{(done.stdout + done.stderr)[-4000:]}")
    found = summary(folder, name)
    rows = found[found["policy"] == "float32_copy"].to_dict("records")
    base = found[found["policy"] == "float32"].set_index("batch_size")["ms_per_step"]
    for row in rows:
        row["experiment"], row["float32_ms"] = name, base[row["batch_size"]]
        row["source"] = str(folder)
    print(f"{name}: {time.monotonic() - started:.0f} s", flush=True)
    return rows


def report(rows: list[dict]) -> list[str]:
    lines = []
    for source in dict.fromkeys(r.get("source", "") for r in rows):
        lines += _report([r for r in rows if r.get("source", "") == source], source)
    return lines


def _report(rows: list[dict], source: str) -> list[str]:
    lines = [source, f"{'experiment':<12}{'batch':>6}{'float32 ms':>12}"
             f"{'speedup (95% interval)':>28}{'±':>7}{'processes':>10}  verdict"]
    for r in rows:
        width = (r["speedup_ci_high"] - r["speedup_ci_low"]) / 2 / r["speedup_vs_baseline"]
        r["half_width"] = width
        figure = (f"{r['speedup_vs_baseline']:.3f} ({r['speedup_ci_low']:.3f}-"
                  f"{r['speedup_ci_high']:.3f})")
        lines.append(f"{r['experiment']:<12}{r['batch_size']:>6}{r['float32_ms']:>12.1f}"
                     f"{figure:>28}{100 * width:>6.1f}%{int(r['speedup_processes']):>10}  "
                     f"{r['speedup_verdict']}")
    false = [r for r in rows if r["speedup_verdict"] in ("faster", "slower")]
    slow = [r["half_width"] for r in rows if r["float32_ms"] >= 50]
    lines.append(f"false verdicts: {len(false)} of {len(rows)} comparisons "
                 f"({100 * len(false) / len(rows):.1f}%; target at most 5%)")
    if slow:
        lines.append(f"median half-width of the speedup's interval, cells of 50 ms or more: "
                     f"{100 * statistics.median(slow):.1f}% over {len(slow)} cells "
                     "(target at most 5%)")
    notes = [r for r in rows if "wider than train.precision" in str(r.get("stopped_by"))]
    lines.append(f"cells that said their budget ran out before ±3%: {len(notes)}")
    mean = over([r["speedup_vs_baseline"] for r in rows])
    below = sum(r["speedup_vs_baseline"] < 1 for r in rows)
    lines.append(f"mean A/A ratio over the {len(rows)} comparisons {shown(mean)}: "
                 f"{'holds' if holds(mean, 1) else 'does NOT hold'} 1; {below} below 1, "
                 f"{len(rows) - below} at or above")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=4)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32, 48, 64, 96])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--report-only", action="store_true",
                        help="the last run's records read again: the report rule only")
    parser.add_argument("--source", type=Path, nargs="+", default=[ROOT],
                        help="the checkouts whose experiments alternate")
    args = parser.parse_args(argv)
    print(f"A/A on {machine()}: {args.experiments} experiments x "
          f"{len(args.batch_sizes)} batch sizes at {args.image_size} px", flush=True)
    folders = [HERE / (f"checkout-{i + 1}" if len(args.source) > 1 else "checkout")
               for i in range(len(args.source))]
    for source, folder in zip(args.source, folders, strict=True):
        checkout(source.resolve(), folder)
    started = time.monotonic()
    rows = []
    for k in range(args.experiments):
        turn = k % len(folders)  # the checkouts take turns going first
        for folder in folders[turn:] + folders[:turn]:
            rows += run(folder, f"aa{k + 1}", args)
    lines = report(rows) + [f"{time.monotonic() - started:.0f} s in all"]
    print("\n".join(lines))
    HERE.mkdir(parents=True, exist_ok=True)
    (HERE / "bench_aa_last_run.txt").write_text("\n".join(lines) + "\n")
    (HERE / "bench_aa_last_run.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
