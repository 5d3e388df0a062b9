"""A GPU owner's first run from README: nvidia-smi lists a GPU, and the frameworks are the CPU
wheels (what a plain `pip install -e .` gives TensorFlow, and `.[jax]` gives JAX). The run stops
before its first job, in one line naming for each backend the extra that gives it GPUs; nothing
is made, downloaded or cached."""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import config_values, copy_workflow, job_counts

from mptbench.plan import layout

pytestmark = [pytest.mark.slow, pytest.mark.workflow]

# What nvidia-smi prints for the two queries mptbench asks of it (core/devices.py).
FAKE_SMI = """#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)";;
  --query-gpu=*) echo "0, NVIDIA H100 80GB HBM3, 9.0, 81559";;
  *) exit 6;;
esac
"""


def fake_gpu_environment(folder: Path) -> dict[str, str]:
    """This environment with an nvidia-smi that lists an H100 first on PATH, no GPU hidden."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}"}


def test_a_gpu_the_cpu_wheels_cannot_see_stops_the_run_before_the_download(tmp_path):
    checkout = copy_workflow(tmp_path)
    env = fake_gpu_environment(tmp_path / "fake-bin")
    config = config_values("smoke", "sweep.devices=[auto]", "backend=[tensorflow,jax]")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--cores", "2", "--config", *config],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    (line,) = [line for line in output.splitlines() if line.startswith("mptbench: gpu0")]
    pip = Path(sys.executable).with_name("pip")
    for framework, extra in (("TensorFlow", "gpu"), ("JAX", "jax-gpu")):
        assert (
            f"gpu0: nvidia-smi lists NVIDIA H100 80GB HBM3 but {framework} sees no GPU; its CUDA "
            f"libraries are likely missing: {pip} install -e '.[{extra}]'"
        ) in line
    # The grid was planned with the GPU in it (a train job per backend and device) and its
    # download with it, and no job started: no fixture, download or cache, only the check's
    # own log of the frameworks' start-up output.
    planned = job_counts(output)
    assert planned["train"] == 4 and planned["download"] == 1 and planned["prepare"] == 1
    assert not re.search(r"^(local)?rule \w+:", output, re.M), output
    made = sorted(p.relative_to(checkout) for p in (checkout / "resources").rglob("*")
                  if p.is_file())
    assert made == [Path(layout.GPU_CHECK_LOG)]
