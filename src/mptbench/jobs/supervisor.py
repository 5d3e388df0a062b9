"""A train (or probe) job: a supervisor (no framework) that owns the cell's MLflow run and
record, and starts the trainer (the engine, jobs/trainer.py) in the variant's Python once per
repeat.

A trainer that dies does not take the job with it: the supervisor records the outcome the
evidence supports (oom when memory ran out, killed otherwise; core/outcomes.py), closes the
MLflow run as KILLED, and the workflow goes on as the published table did. A trainer that
fails in any other way fails the job.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import math
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mptbench.core import record as fields
from mptbench.core.files import read_json, write_json
from mptbench.core.jobs import ModelInfo, ProbeResult, RepeatResult, Run, decode, encode
from mptbench.core.outcomes import first_line
from mptbench.data.builder import DatasetError
from mptbench.data.cache import verify
from mptbench.jobs.budget import assess
from mptbench.jobs.combine import attach_breakdown, combine, model_figures
from mptbench.jobs.environment import interpreter
from mptbench.jobs.tracking import CellRun, NoRun
from mptbench.jobs.trainer import Trainer, TrainerFailed


class TrackingFailed(RuntimeError):
    """The MLflow store could not be reached: the job fails, saying whether the cell's record
    is kept (a rerun then logs it without training again)."""


class Stopped(BaseException):
    """SIGTERM reached the supervisor: `scancel`, a SLURM time limit or preemption, or a user's
    `kill`. Like Ctrl-C (KeyboardInterrupt), not an Exception: nothing may catch it as a
    failure of the cell. Its MLflow run ends KILLED and no record is written."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_sigterm():
    """SIGTERM raises Stopped while the job runs (its default would end the process at once,
    leaving its MLflow run RUNNING and its trainer training)."""

    def stop(signum, _frame):
        raise Stopped(signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def base_record(run: Run, prepared: dict) -> dict[str, Any]:
    return {
        "experiment": run.experiment,
        "dataset": prepared["dataset"],
        "image_size": prepared["image_size"],
        **encode(run.cell),
        "compute_dtype": run.policy.compute_dtype,
        "baseline": run.policy.baseline,
        "outcome": None,
        "reason": None,
        "warmup_steps": run.train.warmup_steps,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": encode(run),
    }


def _repeats(trainer: Trainer, prepared: str) -> tuple[list[RepeatResult], tuple | None]:
    """Every repeat until one ends other than ok; and the death that ended one, if any."""
    results = []
    for repeat in range(trainer.run.train.repeats):
        result = trainer.repeat(prepared, repeat)
        if isinstance(result, tuple):
            print(f"{result[0]}: {result[1]}", file=sys.stderr, flush=True)
            return results, result
        results.append(result)
        if result.outcome != "ok":
            break
    return results, None


def _log(mlrun, record: dict) -> None:
    mlrun.log_fingerprint(record.get("fingerprint") or {})
    mlrun.log_epochs(record.get("epochs") or [])
    metrics = {k: record.get(k) for k in fields.METRICS}
    if record.get("breakdown"):
        classes = record["breakdown"]["classes_ms"]
        metrics |= {f"breakdown_{cls}_ms": ms for cls, ms in classes.items()}
        # Gone when a failed attempt's outputs were removed (a record kept for a rerun).
        if Path(record["breakdown"]["dir"]).is_dir():
            mlrun.log_artifacts(record["breakdown"]["dir"], "profile")
    metrics = {k: v for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)}
    tags = {"outcome": record["outcome"], "reason": record["reason"] or ""}
    tags |= {k: record[k] for k in ("builder", "builder_sha256") if record.get(k)}
    mlrun.finish(metrics, tags, record)


def _cell_run(run: Run, tracking: dict | None, dataset: str):
    """The cell's MLflow run (none without `tracking`), tagged with every grid axis."""
    if not tracking:
        return NoRun()
    label = run.cell.label
    tags = {"experiment": run.experiment, "dataset": dataset, **encode(run.cell)}
    return CellRun(tracking, label, f"{run.experiment}:{label}", tags)


def train_cell(
    trainer: Trainer,
    prepared: str,
    tracking: dict | None,
    probe: ProbeResult | None,
    model_info: ModelInfo | None = None,
    log_file: str | None = None,
) -> dict:
    """Every repeat of the cell, combined into its record, logged as one MLflow run (none
    without `tracking`); with `log_file` (the job's log), the run keeps a copy of it."""
    run, started, info = trainer.run, time.monotonic(), read_json(prepared)
    record = base_record(run, info) | model_figures(model_info, run.cell.batch_size)
    verdict = assess(run, probe)
    record.update({k: v for k, v in verdict.items() if k != "outcome"})
    record["fingerprint"] = probe.fingerprint if probe else None
    kept = _kept(trainer)
    try:
        with _cell_run(run, tracking, info["dataset"]) as mlrun:
            mlrun.log_params(record["config"])
            mlrun.log_dataset(info)
            ids = {"mlflow_run_id": mlrun.run_id,
                   "mlflow_experiment_id": (tracking or {}).get("experiment_id")}  # fmt: skip
            if kept:
                print(f"logging the record kept in {trainer.pending.name} (not training again)")
                record = kept | ids
                if record["outcome"] == "killed":
                    mlrun.status = "KILLED"
            else:
                record.update(ids)
                _measure(trainer, prepared, verdict, record, mlrun)
                record["duration_s"] = time.monotonic() - started
                if tracking:
                    write_json(trainer.pending, record)
            _log(mlrun, record)
            if log_file:  # what the job has logged so far: the trainer's output in full
                mlrun.log_artifact(log_file, "logs")
    except Exception as exc:
        if not tracking or not _unreachable(exc):
            raise
        raise TrackingFailed(_unreachable_line(tracking, exc, trainer.pending)) from None
    trainer.pending.unlink(missing_ok=True)
    return record


def _unreachable_line(tracking: dict, exc: Exception, pending: Path) -> str:
    kept = (
        f"the cell's record is kept in {pending}: run again to log it (nothing is trained again)"
        if pending.exists()
        else "nothing was trained: run again once it answers"
    )
    return f"MLflow at {tracking['tracking_uri']} could not be reached ({first_line(exc)}); {kept}"


def _measure(trainer: Trainer, prepared: str, verdict: dict, record: dict, mlrun) -> None:
    if verdict.get("outcome"):
        record["outcome"] = verdict["outcome"]
        return
    repeats, death = _repeats(trainer, prepared)
    combine(record, repeats, trainer.run.cell.batch_size)
    attach_breakdown(record, repeats)
    if death:
        record["outcome"], record["reason"] = death
        mlrun.status = "KILLED"


def _kept(trainer: Trainer) -> dict | None:
    """The record an earlier attempt finished but could not log, when it is this cell's."""
    if not trainer.pending.exists():
        return None
    try:
        kept = read_json(trainer.pending)
    except ValueError:  # cut short while written: measure again
        return None
    return kept if kept.get("config") == encode(trainer.run) else None


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


def supervise(
    run: Run,
    prepared: str,
    tracking: str | None,
    record: str,
    env_manifest: str | None = None,
    probe_file: str | None = None,
    probe_only: bool = False,
    profile_dir: str | None = None,
    log_file: str | None = None,
    model_info: str | None = None,
) -> int:
    """Train (or, with `probe_only`, probe) one cell and write its record. The exit code.

    With `profile_dir`, the raw profile of an ok cell goes there (train.profile_steps); with
    `log_file` (the job's log), the cell's MLflow run keeps a copy of it; `model_info` (the
    model_info rule's JSON) gives the step's FLOPs."""
    python, installed = interpreter(env_manifest)
    if profile_dir:  # an earlier attempt's profile would be read as this one's
        shutil.rmtree(profile_dir, ignore_errors=True)
        Path(profile_dir).mkdir(parents=True)
    trainer = Trainer(python, run.installed(installed), record, profile_dir)
    try:
        with stopped_by_sigterm():
            if probe_only:
                result = encode(trainer.probe(prepared))
            else:
                result = _train(trainer, prepared, tracking, probe_file, model_info, log_file)
    except (TrainerFailed, DatasetError, TrackingFailed) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except (Stopped, KeyboardInterrupt) as exc:
        stopped = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        print(f"error: stopped by {signal.Signals(stopped).name} before the job finished; nothing "
              "written, the next run does it again", file=sys.stderr, flush=True)  # fmt: skip
        return 128 + stopped
    write_json(record, result)
    return 0


def _train(trainer, prepared, tracking, probe_file, model_info, log_file) -> dict:
    info = read_json(prepared)
    if info.get("digest"):
        verify(info, prepared)
    probed = decode(ProbeResult, read_json(probe_file)) if probe_file else None
    described = decode(ModelInfo, read_json(model_info)) if model_info else None
    tracked = read_json(tracking) if tracking else None
    result = train_cell(trainer, prepared, tracked, probed, described, log_file)
    print(f"{result['outcome']}: {_summary(result)}", file=sys.stderr, flush=True)
    return result


def _summary(record: dict) -> str:
    if record.get("ms_per_step") is None:
        return record.get("reason") or ""
    return (
        f"{record['ms_per_step']:.1f} ms/step (95% interval {record['ms_per_step_ci_low']:.1f}-"
        f"{record['ms_per_step_ci_high']:.1f}, {len(record.get('repeats') or [])} repeats)"
    )


def main(argv: list[str] | None = None) -> int:
    """Train (or probe) one cell by hand: python -m mptbench.jobs.supervisor --run run.json ..."""
    parser = argparse.ArgumentParser(description="Train one grid cell and write its run record.")
    parser.add_argument("--run", required=True, help="the run (a JSON file: encode(Run))")
    parser.add_argument("--prepared", required=True, help="the prepare rule's JSON")
    parser.add_argument("--tracking", default=None, help="the tracking_init rule's JSON")
    parser.add_argument("--env", default=None, help="the variant_env rule's manifest")
    parser.add_argument("--probe", default=None, help="the probe rule's JSON (step time guard)")
    parser.add_argument("--probe-only", action="store_true", help="probe the cell, no run")
    parser.add_argument("--record", required=True, help="where the run record (or probe) goes")
    parser.add_argument("--profile-dir", default=None, help="where an ok cell's profile goes")
    parser.add_argument("--model-info", default=None, help="the model_info rule's JSON")
    args = parser.parse_args(argv)
    if not args.probe_only and not args.tracking:
        parser.error("--tracking is needed to train (only --probe-only runs without it)")
    return supervise(
        decode(Run, read_json(args.run)), args.prepared, args.tracking, args.record, args.env,
        probe_file=args.probe, probe_only=args.probe_only, profile_dir=args.profile_dir,
        model_info=args.model_info,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
