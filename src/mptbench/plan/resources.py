"""What a job asks Snakemake's scheduler for. Every timing job (probe, train, fits, parity,
calibrate) asks alike: its device's slot, so two never share a device; on a cluster its
target's resources, so it lands on that target's nodes; its device kind's memory, runtime and
GPUs; and threads: on a CPU every core Snakemake has, so nothing runs beside it. (A source
build asks for its variant's build.threads, mem_mb and runtime_min: params.build_setting.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mptbench.core.devices import Device
from mptbench.plan.params import Wildcards


def slot(device: str) -> str:
    """The resource of capacity 1 that serialises a device's timing jobs."""
    return f"timing_{device}"


@dataclass(frozen=True)
class Timing:
    """What a timing job asks for. cores: Snakemake's --cores, None where it has none (a
    cluster run: the profile sets threads)."""

    cfg: dict[str, Any]
    devices: list[str]
    cores: int | None

    def threads(self, wildcards: Wildcards) -> int:
        """A CPU timing job takes every core Snakemake has; a GPU job its configured few."""
        device = Device(wildcards["device"])
        if device.is_gpu:
            return self._settings(wildcards)["threads"]
        return self.cores or 1

    def resources(self, runtime: int | None = None, groups: int = 1) -> dict[str, Any]:
        """A timing rule's resources: each device's slot (1 on its own device, else 0), each
        resource the targets name (sweep.targets: every target names the same), and the
        device kind's mem_mb, runtime (minutes; `runtime` instead where given; a train job
        times `groups` comparison groups, each its kind's runtime) and GPUs."""
        slots = {slot(d): self._on(d) for d in self.devices}
        targets = self.cfg["sweep"]["targets"] or {}
        keys = sorted({key for resources in targets.values() for key in resources})
        return {
            **slots,
            **{key: self._target(key) for key in keys},
            "mem_mb": lambda wildcards: self._settings(wildcards)["mem_mb"],
            "runtime": runtime
            or (lambda wildcards: groups * self._settings(wildcards)["runtime_min"]),
            "gpu": lambda wildcards: Device(wildcards["device"]).gpus(),
        }

    def _settings(self, wildcards: Wildcards) -> dict[str, Any]:
        return Device(wildcards["device"]).settings(self.cfg["device"])

    def _on(self, device: str) -> Callable[[Wildcards], int]:
        return lambda wildcards: int(wildcards["device"] == device)

    def _target(self, key: str) -> Callable[[Wildcards], Any]:
        return lambda wildcards: self.cfg["sweep"]["targets"][wildcards["machine"]][key]
