"""A cell's whole run (core/fullrun.py) from its processes: each process's own total and parts,
then per figure the geometric mean over processes with a t interval on the logarithms, as the
cell's step has; widened as the cell's other intervals are where every process ran on a slowed
host (core/host.py). Each process's epoch starts count with the share of them that waited
(core/epochs.py), or where it timed none that told, the share over the cell's processes; what
one of them waits is averaged over the epoch lengths the processes spread over (at least
core/epochs.py EPOCH_SPREAD_FLOOR), since a wake of the tuning thread within that spread makes
a start's wait nearly nothing or nearly a whole period."""

from __future__ import annotations

import math
import statistics
from typing import Any

from mptbench.core import epochs, fullrun, stats
from mptbench.core.contract import ArmResult
from mptbench.core.record import interval

FIGURES = {"total": "fullrun_s", **{part: f"fullrun_{part}_s" for part in fullrun.PARTS}}


def run_of(record: dict[str, Any], batch: int) -> tuple[fullrun.Plan, float, float]:
    """The run a record's cell is projected onto, its steps per epoch and validation batches
    at `batch`."""
    run = fullrun.plan((record.get("config") or {}).get("train") or {})
    steps = run.steps(int(record.get("train_examples") or 0), batch)
    return run, steps, (record.get("validation_examples") or 0) / batch


def share_of(starts: list[dict], pooled: float | None = None) -> float | None:
    """The share of a repeat's epoch starts (its rows) that waited, or `pooled` (the cell's)
    where none of its own told; None where neither is known."""
    own = epochs.waited_share(epochs.boundaries(starts))
    return pooled if own is None else own


def per_process(record: dict[str, Any], r: ArmResult, batch: int,
                share: float | None = None) -> dict[str, float] | None:
    """One repeat's whole run, part by part (seconds); None where it lacks a part. Its epoch
    starts count with its own waited share, or `share` where it has none."""
    run, steps, batches = run_of(record, batch)
    return fullrun.parts(run, steps, batches, r.step_s, r.warmup_s, r.validation_first_s,
                         r.validation_s, share_of(r.epoch_starts, share))


def epoch_spread(lengths: list[float]) -> float:
    """How far the whole run's epoch length may lie from a process's: the processes' own spread
    (the standard deviation of the logarithms), at least core/epochs.py EPOCH_SPREAD_FLOOR."""
    logs = [math.log(v) for v in lengths if v > 0]
    own = statistics.stdev(logs) if len(logs) > 1 else 0.0
    return max(epochs.EPOCH_SPREAD_FLOOR, own)


def spread_over(each: list[dict[str, float]], shares: list[float | None],
                run_epochs: int) -> tuple[list[dict[str, float]], list[float], float]:
    """A cell's processes' whole runs (core/fullrun.py parts, each with its waited share) with
    their epoch starts' rest averaged over the spread of their epoch lengths; those lengths,
    and the spread."""
    lengths = [fullrun.epoch_length(e, run_epochs) for e in each]
    spread = epoch_spread(lengths)
    return ([fullrun.with_spread(e, run_epochs, share, spread)
             for e, share in zip(each, shares, strict=True)], lengths, spread)


def epoch_figures(record: dict[str, Any], ok: list[ArmResult]) -> dict[str, Any]:
    """What the cell's epoch starts showed: how many told a wait from none and how many
    waited, how long those waited, and what one of the whole run's would wait; or why none
    was timed."""
    found = [b for r in ok for b in epochs.boundaries(r.epoch_starts) if b.telling]
    if not found:
        return {"epoch_note": "no epoch start timed: the whole run counts no wait at an "
                              "epoch's start (train.epoch_seconds, core/epochs.py)"}
    waits = [b.wait_s for b in found if b.waited]
    out: dict[str, Any] = {"epoch_starts_timed": len(found), "epoch_starts_waited": len(waits)}
    if waits:
        out |= {"epoch_wait_ms": 1000 * statistics.median(waits),
                "epoch_wait_most_ms": 1000 * max(waits)}
    return out


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
    out |= epoch_figures(record, ok)
    pooled = epochs.waited_share([b for r in ok for b in epochs.boundaries(r.epoch_starts)])
    shares = [share_of(r.epoch_starts, pooled) for r in ok]
    each = [per_process(record, r, batch, pooled) for r in ok]
    if not ok or any(e is None for e in each):
        notes = [r.validation_note for r in ok if r.validation_note]
        out["fullrun_note"] = notes[0] if notes else (
            "not every process timed a validation batch" if ok else None
        )
        return out
    each, lengths, spread = spread_over(each, shares, run.epochs)
    if run.epochs > 1:
        epoch = statistics.median(lengths)
        out |= {"fullrun_epoch_s": epoch, "fullrun_epoch_spread": spread,
                "fullrun_epoch_wait_s": statistics.median(
                    epochs.expected_rest(length, spread) for length in lengths)}
        out["fullrun_epoch_wake_s"] = epochs.wake_within(epoch, spread)
    for key, name in FIGURES.items():
        estimate = _estimate([e[key] for e in each], widening)
        if estimate is None:  # a part of 0 s (no validation), or an extra lost in noise
            out[name] = statistics.fmean(e[key] for e in each)
            continue
        out[name] = estimate.value
        out |= interval(name, estimate)
    return out

