"""Do runs of one cell at different times agree within their intervals?

The same speedup cell (the seed convnet at --image-size, batch --batch-size, float32 against
mixed_bfloat16, the default timing keys) is run --runs times through the whole workflow, each
run a fresh experiment in one copy of a checkout (its train job: the cell's comparison group
alone), the runs spread over --minutes. With several --source checkouts (before and after a
change), their runs alternate, each checkout in a copy of its own, so both meet the same host.
--neighbour starts a process whose load comes and goes (busy and idle spells of 20-90 s each)
for the whole benchmark: a host made busy on purpose.

Per run it prints the speedup with the 95% interval the report gave it (summary.csv), its
processes, the share of the CPU the hypervisor took (steal), how busy the neighbour was, and
the host's own speed (the processes' host_ms, where the code records it). Per checkout: the
pooled figure (every process's paired speedup, over all its runs: exp of their mean log), and
how many runs' intervals hold it. The goal: at least 9 of 10.

    python bench/bench_precision.py --neighbour 1 --source . OLD_CHECKOUT   # ~2 h
    python bench/bench_precision.py --report-only
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import time
from pathlib import Path

from common import (
    ROOT,
    WORK,
    Neighbour,
    Steal,
    append_jsonl,
    busy_share,
    checkout,
    machine,
    read_jsonl,
    records,
    snakemake,
    summary,
)

from mptbench.core import stats

HERE = WORK / "precision"
BASE, OTHER = "float32", "mixed_bfloat16"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, nargs="+", default=[ROOT],
                        help="the checkouts whose runs alternate")
    parser.add_argument("--runs", type=int, default=10, help="per checkout")
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="the runs start spread over this many minutes at least")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--neighbour", type=int, default=0,
                        help="threads of a neighbour whose load comes and goes (0: none)")
    parser.add_argument("--spells", type=float, nargs=4, default=[20, 90, 20, 90],
                        metavar=("BUSY_MIN", "BUSY_MAX", "IDLE_MIN", "IDLE_MAX"),
                        help="the neighbour's busy and idle spells, in seconds")
    parser.add_argument("--work", type=Path, default=HERE, help="kept runs and copies")
    parser.add_argument("--report-only", action="store_true")
    return parser.parse_args(argv)


def overrides(name: str, args) -> list[str]:
    return [
        f"name={name}", "dataset=imagenette_smoke", f"dataset.image_size={args.image_size}",
        "model=[seed_convnet]", "backend=[tensorflow]", f"policy=[{BASE},{OTHER}]",
        "sweep.devices=[cpu]", f"sweep.batch_sizes=[{args.batch_size}]",
        "sweep.fit_search=false", "train.synthetic_twin=false", "train.profile_steps=0",
        "train.parity_steps=0", "train.max_step_seconds=null", "tracking.system_metrics=false",
        # The fixture's 120 images are a few steps: an epoch as long as the real data's (the
        # input repeats), so the timing rules, not the data, end each turn.
        "train.steps_per_epoch=2000",
    ]


def process_logs(found: dict[str, dict]) -> list[float]:
    """Each process's paired log speedup (core/stats.py, round by round)."""
    base = {r["process"]: r for r in found[BASE]["repeats"] if r.get("step_ms")}
    logs = []
    for r in found[OTHER]["repeats"]:
        b = base.get(r["process"])
        if b is None or not r.get("step_ms"):
            continue
        figure = stats.paired_log_ratio(stats.round_medians(b["step_ms"], b["rounds"]),
                                        stats.round_medians(r["step_ms"], r["rounds"]))
        if figure is not None:
            logs.append(figure)
    return logs


def one_run(source: Path, index: int, args, neighbour: Neighbour) -> dict:
    """A fresh experiment in the source's copy: its speedup row and what the host did."""
    folder = args.work / f"checkout-{args.source.index(source) + 1}"
    if index == 0:
        checkout(source.resolve(), folder)
    name = f"prec{index + 1}"
    shutil.rmtree(folder / "results" / name, ignore_errors=True)  # an earlier benchmark's
    steal, began = Steal(), time.time()
    done = snakemake(folder, overrides(name, args))
    if done.returncode != 0:
        raise SystemExit(f"{source} {name} failed: see {folder / 'last_run.log'}")
    table = summary(folder, name)
    row = table[table["policy"] == OTHER].iloc[0].to_dict()
    found = {record["policy"]: record for record in records(folder, name)}
    host = [r.get("host_ms") for r in found[BASE]["repeats"] if r.get("host_ms")]
    return {
        "source": str(source.resolve()), "run": index + 1, "started": began,
        "minutes": (time.time() - began) / 60, "stolen_pct": steal.percent(),
        "neighbour_busy": neighbour.busy_share(began, time.time()),
        "speedup": row["speedup_vs_baseline"], "low": row["speedup_ci_low"],
        "high": row["speedup_ci_high"], "processes": int(row["speedup_processes"]),
        "host_ms": host, "host_widening": row.get("host_widening"),
        "float32_ms": float(table[table["policy"] == BASE]["ms_per_step"].iloc[0]),
        "logs": process_logs(found),
    }


def report(rows: list[dict], work: Path) -> list[str]:
    log = work / "neighbour.log"
    for r in rows:  # the neighbour's spells as its log has them now, the last one closed
        if r.get("neighbour_busy") is not None:
            r["neighbour_busy"] = busy_share(log, r["started"], r["started"] + 60 * r["minutes"])
    lines = []
    for source in dict.fromkeys(r["source"] for r in rows):
        mine = [r for r in rows if r["source"] == source]
        logs = [x for r in mine for x in r["logs"]]
        pooled = math.exp(statistics.fmean(logs))
        held = [r for r in mine if r["low"] <= pooled <= r["high"]]
        lines.append(f"{source}: {len(mine)} runs, pooled speedup {pooled:.3f} over "
                     f"{len(logs)} processes; {len(held)} of {len(mine)} intervals hold it")
        for r in mine:
            host = (f"host {min(r['host_ms']):.2f}-{max(r['host_ms']):.2f} ms"
                    if r["host_ms"] else "host not measured")
            widened = (f", widened {100 * (math.exp(r['host_widening']) - 1):.0f}%"
                       if r.get("host_widening") else "")
            busy = (f", neighbour busy {100 * r['neighbour_busy']:.0f}%"
                    if r.get("neighbour_busy") is not None else "")
            mark = "holds" if r["low"] <= pooled <= r["high"] else "MISSES"
            lines.append(
                f"  run {r['run']:>2}: {r['speedup']:.3f} ({r['low']:.3f}-{r['high']:.3f}) "
                f"{mark}, {r['processes']} processes, float32 {r['float32_ms']:.0f} ms; steal "
                f"{r['stolen_pct'] or 0:.1f}%{busy}; {host}{widened}; {r['minutes']:.1f} min")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kept = args.work / "runs.jsonl"
    if args.report_only:
        print("\n".join(report(read_jsonl(kept), args.work)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    kept.unlink(missing_ok=True)
    (args.work / "neighbour.log").unlink(missing_ok=True)
    print(f"the same cell again and again on {machine()}", flush=True)
    rows, started = [], time.monotonic()
    spacing = 60 * args.minutes / args.runs
    busy, idle = tuple(args.spells[:2]), tuple(args.spells[2:])
    with Neighbour(args.neighbour, args.work / "neighbour.log", busy, idle) as neighbour:
        for index in range(args.runs):
            wait = started + index * spacing - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            k = index % len(args.source)  # the checkouts take turns going first
            for source in args.source[k:] + args.source[:k]:
                row = one_run(source, index, args, neighbour)
                append_jsonl(kept, row)
                rows.append(row)
                print(report([row], args.work)[-1], flush=True)
    print("\n".join(report(rows, args.work)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
