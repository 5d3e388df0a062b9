"""The engine job kinds: what each kind of engine job is given, by its KIND.

A Snakemake job runs in the workflow's Python and imports no framework. It hands the engine (the
variant's Python: TensorFlow, JAX or PyTorch) an engine job in a file, and reads back the
result the engine wrote where the job said (contract/results.py). Every kind of engine job (a
repeat of a cell, its probe, a calibration, a model's description, an environment check, a fit
try, a parity comparison) goes through that one launch (jobs/launcher.py) and one entry point
(`python -m mptbench.engine JOB`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mptbench.core.contract.run import Calibrate, ModelConfig, Run
from mptbench.core.frameworks import DEFAULT

ENGINE = "mptbench.engine"  # the module every engine job runs: python -m mptbench.engine JOB


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
    # Each policy's step the probe predicted (seconds), where a probe ran: how many steps make
    # a timing epoch of train.epoch_seconds (engine/timing.py epoch_length).
    predicted_s: dict[str, float] = field(default_factory=dict)

    def timed_device(self) -> str | None:
        """The device it times or trains on at full load: one such job a device at a time."""
        return str(self.runs[0].cell.device)


@dataclass(frozen=True)
class ProbeJob:
    """Time a few steps of the cell's model at train.probe_batch_sizes, on random data."""

    KIND: ClassVar[str] = "probe"
    out: str
    run: Run
    prepared: str

    def timed_device(self) -> str | None:
        """The device it times or trains on at full load: one such job a device at a time."""
        return str(self.run.cell.device)


@dataclass(frozen=True)
class CalibrateJob:
    """Measure the device's matmul and convolution peaks per dtype with the backend's kernels."""

    KIND: ClassVar[str] = "calibrate"
    out: str
    device: str
    backend: str
    variant: str
    settings: Calibrate  # device.<kind>.calibrate, typed: every setting is there
    jit_compile: Any = "auto"
    tf32: bool = True
    # The grid's models' own Conv2D layers (ModelInfo.conv_layers, each with its model named),
    # timed at batches up to the grid's largest.
    model_convs: list[dict[str, Any]] = field(default_factory=list)
    model_batch: int = 0
    # The dtypes to measure (empty: every one), each named in `progress` as its turn comes: a
    # dtype whose kernels the library refuses aborts the process (core/outcomes.refusal).
    dtypes: tuple[str, ...] = ()
    progress: str | None = None

    def timed_device(self) -> str | None:
        """The device it times or trains on at full load: one such job a device at a time."""
        return str(self.device)


@dataclass(frozen=True)
class DescribeJob:
    """Build a model once: that it builds, its size, its FLOPs per example."""

    KIND: ClassVar[str] = "describe"
    out: str
    model: ModelConfig
    image_size: int
    num_classes: int

    def timed_device(self) -> str | None:
        """None: it times nothing and loads no device at full load."""
        return None


@dataclass(frozen=True)
class EnvironmentJob:
    """What this Python's framework says of itself when it starts (TensorFlow: its start-up
    lines); with a GPU, that the framework sees it, or the one line that says it does not."""

    KIND: ClassVar[str] = "environment"
    out: str
    backend: str = DEFAULT.name
    gpu: str | None = None

    def timed_device(self) -> str | None:
        """None: it times nothing and loads no device at full load."""
        return None


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

    def timed_device(self) -> str | None:
        """The device it times or trains on at full load: one such job a device at a time."""
        return str(self.run.cell.device)


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

    def timed_device(self) -> str | None:
        """The device it times or trains on at full load: one such job a device at a time."""
        return str(self.runs[0].cell.device)

