"""A model_info job: the engine builds the model once and counts it (engine/model_info.py),
before any cell of it runs; every cell reads its FLOPs from what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

from mptbench.core.contract import DescribeJob, ModelConfig, ModelInfo, encode
from mptbench.core.files import write_json
from mptbench.jobs.launcher import Engine, environment


def describe_model(
    model: ModelConfig,
    image_size: int,
    num_classes: int,
    output: str,
    python: str | None = None,
    backend: str | None = None,
) -> ModelInfo:
    """Count the model in `python` (this one by default) on the CPU (counting needs no GPU),
    with TensorFlow where it is installed, else JAX, or with `backend`'s framework. The result
    is written to `output` (and returned)."""
    out = Path(output)
    job = DescribeJob(str(out.with_name(f".{out.name}.out")), model, image_size, num_classes)
    engine = Engine(python or sys.executable, environment(device="cpu", backend=backend))
    info = engine.result(job, ModelInfo)
    write_json(output, encode(info))
    return info
