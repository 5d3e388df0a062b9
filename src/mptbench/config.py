"""Compose the Hydra configuration, check it, and expand it into the grid of runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

COMPUTE_DTYPES = ("float32", "float16", "bfloat16")
DEVICE_PATTERN = re.compile(r"^(cpu|gpu\d+)$")

# One path per run; its wildcards spell the grid cell. The aggregate step globs these.
RUN_RECORD = "results/{experiment}/runs/{variant}/{device}/{policy}/bs{batch_size}.json"
RUN_LOG = "results/{experiment}/logs/train/{variant}/{device}/{policy}/bs{batch_size}.log"


class ConfigError(ValueError):
    """A configuration a user must fix; the message is one line naming the key."""


@dataclass(frozen=True)
class Cell:
    """One grid cell: one training run."""

    variant: str
    device: str
    policy: str
    batch_size: int

    def wildcards(self, experiment: str) -> dict[str, Any]:
        return {"experiment": experiment, **asdict(self)}

    @property
    def label(self) -> str:
        return f"{self.variant}/{self.device}/{self.policy}/bs{self.batch_size}"


def parse_overrides(value: Any) -> list[str]:
    """Overrides as Snakemake's --config hands them over: a YAML list, or one string.

    `--config 'overrides=["a=[1,2]","b=3"]'` arrives as a list; the unquoted
    `--config overrides=[a=[1,2],b=3]` arrives as the string "[a=[1,2],b=3]", which is
    split on the commas that are not inside brackets or quotes.
    """
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    if not isinstance(value, str):
        raise ConfigError(f"overrides: expected a list of Hydra overrides, got {value!r}")
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    parts, depth, quote, current = [], 0, None, []
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _options(conf_dir: Path, group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def _composition_error(conf_dir: Path, exc: Exception) -> ConfigError:
    text = str(exc)
    missing = re.search(r"Could not (?:find|load) '([\w/]+)/([^/']+)'", text)
    if missing:
        group, option = missing.groups()
        allowed = ", ".join(_options(conf_dir, group))
        return ConfigError(f"unknown {group} '{option}' (allowed: {allowed})")
    env = re.search(r"Environment variable '(\w+)' not found", text)
    if env:
        return ConfigError(
            f"{env.group(1)} is not set; this configuration reads it (e.g. tracking=server)"
        )
    key = re.search(r"Could not override '([^']+)'", text)
    if key:
        return ConfigError(f"override of unknown key '{key.group(1)}': no such key in the config")
    return ConfigError(text.strip().splitlines()[0])


def compose_config(
    conf_dir: str | Path, experiment: str | None = None, overrides: Any = None
) -> dict[str, Any]:
    """Compose conf/config.yaml with an experiment and overrides; return a checked dict."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    conf_dir = Path(conf_dir).resolve()
    override_list = parse_overrides(overrides)
    if experiment:
        override_list.append(f"experiment={experiment}")
    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            composed = compose("config", overrides=override_list)
        cfg = OmegaConf.to_container(composed, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise _composition_error(conf_dir, exc) from None
    check_config(cfg)
    return cfg


def _positive_int(value: Any, key: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}: {value!r} is not an integer >= {minimum}")
    return value


def _optional_positive(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{key}: {value!r} is not a positive number (or null)")


def check_config(cfg: dict[str, Any]) -> None:
    """Reject values that would fail (or mislead) later, before any job starts."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(cfg.get("name", ""))):
        raise ConfigError(f"name: {cfg.get('name')!r} must be letters, digits, '_', '.', '-'")
    sweep = cfg["sweep"]
    if not sweep.get("batch_sizes"):
        raise ConfigError("sweep.batch_sizes: empty; give at least one batch size")
    for i, batch_size in enumerate(sweep["batch_sizes"]):
        _positive_int(batch_size, f"sweep.batch_sizes[{i}]")
    if len(set(sweep["batch_sizes"])) != len(sweep["batch_sizes"]):
        raise ConfigError(f"sweep.batch_sizes: {sweep['batch_sizes']} lists a size twice")
    if not sweep.get("devices"):
        raise ConfigError("sweep.devices: empty; give auto, cpu or gpuN")
    for device in sweep["devices"]:
        if device != "auto" and not DEVICE_PATTERN.match(str(device)):
            raise ConfigError(
                f"sweep.devices: unknown device {device!r} (allowed: auto, cpu, gpu0, gpu1, ...)"
            )
    if not cfg.get("policy"):
        raise ConfigError(
            "policy: no policy selected (allowed: float32, mixed_float16, mixed_bfloat16)"
        )
    for name, policy in cfg["policy"].items():
        if policy.get("compute_dtype") not in COMPUTE_DTYPES:
            raise ConfigError(
                f"policy.{name}.compute_dtype: {policy.get('compute_dtype')!r} "
                f"(allowed: {', '.join(COMPUTE_DTYPES)})"
            )
    if not cfg.get("variant"):
        raise ConfigError("variant: no variant selected (e.g. variant=[pypi])")
    model = cfg["model"]
    if not model.get("conv_layers") and not model.get("dense_layers"):
        raise ConfigError(f"model {model['name']!r}: no conv_layers and no dense_layers")
    if model["output_activation"] not in ("softmax", "sigmoid"):
        raise ConfigError(
            f"model.output_activation: {model['output_activation']!r} (allowed: softmax, sigmoid)"
        )
    dataset = cfg["dataset"]
    _positive_int(dataset["image_size"], "dataset.image_size", minimum=8)
    if not dataset.get("url"):
        raise ConfigError("dataset.url: empty; give an http(s) URL or a local path")
    sha = dataset.get("sha256")
    if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
        raise ConfigError(f"dataset.sha256: {sha!r} is not 64 lowercase hex digits")
    if sha is None and not dataset.get("sha256_url"):
        raise ConfigError("dataset.sha256: no checksum pinned and no sha256_url to fetch one from")
    buffer = dataset["input"]["shuffle_buffer"]
    if buffer != "seed":
        _positive_int(buffer, "dataset.input.shuffle_buffer")
    if dataset["input"]["cache"] not in ("memory", "none"):
        raise ConfigError(
            f"dataset.input.cache: {dataset['input']['cache']!r} (allowed: memory, none)"
        )
    train = cfg["train"]
    _positive_int(train["epochs"], "train.epochs")
    if train["steps_per_epoch"] is not None:
        _positive_int(train["steps_per_epoch"], "train.steps_per_epoch")
    _positive_int(train["warmup_steps"], "train.warmup_steps", minimum=0)
    _positive_int(train["warmup_epochs"], "train.warmup_epochs", minimum=0)
    if train["warmup_epochs"] >= train["epochs"]:
        raise ConfigError(
            f"train.warmup_epochs: {train['warmup_epochs']} leaves none of the "
            f"{train['epochs']} epochs to time"
        )
    _positive_int(train["synthetic_max_steps"], "train.synthetic_max_steps")
    _positive_int(train["min_timed_steps"], "train.min_timed_steps")
    if train["timed_steps"] is not None:
        _positive_int(train["timed_steps"], "train.timed_steps")
        if train["timed_steps"] < train["min_timed_steps"]:
            raise ConfigError(
                f"train.timed_steps: {train['timed_steps']} is below train.min_timed_steps "
                f"({train['min_timed_steps']})"
            )
    _optional_positive(train["time_budget_s"], "train.time_budget_s")
    _optional_positive(train["max_step_seconds"], "train.max_step_seconds")
    _positive_int(train["probe_batch_size"], "train.probe_batch_size")
    if train["memory_limit_mb"] is not None:
        _positive_int(train["memory_limit_mb"], "train.memory_limit_mb", minimum=256)
    if not str(cfg["tracking"].get("uri") or ""):
        raise ConfigError("tracking.uri: empty; give an MLflow tracking URI")


def visible_gpus() -> list[str]:
    """GPUs this machine shows, as nvidia-smi names them (no TensorFlow import: it costs 5 s)."""
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


def expand_devices(cfg: dict[str, Any], gpus: list[str] | None = None) -> list[str]:
    """sweep.devices with auto replaced by cpu plus every visible GPU; absent GPUs rejected."""
    gpus = visible_gpus() if gpus is None else gpus
    devices: list[str] = []
    for device in cfg["sweep"]["devices"]:
        names = ["cpu"] + [f"gpu{i}" for i in range(len(gpus))] if device == "auto" else [device]
        for name in names:
            if name not in devices:
                devices.append(name)
    if cfg["device"]["check_present"]:
        for name in devices:
            if name.startswith("gpu") and int(name[3:]) >= len(gpus):
                seen = ", ".join(f"gpu{i} ({n})" for i, n in enumerate(gpus)) or "none"
                raise ConfigError(
                    f"sweep.devices: {name} was asked for but is not visible here "
                    f"(GPUs seen: {seen}); "
                    "set device.check_present=false if jobs run on other nodes"
                )
    return devices


def grid(cfg: dict[str, Any], devices: list[str]) -> list[Cell]:
    return [
        Cell(variant, device, policy, batch_size)
        for variant in cfg["variant"]
        for device in devices
        for policy in cfg["policy"]
        for batch_size in cfg["sweep"]["batch_sizes"]
    ]


def run_config(cfg: dict[str, Any], cell: Cell) -> dict[str, Any]:
    """What one run needs: the config with the grid axes resolved to this cell's values.

    Other cells' values stay out, so adding a batch size does not invalidate finished runs.
    """
    kind = "cpu" if cell.device == "cpu" else "gpu"
    run = {k: v for k, v in cfg.items() if k not in ("sweep", "policy", "variant", "device")}
    run["cell"] = asdict(cell)
    run["policy"] = {"name": cell.policy, **cfg["policy"][cell.policy]}
    run["variant"] = {"name": cell.variant, **cfg["variant"][cell.variant]}
    run["device"] = {"name": cell.device, "kind": kind, **cfg["device"][kind]}
    return run


def dataset_key(dataset: dict[str, Any]) -> str:
    """Names the prepared cache: dataset and image size (the builder version is inside)."""
    return f"{dataset['name']}-{dataset['image_size']}px"


def archive_name(dataset: dict[str, Any]) -> str:
    url = str(dataset["url"])
    name = url.rstrip("/").rsplit("/", 1)[-1]
    return name if name.endswith((".tgz", ".tar.gz", ".tar")) else f"{dataset['name']}.tgz"
