"""What kind a device is and how it is addressed: the one place that knows `cpu` from `gpuN`.

Devices are named as in `sweep.devices`: `cpu`, or `gpu0`, `gpu1`, ... in nvidia-smi's order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

PATTERN = r"cpu|gpu\d+"
KINDS = ("cpu", "gpu")


@dataclass(frozen=True)
class Device:
    name: str

    def __post_init__(self):
        if not re.fullmatch(PATTERN, self.name):
            raise ValueError(f"unknown device {self.name!r} (allowed: cpu, gpu0, gpu1, ...)")

    @property
    def kind(self) -> str:
        return "cpu" if self.name == "cpu" else "gpu"

    @property
    def index(self) -> int | None:
        return None if self.kind == "cpu" else int(self.name[3:])

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    def settings(self, device_cfg: dict[str, Any]) -> dict[str, Any]:
        """This kind's block of conf/device (mem_mb, runtime_min, calibrate, ...)."""
        return device_cfg[self.kind]

    def environment(self) -> dict[str, str]:
        """What a process must have set before its framework starts to see only this device."""
        return {"CUDA_VISIBLE_DEVICES": "" if self.index is None else str(self.index)}

    def gpus(self) -> int:
        """GPUs a job on this device asks the scheduler for."""
        return 0 if self.index is None else 1


def every_device(gpu_count: int) -> list[str]:
    """What `auto` means: the CPU and every GPU this machine shows."""
    return ["cpu", *(f"gpu{i}" for i in range(gpu_count))]


def visible_gpus() -> list[str]:
    """GPUs this machine shows, as nvidia-smi names them (no framework import: it costs 5 s)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return []
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [
        line.split(":", 1)[1].split("(UUID")[0].strip()
        for line in out.stdout.splitlines()
        if line.startswith("GPU ")
    ]


def gpu_facts(index: int) -> dict[str, Any] | None:
    """Name, compute capability and memory of GPU `index` in nvidia-smi's order, from
    nvidia-smi (whatever framework runs, and whatever CUDA_VISIBLE_DEVICES says); None
    without nvidia-smi or that GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    query = "--query-gpu=index,name,compute_cap,memory.total"
    try:
        out = subprocess.run(
            [smi, query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4 and fields[0] == str(index):
            try:
                capability, memory = float(fields[2]), int(float(fields[3]))
            except ValueError:
                capability, memory = None, None
            return {"name": fields[1], "compute_capability": capability, "memory_mb": memory}
    return None
