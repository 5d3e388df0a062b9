"""Run one of mptbench's modules in a variant's Python: the one way every job does it.

The child sees only its device, its Keras backend (KERAS_BACKEND), the variant's environment
variables (set before its framework starts) and this checkout's mptbench, whatever
environment it runs in.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from mptbench import backends
from mptbench.devices import Device

SRC = str(Path(__file__).resolve().parents[2])  # the folder that holds mptbench/


def environment(
    variant_env: dict[str, Any] | None = None,
    device: str | None = None,
    backend: str | None = None,
) -> dict:
    env = dict(os.environ)
    if device:
        env.update(Device(device).environment())
    if backend:
        env.update(backends.backend(backend).environment())
    env.update({str(k): str(v) for k, v in (variant_env or {}).items()})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return env


def command(python: str, module: str, *args: str) -> list[str]:
    return [python, "-m", module, *args]


def start(python: str, module: str, args: list[str], env: dict, **popen) -> subprocess.Popen:
    """The module running in the background (the supervisor watches it)."""
    return subprocess.Popen(command(python, module, *args), env=env, **popen)


def run(
    python: str,
    module: str,
    args: list[str],
    env: dict,
    timeout: float | None = None,
    capture: bool = True,
) -> subprocess.CompletedProcess:
    """The module run to its end; its output captured as text, or passed on to ours."""
    return subprocess.run(
        command(python, module, *args), env=env, capture_output=capture, text=True, timeout=timeout
    )
