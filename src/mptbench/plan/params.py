"""What a rule's job is given besides its files and Runs: the composed config's settings for it,
looked up by the job's wildcards (Snakemake's, or any mapping of them). A path asked for by
hand that names no model, variant or backend of this experiment stops with one line."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mptbench.core.devices import Device
from mptbench.plan import layout
from mptbench.plan.errors import ConfigError
from mptbench.plan.grid import model_fields

Wildcards = Mapping[str, Any]


def description(cfg: dict[str, Any], name: str) -> str:
    """The model_info rule's output for one of this experiment's models on its data."""
    return layout.model_info(name, model_fields(cfg, name), cfg["dataset"])


def model(cfg: dict[str, Any], wildcards: Wildcards) -> dict[str, Any]:
    """The model a description is of, when it is this experiment's (its key says so)."""
    name, asked = wildcards["model"], layout.MODEL_INFO.format(**wildcards)
    if name not in cfg["model"] or description(cfg, name) != asked:
        raise ConfigError(
            f"{asked}: not a model of this experiment on its data; "
            "run it from the experiment that names it"
        )
    return {"name": name, **model_fields(cfg, name)}


def variant(cfg: dict[str, Any], wildcards: Wildcards) -> dict[str, Any]:
    name = wildcards["variant"]
    if name not in cfg["variant"]:
        raise ConfigError(f"variant {name} is not in this experiment")
    return {"name": name, **cfg["variant"][name]}


def backend(cfg: dict[str, Any], wildcards: Wildcards) -> str:
    name = wildcards["backend"]
    if name not in cfg["backend"]:
        raise ConfigError(f"backend {name} is not in this experiment")
    return name


def fit_settings(cfg: dict[str, Any], wildcards: Wildcards) -> dict[str, Any]:
    """The fits search's batch sizes, its cap (sweep.max_batch, else the grid's largest), steps
    per try and the device's memory limit (device.<kind>.fits_search_mb)."""
    sweep = cfg["sweep"]
    return {
        "batch_sizes": sweep["batch_sizes"],
        "cap": sweep["max_batch"] or max(sweep["batch_sizes"]),
        "steps": sweep["fit_steps"],
        "limit_mb": Device(wildcards["device"]).settings(cfg["device"])["fits_search_mb"],
    }


def parity_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """Every parity job's steps per policy and time budget (train.parity_*)."""
    return {"steps": cfg["train"]["parity_steps"], "budget_s": cfg["train"]["parity_budget_s"]}


def build_setting(cfg: dict[str, Any], key: str, wildcards: Wildcards) -> Any:
    """One setting of the variant's source build (variant.<name>.build.<key>): what to build,
    and the threads, mem_mb and runtime_min the build job asks for."""
    build = variant(cfg, wildcards)["build"]
    if not build:
        name = wildcards["variant"]
        raise ConfigError(f"variant {name}: variant.{name}.build is null, nothing to build")
    return build[key]


def build_copts(cfg: dict[str, Any], wildcards: Wildcards) -> str:
    """The build's copts as Bazel flags, each one quoted: the schema allows only flag
    characters, and quoting keeps it so."""
    copts = build_setting(cfg, "copts", wildcards)
    return " ".join(shlex.quote(f"--copt={c}") for c in copts)


def host_reference(wildcards: Wildcards) -> str:
    """Where a train job's host keeps its fastest (jobs/host.py)."""
    return layout.HOST.format(**{k: wildcards[k] for k in ("machine", "backend", "variant",
                                                           "device")})


def output_dir(wildcards: Wildcards, output: list[str]) -> str:
    """The folder of a rule's first output (a param derived from it, not a second literal)."""
    return str(Path(output[0]).parent)
