"""Which calibration a cell is compared with, and what the calibrate job measures: the device's
peaks with its kind's calibrate settings, the variant's build and, on a GPU, its TF32 setting,
over the convolutions of the models its cells train, at their largest batch, on their
machine. The calibration's path is named after all of it (layout.calibration_key), so
experiments that share them share one calibration."""

from __future__ import annotations

from typing import Any

from mptbench.core.cells import Cell
from mptbench.core.devices import Device
from mptbench.plan import layout, params
from mptbench.plan.errors import ConfigError
from mptbench.plan.params import Wildcards

# What a calibration is per: every cell of these axes is compared with the same one.
AXES = ("machine", "backend", "variant", "device")


def _calibrated(cells: list[Cell], wildcards: Wildcards) -> list[Cell]:
    on = tuple(wildcards[a] for a in AXES)
    return [c for c in cells if (c.machine, c.backend, c.variant, c.device) == on]


def models(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> list[str]:
    """The descriptions of the models a backend and variant's cells on a device train."""
    names = sorted({c.model for c in _calibrated(cells, wildcards)})
    return [params.description(cfg, name) for name in names]


def batch(cells: list[Cell], wildcards: Wildcards) -> int:
    """The largest batch size a backend and variant's cells on a device train at."""
    return max(c.batch_size for c in _calibrated(cells, wildcards))


def tf32(cfg: dict[str, Any], wildcards: Wildcards) -> bool:
    """Whether a GPU may run float32 as TF32 (device.gpu.tf32); True on a CPU (no effect)."""
    device = Device(wildcards["device"])
    return not device.is_gpu or bool(device.settings(cfg["device"])["tf32"])


def calibration(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> str:
    """The calibration a backend and variant's cells on a device are compared with (wildcards:
    the AXES, a cell's or a calibrate job's)."""
    device = Device(wildcards["device"])
    settings = device.settings(cfg["device"])
    key = layout.calibration_key(
        cfg["variant"][wildcards["variant"]],
        settings["calibrate"],
        settings["tf32"] if device.is_gpu else None,  # a CPU has no TF32 to set
        models=models(cfg, cells, wildcards),
        batch=batch(cells, wildcards),
    )
    return layout.CALIBRATION.format(**{a: wildcards[a] for a in AXES}, settings=key)


def calibrations(cfg: dict[str, Any], cells: list[Cell]) -> list[str]:
    """Every calibration the grid's cells are compared with, each once."""
    calibrated = {tuple(getattr(cell, a) for a in AXES) for cell in cells}
    return sorted(calibration(cfg, cells, dict(zip(AXES, on, strict=True))) for on in calibrated)


def settings(cfg: dict[str, Any], cells: list[Cell], wildcards: Wildcards) -> dict[str, Any]:
    """A calibrate job's settings (device.<kind>.calibrate), when they are the ones its path
    was named after."""
    asked = layout.CALIBRATION.format(**wildcards)
    if calibration(cfg, cells, wildcards) != asked:
        raise ConfigError(
            f"{asked}: not measured with this experiment's calibrate settings; "
            "run it from the experiment that names it"
        )
    return Device(wildcards["device"]).settings(cfg["device"])["calibrate"]
