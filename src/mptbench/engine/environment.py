"""The environment job's engine side: start TensorFlow (every TensorFlow backend starts it here)
and read what its C++ start-up lines say about this build."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Any

from mptbench.core import frameworks
from mptbench.core.contract import EnvironmentFacts, EnvironmentJob

GUARD = re.compile(r"To enable the following instructions: ([A-Z0-9_ ,]+?), in other operations")


# What Keras imports at start for a feature no engine job uses, each behind a guard that
# leaves the feature out when the import fails: scikit-learn (Keras' scikit-learn wrappers),
# pandas (fitting on a DataFrame) and matplotlib (its image gallery): seconds of every engine
# process's start (bench/README.md, bench_start.py).
UNUSED_BY_KERAS = ("sklearn", "pandas", "matplotlib")
UNUSED_BY_TENSORFLOW = frameworks.TENSORFLOW.unused_imports


@contextlib.contextmanager
def skipping(*modules: str):
    """Keras and TensorFlow, while they are imported, go without `modules` (those not already
    imported): a None in sys.modules makes each guarded import fail. Afterwards they import again
    as usual (a user's model builder may want scikit-learn or pandas)."""
    blocked = [name for name in modules if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_tensorflow() -> tuple[Any, Any, dict[str, Any]]:
    """Import TensorFlow and Keras; return them and the facts of its start-up log.

    Those lines go straight to file descriptor 2, so it is pointed at a file while TensorFlow
    loads; the text is then passed on to the job's log unchanged.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            with skipping(*UNUSED_BY_KERAS, *UNUSED_BY_TENSORFLOW):
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


def environment_facts(session, gpu: str | None = None) -> EnvironmentFacts:
    """What this interpreter's started backend (engine/backends.py's Session) says of itself:
    the environment check's answer. A GPU named must be one it sees: its GpuMissing line
    otherwise, the check a run makes before any job (jobs/environment.py gpu_problems)."""
    if gpu:
        session.require_gpu(gpu)
    if not session.backend.facts.says_its_build:
        return EnvironmentFacts(keras=session.keras.__version__)
    return EnvironmentFacts(tensorflow=session.framework.__version__,
                            keras=session.keras.__version__, **session.facts)


def run(job: EnvironmentJob, start) -> EnvironmentFacts:
    """Do an environment check (the engine's entry point: `start` starts its backend)."""
    return environment_facts(start(job.backend), job.gpu)
