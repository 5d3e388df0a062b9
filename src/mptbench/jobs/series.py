"""A train job: a series of comparison groups (one model, backend, variant and device; a group
per batch size, its cells one per policy, timed together), their processes spread in time
(jobs/repeats.py), each cell combined into its own record and logged as its own MLflow run.

Every cell's run is open while the series is timed, so a job stopped from outside ends them all
KILLED. Each finished process is kept until its group's records are written (jobs/trainer.py),
and a finished group's records beside them until MLflow has them: a rerun goes on where the
job stopped, and after the store was unreachable logs the records without training again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
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
from mptbench.jobs.host import Reference
from mptbench.jobs.repeats import (
    FUTILE,
    Measured,
    futile,
    measure_series,
    processes_why,
    settled,
    speedups,
)
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
        "validation_examples": (prepared.get("splits") or {}).get("validation"),
        **encode(run.cell),
        "compute_dtype": run.policy.compute_dtype,
        "keras_policy": run.policy.keras_name,
        "float32_layers": " ".join(run.policy.float32_layers) or None,
        "loss_scaling": run.policy.loss_scaling,
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
    # Each tag, read by its path as a metric is (isa_cap is under config, kernel_isa under the
    # fingerprint); "" where the record says None: MLflow keeps strings.
    tags = {k: fields.BY_NAME[k].read(record) or "" for k in fields.TAGS}
    mlrun.finish(metrics, tags, record)


def _cell_run(run: Run, tracking: dict | None, dataset: str, cells: int):
    """The cell's MLflow run (none without `tracking`), tagged with every grid axis; its system
    metrics sampled every 10 s times the series' cells (its runs sample in turn)."""
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
        if record.get("predicted_step_s"):
            trainer.predicted_s[run.policy.name] = record["predicted_step_s"]
    return records


def train_series(
    trainers: list[Trainer],
    prepared: str,
    tracking: dict | None,
    probes: dict[str, ProbeResult] | None = None,
    model_info: ModelInfo | None = None,
    log_file: str | None = None,
    fits: dict[str, dict] | None = None,
    host_reference: str | None = None,
) -> list[list[dict]]:
    """Every group's repeats (one Trainer each), each cell's combined into its record, each
    logged as one MLflow run (none without `tracking`); with `log_file` (the job's log), each
    run keeps a copy of it; `host_reference`: where the host's fastest is kept (jobs/host.py).
    The records, per group in the order of its trainer's runs."""
    info = read_json(prepared)
    records = [_records(t, info, probes or {}, model_info, fits or {}) for t in trainers]
    kept = [_kept(t) for t in trainers]
    try:
        with contextlib.ExitStack() as stack:
            mlruns = _open_runs(stack, trainers, records, tracking, info)
            timed = [i for i, found in enumerate(kept) if not found]
            deaths = _measure_series([(trainers[i], records[i]) for i in timed], prepared,
                                     Reference(host_reference))
            died = dict(zip(timed, deaths, strict=True))
            for i, (trainer, found) in enumerate(zip(trainers, kept, strict=True)):
                if found:
                    print(f"{_label(trainer)}: logging the records kept from an earlier attempt "
                          "(not training again)")
                    ids = ("mlflow_run_id", "mlflow_experiment_id")
                    records[i] = {n: found[n] | {k: records[i][n][k] for k in ids} for n in found}
                    died[i] = {n for n, r in records[i].items() if r["outcome"] == Outcome.KILLED}
                elif tracking:
                    for path, run in zip(trainer.pending, trainer.runs, strict=True):
                        write_json(path, records[i][run.policy.name])
                    trainer.forget()  # its records are kept: its processes need not be
            for i, (group, runs) in enumerate(zip(records, mlruns, strict=True)):
                for name, mlrun in runs.items():
                    if name in died[i]:
                        mlrun.status = "KILLED"
                    _log(mlrun, group[name])
                    if log_file:  # what the job has logged so far: the trainer's output in full
                        mlrun.log_artifact(log_file, "logs")
    except Exception as exc:
        if not tracking or not _unreachable(exc):
            raise
        raise TrackingFailed(_unreachable_line(tracking, exc, trainers[0].pending[0])) from None
    for trainer in trainers:
        for path in trainer.pending:
            path.unlink(missing_ok=True)
        trainer.forget()
    return [[group[r.policy.name] for r in t.runs] for t, group in zip(trainers, records,
                                                                       strict=True)]


def _open_runs(stack, trainers: list[Trainer], records: list[dict], tracking, info) -> list[dict]:
    """Every cell's MLflow run, open while the series is timed, with its params and dataset;
    each record given its run's id."""
    cells = sum(len(t.runs) for t in trainers)
    mlruns = [
        {r.policy.name: stack.enter_context(_cell_run(r, tracking, info["dataset"], cells))
         for r in t.runs}
        for t in trainers
    ]
    experiment_id = (tracking or {}).get("experiment_id")
    for group, runs in zip(records, mlruns, strict=True):
        for name, mlrun in runs.items():
            mlrun.log_params(group[name]["config"])
            mlrun.log_dataset(info)
            group[name] |= {"mlflow_run_id": mlrun.run_id, "mlflow_experiment_id": experiment_id}
    return mlruns


def _label(trainer: Trainer) -> str:
    return trainer.runs[0].cell.label.rsplit("/", 1)[-1]


def _measure_series(
    groups: list[tuple[Trainer, dict[str, dict]]], prepared: str, reference: Reference
) -> list[set[str]]:
    """Time every group's cells not already over the budget, their processes spread in time;
    combine each one's repeats. Per group, the cells whose trainer died."""
    to_time = [[r for r in t.runs if records[r.policy.name]["outcome"] is None]
               for t, records in groups]
    timed = [(t, runs) for (t, _), runs in zip(groups, to_time, strict=True) if runs]
    measured = iter(measure_series(timed, prepared, reference))
    died = []
    for (_, records), runs in zip(groups, to_time, strict=True):
        found = next(measured) if runs else None
        if found is not None:
            _combine(records, runs, found, reference.fastest_ms)
        died.append(set(found.deaths) if found else set())
    return died


def _combine(
    records: dict[str, dict], runs: list, measured: Measured, fastest_ms: float | None
) -> None:
    """Each cell's record from the group's repeats; a speedup wider than train.precision says
    why it got no more processes."""
    train = runs[0].train
    found = speedups(measured.results, runs, train.repeats)
    first = speedups(_first_stage(measured.results, train.repeats), runs)
    for run in runs:
        name, record = run.policy.name, records[run.policy.name]
        combine(record, measured.results[name], run.cell.batch_size, fastest_ms)
        attach_breakdown(record, measured.results[name])
        record["duration_s"] = measured.seconds
        if name in measured.deaths:
            death = measured.deaths[name]
            record["outcome"], record["reason"] = death.outcome, death.reason
        record["processes_why"] = processes_why(first.get(name), found.get(name), train,
                                                measured.host_asked)
        width = found[name].half_width if name in found else None
        if train.precision and width and width > train.precision:
            # Said where a reader looks for why timing stopped: no verdict-free number.
            why = _why_no_more(first[name], found[name], train)
            record["stopped_by"] = (
                f"{record.get('stopped_by')}; speedup ±{100 * width:.1f}% after "
                f"{found[name].n} processes, {why}"
            )


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
