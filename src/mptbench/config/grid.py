"""The grid of runs: its axes, its cells, and what one cell's run is given."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mptbench.config.errors import ConfigError
from mptbench.devices import Device, every_device, visible_gpus


@dataclass(frozen=True)
class Cell:
    """One grid cell: one training run. Its fields are the grid's axes, in path order."""

    model: str
    backend: str
    variant: str
    device: str
    policy: str
    batch_size: int

    def wildcards(self, experiment: str) -> dict[str, Any]:
        return {"experiment": experiment, **asdict(self)}

    @property
    def label(self) -> str:
        axes = (self.model, self.backend, self.variant, self.device, self.policy)
        return "/".join((*axes, f"bs{self.batch_size}"))


AXES = tuple(Cell.__dataclass_fields__)


def expand_devices(cfg: dict[str, Any], gpus: list[str] | None = None) -> list[str]:
    """sweep.devices with auto replaced by cpu plus every visible GPU; absent GPUs rejected."""
    gpus = visible_gpus() if gpus is None else gpus
    devices: list[str] = []
    for device in cfg["sweep"]["devices"]:
        names = every_device(len(gpus)) if device == "auto" else [device]
        devices += [name for name in names if name not in devices]
    if cfg["device"]["check_present"]:
        for name in devices:
            index = Device(name).index
            if index is not None and index >= len(gpus):
                seen = ", ".join(f"gpu{i} ({n})" for i, n in enumerate(gpus)) or "none"
                raise ConfigError(
                    f"sweep.devices: {name} was asked for but is not visible here "
                    f"(GPUs seen: {seen}); "
                    "set device.check_present=false if jobs run on other nodes"
                )
    return devices


def pairs(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(backend, variant) pairs of the grid: a variant runs on the backends it lists."""
    return [
        (backend, variant)
        for backend in cfg["backend"]
        for variant in cfg["variant"]
        if backend in cfg["variant"][variant]["backends"]
    ]


def left_out(cfg: dict[str, Any]) -> list[str]:
    """Why a backend and variant asked for together have no cells (a note, not an error)."""
    notes = []
    for variant, facts in cfg["variant"].items():
        missing = [b for b in cfg["backend"] if b not in facts["backends"]]
        if missing:
            notes.append(
                f"variant {variant} runs on {', '.join(facts['backends'])} only: "
                f"no {', '.join(missing)} cells with it"
            )
    return notes


def grid(cfg: dict[str, Any], devices: list[str]) -> list[Cell]:
    return [
        Cell(model, backend, variant, device, policy, batch_size)
        for model in cfg["model"]
        for backend, variant in pairs(cfg)
        for device in devices
        for policy in cfg["policy"]
        for batch_size in cfg["sweep"]["batch_sizes"]
    ]


def run_config(cfg: dict[str, Any], cell: Cell) -> dict[str, Any]:
    """What one run needs: the config with the grid axes resolved to this cell's values.

    Other cells' values stay out, so adding a batch size does not invalidate finished runs.
    """
    device = Device(cell.device)
    axes = ("sweep", "policy", "variant", "device", "model", "backend")
    run = {k: v for k, v in cfg.items() if k not in axes}
    run["cell"] = asdict(cell)
    run["model"] = {"name": cell.model, **cfg["model"][cell.model]}
    run["backend"] = {"name": cell.backend, **cfg["backend"][cell.backend]}
    run["policy"] = {"name": cell.policy, **cfg["policy"][cell.policy]}
    run["variant"] = {"name": cell.variant, **cfg["variant"][cell.variant]}
    run["device"] = {"name": cell.device, "kind": device.kind, **device.settings(cfg["device"])}
    return run
