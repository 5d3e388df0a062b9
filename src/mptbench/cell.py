"""A train job in two processes: a supervisor that survives the trainer being killed for memory.

The supervisor (no TensorFlow import) starts the trainer as a child process. When the child
writes its record, the supervisor is done. When the kernel kills the child (SIGKILL: the
out-of-memory killer, or a memory limit), the supervisor writes the cell's record with outcome
`oom` and closes its MLflow run, so the workflow goes on as the published table did. Any
other failure fails the job.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mptbench.dataset import write_json

GUARD = re.compile(r"To enable the following instructions: ([A-Z0-9_ ,]+?), in other operations")


def import_tensorflow() -> tuple[Any, Any, dict[str, Any]]:
    """Import TensorFlow, reading what its C++ start-up lines say about this build.

    Those lines go straight to file descriptor 2, so it is pointed at a file while TensorFlow
    loads; the text is then passed on to the job's log unchanged.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import keras
            import tensorflow as tf

            tf.config.list_physical_devices()  # device discovery logs here, not at import
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
    sys.stderr.write(text)
    sys.stderr.flush()
    return tf, keras, startup_facts(text)


def startup_facts(text: str) -> dict[str, Any]:
    """What TensorFlow's start-up log says: unused CPU instructions and oneDNN's state."""
    guard = GUARD.search(text)
    unused = sorted(guard.group(1).replace(",", " ").split()) if guard else []
    if "oneDNN custom operations are on" in text:
        onednn = "on"
    elif "oneDNN" in text and "off" in text:
        onednn = "off"
    else:
        onednn = "off (no oneDNN start-up message)"
    return {"tf_unused_cpu_instructions": unused, "onednn": onednn}


def _watch(child: subprocess.Popen, limit_mb: int | None) -> tuple[int, str | None]:
    """Wait for the child; with a limit, kill it as an OOM killer would once its resident
    memory passes the limit. Returns the exit code and, when it was killed here, why."""
    if not limit_mb:
        return child.wait(), None
    import psutil

    process = psutil.Process(child.pid)
    while child.poll() is None:
        try:
            rss_mb = process.memory_info().rss / 2**20
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


def installed_variant(env_manifest: str | None) -> tuple[str, dict]:
    """The variant environment's interpreter, and what to record of its TensorFlow."""
    if not env_manifest:
        return sys.executable, {}
    manifest = json.loads(Path(env_manifest).read_text())
    keep = (
        "wheel",
        "wheel_sha256",
        "tensorflow",
        "verified",
        "warning",
        "tf_unused_cpu_instructions",
    )
    return manifest["python"], {k: manifest.get(k) for k in keep}


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
    state = Path(record).with_name(Path(record).name + ".state")
    state.unlink(missing_ok=True)
    python, installed = installed_variant(env_manifest)
    run = dict(run, variant=dict(run["variant"], installed=installed))
    command = [
        python,
        "-m",
        "mptbench.cell",
        "--child",
        "--run",
        json.dumps(run),
        "--prepared",
        prepared,
        "--record",
        record,
        "--state",
        str(state),
    ]
    command += ["--tracking", tracking] if tracking else []
    command += ["--probe", probe] if probe else []
    command += ["--probe-only"] if probe_only else []
    device = run["device"]["name"]
    env = dict(os.environ)
    # Before TensorFlow starts: the device it may see, and the variant's settings.
    env["CUDA_VISIBLE_DEVICES"] = "" if device == "cpu" else device[3:]
    env.update({str(k): str(v) for k, v in (run["variant"].get("env") or {}).items()})
    src = str(Path(__file__).resolve().parents[1])  # the child imports mptbench from here too
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    sys.stdout.flush()
    child = subprocess.Popen(command, env=env)
    code, over_limit = _watch(child, run["train"].get("memory_limit_mb"))
    if code == 0:
        state.unlink(missing_ok=True)
        return 0
    if code == -signal.SIGKILL and not probe_only:
        reason = over_limit or (
            "the training process was killed by SIGKILL (out of memory: the kernel's OOM killer)"
        )
        print(f"oom: {reason}", file=sys.stderr, flush=True)
        _record_killed(run, state, record, reason)
        return 0
    print(
        f"error: the training process exited with code {code}; see the log above", file=sys.stderr
    )
    return 1


def _record_killed(run: dict, state: Path, record: str, reason: str) -> None:
    """The record (and MLflow run) of a cell whose trainer was killed."""
    started = json.loads(state.read_text()) if state.exists() else {}
    data = dict(started.get("record") or {}, outcome="oom", reason=reason, config=run)
    data.setdefault("experiment", run["name"])
    data.update({k: v for k, v in run["cell"].items() if k not in data})
    run_id = data.get("mlflow_run_id")
    if run_id:
        from mptbench.tracking import close_killed_run

        close_killed_run(started["tracking_uri"], run_id, reason)
    write_json(record, data)
    state.unlink(missing_ok=True)


def child_main(args: argparse.Namespace) -> int:
    run = json.loads(args.run)
    tf, keras, startup = import_tensorflow()
    from mptbench.train import probe_cell, run_cell

    prepared = json.loads(Path(args.prepared).read_text())
    if args.probe_only:
        probe = probe_cell(run, prepared) | startup
        print(f"probe: {probe['step_s']:.3f} s/step at batch {probe['batch_size']}", flush=True)
        write_json(args.record, probe)
        return 0
    tracking = json.loads(Path(args.tracking).read_text())
    probe = json.loads(Path(args.probe).read_text()) if args.probe else None

    def on_start(record: dict) -> None:
        # What the supervisor needs if this process is killed from here on.
        write_json(args.state, {"record": record, "tracking_uri": tracking["tracking_uri"]})

    record = run_cell(
        run,
        prepared,
        tracking,
        log=lambda line: print(line, flush=True),
        startup=startup,
        on_start=on_start,
        probe=probe,
    )
    record["config"] = run
    write_json(args.record, record)
    ms = record.get("ms_per_step")
    print(
        f"{record['outcome']}" + (f": {ms:.1f} ms/step" if ms else ""), file=sys.stderr, flush=True
    )
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train one grid cell and write its run record.")
    parser.add_argument(
        "--run", required=True, help="the run's config (JSON), as the workflow composes it"
    )
    parser.add_argument("--prepared", required=True, help="the prepare rule's JSON")
    parser.add_argument("--tracking", default=None, help="the tracking_init rule's JSON")
    parser.add_argument("--env", default=None, help="the variant_env rule's manifest")
    parser.add_argument("--probe", default=None, help="the probe rule's JSON (step time guard)")
    parser.add_argument("--probe-only", action="store_true", help="time a few images, no run")
    parser.add_argument("--record", required=True, help="where the run record (or probe) goes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--state", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    if not args.probe_only and not args.tracking:
        print(
            "error: --tracking is needed to train (only --probe-only runs without it)",
            file=sys.stderr,
        )
        return 2
    return supervise(
        json.loads(args.run), args.prepared, args.tracking, args.record, args.env,
        probe=args.probe or None, probe_only=args.probe_only,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
