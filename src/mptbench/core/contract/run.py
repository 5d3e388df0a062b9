"""What one cell's run is given: each config group (conf/model, backend, variant, device,
dataset, train) as a dataclass, and the `Run` that holds them with its axes resolved to the
cell's values. A run record keeps `encode(run)` as its `config`: what the cell was run with,
in full.

A field made by `setting()` is that setting's one declaration: its annotation is the type,
its rules the allowed values, its doc one line on what it does. plan/schema.py builds the
configuration's check from these fields; conf/'s yaml holds every default. A field made
otherwise (a name, a kind) is filled in by the plan and is never written in a yaml.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, replace
from typing import Any

from mptbench.core import isa
from mptbench.core.cells import BACKENDS, Cell
from mptbench.core.policies import Policy

# Rules many settings share (JSON Schema's keywords; `message` words the error).
COUNT = {"minimum": 1}
POSITIVE = {"exclusiveMinimum": 0}
NAME = {"pattern": "^[A-Za-z0-9_.-]+$", "message": "must be letters, digits, '_', '.', '-'"}


def setting(
    doc: str,
    *,
    absent: Any = MISSING,
    kinds: tuple[str, ...] = (),
    kind: str | None = None,
    shape: type | None = None,
    **rules: Any,
) -> Any:
    """A setting's declaration, as a dataclass field. `rules`: what its values may be beyond
    the annotation's type, in JSON Schema's keywords (minimum, pattern, minItems, ...), and
    `allowed` (its values), `message` (an error's wording), `items`, `values` and `keys` (the
    rules of a list's items, a mapping's values and its keys). No default: the yaml has it.

    `absent`: in a group of options (a model, a dataset, ...), what an option that leaves the
    key out has (None or empty). `kinds`: the device kinds it is for; None on the others.
    `kind`: the device kind a block of settings is for. `shape`: the dataclass declaring a
    mapping the run is given as a dict."""
    metadata = {"doc": doc, "kinds": kinds, "kind": kind, "shape": shape, "rules": rules}
    if kinds:
        absent = None
    if absent is MISSING:
        return field(metadata=metadata)
    if isinstance(absent, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=absent, metadata=metadata)


@dataclass(frozen=True)
class ConvLayer:
    filters: int = setting("output channels (multiples of 8 suit tensor cores)", **COUNT)
    kernel_size: int = setting("the square kernel's side, in pixels", **COUNT)
    strides: int = setting("the stride, both ways", **COUNT)


@dataclass(frozen=True)
class ModelConfig:
    """conf/model/<name>.yaml: how to build the network (by kind) and train it."""

    name: str
    kind: str = setting(
        "layers (listed here), application (keras.applications) or python",
        allowed=("layers", "application", "python"),
    )
    optimizer: str = setting("a Keras optimizer's name (adam, sgd, ...)", minLength=1)
    learning_rate: float = setting("the optimizer's learning rate", **POSITIVE)
    loss: str = setting(
        "the Keras loss; the categorical ones train on one-hot labels",
        allowed=(
            "sparse_categorical_crossentropy",
            "categorical_crossentropy",
            "binary_crossentropy",
        ),
    )
    output_activation: str | None = setting(
        "the last layer's activation, in float32 (kinds layers and application)",
        absent=None,
        allowed=("softmax", "sigmoid"),
    )
    conv_layers: tuple[ConvLayer, ...] = setting("kind layers: its convolutions", absent=())
    dense_layers: tuple[int, ...] = setting(
        "kind layers: its hidden Dense layers' units", absent=(), items=COUNT
    )
    application: str | None = setting(
        "kind application: the keras.applications class",
        absent=None,
        pattern="^[A-Z][A-Za-z0-9]+$",
        message="is not a keras.applications name (e.g. ResNet50, MobileNetV2)",
    )
    builder: str | None = setting(
        "kind python: your function that builds it",
        absent=None,
        pattern="^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
        message="is not package.module:function",
    )

    @property
    def one_hot_labels(self) -> bool:
        """categorical_crossentropy wants one-hot labels; the sparse losses class indices."""
        return self.loss in ("categorical_crossentropy", "binary_crossentropy")


@dataclass(frozen=True)
class BackendConfig:
    """conf/backend/<name>.yaml."""

    name: str
    description: str = setting("what it is, in a few words (the report's backends section)")


@dataclass(frozen=True)
class Build:
    """variant.<name>.build: how to build a TensorFlow wheel from source (its rule's own)."""

    repository: str = setting("the git repository to clone")
    tag: str = setting("the tag to build")
    bazel_version: str = setting("the Bazel that TensorFlow's build of that tag asks for")
    wheel_name: str = setting("the wheel's project name", pattern="^[A-Za-z0-9_]+$")
    copts: tuple[str, ...] = setting(
        "compiler flags, each passed as --copt", items={"pattern": "^-[A-Za-z0-9_=.,+-]+$"}
    )
    threads: int = setting("cores the build takes", **COUNT)
    mem_mb: int = setting("memory the build takes, in MB", **COUNT)
    runtime_min: int = setting("the build's time limit, in minutes", **COUNT)
    expect_used: tuple[str, ...] = setting(
        "instructions the built TensorFlow must no longer list as unused"
    )


@dataclass(frozen=True)
class VariantConfig:
    """conf/variant/<name>.yaml; `installed` is what its verified environment recorded."""

    name: str
    backends: tuple[str, ...] | None = setting(
        "the backends it runs on (null: every one)",
        minItems=1,
        items={"allowed": BACKENDS},
        message=f"must be null or list backends among {', '.join(BACKENDS)}",
    )
    jit_compile: bool | str = setting(
        "XLA for the train step: true, false or Keras' own auto", allowed=("auto", True, False)
    )
    env: dict[str, str | float | bool] = setting("environment variables set for its train jobs")
    wheel: str | None = setting("a TensorFlow wheel to install into its own environment")
    build: dict[str, Any] | None = setting("how to build that wheel from source", shape=Build)
    description: str = setting("what it is, in a few words (the report's variants section)")
    isa: str | None = setting(
        "the instruction set its kernels are capped at (core/isa.py); null: what the CPU has",
        absent=None,
        allowed=(None, *isa.NAMES),
        message=f"must be null or one of {', '.join(isa.NAMES)}",
    )
    installed: dict[str, Any] = field(default_factory=dict)

    def environment(self, backend: str) -> dict[str, str]:
        """What its engine processes on `backend` are started with: its env, and its cap's."""
        env = {str(k): str(v) for k, v in self.env.items()}
        for key, value in isa.environment(self.isa, backend).items():
            env[key] = f"{env[key]} {value}" if key == "XLA_FLAGS" and key in env else value
        return env


@dataclass(frozen=True)
class MatmulSizes:
    start: int = setting("the first matmul's size (size x size)", **COUNT)
    max: int = setting("the largest size doubling reaches", **COUNT)


@dataclass(frozen=True)
class ConvSizes:
    batch: int = setting("the batch of every convolution timed", **COUNT)
    spatial: int = setting("its images' height and width", **COUNT)
    start_channels: int = setting("the first channels", **COUNT)
    max_channels: int = setting("the most channels doubling reaches", **COUNT)
    kernels: tuple[int, ...] = setting("the kernel sizes, a series each", minItems=1, items=COUNT)


@dataclass(frozen=True)
class Calibrate:
    """device.<kind>.calibrate: how the peak per dtype is measured (conf/device/default.yaml)."""

    matmul: MatmulSizes = setting("the matmul series")
    conv: ConvSizes = setting("the convolution training steps' series")
    min_seconds: float = setting("each size's timing, after a warm-up call", **POSITIVE)
    min_gain: float = setting("a size must beat the best by this much (0.03: 3%)", minimum=0)
    cap_s: float = setting("the time a dtype may take", **POSITIVE)


@dataclass(frozen=True)
class HostCheck:
    """device.<kind>.host_check: the host's own speed while a group is timed (engine/host.py)."""

    size: int = setting("the float32 matmul's size (size x size)", **COUNT)
    calls: int = setting("calls per sample; a sample is their median", **COUNT)
    seconds: float = setting("a sample between turns at most this often", **POSITIVE)


@dataclass(frozen=True)
class DeviceConfig:
    """The device a cell runs on, with its kind's block of conf/device."""

    name: str
    kind: str
    mem_mb: int = setting("memory a job on it asks Snakemake for, in MB", **COUNT)
    runtime_min: int = setting("a job's time limit on it, in minutes", **COUNT)
    block_steps: int = setting(
        "steps per compiled call: one read-back of the loss per block", **COUNT
    )
    calibrate: dict[str, Any] = setting("how its peak per dtype is measured", shape=Calibrate)
    host_check: dict[str, Any] = setting(
        "a fixed kernel timed between turns: the host's own speed", shape=HostCheck
    )
    threads: int | None = setting("cores a job on it takes", kinds=("gpu",), **COUNT)
    tf32: bool | None = setting(
        "float32 matmuls as TF32 (Ampere on); false: strict float32", kinds=("gpu",)
    )


@dataclass(frozen=True)
class InputConfig:
    shuffle_buffer: int | str = setting(
        "seed (train examples // batch size, the 2020 rule) or a count",
        anyOf=[{"const": "seed"}, {"type": "integer", **COUNT}],
        message='is neither "seed" nor an integer >= 1',
    )
    cache: str = setting("memory (images in RAM once read) or none", allowed=("memory", "none"))
    deterministic: bool = setting("tf.data keeps its order (reproducible) rather than its pace")


@dataclass(frozen=True, kw_only=True)
class DatasetConfig:
    """conf/dataset/<name>.yaml."""

    name: str = setting("the data's name, part of its cache's key", **NAME)
    builder: str = setting(
        "what reads it", allowed=("imagenette", "cifar10", "image_folder", "synthetic")
    )
    image_size: int = setting("images are resized to image_size x image_size", minimum=8)
    input: InputConfig = setting("how the input pipeline reads the cache")
    url: str | None = setting(
        "the archive: an http(s) URL or a local path",
        minLength=1,
        message="empty; give an http(s) URL or a local path",
    )
    path: str | None = setting("builder image_folder: the folder of class folders", absent=None)
    sha256: str | None = setting(
        "the archive's pinned checksum",
        pattern="^[0-9a-f]{64}$",
        message="is not 64 lowercase hex digits",
    )
    sha256_url: str | None = setting("a URL or path whose first word is the sha256")
    size_bytes: int | None = setting(
        "the archive's size, checked before the download", absent=None, **COUNT
    )
    num_classes: int | None = setting("classes; null: taken from the data", **COUNT)
    train_examples: int | None = setting(
        "builder synthetic: an epoch's examples", absent=None, **COUNT
    )
    fixture: dict[str, int] | None = setting(
        "a generated archive's sizes (make_fixture)", absent=None, values=COUNT
    )


@dataclass(frozen=True)
class TrainConfig:
    """conf/train: how a cell is timed (conf/train/benchmark.yaml says how each works)."""

    epochs: int = setting("epochs per repeat", **COUNT)
    steps_per_epoch: int | None = setting("steps per epoch; null: a whole epoch", **COUNT)
    epoch_seconds: float | None = setting(
        "a one-epoch timing run's epochs' length, each a new iterator; null: one for all",
        **POSITIVE,
    )
    warmup_steps: int = setting("untimed steps each repeat starts with", minimum=0)
    warmup_seconds: float | None = setting("or warm-up ends once it took this long", **POSITIVE)
    warmup_epochs: int = setting("or the first epochs are warm-up", minimum=0)
    timed_steps: int | None = setting("timed steps per policy and repeat, at most", **COUNT)
    min_timed_steps: int = setting("timed steps per policy and repeat, at least", **COUNT)
    precision: float | None = setting(
        "more processes while an interval is wider than +-this", exclusiveMinimum=0, maximum=1
    )
    time_budget_s: float | None = setting(
        "a cell's timed steps' seconds, over its repeats", **POSITIVE
    )
    repeats: int = setting("fresh processes per comparison group, at least", **COUNT)
    max_repeats: int = setting("fresh processes per comparison group, at most", **COUNT)
    round_samples: int = setting("timed steps a policy runs per turn", **COUNT)
    round_seconds: float | None = setting("or fewer, once its turn took this long", **POSITIVE)
    max_step_seconds: float | None = setting(
        "a cell predicted slower per step is over_budget", **POSITIVE
    )
    probe_batch_sizes: tuple[int, ...] = setting(
        "the probe's two batch sizes",
        items=COUNT,
        minItems=2,
        maxItems=2,
        message="needs two batch sizes, the smaller first (e.g. [4, 32])",
    )
    probe_seconds: float | None = setting(
        "under plan fast, a probe batch size's steps end once they took this long", **POSITIVE
    )
    validate: bool = setting("evaluate on the validation split after each epoch")
    validation_steps: int = setting(
        "validation batches timed per process, after a first that compiles; 0: none", minimum=0
    )
    validation_seconds: float | None = setting(
        "fewer, once they took this long (one at least)", **POSITIVE
    )
    synthetic_twin: bool | str = setting(
        "the same steps on in-memory tensors: true, false or always",
        allowed=(True, False, "always"),
        message="is true (where the input could set the pace), false or always",
    )
    synthetic_max_steps: int = setting("the twin's timed steps, at most", **COUNT)
    profile_steps: int = setting("steps run under the profiler, at most; 0: none", minimum=0)
    profile_seconds: float | None = setting(
        "fewer, where that many would take longer", **POSITIVE
    )
    profile_repeats: int = setting("the processes that profile, the first ones", **COUNT)
    plan: str = setting(
        "fast: skip what no verdict reads (conf/train/benchmark.yaml says what); full: all",
        allowed=("fast", "full"),
        message="is fast or full",
    )
    kill_above_mb: int | None = setting(
        "the trainer is killed past this resident memory (MB), recorded as oom", minimum=256
    )
    verbose: int = setting("Keras' progress in the job log", allowed=(0, 1, 2))


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
