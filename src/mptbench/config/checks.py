"""Rules across fields that a schema cannot say; everything per-field is in schema.yaml."""

from __future__ import annotations

from typing import Any

from mptbench.config.errors import ConfigError
from mptbench.policies import Policy


def check(cfg: dict[str, Any]) -> None:
    _model(cfg["model"])
    _dataset(cfg["dataset"])
    _train(cfg["train"])
    for name, facts in cfg["policy"].items():
        problem = Policy.of(name, facts).problem()
        if problem:
            raise ConfigError(f"policy.{name}: {problem}")


def _model(model: dict[str, Any]) -> None:
    if not model["conv_layers"] and not model["dense_layers"]:
        raise ConfigError(f"model {model['name']!r}: no conv_layers and no dense_layers")


def _dataset(dataset: dict[str, Any]) -> None:
    if dataset["sha256"] is None and not dataset["sha256_url"]:
        raise ConfigError("dataset.sha256: no checksum pinned and no sha256_url to fetch one from")


def _train(train: dict[str, Any]) -> None:
    if train["warmup_epochs"] >= train["epochs"]:
        raise ConfigError(
            f"train.warmup_epochs: {train['warmup_epochs']} leaves none of the "
            f"{train['epochs']} epochs to time"
        )
    small, large = train["probe_batch_sizes"]
    if small >= large:
        raise ConfigError(
            f"train.probe_batch_sizes: {train['probe_batch_sizes']} needs two batch sizes, "
            "the smaller first"
        )
    if train["timed_steps"] is not None and train["timed_steps"] < train["min_timed_steps"]:
        raise ConfigError(
            f"train.timed_steps: {train['timed_steps']} is below train.min_timed_steps "
            f"({train['min_timed_steps']})"
        )
