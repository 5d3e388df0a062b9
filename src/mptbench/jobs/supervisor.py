"""A train (or probe) job: a supervisor (no framework) that owns the MLflow runs and records of
a comparison group's cells (jobs/series.py), and starts the trainer (the engine,
jobs/trainer.py) in the variant's Python once per repeat.

A trainer that dies does not take the job with it: the supervisor records the outcome the
evidence supports (oom when memory ran out, killed otherwise; core/outcomes.py), closes the
MLflow run as KILLED, and the workflow goes on as the published table did. A trainer that
fails in any other way fails the job.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
from pathlib import Path

from mptbench.core import hardware
from mptbench.core.contract import ModelInfo, ProbeResult, Run, decode, encode
from mptbench.core.files import read_json, write_json
from mptbench.data.builder import DatasetError
from mptbench.data.cache import verify
from mptbench.jobs.environment import interpreter
from mptbench.jobs.series import TrackingFailed, train_series
from mptbench.jobs.trainer import Trainer, TrainerFailed


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


def supervise(
    groups: list[list[Run]],
    prepared: str,
    tracking: str | None,
    records: list[list[str]],
    env_manifest: str | None = None,
    probe_files: list[str] | None = None,
    probe_only: bool = False,
    profile_dirs: list[list[str]] | None = None,
    log_file: str | None = None,
    model_info: str | None = None,
    fits_files: list[str] | None = None,
    host_reference: str | None = None,
) -> int:
    """Train a series of comparison groups (each a list of Runs, one per policy, with a record
    path each) and write its records; or, with `probe_only`, probe its one cell. The exit code.

    With `profile_dirs` (per group, one per Run), the raw profiles of ok cells go there
    (train.profile_steps); with `log_file` (the job's log), the cells' MLflow runs keep a copy
    of it; `model_info` (the model_info rule's JSON) gives the step's FLOPs, `probe_files` each
    policy's prediction, `host_reference` where the host's fastest is kept (jobs/host.py)."""
    python, installed = interpreter(env_manifest)
    for folder in [f for dirs in profile_dirs or [] for f in dirs]:
        shutil.rmtree(folder, ignore_errors=True)  # an earlier attempt's would be read as these
        Path(folder).mkdir(parents=True)
    groups = [[run.installed(installed) for run in runs] for runs in groups]
    trainers = [
        Trainer(python, runs, paths, dirs, keep=not probe_only)
        for runs, paths, dirs in zip(groups, records, profile_dirs or [None] * len(groups),
                                     strict=True)
    ]
    try:
        with stopped_by_sigterm():
            if probe_only:
                probe = trainers[0].probe(prepared)
                probe.hardware = hardware.identity(groups[0][0].cell.device)
                results = [[encode(probe)]]
            else:
                fits = {f["policy"]: f for f in (read_json(p) for p in fits_files or [])}
                results = _train(trainers, prepared, tracking, probe_files, model_info, log_file,
                                 fits, host_reference)
    except (TrainerFailed, DatasetError, TrackingFailed, hardware.Mismatch) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except (Stopped, KeyboardInterrupt) as exc:
        stopped = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        print(f"error: stopped by {signal.Signals(stopped).name} before the job finished; no "
              "record written, the next run goes on where it stopped", file=sys.stderr,
              flush=True)
        return 128 + stopped
    for paths, found in zip(records, results, strict=True):
        for path, result in zip(paths, found, strict=True):
            write_json(path, result)
    return 0


def _train(trainers, prepared, tracking, probe_files, model_info, log_file, fits, host_reference):
    info = read_json(prepared)
    if info.get("digest"):
        verify(info, prepared)
    probes = [decode(ProbeResult, read_json(p)) for p in probe_files or []]
    described = decode(ModelInfo, read_json(model_info)) if model_info else None
    tracked = read_json(tracking) if tracking else None
    by_policy = {p.policy: p for p in probes}
    results = train_series(trainers, prepared, tracked, by_policy, described, log_file, fits,
                           host_reference)
    for result in (r for group in results for r in group):
        print(f"{result['policy']} at batch {result['batch_size']}: {result['outcome']}: "
              f"{_summary(result)}", file=sys.stderr, flush=True)
    return results


def _summary(record: dict) -> str:
    if record.get("ms_per_step") is None:
        return record.get("reason") or ""
    interval = ""
    if record.get("ms_per_step_ci_low") is not None:
        interval = (f"95% interval {record['ms_per_step_ci_low']:.1f}-"
                    f"{record['ms_per_step_ci_high']:.1f}, ")
    return f"{record['ms_per_step']:.1f} ms/step ({interval}{len(record['repeats'])} repeats)"


def main(argv: list[str] | None = None) -> int:
    """Train a group (or probe a cell) by hand: python -m mptbench.jobs.supervisor --run ..."""
    parser = argparse.ArgumentParser(description="Train one comparison group; write its records.")
    parser.add_argument("--run", required=True, nargs="+",
                        help="each cell's run (a JSON file: encode(Run))")
    parser.add_argument("--prepared", required=True, help="the prepare rule's JSON")
    parser.add_argument("--tracking", default=None, help="the tracking_init rule's JSON")
    parser.add_argument("--env", default=None, help="the variant_env rule's manifest")
    parser.add_argument("--probe", default=None, nargs="*", help="the probe rule's JSONs")
    parser.add_argument("--probe-only", action="store_true", help="probe the cell, no run")
    parser.add_argument("--record", required=True, nargs="+",
                        help="where each run's record (or the probe) goes")
    parser.add_argument("--profile-dir", default=None, nargs="*", help="each ok cell's profile")
    parser.add_argument("--model-info", default=None, help="the model_info rule's JSON")
    parser.add_argument("--host-reference", default=None,
                        help="where the host's fastest is kept (jobs/host.py)")
    args = parser.parse_args(argv)
    if not args.probe_only and not args.tracking:
        parser.error("--tracking is needed to train (only --probe-only runs without it)")
    if len(args.record) != len(args.run):
        parser.error("one --record per --run")
    return supervise(
        [[decode(Run, read_json(p)) for p in args.run]], args.prepared, args.tracking,
        [args.record], args.env, probe_files=args.probe, probe_only=args.probe_only,
        profile_dirs=[args.profile_dir] if args.profile_dir else None,
        model_info=args.model_info, host_reference=args.host_reference,
    )


if __name__ == "__main__":
    sys.exit(main())
