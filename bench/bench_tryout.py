"""The offline try-out as a new user runs it: wall time and each rule's time, side by side.

Runs README's try-out (`snakemake --cores 2 --config experiment=smoke`) on a fresh copy of each
source checkout (no resources/, no results/), the sources taking turns (A B A B ...), and
prints per run its wall time, the share of the machine's CPU the hypervisor took meanwhile
(steal time) and each rule's time from Snakemake's own log (a job's start to its finish, summed
over its jobs; timing jobs run one at a time, so those add up). Two sources compare two versions
of the code on one machine in one sitting, which is the only comparison that means anything on
a shared host.

    python bench/bench_tryout.py                       # this checkout, once
    python bench/bench_tryout.py --source OLD . --runs 2
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from common import ROOT, WORK, Steal, checkout, machine, snakemake

HERE = WORK / "tryout"
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
STARTED = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")


def rule_seconds(log: str) -> dict[str, float]:
    """Each rule's time in a Snakemake log: from the stamp before a job's `rule X:` block to
    the stamp before its `Finished jobid: N`, summed over the rule's jobs."""
    stamp = None
    rule = None
    started: dict[str, tuple[str, datetime]] = {}
    total: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if match := STAMP.match(line):
            stamp = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif match := STARTED.match(line):
            rule = match.group(1)
        elif (match := JOBID.match(line)) and rule is not None and stamp is not None:
            started[match.group(1)] = (rule, stamp)
            rule = None
        elif (match := FINISHED.match(line)) and match.group(1) in started and stamp:
            name, began = started.pop(match.group(1))
            total[name] += (stamp - began).total_seconds()
    return dict(total)


def one_run(source: Path, workdir: Path) -> dict:
    """README's try-out in a fresh copy of `source` under `workdir`, as a user runs it."""
    target = checkout(source, workdir / "checkout", fresh=True)
    steal, began = Steal(), time.monotonic()
    done = snakemake(target, experiment="smoke", hide_gpus=False)
    wall = time.monotonic() - began
    stolen = steal.percent()
    log = done.stdout + done.stderr
    (workdir / "snakemake.log").write_text(log)
    headline = (target / "results/smoke/report/headline.txt")
    return {
        "wall_s": wall, "returncode": done.returncode, "stolen_pct": stolen,
        "rules": rule_seconds(log),
        "answer": headline.read_text().strip() if headline.exists() else "",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, nargs="+", default=[ROOT],
                        help="checkouts to time, taking turns")
    parser.add_argument("--runs", type=int, default=1, help="runs of each source")
    parser.add_argument("--workdir", type=Path, default=HERE)
    args = parser.parse_args(argv)
    print(f"CPU: {machine()}; the try-out with {Path(sys.executable).with_name('snakemake')}",
          flush=True)
    results: dict[int, list[dict]] = defaultdict(list)
    for turn in range(args.runs):
        for index, source in enumerate(args.source):
            run = one_run(source.resolve(), args.workdir.resolve() / f"s{index}")
            results[index].append(run)
            rules = ", ".join(f"{name} {s:.0f}" for name, s in sorted(run["rules"].items()))
            stolen = "-" if run["stolen_pct"] is None else f"{run['stolen_pct']:.1f}%"
            print(f"run {turn + 1} of {source}: {run['wall_s']:.1f} s wall, exit "
                  f"{run['returncode']}, steal {stolen}; per rule (s): {rules}", flush=True)
    for index, source in enumerate(args.source):
        walls = sorted(r["wall_s"] for r in results[index])
        print(f"{source}: wall {', '.join(f'{w:.1f}' for w in walls)} s")
        print(f"  answer: {results[index][-1]['answer']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
