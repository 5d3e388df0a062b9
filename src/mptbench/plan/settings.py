"""The settings no run is given (the sweep, tracking, the report, the top level) and those a run
is given without (a policy's, a model's backends, train.parity_*, device.<kind>.fits_search_mb),
declared as the run's own are (core/contract/run.py's `setting`): `Config` is the whole
configuration's shape."""

from __future__ import annotations

from dataclasses import dataclass

from mptbench.core.cells import BACKENDS
from mptbench.core.contract import BackendConfig, DatasetConfig, ModelConfig, VariantConfig
from mptbench.core.contract.run import COUNT, NAME, POSITIVE, DeviceConfig, TrainConfig, setting
from mptbench.core.policies import DTYPES

# A machine's or a target's name: part of every cell's path.
MACHINE = "^[a-z0-9][a-z0-9._-]*$"
ENV_NAME = {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}


@dataclass(frozen=True)
class PolicySettings:
    """conf/policy/<name>.yaml: core/policies.py's Policy, whose fields these are."""

    compute_dtype: str = setting("the dtype layers compute in", allowed=DTYPES)
    variable_dtype: str = setting(
        "the dtype of the weights (float32 in mixed policies)", allowed=DTYPES
    )
    loss_scaling: str = setting(
        "dynamic: the loss scaled against float16 underflow", allowed=("dynamic", "none")
    )
    baseline: bool = setting("the policy every other is compared with (one only)", absent=False)
    initial_loss_scale: float | None = setting(
        "dynamic loss scaling starts here; null: Keras' own (2**15)", absent=None, **POSITIVE
    )
    float32_layers: tuple[str, ...] = setting(
        "Keras layer classes kept in float32 (<policy>_keep_<Class> makes one)",
        absent=(), items={"pattern": "^[A-Z][A-Za-z0-9]*$"},
    )


@dataclass(frozen=True, kw_only=True)
class ModelSettings(ModelConfig):
    """conf/model/<name>.yaml: how to build and train it (what its runs are given), and which
    backends the grid runs it on, which neither its runs nor its description read."""

    backends: tuple[str, ...] | None = setting(
        "the backends its cells run on; absent: every backend asked for",
        absent=None,
        minItems=1,
        items={"allowed": BACKENDS},
        message=f"must list backends among {', '.join(BACKENDS)}",
    )


@dataclass(frozen=True, kw_only=True)
class TrainSettings(TrainConfig):
    """conf/train: a run's timing settings, and the parity rule's, which no timing run reads."""

    parity_steps: int = setting("does it still learn: steps per policy; 0: not run", minimum=0)
    parity_budget_s: float | None = setting(
        "a run longer trains fewer steps (20 at least, else it is left out)", **POSITIVE
    )


@dataclass(frozen=True, kw_only=True)
class DeviceSettings(DeviceConfig):
    """A kind's block of conf/device: what its runs are given, and the fits rule's limit."""

    fits_search_mb: int | None = setting(
        "the fits search's memory: what fits in this much (MB); null: the device's own",
        minimum=64,
        message="is a memory limit in MB (64 at least), or null for the device's own memory",
    )


@dataclass(frozen=True)
class Devices:
    """conf/device/default.yaml."""

    cpu: DeviceSettings = setting("the CPU's settings", kind="cpu")
    gpu: DeviceSettings = setting("every GPU's settings", kind="gpu")
    check_present: bool = setting("fail before any job when a listed GPU is not visible here")


@dataclass(frozen=True)
class Sweep:
    """conf/sweep: the grid's batch sizes and devices, what fits, whose hardware."""

    batch_sizes: tuple[int, ...] = setting(
        "the grid's batch sizes",
        items=COUNT,
        minItems=1,
        uniqueItems=True,
        message={
            "minItems": "empty; give at least one batch size",
            "uniqueItems": "lists a batch size twice",
        },
    )
    devices: tuple[str, ...] = setting(
        "auto (cpu and every GPU present), cpu or gpuN",
        minItems=1,
        message="empty; give auto, cpu or gpuN",
        items={
            "pattern": "^(auto|cpu|gpu[0-9]+)$",
            "message": "is not a device (allowed: auto, cpu, gpu0, gpu1, ...)",
        },
    )
    fit_search: bool = setting("search for the largest batch that fits; false: none")
    max_batch: int | None = setting(
        "the search doubles up to this; null: the grid's largest", **COUNT
    )
    fit_steps: int = setting("training steps per try of the search", **COUNT)
    machine: str = setting(
        "auto (this machine's hardware id) or a name of yours",
        pattern=MACHINE,
        message="is auto (this machine's hardware id) or a name of lower-case letters, digits, "
        "'.', '_', '-'",
    )
    targets: dict[str, dict[str, str | int]] | None = setting(
        "a cluster's kinds of node, each with the Snakemake resources that reach it",
        minProperties=1,
        message="null, or named hardware targets, each with the resources that reach it",
        keys={
            "pattern": MACHINE,
            "message": "is not a target name (lower-case letters, digits, '.', '_', '-')",
        },
        values={
            "message": "gives Snakemake resources (e.g. constraint: v100), each a string or an "
            "integer"
        },
    )


@dataclass(frozen=True)
class Tracking:
    """conf/tracking: where MLflow keeps the runs."""

    uri: str = setting(
        "the MLflow tracking URI", minLength=1, message="empty; give an MLflow tracking URI"
    )
    artifact_root: str | None = setting("where artifacts go; null: the server decides")
    system_metrics: bool = setting("MLflow's system/* metrics (CPU, memory; GPU with pynvml)")
    env: tuple[str, ...] = setting("environment variables passed on to every job", items=ENV_NAME)
    env_if_set: tuple[str, ...] = setting(
        "passed on where set (credentials), never written to the config", items=ENV_NAME
    )
    ui: str | None = setting("where its UI serves the store: the report links each run there")


@dataclass(frozen=True)
class Report:
    include: tuple[str, ...] = setting(
        "other machines' cells: results/<experiment> folders or mlflow:URI[#EXPERIMENT]",
        items={"minLength": 1},
        message="lists results/<experiment> folders or mlflow:URI[#EXPERIMENT] stores",
    )


@dataclass(frozen=True)
class Config:
    """conf/config.yaml, composed: the whole configuration."""

    name: str = setting("the experiment's name: results/<name>/, the MLflow experiment", **NAME)
    seed: int = setting("weights, shuffling and synthetic data", minimum=0)
    dataset: DatasetConfig = setting("the data every cell trains on")
    model: dict[str, ModelSettings] = setting(
        "the models, a grid axis",
        minProperties=1,
        message="no model selected (e.g. model=[seed_convnet,resnet50])",
    )
    backend: dict[str, BackendConfig] = setting(
        "the Keras backends, a grid axis",
        minProperties=1,
        message="no backend selected (e.g. backend=[tensorflow,jax])",
        keys={"allowed": BACKENDS},
    )
    policy: dict[str, PolicySettings] = setting(
        "the dtype policies, a grid axis",
        minProperties=1,
        message="no policy selected (e.g. policy=[float32,mixed_float16])",
    )
    variant: dict[str, VariantConfig] = setting(
        "the TensorFlow variants, a grid axis",
        minProperties=1,
        message="no variant selected (e.g. variant=[pypi])",
    )
    device: Devices = setting("per device kind: resources, calibration, limits")
    sweep: Sweep = setting("the grid's batch sizes and devices, what fits, whose hardware")
    train: TrainSettings = setting("how a cell is timed")
    tracking: Tracking = setting("where MLflow keeps the runs")
    report: Report = setting("what the report shows beside this run's own cells")
