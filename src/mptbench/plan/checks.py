"""Rules across fields that a schema cannot say; everything per-field is in the settings'
declarations (schema.py builds the check from them)."""

from __future__ import annotations

import importlib.util
from typing import Any

from mptbench.core.frameworks import framework
from mptbench.core.policies import Policy
from mptbench.data.builder import DatasetError
from mptbench.data.image_folder import class_names
from mptbench.plan.errors import ConfigError
from mptbench.plan.grid import beyond_machine, model_backends, pairs

# keras.applications' own lower bound on image height and width (the networks built here
# take their input shape without pretrained weights).
APPLICATION_MIN_SIZE = 32


def check(cfg: dict[str, Any]) -> None:
    for name, model in cfg["model"].items():
        _model(name, model)
        _fits(name, model, cfg["dataset"]["image_size"])
    _dataset(cfg["dataset"])
    _backends(cfg)
    _train(cfg["train"])
    _policies(cfg["policy"])
    _sweep(cfg["sweep"])


def _sweep(sweep: dict[str, Any]) -> None:
    cap, smallest = sweep["max_batch"], min(sweep["batch_sizes"])
    if sweep["fit_search"] and cap is not None and cap < smallest:
        raise ConfigError(
            f"sweep.max_batch: {cap} is below the grid's smallest batch size ({smallest}); "
            "the search for the largest batch that fits would try nothing"
        )


def _policies(policies: dict[str, Any]) -> None:
    for name, facts in policies.items():
        problem = Policy.of(name, facts).problem()
        if problem:
            raise ConfigError(f"policy.{name}: {problem}")
    baselines = [name for name, facts in policies.items() if facts.get("baseline")]
    if len(baselines) > 1:
        raise ConfigError(
            f"policy: {', '.join(baselines)} each say baseline: true; the others are compared "
            "with one baseline, so set it on one policy only"
        )


def _model(name: str, model: dict[str, Any]) -> None:
    """What each kind of model needs (engine/networks.py builds them)."""
    kind = model["kind"]
    if kind != "python" and not model.get("output_activation"):
        raise ConfigError(f"model.{name}.output_activation: missing (softmax or sigmoid)")
    if kind == "layers" and not (model.get("conv_layers") or model.get("dense_layers")):
        raise ConfigError(f"model.{name}: no conv_layers and no dense_layers")
    if kind == "application" and not model.get("application"):
        raise ConfigError(f"model.{name}: kind application needs model.{name}.application")
    if kind == "python" and not model.get("builder"):
        raise ConfigError(
            f"model.{name}.builder: not set; name your function, e.g. "
            f"model.{name}.builder=mymodels:small_cnn"
        )


def _fits(name: str, model: dict[str, Any], image_size: int) -> None:
    """An image size the model cannot take stops the run here, not in its first job."""
    if model["kind"] == "application" and image_size < APPLICATION_MIN_SIZE:
        raise ConfigError(
            f"dataset.image_size={image_size}: model {name} "
            f"(keras.applications.{model['application']}) takes images of at least "
            f"{APPLICATION_MIN_SIZE} px"
        )


def _backends(cfg: dict[str, Any]) -> None:
    """Each backend asked for is installed, pairs with at least one variant, and each model
    runs on one of them."""
    for name in cfg["backend"]:
        found = framework(name)
        if importlib.util.find_spec(found.module) is None:
            gpus = f" (for GPUs: {found.gpu_install})" if found.gpu_install != found.install else ""
            raise ConfigError(f"backend {name}: not installed here; {found.install}{gpus}")
    if not pairs(cfg):
        above = beyond_machine(cfg)
        if above and set(above) == set(cfg["variant"]):
            raise ConfigError("; ".join(above.values()))
        raise ConfigError(
            f"no cells: variant(s) {', '.join(cfg['variant'])} run on none of the backends "
            f"{', '.join(cfg['backend'])}"
        )
    for name in cfg["model"]:
        if not {b for b, _ in pairs(cfg)} & set(model_backends(cfg, name)):
            raise ConfigError(
                f"model.{name}.backends: {', '.join(cfg['model'][name]['backends'])}, none of "
                f"the backends asked for with a variant ({', '.join(cfg['backend'])}): no cells"
            )


def _dataset(dataset: dict[str, Any]) -> None:
    if dataset["builder"] == "synthetic":
        if not dataset["num_classes"] or not dataset.get("train_examples"):
            raise ConfigError("dataset: synthetic data needs num_classes and train_examples")
        return
    if dataset["builder"] == "image_folder":
        _image_folder(dataset)
        return
    if not dataset["url"]:
        raise ConfigError("dataset.url: empty; give an http(s) URL or a local path")
    if dataset["sha256"] is None and not dataset["sha256_url"]:
        raise ConfigError("dataset.sha256: no checksum pinned and no sha256_url to fetch one from")


def _image_folder(dataset: dict[str, Any]) -> None:
    """The folder exists and has classes with images (its images are read at prepare)."""
    if not dataset.get("path"):
        raise ConfigError("dataset.path: not set; give the folder of class folders of images")
    try:
        class_names(dataset["path"])
    except DatasetError as exc:
        raise ConfigError(str(exc)) from None


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
    if train["max_repeats"] < train["repeats"]:
        raise ConfigError(
            f"train.max_repeats: {train['max_repeats']} is below train.repeats ({train['repeats']})"
        )
    if train["timed_steps"] is not None and train["timed_steps"] < train["min_timed_steps"]:
        raise ConfigError(
            f"train.timed_steps: {train['timed_steps']} is below train.min_timed_steps "
            f"({train['min_timed_steps']})"
        )
