"""A cell's whole run (core/fullrun.py) from its processes: each process's own total and parts,
then per figure the geometric mean over processes with a t interval on the logarithms, as the
cell's step has; widened as the cell's other intervals are where every process ran on a slowed
host (core/host.py)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from mptbench.core import fullrun, stats
from mptbench.core.contract import ArmResult
from mptbench.core.record import interval

FIGURES = {"total": "fullrun_s", **{part: f"fullrun_{part}_s" for part in fullrun.PARTS}}


def run_of(record: dict[str, Any], batch: int) -> tuple[fullrun.Plan, int, float]:
    """The run a record's cell is projected onto, its steps per epoch and validation batches
    at `batch`."""
    run = fullrun.plan((record.get("config") or {}).get("train") or {})
    steps = run.steps(int(record.get("train_examples") or 0), batch)
    return run, steps, (record.get("validation_examples") or 0) / batch


def per_process(record: dict[str, Any], r: ArmResult, batch: int) -> dict[str, float] | None:
    """One repeat's whole run, part by part (seconds); None where it lacks a part."""
    run, steps, batches = run_of(record, batch)
    return fullrun.parts(run, steps, batches, r.step_s, r.warmup_s, r.validation_first_s,
                         r.validation_s)


def _estimate(values: list[float], widening: float) -> stats.Estimate | None:
    if not values or any(v <= 0 for v in values):
        return None
    estimate = stats.of_logs([math.log(v) for v in values])
    return stats.Estimate(estimate.value, estimate.n, estimate.log_se, df=estimate.df,
                          widening=widening)


def figures(
    record: dict[str, Any], ok: list[ArmResult], batch: int, widening: float
) -> dict[str, Any]:
    """The cell's whole-run columns from its ok repeats (each repeat's own in its entry)."""
    run, _, _ = run_of(record, batch)
    out: dict[str, Any] = {"fullrun_epochs": run.epochs, "fullrun_validates": run.validates,
                           "fullrun_source": run.source}
    validated = [r for r in ok if r.validation_s]
    if validated:
        steady = _estimate([statistics.fmean(r.validation_s) for r in validated], widening)
        out |= {"validation_ms_per_batch": 1000 * steady.value}
        out |= interval("validation_ms_per_batch", steady, scale=1000)
        out["validation_first_ms"] = 1000 * statistics.median(
            r.validation_first_s for r in validated
        )
    each = [per_process(record, r, batch) for r in ok]
    if not ok or any(e is None for e in each):
        notes = [r.validation_note for r in ok if r.validation_note]
        out["fullrun_note"] = notes[0] if notes else (
            "not every process timed a validation batch" if ok else None
        )
        return out
    for key, name in FIGURES.items():
        estimate = _estimate([e[key] for e in each], widening)
        if estimate is None:  # a part of 0 s (no validation), or an extra lost in noise
            out[name] = statistics.fmean(e[key] for e in each)
            continue
        out[name] = estimate.value
        out |= interval(name, estimate)
    return out
