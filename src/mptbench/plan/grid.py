"""The grid of runs: its cells, and what one cell's run is given (a typed `Run`)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from mptbench.core import hardware, isa
from mptbench.core.cells import AXES, Cell
from mptbench.core.contract import (
    BackendConfig,
    DatasetConfig,
    DeviceConfig,
    ModelConfig,
    Run,
    TrainConfig,
    VariantConfig,
    decode,
)
from mptbench.core.devices import Device, every_device, gpu_facts, visible_gpus
from mptbench.core.policies import Policy
from mptbench.plan.errors import ConfigError

__all__ = [
    "AXES", "Cell", "beyond_machine", "expand_devices", "given", "grid", "left_out", "machines",
    "model_config", "model_fields", "pairs", "run_config",
]


def machines(cfg: dict[str, Any]) -> list[str]:
    """The machine axis: sweep.targets' names, or this machine's hardware id (sweep.machine
    auto), or the name sweep.machine gives."""
    sweep = cfg["sweep"]
    targets = sweep.get("targets")
    if targets:
        named = {name: sorted(resources) for name, resources in targets.items()}
        first = next(iter(named))
        for name, keys in named.items():
            if keys != named[first]:
                raise ConfigError(
                    f"sweep.targets: every target names the same resources ({first}: "
                    f"{', '.join(named[first]) or 'none'}; {name}: {', '.join(keys) or 'none'})"
                )
        return list(targets)
    machine = sweep["machine"]
    if machine != "auto":
        return [machine]
    if not cfg["device"]["check_present"]:
        raise ConfigError(
            "sweep.machine: auto names this machine's hardware, but device.check_present=false "
            "says the jobs run elsewhere; list sweep.targets (one per kind of node) or give "
            "sweep.machine=NAME"
        )
    return [hardware.machine_id()]


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
        memory_limits(cfg, devices)
    return devices


def memory_limits(cfg: dict[str, Any], devices: list[str]) -> None:
    """A memory limit no larger than the device it limits: this machine's memory for the CPU,
    nvidia-smi's figure for a GPU (checked where the devices are this machine's)."""
    for name in devices:
        device = Device(name)
        limit = device.settings(cfg["device"]).get("fits_search_mb")
        if not limit:
            continue
        if device.is_gpu:
            has = (gpu_facts(device.index or 0) or {}).get("memory_mb")
        else:
            has = machine_memory_mb()
        if has and limit > has:
            raise ConfigError(
                f"device.{device.kind}.fits_search_mb: {limit} MB is more than {name} has "
                f"({has} MB); a limit asks what fits in less"
            )


def machine_memory_mb() -> int | None:
    """MemTotal of this machine, in MB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def pairs(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(backend, variant) pairs of the grid: a variant runs on the backends it lists, and one
    capped at an instruction set (variant.<name>.isa) only where this machine has it."""
    above = beyond_machine(cfg)
    return [
        (backend, variant)
        for backend in cfg["backend"]
        for variant in cfg["variant"]
        if cfg["variant"][variant]["backends"] in (None, [], ())
        or backend in cfg["variant"][variant]["backends"]
        if variant not in above
    ]


def beyond_machine(cfg: dict[str, Any], flags: set[str] | None = None) -> dict[str, str]:
    """Variants capped at an instruction set this machine lacks, and why: such a cap caps
    nothing (the libraries use what the machine has), so its cells would repeat another's."""
    flags = isa.cpu_flags() if flags is None else flags
    found = {}
    for name, facts in cfg["variant"].items():
        cap = facts.get("isa")
        missing = isa.lacks(cap, flags) if cap else []
        if missing:
            found[name] = (
                f"variant {name} caps at {cap}, above this machine's CPU (it lacks "
                f"{', '.join(missing)}): no cells with it"
            )
    return found


def model_backends(cfg: dict[str, Any], model: str) -> list[str]:
    """The backends asked for that a model runs on (model.<name>.backends; absent: all)."""
    listed = cfg["model"][model].get("backends")
    return [backend for backend in cfg["backend"] if listed is None or backend in listed]


def left_out(cfg: dict[str, Any]) -> list[str]:
    """Why a backend asked for has no cells with a variant or a model (a note, not an error)."""
    notes = list(beyond_machine(cfg).values())
    for kind, options in (("variant", cfg["variant"]), ("model", cfg["model"])):
        for name, facts in options.items():
            listed = facts.get("backends")
            missing = [b for b in cfg["backend"] if listed is not None and b not in listed]
            if missing:
                notes.append(
                    f"{kind} {name} runs on {', '.join(listed)} only: "
                    f"no {', '.join(missing)} cells with it"
                )
    return notes


def grid(cfg: dict[str, Any], devices: list[str], on: list[str] | None = None) -> list[Cell]:
    """Every cell, in axis order (AXES): machine, model, backend and variant, device, policy,
    batch (`on`: the machines, machines(cfg) unless given)."""
    return [
        Cell(machine, model, backend, variant, device, policy, batch_size)
        for machine in (machines(cfg) if on is None else on)
        for model in cfg["model"]
        for backend, variant in pairs(cfg)
        if backend in model_backends(cfg, model)
        for device in devices
        for policy in cfg["policy"]
        for batch_size in cfg["sweep"]["batch_sizes"]
    ]


def given(contract: type, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a run is given: its contract's fields. Those declared beside them
    (plan/settings.py: the grid, the fits and parity rules read them from the config) rerun
    no group and describe no model again."""
    names = {f.name for f in fields(contract)}
    return {k: v for k, v in settings.items() if k in names}


def model_fields(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A model's settings as its runs and its description get them: ModelConfig's fields, as
    the config writes them (its description's key is a hash of these)."""
    return given(ModelConfig, cfg["model"][name])


def model_config(cfg: dict[str, Any], name: str) -> ModelConfig:
    """A model as its runs get it."""
    return decode(ModelConfig, {"name": name, **model_fields(cfg, name)})


def device_config(cfg: dict[str, Any], name: str) -> DeviceConfig:
    device = Device(name)
    settings = given(DeviceConfig, device.settings(cfg["device"]))
    return decode(DeviceConfig, {"name": name, "kind": device.kind, **settings})


def run_config(cfg: dict[str, Any], cell: Cell) -> Run:
    """What one cell's run is given: the config with the grid axes resolved to its values.

    Other cells' values stay out, so adding a batch size does not invalidate finished runs.
    """
    return Run(
        experiment=cfg["name"],
        seed=cfg["seed"],
        cell=cell,
        model=model_config(cfg, cell.model),
        backend=decode(BackendConfig, {"name": cell.backend, **cfg["backend"][cell.backend]}),
        policy=Policy.of(cell.policy, cfg["policy"][cell.policy]),
        variant=decode(VariantConfig, {"name": cell.variant, **cfg["variant"][cell.variant]}),
        device=device_config(cfg, cell.device),
        dataset=decode(DatasetConfig, cfg["dataset"]),
        train=decode(TrainConfig, given(TrainConfig, cfg["train"])),
    )
