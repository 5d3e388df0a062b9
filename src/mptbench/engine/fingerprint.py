"""What the numbers were measured on: host, CPU features, the framework's build, and device."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from mptbench.core import hardware, isa
from mptbench.core.devices import Device, gpu_facts
from mptbench.engine.backends import Backend, Session, tf32_effective

# CPU flags that decide whether reduced precision can be fast on a CPU.
CPU_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "amx_int8",
)


def cpu_info() -> dict[str, Any]:
    """The CPU, and what its kernels may use: where the run caps them (ONEDNN_MAX_CPU_ISA,
    core/isa.py), its fast dtypes are those within the cap."""
    flags = isa.cpu_flags()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    usable = isa.within(flags, cap if cap in isa.NAMES else None)
    return {
        "model": hardware.cpu_name(),  # the name the cell's hardware id is made from
        # The cores this process may use (a SLURM job's share), not the whole node's.
        "logical_cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "node_logical_cores": os.cpu_count(),
        "flags": sorted(f for f in CPU_FLAGS if f in flags),
        "isa_cap": cap,
        # What TensorFlow's oneDNN kernels can use: AVX512_FP16 alone gives it no fast float16.
        "fast_bfloat16": bool(usable & {"amx_bf16", "avx512_bf16"}),
        "fast_float16": "amx_fp16" in usable,
    }


def framework_info(backend: Backend, framework, keras) -> dict[str, Any]:
    """The backend and its framework's versions (and TensorFlow's build)."""
    facts = {
        "backend": backend.name,
        "keras": keras.__version__,
        "python": platform.python_version(),
        **backend.versions(framework),
    }
    return facts | backend.build(framework)


def gpu_info(backend: Backend, framework, device: str) -> dict[str, Any] | None:
    facts = gpu_facts(Device(device).index or 0)
    if facts is None:  # no nvidia-smi: what the framework says of it, where it says
        facts = backend.gpu_details(framework)
    if facts is None:
        return None
    cc = facts.get("compute_capability")
    return {
        **facts,
        # Tensor Cores: float16 from compute capability 7.0, bfloat16 and TF32 from 8.0.
        "fast_float16": cc is not None and cc >= 7.0,
        "fast_bfloat16": cc is not None and cc >= 8.0,
    }


def fingerprint(backend: Backend, framework, keras, device: str) -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "device": device,
        "cpu": cpu_info(),
        "gpu": gpu_info(backend, framework, device) if Device(device).is_gpu else None,
        **framework_info(backend, framework, keras),
    }


def on_device(session: Session, device: str, tf32: bool | None = True) -> dict[str, Any]:
    """What every engine job does once its backend has started, before it measures: fail with
    one line when a GPU job sees no GPU, set TF32 as asked (GPUs), and return the fingerprint
    with the TF32 setting as it takes effect and what the backend's start showed."""
    session.require_gpu(device)
    facts = fingerprint(session.backend, session.framework, session.keras, device)
    allowed = tf32 is not False
    if facts["gpu"]:
        session.set_tf32(allowed)
    facts["tf32"] = tf32_effective(allowed, device, (facts["gpu"] or {}).get("compute_capability"))
    return facts | session.facts
