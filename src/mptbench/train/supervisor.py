"""A train job in two processes: a supervisor that survives the trainer being killed for memory.

The supervisor (no TensorFlow import) starts the trainer (train/trainer.py) as a child in the
variant's Python. When the child writes its record, the supervisor is done. When the kernel
kills the child (SIGKILL: the out-of-memory killer, or a memory limit), the supervisor writes
the cell's record with outcome `oom` and closes its MLflow run, so the workflow goes on as the
published table did. Any other failure fails the job.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from mptbench.files import read_json, write_json
from mptbench.train.trainer import MODULE as TRAINER
from mptbench.variants import process
from mptbench.variants.environment import interpreter


def _watch(child, limit_mb: int | None) -> tuple[int, str | None]:
    """Wait for the child; with a limit, kill it as an OOM killer would once its resident
    memory passes the limit. Returns the exit code and, when it was killed here, why."""
    if not limit_mb:
        return child.wait(), None
    import psutil

    watched = psutil.Process(child.pid)
    while child.poll() is None:
        try:
            rss_mb = watched.memory_info().rss / 2**20
        except psutil.Error:  # it just ended
            continue
        if rss_mb > limit_mb:
            child.kill()
            child.wait()
            return child.returncode, (
                f"resident memory reached {rss_mb:.0f} MB, over train.memory_limit_mb={limit_mb}"
            )
        time.sleep(0.05)
    return child.returncode, None


def job_files(record: str) -> tuple[Path, Path]:
    """The job file the trainer reads, and the state it leaves for the supervisor."""
    record = Path(record)
    return record.with_name(f".{record.name}.job"), record.with_name(f".{record.name}.state")


def supervise(
    run: dict,
    prepared: str,
    tracking: str | None,
    record: str,
    env_manifest: str | None = None,
    probe: str | None = None,
    probe_only: bool = False,
) -> int:
    """Run the trainer in a child; record `oom` when it is killed. Returns the exit code.

    With `probe_only`, the child times a step on a few images and writes that to `record`.
    """
    job_file, state = job_files(record)
    state.unlink(missing_ok=True)
    python, installed = interpreter(env_manifest)
    run = dict(run, variant=dict(run["variant"], installed=installed))
    job = {
        "run": run, "prepared": prepared, "tracking": tracking, "record": record,
        "state": str(state), "probe": probe, "probe_only": probe_only,
    }  # fmt: skip
    write_json(job_file, job)
    env = process.environment(run["variant"].get("env"), run["device"]["name"])
    sys.stdout.flush()
    child = process.start(python, TRAINER, ["--job", str(job_file)], env)
    code, over_limit = _watch(child, run["train"].get("memory_limit_mb"))
    try:
        if code == 0:
            return 0
        if code == -signal.SIGKILL and not probe_only:
            reason = over_limit or (
                "the training process was killed by SIGKILL "
                "(out of memory: the kernel's OOM killer)"
            )
            print(f"oom: {reason}", file=sys.stderr, flush=True)
            _record_killed(run, state, record, reason)
            return 0
        print(
            f"error: the training process exited with code {code}; see the log above",
            file=sys.stderr,
        )
        return 1
    finally:
        job_file.unlink(missing_ok=True)
        state.unlink(missing_ok=True)


def _record_killed(run: dict, state: Path, record: str, reason: str) -> None:
    """The record (and MLflow run) of a cell whose trainer was killed."""
    started = read_json(state) if state.exists() else {}
    data = dict(started.get("record") or {}, outcome="oom", reason=reason, config=run)
    data.setdefault("experiment", run["name"])
    data.update({k: v for k, v in run["cell"].items() if k not in data})
    if data.get("mlflow_run_id"):
        from mptbench.tracking import close_killed_run

        close_killed_run(started["tracking_uri"], data["mlflow_run_id"], reason)
    write_json(record, data)


def main(argv: list[str] | None = None) -> int:
    """Train (or probe) one cell by hand: python -m mptbench.train.supervisor --run run.json ..."""
    parser = argparse.ArgumentParser(description="Train one grid cell and write its run record.")
    parser.add_argument("--run", required=True, help="the run's config (a JSON file)")
    parser.add_argument("--prepared", required=True, help="the prepare rule's JSON")
    parser.add_argument("--tracking", default=None, help="the tracking_init rule's JSON")
    parser.add_argument("--env", default=None, help="the variant_env rule's manifest")
    parser.add_argument("--probe", default=None, help="the probe rule's JSON (step time guard)")
    parser.add_argument("--probe-only", action="store_true", help="time a few images, no run")
    parser.add_argument("--record", required=True, help="where the run record (or probe) goes")
    args = parser.parse_args(argv)
    if not args.probe_only and not args.tracking:
        parser.error("--tracking is needed to train (only --probe-only runs without it)")
    return supervise(
        read_json(args.run), args.prepared, args.tracking, args.record, args.env,
        probe=args.probe, probe_only=args.probe_only,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
