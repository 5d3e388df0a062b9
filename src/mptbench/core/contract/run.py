"""What one cell's run is given: each config group (conf/model, backend, variant, device,
dataset, train) as a dataclass, and the `Run` that holds them with its axes resolved to the
cell's values. A run record keeps `encode(run)` as its `config`: what the cell was run with,
in full."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mptbench.core.cells import Cell
from mptbench.core.policies import Policy


@dataclass(frozen=True)
class ConvLayer:
    filters: int
    kernel_size: int
    strides: int


@dataclass(frozen=True)
class ModelConfig:
    """conf/model/<name>.yaml: how to build the network (by kind) and train it."""

    name: str
    kind: str
    optimizer: str
    learning_rate: float
    loss: str
    output_activation: str | None = None
    conv_layers: tuple[ConvLayer, ...] = ()
    dense_layers: tuple[int, ...] = ()
    application: str | None = None
    builder: str | None = None

    @property
    def one_hot_labels(self) -> bool:
        """categorical_crossentropy wants one-hot labels; the sparse losses class indices."""
        return self.loss in ("categorical_crossentropy", "binary_crossentropy")


@dataclass(frozen=True)
class BackendConfig:
    """conf/backend/<name>.yaml."""

    name: str
    description: str = ""
    install: str = ""
    gpu_install: str = ""


@dataclass(frozen=True)
class VariantConfig:
    """conf/variant/<name>.yaml; `installed` is what its verified environment recorded."""

    name: str
    backends: tuple[str, ...]
    jit_compile: Any = "auto"  # True, False or "auto" (Keras' own)
    env: dict[str, Any] = field(default_factory=dict)
    wheel: str | None = None
    build: dict[str, Any] | None = None
    description: str = ""
    installed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceConfig:
    """The device a cell runs on, with its kind's block of conf/device."""

    name: str
    kind: str
    mem_mb: int
    runtime_min: int
    block_steps: int
    calibrate: dict[str, Any]
    threads: int | None = None
    tf32: bool | None = None


@dataclass(frozen=True)
class InputConfig:
    shuffle_buffer: Any  # "seed" (the 2020 rule: train examples // batch size) or a count
    cache: str
    deterministic: bool


@dataclass(frozen=True)
class DatasetConfig:
    """conf/dataset/<name>.yaml."""

    name: str
    builder: str
    image_size: int
    input: InputConfig
    url: str | None = None
    path: str | None = None
    sha256: str | None = None
    sha256_url: str | None = None
    size_bytes: int | None = None
    num_classes: int | None = None
    train_examples: int | None = None
    fixture: dict[str, int] | None = None


@dataclass(frozen=True)
class TrainConfig:
    """conf/train: how a cell is timed (the schema says what each value may be)."""

    epochs: int
    steps_per_epoch: int | None
    warmup_steps: int
    warmup_seconds: float | None
    warmup_epochs: int
    timed_steps: int | None
    min_timed_steps: int
    precision: float | None
    time_budget_s: float | None
    repeats: int
    max_repeats: int
    round_samples: int
    round_seconds: float | None
    max_step_seconds: float | None
    probe_batch_sizes: tuple[int, ...]
    validate: bool
    synthetic_twin: bool | str  # true, false or "always"
    synthetic_max_steps: int
    profile_steps: int
    profile_seconds: float | None
    profile_repeats: int
    memory_limit_mb: int | None
    verbose: int


@dataclass(frozen=True)
class Run:
    """Everything one cell's run is given: the configuration with its axes resolved to the
    cell's values (other cells' values stay out, so adding a batch size invalidates no run)."""

    experiment: str
    seed: int
    cell: Cell
    model: ModelConfig
    backend: BackendConfig
    policy: Policy
    variant: VariantConfig
    device: DeviceConfig
    dataset: DatasetConfig
    train: TrainConfig

    @property
    def block_steps(self) -> int:
        """Steps per compiled call, and so per read-back of the loss (device.<kind>.block_steps)."""
        return max(1, int(self.device.block_steps or 1))

    def installed(self, facts: dict[str, Any]) -> Run:
        """This run in the variant environment whose facts are given."""
        return replace(self, variant=replace(self.variant, installed=dict(facts)))
