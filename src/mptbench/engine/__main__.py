"""The engine's one entry point: `python -m mptbench.engine JOB`, in the variant's Python.

It reads an engine job (core/contract/) from the file JOB, starts the Keras backend the job needs
(only that framework is imported: a JAX cell on synthetic data imports no TensorFlow), runs the
job and writes its result where the job says. A failure a user must fix is one `error:` line
(also written where the result would go, as {"error": ...}) and exit code 1; anything else is
a traceback. The job that launched it (jobs/launcher.py)
knows what to record if it dies.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys

from mptbench.core.contract import EngineJob, decode_job, encode, kind_of
from mptbench.core.files import read_json, write_json
from mptbench.engine.backends import GpuMissing, start
from mptbench.engine.networks import ModelError


def run(job: EngineJob):
    """The job's result: its kind's engine module's `run` (core/contract/kinds.py)."""
    module = importlib.import_module(f"mptbench.engine.{kind_of(job).feature}")
    return module.run(job, start)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m mptbench.engine JOB_FILE", file=sys.stderr)
        return 2
    job = decode_job(read_json(argv[0]))
    try:
        result = run(job)
    except (ModelError, GpuMissing) as exc:  # one line for the user, read by the launcher too
        print(f"error: {exc}", file=sys.stderr, flush=True)
        write_json(job.out, {"error": str(exc)})
        return 1
    write_json(job.out, encode(result))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # What C libraries wrote through stdio (oneDNN's kernel lines) is still in their buffers
    # where stdout is a pipe: os._exit would drop it.
    ctypes.CDLL(None).fflush(None)
    # The result is written (atomically) and the profiles saved: skip the interpreter's
    # teardown, in which the framework's threads (tf.data's tuning threads above all: core/
    # epochs.py) can take tens of seconds, between two timed processes of a group.
    os._exit(code)
