"""A comparison group's train job: the cells of one model, backend, variant, device and batch
size (one per policy), timed together (jobs/repeats.py), each combined into its own record and
logged as its own MLflow run.

Every cell's run is open while the group is timed, so a job stopped from outside ends them all
KILLED. A finished group's records are kept beside them until MLflow has them: a rerun after
the store was unreachable logs them without training again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import time
from pathlib import Path
from typing import Any

from mptbench import __version__
from mptbench.core import hardware, stats
from mptbench.core import record as fields
from mptbench.core.contract import ModelInfo, ProbeResult, Run, encode
from mptbench.core.files import read_json, write_json
from mptbench.core.outcomes import Outcome, first_line
from mptbench.jobs.budget import assess
from mptbench.jobs.combine import attach_breakdown, combine, model_figures
from mptbench.jobs.fits import cell_memory
from mptbench.jobs.repeats import FUTILE, futile, measure, settled, speedups
from mptbench.jobs.tracking import CellRun, NoRun
from mptbench.jobs.trainer import Trainer


class TrackingFailed(RuntimeError):
    """The MLflow store could not be reached: the job fails, saying whether the cells'
    records are kept (a rerun then logs them without training again)."""


def base_record(run: Run, prepared: dict) -> dict[str, Any]:
    return {
        "experiment": run.experiment,
        "dataset": prepared["dataset"],
        "image_size": prepared["image_size"],
        "train_examples": (prepared.get("splits") or {}).get("train"),
        **encode(run.cell),
        "compute_dtype": run.policy.compute_dtype,
        "baseline": run.policy.baseline,
        "outcome": None,
        "reason": None,
        "warmup_steps": run.train.warmup_steps,
        "mptbench": __version__,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": encode(run),
    }


def _log(mlrun, record: dict) -> None:
    mlrun.log_fingerprint(record.get("fingerprint") or {})
    mlrun.log_epochs(record.get("epochs") or [])
    metrics = {k: fields.BY_NAME[k].read(record) for k in fields.METRICS}
    if record.get("breakdown"):
        classes = record["breakdown"]["classes_ms"]
        metrics |= {f"breakdown_{cls}_ms": ms for cls, ms in classes.items()}
        # Gone when a failed attempt's outputs were removed (a record kept for a rerun).
        if Path(record["breakdown"]["dir"]).is_dir():
            mlrun.log_artifacts(record["breakdown"]["dir"], "profile")
    metrics = {k: v for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)}
    # Each tag the record holds ("" where it says None: MLflow keeps strings).
    tags = {k: record[k] or "" for k in fields.TAGS if k in record}
    mlrun.finish(metrics, tags, record)


def _cell_run(run: Run, tracking: dict | None, dataset: str, cells: int):
    """The cell's MLflow run (none without `tracking`), tagged with every grid axis; its system
    metrics sampled every 10 s times the group's cells (the group's runs sample in turn)."""
    if not tracking:
        return NoRun()
    label = run.cell.label
    tags = {"experiment": run.experiment, "dataset": dataset, **encode(run.cell)}
    return CellRun(tracking, label, f"{run.experiment}:{label}", tags, sampling_s=10 * cells)


def _records(trainer: Trainer, info: dict, probes: dict, model_info, fits: dict) -> dict[str, dict]:
    """Each cell's record before it is timed, with its probe's prediction (and outcome when
    it is over the budget) and its peak memory from its policy's search."""
    # Where this job runs: the probes' hardware, or it fails before timing anything.
    where = hardware.require_same(
        trainer.runs[0].cell.device,
        {f"the {name} probe": p.hardware for name, p in probes.items()},
    )
    records = {}
    for run in trainer.runs:
        probe = probes.get(run.policy.name)
        record = base_record(run, info) | model_figures(model_info, run.cell.batch_size)
        record |= cell_memory(fits.get(run.policy.name), run.cell.batch_size)
        record |= assess(run, probe)
        record["fingerprint"] = probe.fingerprint if probe else None
        record["hardware"] = where
        records[run.policy.name] = record
    return records


def train_group(
    trainer: Trainer,
    prepared: str,
    tracking: dict | None,
    probes: dict[str, ProbeResult] | None = None,
    model_info: ModelInfo | None = None,
    log_file: str | None = None,
    fits: dict[str, dict] | None = None,
) -> list[dict]:
    """Every repeat of the group, each cell's combined into its record, each logged as one
    MLflow run (none without `tracking`); with `log_file` (the job's log), each run keeps a
    copy of it. The records, in the order of the trainer's runs."""
    started, info = time.monotonic(), read_json(prepared)
    records = _records(trainer, info, probes or {}, model_info, fits or {})
    kept = _kept(trainer)
    try:
        with contextlib.ExitStack() as stack:
            cells = len(trainer.runs)
            mlruns = {
                r.policy.name: stack.enter_context(_cell_run(r, tracking, info["dataset"], cells))
                for r in trainer.runs
            }
            experiment_id = (tracking or {}).get("experiment_id")
            for name, mlrun in mlruns.items():
                mlrun.log_params(records[name]["config"])
                mlrun.log_dataset(info)
                records[name] |= {"mlflow_run_id": mlrun.run_id,
                                  "mlflow_experiment_id": experiment_id}
            if kept:
                print("logging the records kept from an earlier attempt (not training again)")
                ids = ("mlflow_run_id", "mlflow_experiment_id")
                records = {n: kept[n] | {k: records[n][k] for k in ids} for n in records}
                died = {n for n, r in records.items() if r["outcome"] == Outcome.KILLED}
            else:
                died = _measure(trainer, prepared, records)
                for record in records.values():
                    record["duration_s"] = time.monotonic() - started
                if tracking:
                    for path, run in zip(trainer.pending, trainer.runs, strict=True):
                        write_json(path, records[run.policy.name])
            for name, mlrun in mlruns.items():
                if name in died:
                    mlrun.status = "KILLED"
                _log(mlrun, records[name])
                if log_file:  # what the job has logged so far: the trainer's output in full
                    mlrun.log_artifact(log_file, "logs")
    except Exception as exc:
        if not tracking or not _unreachable(exc):
            raise
        raise TrackingFailed(_unreachable_line(tracking, exc, trainer.pending[0])) from None
    for path in trainer.pending:
        path.unlink(missing_ok=True)
    return [records[r.policy.name] for r in trainer.runs]


def _measure(trainer: Trainer, prepared: str, records: dict[str, dict]) -> set[str]:
    """Time the cells not already over the budget; combine each one's repeats. The cells
    whose trainer died."""
    to_time = [r for r in trainer.runs if records[r.policy.name]["outcome"] is None]
    if not to_time:
        return set()
    measured = measure(trainer, prepared, to_time)
    train = trainer.runs[0].train
    found = speedups(measured.results, to_time, train.repeats)
    first = speedups(_first_stage(measured.results, train.repeats), to_time)
    for run in to_time:
        name, record = run.policy.name, records[run.policy.name]
        combine(record, measured.results[name], run.cell.batch_size)
        attach_breakdown(record, measured.results[name])
        if name in measured.deaths:
            death = measured.deaths[name]
            record["outcome"], record["reason"] = death.outcome, death.reason
        width = found[name].half_width if name in found else None
        if train.precision and width and width > train.precision:
            # Said where a reader looks for why timing stopped: no verdict-free number.
            why = _why_no_more(first[name], found[name], train)
            record["stopped_by"] = (
                f"{record.get('stopped_by')}; speedup ±{100 * width:.1f}% after "
                f"{found[name].n} processes, {why}"
            )
    return set(measured.deaths)


def _why_no_more(first: stats.Estimate, found: stats.Estimate, train) -> str:
    """Why a speedup wider than train.precision got no more processes."""
    if settled(first):
        return f"its verdict ({stats.verdict(found)}) was settled by the first {train.repeats}"
    if found.n == first.n and futile(first, train.precision, train.max_repeats):
        after = stats.half_width_after(first, train.max_repeats)
        return (
            f"no more were run: their spread says train.max_repeats={train.max_repeats} would "
            f"still leave ±{100 * after:.1f}%, over {FUTILE:g}x train.precision={train.precision}"
        )
    return f"wider than train.precision={train.precision} (train.max_repeats={train.max_repeats})"


def _first_stage(results: dict[str, list], repeats: int) -> dict[str, list]:
    return {name: arms[:repeats] for name, arms in results.items()}


def _unreachable_line(tracking: dict, exc: Exception, pending: Path) -> str:
    kept = (
        f"the cells' records are kept beside them ({pending.name}, ...): run again to log them "
        "(nothing is trained again)"
        if pending.exists()
        else "nothing was trained: run again once it answers"
    )
    return f"MLflow at {tracking['tracking_uri']} could not be reached ({first_line(exc)}); {kept}"


def _kept(trainer: Trainer) -> dict[str, dict] | None:
    """The records an earlier attempt finished but could not log, when they are this group's
    (all of them: the cells were timed together)."""
    kept = {}
    for path, run in zip(trainer.pending, trainer.runs, strict=True):
        try:
            record = read_json(path) if path.exists() else None
        except ValueError:  # cut short while written: measure again
            record = None
        if not record or record.get("config") != encode(run):
            return None
        kept[run.policy.name] = record
    return kept


def _unreachable(exc: BaseException) -> bool:
    """An error of the MLflow client talking to its store (connection refused, timeouts,
    retries exhausted), not one of ours."""
    for error in (exc, exc.__cause__, exc.__context__):
        module = type(error).__module__ if error is not None else ""
        if module.startswith(("mlflow", "requests", "urllib3")) or isinstance(
            error, ConnectionError | TimeoutError
        ):
            return True
    return False
