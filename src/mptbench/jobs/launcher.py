"""The one way a job runs the engine: write the engine job to a file, start
`python -m mptbench.engine JOB` in the variant's Python with what it must see, watch it, and
read back its result.

The engine sees only its device (CUDA_VISIBLE_DEVICES), its Keras backend (KERAS_BACKEND), the
variant's environment variables (set before its framework starts) and this checkout's mptbench,
whatever environment it runs in. Its output goes where the job's goes (the rule's log), less
oneDNN's kernel lines, which say what its kernels were built for (core/isa.py). Train, probe,
calibrate, model_info and variant_env jobs all launch it here.
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mptbench.core import isa
from mptbench.core.contract import (
    ENGINE,
    EngineJob,
    FitJob,
    Run,
    decode,
    encode,
)
from mptbench.core.devices import Device
from mptbench.core.files import read_json, write_json
from mptbench.core.hardware import RESIDENT_PEAK, RUSAGE_PEAK
from mptbench.core.outcomes import classify_death, refusal
from mptbench.jobs import device_lock, memory

SRC = str(Path(__file__).resolve().parents[2])  # the folder that holds mptbench/


class EngineFailed(RuntimeError):
    """The engine exited with an error, or died where no outcome can be recorded: the job fails
    (its log holds the engine's `error:` line or traceback)."""


def environment(
    variant_env: dict[str, Any] | None = None,
    device: str | None = None,
    backend: str | None = None,
) -> dict[str, str]:
    """The engine's environment: ours, with only `device` visible, Keras on `backend`, the
    variant's variables, and this checkout's mptbench first on its path."""
    env = dict(os.environ)
    if device:
        env.update(Device(device).environment())
    if backend:
        env["KERAS_BACKEND"] = backend
    env.update({str(k): str(v) for k, v in (variant_env or {}).items()})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return env


def run_environment(run: Run) -> dict[str, str]:
    """The engine's environment for a cell's run: its device, backend and variant (with the
    variant's instruction-set cap, core/isa.py)."""
    return environment(run.variant.environment(run.backend.name), run.device.name,
                       run.backend.name)


def cpu_usage() -> tuple[float, float]:
    """(CPU seconds of this process's finished children, wall clock): the engine's own use of
    the machine, known even for a cell shorter than MLflow's system-metrics interval."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime, time.monotonic()


def cpu_percent(before: tuple[float, float]) -> float:
    """Percent of this process's cores the engine kept busy since `before` (100: all)."""
    cpu, wall = cpu_usage()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 100 * (cpu - before[0]) / max(wall - before[1], 1e-9) / (cores or 1)


def _why(code: int, out: Path) -> str:
    """The engine's own one-line error where it wrote one, else where to look."""
    try:
        error = read_json(out).get("error") if out.exists() else None
    except (ValueError, AttributeError):
        error = None
    return error or f"the engine exited with code {code}; see the log above"


@dataclass
class Finished:
    """How an engine job ended: its result, or the death that left it without one."""

    result: Any = None
    death: tuple[str, str] | None = None  # (outcome, reason): killed by a signal, or over memory
    cpu_percent: float | None = None
    kernels: isa.Kernels | None = None  # what oneDNN said it created (None: not asked)


class Output:
    """The engine's output on its way to the job's: oneDNN's kernel lines go to `kernels`
    (core/isa.py), the rest on, the last of its error output kept for what a death left."""

    def __init__(self):
        self.kernels = isa.Kernels()
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.readers: list[threading.Thread] = []
        self.asked = False  # oneDNN was asked to name its kernels

    def start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        self.asked = "ONEDNN_VERBOSE" not in env  # else the user's own: theirs to read
        if self.asked:
            env = {**env, "ONEDNN_VERBOSE": "profile_create"}
        env = {**env, "PYTHONUNBUFFERED": "1"}
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
        for stream, to in ((child.stdout, "stdout"), (child.stderr, "stderr")):
            reader = threading.Thread(target=self._pass_on, args=(stream, to), daemon=True,
                                      name=f"engine-{to}")
            reader.start()
            self.readers.append(reader)
        return child

    def _pass_on(self, stream, to: str) -> None:
        out = getattr(sys, to)
        for line in stream:
            if to == "stdout" and self.kernels.read(line):
                continue
            if to == "stderr":
                self.tail.append(line)
            out.write(line)
            out.flush()

    def finish(self) -> None:
        for reader in self.readers:
            reader.join(timeout=30)


def timed_device(job: EngineJob) -> str | None:
    """The device a job times steps or kernels on, or trains on at full load (a fit try, a
    parity run: they would slow a timing job beside them); None for one that does neither."""
    return job.timed_device()


def _kernel_limited(job: EngineJob) -> bool:
    """A fit try on a CPU: its memory limit is the kernel's, on the trainer's own cgroup (the
    RSS watch, which kills between two samples, stands in where no cgroup can be made)."""
    return isinstance(job, FitJob) and not Device(job.run.cell.device).is_gpu


@dataclass(frozen=True)
class Engine:
    """The engine in one Python, with one environment."""

    python: str
    env: dict[str, str]

    def command(self, job_file: Path) -> list[str]:
        return [self.python, "-m", ENGINE, str(job_file)]

    def launch(
        self, job: EngineJob, result_type: type, limit: memory.Limit | None = None
    ) -> Finished:
        """Run `job` to its end; a death by a signal (or past `limit`, named in its reason) is
        returned as evidence for an outcome, any other failure raised as EngineFailed. A
        timing job holds its device's lock while it runs (jobs/device_lock.py)."""
        with device_lock.holding(timed_device(job)):
            return self._launch(job, result_type, limit)

    def _launch(self, job: EngineJob, result_type: type, limit: memory.Limit | None) -> Finished:
        out = Path(job.out)
        job_file = out.with_name(f".{out.name}.job")
        write_json(job_file, encode(job))
        out.unlink(missing_ok=True)
        evidence, usage = memory.Evidence.start(), cpu_usage()
        sys.stdout.flush()
        child, output = None, Output()
        try:
            child = output.start(self.command(job_file), self.env)
            evidence.adopt(child.pid)
            watched = limit
            if _kernel_limited(job) and limit and evidence.limit(limit.mb):
                watched = None  # the kernel holds the limit: an OOM kill is its record
            code, over_limit = memory.watch(child, watched, evidence)
            output.finish()
            if code < 0 or over_limit:
                oom = evidence.oom_record()
                if oom and limit and watched is None:  # the kernel held the limit: name it
                    oom = f"{oom}; the limit {limit}"
                death = (None if over_limit else refusal(code, list(output.tail))) or (
                    classify_death(code, over_limit, oom, evidence.notes))
                return Finished(death=death)
            if code != 0 or not out.exists():
                raise EngineFailed(_why(code, out))
            result = decode(result_type, read_json(out))
            if isinstance(job, FitJob) and result.peak_source in (RESIDENT_PEAK, RUSAGE_PEAK):
                result.limit_counted_mb = evidence.counted_mb()
            return Finished(result, cpu_percent=cpu_percent(usage),
                            kernels=output.kernels if output.asked else None)
        finally:
            if child is not None and child.poll() is None:  # this job itself was stopped
                child.kill()
                child.wait()
            evidence.release()
            job_file.unlink(missing_ok=True)
            out.unlink(missing_ok=True)

    def result(self, job: EngineJob, result_type: type) -> Any:
        """The job's result; a death is a failure here (no outcome to record it as)."""
        finished = self.launch(job, result_type)
        if finished.death:
            raise EngineFailed(f"the engine died: {finished.death[1]}")
        return finished.result
