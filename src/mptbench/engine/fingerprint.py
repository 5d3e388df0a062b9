"""What the numbers were measured on: host, CPU features, the framework's build, and device."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

from mptbench.core import hardware
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
    flags = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "flags":
                flags = set(value.split())
                break
    return {
        "model": hardware.cpu_name(),  # the name the cell's hardware id is made from
        # The cores this process may use (a SLURM job's share), not the whole node's.
        "logical_cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "node_logical_cores": os.cpu_count(),
        "flags": sorted(f for f in CPU_FLAGS if f in flags),
        # What TensorFlow's oneDNN kernels can use: AVX512_FP16 alone gives it no fast float16.
        "fast_bfloat16": bool(flags & {"amx_bf16", "avx512_bf16"}),
        "fast_float16": "amx_fp16" in flags,
    }


def tensorflow_build(tf) -> dict[str, Any]:
    build = dict(tf.sysconfig.get_build_info())
    return {
        "is_cuda_build": bool(build.get("is_cuda_build")),
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get(
            "TF_ENABLE_ONEDNN_OPTS", "unset (TensorFlow's default)"
        ),
    }


def framework_info(backend: Backend, framework, keras) -> dict[str, Any]:
    """The backend and its framework's versions (and TensorFlow's build)."""
    facts = {
        "backend": backend.name,
        "keras": keras.__version__,
        "python": platform.python_version(),
        **backend.versions(framework),
    }
    if backend.name == "tensorflow":
        facts |= tensorflow_build(framework)
    return facts


def _tensorflow_gpu(tf) -> dict[str, Any] | None:
    """What TensorFlow says of its first GPU, where nvidia-smi is not there to ask."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    details = tf.config.experimental.get_device_details(gpus[0])
    capability = details.get("compute_capability")
    cc = float(f"{capability[0]}.{capability[1]}") if capability else None
    return {"name": details.get("device_name", gpus[0].name), "compute_capability": cc}


def gpu_info(backend: Backend, framework, device: str) -> dict[str, Any] | None:
    facts = gpu_facts(Device(device).index or 0)
    if facts is None and backend.name == "tensorflow":
        facts = _tensorflow_gpu(framework)
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
