"""What each kind of engine job gives back: the result the engine writes where its job
(contract/jobs.py) said."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mptbench.core.outcomes import Outcome


@dataclass
class Profiled:
    """Where a repeat's profiled steps went (the raw profile) and how long they took."""

    dir: str
    steps: int
    step_s: list[float]
    scopes: dict[str, str | None]
    layers: dict[str, str] = field(default_factory=dict)  # the model's layers: name -> type


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
    # Each timed epoch's start after the second (core/epochs.py): how long the last epoch's
    # iterator had lived and how long this epoch's first batch waited, in seconds.
    epoch_starts: list[dict[str, float]] = field(default_factory=list)
    synthetic_step_s: list[float] | None = None
    synthetic_rounds: list[int] | None = None
    # What it measured beyond its steps, by the name of a per_repeat field of the run record
    # (core/record.py): the input pipeline's own cost per batch, input_ms_per_batch, ...
    measured: dict[str, float] = field(default_factory=dict)
    twin_note: str | None = None  # why no twin ran
    profile: Profiled | None = None
    profile_note: str | None = None
    process: str | None = None  # the process it shared with the group's other arms
    cpu_percent: float | None = None  # the supervisor's measurement of the trainer
    position: int = 0  # where the process built, started and first ran it (0: first)
    sequence: int | None = None  # the process's place in its train job's order (jobs/series.py)
    # The host's own speed while the arms trained: the fixed kernel's samples (engine/host.py).
    host_s: list[float] = field(default_factory=list)
    # The whole run's validation (engine/fullrun.py): the first batch, which compiles the test
    # step, and the steady ones after it; or why none was timed.
    validation_first_s: float | None = None
    validation_s: list[float] = field(default_factory=list)
    validation_note: str | None = None
    # Its process's phases (RepeatResult.phases_s), shared with the group's other arms.
    process_phases_s: dict[str, float] = field(default_factory=dict)


@dataclass
class RepeatResult:
    """One process of a comparison group: every arm it timed."""

    process: str
    arms: list[ArmResult]
    # Where the process's wall time went, in seconds, by phase (engine/repeat.py PHASES).
    phases_s: dict[str, float] = field(default_factory=dict)


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
    # How the probe ended (core/outcomes.py): a policy the device refuses, or whose step ran
    # out of memory or crashed, is that outcome for every cell of it, with the reason.
    outcome: str = Outcome.OK
    reason: str | None = None


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
    trainer's own peak resident set, VmHWM; ru_maxrss, which holds its supervisor's peak too,
    only without /proc). On a CPU with a cgroup of its own, `limit_counted_mb` is that cgroup's
    peak: what its limit counted, page cache included. Which process read a file first decides
    whose cgroup pays for it, so that figure can read the smaller of two batches higher where
    their resident peaks grow with the batch: the peak is VmHWM."""

    batch_size: int
    outcome: str
    reason: str | None = None
    peak_mb: float | None = None
    peak_source: str | None = None
    step_s: list[float] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    limit_counted_mb: float | None = None


@dataclass
class ParityRun:
    """One run of a parity job: its policy and seed, each step's loss; under loss scaling each
    step's scale after it and the steps whose update was skipped (non-finite gradients)."""

    policy: str
    seed: int
    losses: list[float | None]  # None where the loss was not finite
    outcome: str = Outcome.OK
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
    keras: str
    # TensorFlow's start-up facts; None where the job started another backend.
    tensorflow: str | None = None
    tf_unused_cpu_instructions: list[str] = field(default_factory=list)
    onednn: str | None = None
