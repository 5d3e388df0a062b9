"""What fits and does it still learn, on this machine: the fits and parity rules of the smoke
experiment (the seed convnet on the offline fixture) at --image-size, under --limit-mb, with
the search capped at --max-batch; prints each policy's tries (batch, outcome, peak memory and
where it comes from), its largest batch that fit, and each policy's parity figures. The rules'
wall time is printed too: what they add to a run.

    python bench/bench_fits.py                                  # 32 px, no limit: the smoke's
    python bench/bench_fits.py --image-size 128 --limit-mb 1536 --max-batch 1024
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from common import ROOT, WORK, checkout, snakemake

from mptbench.core.hardware import machine_id

HERE = WORK / "fits"


def _targets(name: str, args) -> list[str]:
    """The fits and parity files of the experiment (layout.OUTPUTS)."""
    results = f"results/{name}"
    cell = f"{machine_id()}/seed_convnet/tensorflow/pypi/cpu"
    fits = [f"{results}/fits/{cell}/{policy}.json" for policy in args.policies]
    parity = [f"{results}/parity/{cell}/bs{b}.json" for b in args.batch_sizes]
    return fits + (parity if len(args.policies) > 1 else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--limit-mb", type=int, default=None)
    parser.add_argument("--max-batch", type=int, default=None)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_float16"])
    parser.add_argument("--parity-steps", type=int, default=100)
    args = parser.parse_args(argv)
    name = f"fits{args.image_size}"
    overrides = [
        f"name={name}", f"dataset.image_size={args.image_size}",
        f"policy=[{','.join(args.policies)}]",
        f"sweep.batch_sizes=[{','.join(map(str, args.batch_sizes))}]",
        f"train.parity_steps={args.parity_steps}",
    ]
    if args.limit_mb:
        overrides.append(f"device.cpu.fits_search_mb={args.limit_mb}")
    if args.max_batch:
        overrides.append(f"sweep.max_batch={args.max_batch}")
    folder = checkout(ROOT, HERE / "checkout", fresh=True)  # a fresh copy of the workflow
    targets = _targets(name, args)
    # Their inputs first (the data, the environment, the probes): not what is measured here.
    done = snakemake(folder, overrides, "smoke", ["--until", "probe"])
    if done.returncode != 0:
        raise SystemExit(f"the data, environment and probes failed:\n{done.stderr[-4000:]}")
    started = time.monotonic()
    done = snakemake(folder, overrides, "smoke", targets)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"failed:\n{(done.stdout + done.stderr)[-4000:]}")
    print(f"{name}: fits and parity rules {wall:.0f} s wall time ({' '.join(overrides)})")
    for path in targets:
        found = json.loads((folder / path).read_text())
        if "tries" in found:
            print(f"\n{found['policy']}: largest fit {found['largest_fit']}, smallest failed "
                  f"{found['smallest_failed']} ({found['memory_limit']}; "
                  f"{found['stopped_by']})")
            for t in found["tries"]:
                peak = f"{t['peak_mb']:.0f} MB ({t['peak_source']})" if t["peak_mb"] else ""
                why = t.get("reason") or ""
                print(f"  batch {t['batch_size']:>5}: {t['outcome']:<4} {peak} {why}")
        else:
            print(f"\nparity at batch {found['batch_size']}: {found['outcome']}")
            for policy, figures in found.get("policies", {}).items():
                print(f"  {policy}: {json.dumps(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
