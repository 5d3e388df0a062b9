"""How well the probe predicts a cell's step, and whether the budget drops a runnable cell.

Beside each two-point prediction it prints the error of the rule it replaced (the smaller
probe batch's step scaled linearly to the cell's batch), from the same probe.

For the seed convnet on this machine, at one image size: the probe (train.probe_batch_sizes)
runs once per policy, then every batch size is both predicted (jobs/budget.py) and measured
for real (one repeat through the input pipeline, jobs/trainer.py). Printed side by side: the
prediction, the measured median step, the error, and the budget's verdict. Targets (issue):
every prediction within +-30%, and no cell measured under 80% of train.max_step_seconds
marked over_budget. Data: bench_data.py's full-size synthetic archive, cached at this size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from bench_data import DATASET_NAME, bench_archive
from common import ROOT, WORK

HERE = WORK / "budget"


def prepared_cache(image_size: int) -> dict:
    from mptbench.data.cache import prepare

    archive = bench_archive(WORK / "data", 13394)
    return prepare(archive["path"], DATASET_NAME, image_size, HERE / "tfds", log=print)


def compose(policy: str, batch_size: int, args) -> dict:
    from mptbench.plan import Cell, compose_config, run_config

    overrides = [f"dataset.image_size={args.image_size}", f"train.max_step_seconds={args.limit}",
                 "train.validate=false", "train.synthetic_twin=false"]
    cfg = compose_config(ROOT / "conf", None, overrides)
    return run_config(
        cfg, Cell("local", "seed_convnet", "tensorflow", "pypi", "cpu", policy, batch_size)
    )


def measure(policy: str, batch_sizes: list[int], prepared: dict, args) -> list[dict]:
    from mptbench.core.contract import ProbeJob, RepeatJob, encode
    from mptbench.engine import backends
    from mptbench.engine.probe import probe_cell
    from mptbench.engine.repeat import run_repeat
    from mptbench.jobs.budget import assess

    session = backends.start("tensorflow")

    started = time.monotonic()
    probe_job = ProbeJob("unused.json", compose(policy, batch_sizes[0], args), "prepared.json")
    probe = probe_cell(session, probe_job, prepared)
    probe_s = time.monotonic() - started
    rows = []
    for batch_size in batch_sizes:
        run = compose(policy, batch_size, args)
        verdict = assess(run, probe)
        # Measured whatever the verdict: the point is to check it (the step guard stays on).
        result = run_repeat(session, RepeatJob("unused.json", run, "prepared.json"), prepared)
        measured = statistics.median(result.step_s) if result.step_s else None
        predicted = verdict.get("predicted_step_s")
        # The rule before two-point probes: the smaller batch's step, scaled linearly.
        small = probe.points[0]
        one_point = small.step_s * batch_size / small.batch_size
        rows.append({
            "policy": policy, "batch_size": batch_size, "predicted_s": predicted,
            "measured_s": measured, "error": predicted / measured - 1 if measured else None,
            "one_point_error": one_point / measured - 1 if measured else None,
            "budget_verdict": verdict.get("outcome", "runs"), "outcome": result.outcome,
            "probe_s": probe_s, "probe": encode(probe.points),
        })
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "probe"}), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--limit", type=float, default=20.0, help="train.max_step_seconds")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    HERE.mkdir(parents=True, exist_ok=True)
    prepared = prepared_cache(args.image_size)
    rows = [r for p in args.policies for r in measure(p, args.batch_sizes, prepared, args)]
    print(f"\n{'policy':15} {'batch':>5} {'predicted':>10} {'measured':>9} {'error':>7} "
          f"{'one-point':>10}  verdict")
    for r in rows:
        figures = f"{r['predicted_s']:9.3f}s {r['measured_s']:8.3f}s {100 * r['error']:+6.0f}%"
        old = f"{100 * r['one_point_error']:+9.0f}%"
        print(f"{r['policy']:15} {r['batch_size']:5d} {figures} {old}  {r['budget_verdict']}")
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    dropped = [r for r in rows if r["budget_verdict"] == "over_budget"
               and r["measured_s"] is not None and r["measured_s"] < 0.8 * args.limit]
    print(f"worst |error| {100 * max(errors):.0f}% (target <= 30%); "
          f"runnable cells dropped: {len(dropped)} (target 0)")
    (HERE / f"bench_budget_{args.image_size}px.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
