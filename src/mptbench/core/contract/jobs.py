"""The job contract: what one cell's run is given, what each kind of engine job is given and
gives back, and the one JSON codec for all of them (`encode`, `decode`).

A Snakemake job runs in the workflow's Python and imports no framework. It hands the engine (the
variant's Python: TensorFlow, JAX or PyTorch) an engine job in a file, and reads back the
result the engine wrote where the job said. Every kind of engine job (a repeat of a cell, its
probe, a calibration, a model's description, an environment check) goes through that one
launch (jobs/launcher.py) and one entry point (`python -m mptbench.engine JOB`).

A run record keeps `encode(run)` as its `config`: what the cell was run with, in full.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, ClassVar

from mptbench.core.cells import Cell
from mptbench.core.policies import Policy

ENGINE = "mptbench.engine"  # the module every engine job runs: python -m mptbench.engine JOB


class ContractError(ValueError):
    """A job or result file that does not fit the contract (another version wrote it)."""


# ---- what one cell's run is given ---------------------------------------------------------


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


# ---- engine jobs and what they give back --------------------------------------------------


@dataclass(frozen=True)
class RepeatJob:
    """One repeat of a comparison group, in one process: the cells of one model, backend,
    variant, device and batch size (one Run per policy: its arms) trained and timed taking
    turns in rounds; each ok arm then profiled where it has a profile_dir. The engine writes
    the arm whose turn it is to `progress` (so a death is blamed on that arm)."""

    KIND: ClassVar[str] = "repeat"
    out: str
    runs: tuple[Run, ...]
    prepared: str  # the prepare rule's JSON
    repeat: int = 0
    profile_dirs: tuple[str | None, ...] = ()
    progress: str | None = None
    twins: bool = True  # the input's cost and the synthetic twins (first-stage repeats only)


@dataclass(frozen=True)
class ProbeJob:
    """Time a few steps of the cell's model at train.probe_batch_sizes, on random data."""

    KIND: ClassVar[str] = "probe"
    out: str
    run: Run
    prepared: str


@dataclass(frozen=True)
class CalibrateJob:
    """Measure the device's matmul and convolution peaks per dtype with the backend's kernels."""

    KIND: ClassVar[str] = "calibrate"
    out: str
    device: str
    backend: str
    variant: str
    settings: dict[str, Any]
    jit_compile: Any = "auto"
    tf32: bool = True
    # The grid's models' own Conv2D layers (ModelInfo.conv_layers, each with its model named),
    # timed at batches up to the grid's largest.
    model_convs: list[dict[str, Any]] = field(default_factory=list)
    model_batch: int = 0


@dataclass(frozen=True)
class DescribeJob:
    """Build a model once: that it builds, its size, its FLOPs per example."""

    KIND: ClassVar[str] = "describe"
    out: str
    model: ModelConfig
    image_size: int
    num_classes: int


@dataclass(frozen=True)
class EnvironmentJob:
    """What this Python's TensorFlow says of itself when it starts."""

    KIND: ClassVar[str] = "environment"
    out: str


@dataclass(frozen=True)
class FitJob:
    """A few real training steps of one cell at its batch size on random in-memory data, in a
    fresh process: does it fit, and its peak memory (jobs/fits.py searches the largest batch
    that fits). On a GPU the framework's own memory limit is set to `memory_limit_mb` before it
    starts; on a CPU the launcher enforces it on the trainer's own cgroup."""

    KIND: ClassVar[str] = "fit"
    out: str
    run: Run
    prepared: str
    steps: int
    memory_limit_mb: int | None = None


@dataclass(frozen=True)
class ParityJob:
    """Does it still learn: each run trains the same steps on the cell's data from its seed (the
    same data order for the same seed), one after the other in this process, and records each
    step's loss and, under loss scaling, the scale and whether the step was skipped."""

    KIND: ClassVar[str] = "parity"
    out: str
    runs: tuple[Run, ...]
    seeds: tuple[int, ...]  # one per run: float32's second seed gives its seed-to-seed spread
    prepared: str
    steps: int


EngineJob = RepeatJob | ProbeJob | CalibrateJob | DescribeJob | EnvironmentJob | FitJob | ParityJob
JOB_KINDS: dict[str, type] = {
    cls.KIND: cls
    for cls in (
        RepeatJob,
        ProbeJob,
        CalibrateJob,
        DescribeJob,
        EnvironmentJob,
        FitJob,
        ParityJob,
    )  # fmt: skip
}


@dataclass
class Profiled:
    """Where a repeat's profiled steps went (the raw profile) and how long they took."""

    dir: str
    steps: int
    step_s: list[float]
    scopes: dict[str, str | None]


@dataclass
class ArmResult:
    """What one repeat measured of one policy (an arm of its comparison group)."""

    repeat: int
    policy: str
    fingerprint: dict[str, Any]
    outcome: str | None = None
    reason: str | None = None
    step_s: list[float] = field(default_factory=list)  # one per step, or per block: its mean
    rounds: list[int] = field(default_factory=list)  # the round of each timed sample
    timed_wall_s: float | None = None
    stopped_by: str | None = None
    warmup_s: list[float] = field(default_factory=list)
    steps_per_sample: int = 1
    epochs: list[dict[str, Any]] = field(default_factory=list)
    synthetic_step_s: list[float] | None = None
    synthetic_rounds: list[int] | None = None
    input_s: float | None = None  # the input pipeline alone: wall seconds per batch
    input_cpu_s: float | None = None  # ... and the process's CPU seconds per batch
    twin_note: str | None = None  # why no twin ran
    profile: Profiled | None = None
    profile_note: str | None = None
    process: str | None = None  # the process it shared with the group's other arms
    cpu_percent: float | None = None  # the supervisor's measurement of the trainer


@dataclass
class RepeatResult:
    """One process of a comparison group: every arm it timed."""

    process: str
    arms: list[ArmResult]


@dataclass
class ProbePoint:
    batch_size: int
    first_step_s: float
    steps_s: list[float]
    step_s: float  # their median


@dataclass
class ProbeResult:
    backend: str
    variant: str
    device: str
    policy: str
    image_size: int
    points: list[ProbePoint]
    fingerprint: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)  # core/hardware.py identity()


@dataclass
class Calibration:
    """The calibrate rule's output: peaks per kind and dtype (each with every size tried)."""

    device: str
    variant: str
    backend: str
    fingerprint: dict[str, Any]
    settings: dict[str, Any]
    jit_compile: Any
    matmul: dict[str, dict[str, Any]]
    conv: dict[str, dict[str, Any]]
    matmul_vs_float32: dict[str, float]
    conv_vs_float32: dict[str, float]
    model_batch: int = 0  # the largest batch the models' own convolutions were timed at
    hardware: dict[str, Any] = field(default_factory=dict)  # core/hardware.py identity()
    machine: str = "local"  # the machine axis' value it was measured for


@dataclass
class ModelInfo:
    """The model_info rule's output: what every cell of the model reads its FLOPs from."""

    model: str
    kind: str
    input_shape: list[int]
    num_classes: int
    parameters: int
    training_flops_per_example: dict[str, int]
    forward_flops_per_example: dict[str, int]
    flops_counted_by: str
    builder: str | None = None
    builder_file: str | None = None
    builder_sha256: str | None = None
    # Its distinct Conv2D layers: name, input [h, w, channels], filters, kernel, stride.
    conv_layers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FitResult:
    """One try of a batch size: its outcome (ok, oom, ...) and, where it ran, its peak memory
    and where that figure comes from (the framework's device peak on a GPU; on a CPU the
    trainer's own cgroup's peak, else its peak resident set, ru_maxrss)."""

    batch_size: int
    outcome: str
    reason: str | None = None
    peak_mb: float | None = None
    peak_source: str | None = None
    step_s: list[float] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParityRun:
    """One run of a parity job: its policy and seed, each step's loss; under loss scaling each
    step's scale after it and the steps whose update was skipped (non-finite gradients)."""

    policy: str
    seed: int
    losses: list[float | None]  # None where the loss was not finite
    outcome: str = "ok"
    reason: str | None = None
    loss_scale: list[float] = field(default_factory=list)
    skipped_steps: list[int] = field(default_factory=list)
    initial_loss_scale: float | None = None
    val_accuracy: float | None = None  # after the steps, where the run validates


@dataclass
class ParityResult:
    batch_size: int
    runs: list[ParityRun]
    fingerprint: dict[str, Any] = field(default_factory=dict)


@dataclass
class EnvironmentFacts:
    tensorflow: str
    keras: str
    tf_unused_cpu_instructions: list[str]
    onednn: str


# ---- the codec ----------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A dataclass (nested ones, lists and dicts of them) as JSON-ready data; an engine job
    with its `kind`."""
    if is_dataclass(value) and not isinstance(value, type):
        data = {f.name: encode(getattr(value, f.name)) for f in fields(value)}
        kind = getattr(type(value), "KIND", None)
        return {"kind": kind, **data} if kind else data
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type, data: Any) -> Any:
    """`cls` from what `encode` made of one; a field it does not know, or a required one it
    lacks, is a ContractError naming it."""
    if not isinstance(data, dict):
        raise ContractError(f"{cls.__name__}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if f.init}
    unknown = sorted(set(data) - set(known) - {"kind"})
    if unknown:
        raise ContractError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    missing = [
        name
        for name, f in known.items()
        if name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ContractError(f"{cls.__name__}: missing field(s) {', '.join(missing)}")
    return cls(**{name: _value(hints[name], data[name]) for name in known if name in data})


def _value(hint: Any, value: Any) -> Any:
    if value is None or hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _value(options[0], value) if len(options) == 1 else value
    if is_dataclass(hint):
        return decode(hint, value)
    if origin in (list, tuple) and args:
        items = [_value(args[0], v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict and args:
        return {k: _value(args[1], v) for k, v in value.items()}
    return value


def decode_job(data: Any) -> EngineJob:
    """The engine job a job file holds, by its `kind`."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in JOB_KINDS:
        raise ContractError(f"unknown engine job kind {kind!r} (known: {', '.join(JOB_KINDS)})")
    return decode(JOB_KINDS[kind], data)
